"""Bad-input registry of contrastive_nb.hard_negatives (read by tests/test_bad_input.py)."""
import torch
from test_bad_input import Case, feats, gen, images, unit, _mod

def _encoder_head():
    torch.manual_seed(0)
    models = _mod('models')
    encoder = models.SmallCNN(width=4, blocks=2, norm='group')
    return encoder, models.ProjectionHead(encoder.feature_dim, 8, 4)

def _mask(n: int = 6) -> torch.Tensor:
    ids = _mod('pairs').instance_ids(n // 2)
    return _mod('pairs').pair_masks(ids)[1]

VIEW_NAMES = ('views', 'x', 'z1', 'z2', 'h')
VIEW_ALIASES = {'view1': VIEW_NAMES, 'view2': VIEW_NAMES}

def two_view_loss(method, view1, view2, labels=torch.tensor([0, 1, 0, 1])):
    "A two-view method's loss on one batch of 4 sources."
    return method.loss(_mod('methods').Batch([view1, view2], torch.arange(4), labels, gen()))

def cases():
    h = _mod('hard_negatives')
    sims = unit(6, 4) @ unit(6, 4).T

    def mochi(**options):
        encoder, head = _encoder_head()
        return h.MoCHi(encoder, head, h.MoCHiOptions(**{'queue_size': 8, 'num_hard': 3, 'n_mixes': 2,
                                                       'n_query_mixes': 2, **options}))

    def xbm(seed=0, **options):
        options = h.CrossBatchMemoryOptions(**{'memory_size': 8, **options})
        setup = _mod('methods').MethodSetup(n_train=8, batch_size=4, embed_dim=4, seed=seed)
        return h.CrossBatchMemory(*_encoder_head(), options, setup)

    return {
        'importance_weighted_nt_xent': [Case(h.importance_weighted_nt_xent,
                                             dict(z1=feats(), z2=feats(seed=1), temperature=0.5, beta=1.0,
                                                  detach_weights=False, reduction='mean'),
                                             choices=('reduction',))],
        'importance_weighted_negatives': [Case(h.importance_weighted_negatives,
                                               dict(z1=feats(), z2=feats(seed=1), temperature=0.5, beta=1.0,
                                                    detach_weights=True))],
        'top_k_negatives': [Case(h.top_k_negatives, dict(similarities=sims, negative_mask=_mask(), k=2))],
        'semi_hard_negatives': [Case(h.semi_hard_negatives,
                                     dict(similarities=sims, positive_similarity=sims.diagonal(3).repeat(2),
                                          negative_mask=_mask(), margin=0.3))],
        'random_negatives': [Case(lambda negative_mask, k: h.random_negatives(negative_mask, k, gen()),
                                  dict(negative_mask=_mask(), k=3))],
        'hard_negative_loss': [Case(h.hard_negative_loss,
                                    dict(query=feats(), positive=feats(seed=1), negatives=feats(8, seed=2),
                                         temperature=0.1, hard_weight=0.5, num_hard=3, reduction='mean'),
                                    choices=('reduction',)),
                               Case(h.hard_negative_loss, dict(query=feats(), positive=feats(seed=1),
                                                               negatives=torch.randn(6, 5, 4, generator=gen(2))),
                                    'per-query')],
        'in_batch_negatives': [Case(h.in_batch_negatives, dict(z1=feats(), z2=feats(seed=1)))],
        'in_batch_hard_negative_loss': [Case(h.in_batch_hard_negative_loss,
                                             dict(z1=feats(), z2=feats(seed=1), temperature=0.1, hard_weight=0.5,
                                                  num_hard=3, reduction='mean'), choices=('reduction',))],
        'mix_hard_negatives': [Case(lambda query, negatives, num_hard, n_mixes, n_query_mixes, query_max:
                                    h.mix_hard_negatives(query, negatives, num_hard, n_mixes, n_query_mixes,
                                                         query_max, gen()),
                                    dict(query=feats(), negatives=unit(8, seed=3), num_hard=3, n_mixes=2,
                                         n_query_mixes=2, query_max=0.5))],
        'MoCHiOptions': [Case(h.MoCHiOptions, dict(num_hard=3, n_mixes=2, n_query_mixes=2, query_max=0.5,
                                                   queue_size=8))],
        'MoCHi': [Case(lambda num_hard, n_mixes, n_query_mixes, query_max, queue_size:
                       mochi(num_hard=num_hard, n_mixes=n_mixes, n_query_mixes=n_query_mixes, query_max=query_max,
                             queue_size=queue_size),
                       dict(num_hard=3, n_mixes=2, n_query_mixes=2, query_max=0.5, queue_size=8)),
                  Case(lambda view1, view2: mochi()(view1, view2, gen()),
                       dict(view1=images(4), view2=images(4, seed=1)),
                       'forward', aliases={'view1': ('views',), 'view2': ('views',)})],
        'CrossBatchMemoryOptions': [Case(h.CrossBatchMemoryOptions, dict(temperature=0.5, weight=0.5, num_hard=3,
                                                                          memory_size=8))],
        'CrossBatchMemory': [Case(lambda memory_size, temperature, weight, num_hard, seed:
                                  xbm(memory_size=memory_size, temperature=temperature, weight=weight,
                                      num_hard=num_hard, seed=seed),
                                  dict(memory_size=8, temperature=0.5, weight=0.5, num_hard=3, seed=0)),
                             Case(lambda view1, view2: two_view_loss(xbm(), view1, view2),
                                  dict(view1=images(4), view2=images(4, seed=1)), 'loss', aliases=VIEW_ALIASES)],
        'ImportanceWeightedOptions': [Case(h.ImportanceWeightedOptions, dict(temperature=0.5, beta=2.0))],
        'ImportanceWeightedSimCLR': [Case(lambda view1, view2: two_view_loss(
                                              h.ImportanceWeightedSimCLR(*_encoder_head()), view1, view2),
                                          dict(view1=images(4), view2=images(4, seed=1)), 'loss',
                                          aliases=VIEW_ALIASES)],
        'HardNegativeOptions': [Case(h.HardNegativeOptions, dict(temperature=0.5, weight=0.5, num_hard=3))],
        'HardNegativeSimCLR': [Case(lambda encoder, temperature, weight, num_hard:
                                    h.HardNegativeSimCLR(encoder, _encoder_head()[1],
                                                         h.HardNegativeOptions(temperature, weight, num_hard)),
                                    dict(encoder=_encoder_head()[0], temperature=0.5, weight=0.5, num_hard=3)),
                               Case(lambda view1, view2: two_view_loss(h.HardNegativeSimCLR(*_encoder_head()),
                                                                       view1, view2),
                                    dict(view1=images(4), view2=images(4, seed=1)), 'loss', aliases=VIEW_ALIASES)],
        'hardness_schedule': [Case(h.hardness_schedule, dict(step=3, total_steps=10, start=0.0, end=2.0,
                                                             warmup_steps=2))],
    }
