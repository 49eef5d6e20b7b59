"""Bad-input registry of contrastive_nb.debiased (read by tests/test_bad_input.py)."""
import torch
from test_bad_input import Case, feats, gen, images, _mod
from bad_input_hard_negatives import VIEW_ALIASES, VIEW_NAMES, _encoder_head, two_view_loss

CONSTANTS = {'FN_MODES', 'SUPCON_VARIANTS', 'FLAGS'}

def cases():
    d = _mod('debiased')
    flags = torch.tensor([[False, True, False, False, False, False],
                          [True, False, False, False, False, False],
                          [False, False, False, True, False, False],
                          [False, False, True, False, False, False],
                          [False, False, False, False, False, True],
                          [False, False, False, False, True, False]])
    views = dict(z1=feats(), z2=feats(seed=1))
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 3, 1, 2])  # label 3 once: a lonely anchor
    def method(cls, options):
        "A method of lesson 08 built from its options' arguments."
        return lambda encoder, **values: cls(encoder, _encoder_head()[1], options(**values))

    def loss(cls):
        return Case(lambda view1, view2: two_view_loss(cls(*_encoder_head()), view1, view2),
                    dict(view1=images(4), view2=images(4, seed=1)), 'loss', aliases=VIEW_ALIASES)

    return {
        'DebiasedOptions': [Case(d.DebiasedOptions, dict(temperature=0.5, tau_plus=0.1))],
        'HCLOptions': [Case(d.HCLOptions, dict(temperature=0.5, tau_plus=0.1, beta=1.0))],
        'SupConOptions': [Case(d.SupConOptions, dict(temperature=0.5))],
        'DebiasedSimCLR': [Case(method(d.DebiasedSimCLR, d.DebiasedOptions),
                                dict(encoder=_encoder_head()[0], temperature=0.5, tau_plus=0.1)),
                           loss(d.DebiasedSimCLR)],
        'HCLSimCLR': [Case(method(d.HCLSimCLR, d.HCLOptions),
                           dict(encoder=_encoder_head()[0], temperature=0.5, tau_plus=0.1, beta=1.0)),
                      loss(d.HCLSimCLR)],
        'SupCon': [Case(method(d.SupCon, d.SupConOptions), dict(encoder=_encoder_head()[0], temperature=0.5)),
                   loss(d.SupCon)],
        'SupervisedOptions': [Case(d.SupervisedOptions, dict())],
        'Supervised': [Case(lambda encoder, n_classes: d.Supervised(encoder, _encoder_head()[1], setup=_mod(
                                'methods').MethodSetup(n_train=8, batch_size=4, embed_dim=4, n_classes=n_classes)),
                            dict(encoder=_encoder_head()[0], n_classes=4)),
                       Case(lambda view, labels: d.Supervised(*_encoder_head()).loss(
                                _mod('methods').Batch([view], torch.arange(4), labels, gen())),
                            dict(view=images(4), labels=torch.tensor([0, 1, 3, 2])), 'loss', indices=('labels',),
                            aliases={'view': VIEW_NAMES})],
        'DecoupledOptions': [Case(d.DecoupledOptions, dict(temperature=0.5))],
        'FalseNegativeOptions': [Case(d.FalseNegativeOptions, dict(temperature=0.5, mode='attract', flag='labels',
                                                                   k=2), choices=('mode', 'flag'))],
        'DecoupledSimCLR': [Case(method(d.DecoupledSimCLR, d.DecoupledOptions),
                                 dict(encoder=_encoder_head()[0], temperature=0.5)),
                            loss(d.DecoupledSimCLR)],
        'FalseNegativeSimCLR': [Case(method(d.FalseNegativeSimCLR, d.FalseNegativeOptions),
                                     dict(encoder=_encoder_head()[0], temperature=0.5, mode='eliminate',
                                          flag='similarity', k=2), choices=('mode', 'flag')),
                                loss(d.FalseNegativeSimCLR)],
        'debiased_nt_xent': [Case(d.debiased_nt_xent, dict(**views, temperature=0.5, tau_plus=0.1,
                                                           reduction='mean'), choices=('reduction',))],
        'hcl_loss': [Case(d.hcl_loss, dict(**views, temperature=0.5, tau_plus=0.1, beta=1.0,
                                           reduction='mean'), choices=('reduction',))],
        'clamped_anchors': [Case(d.clamped_anchors, dict(**views, temperature=0.5, tau_plus=0.1, beta=0.5))],
        'decoupled_nt_xent': [Case(d.decoupled_nt_xent, dict(**views, temperature=0.5, reduction='mean'),
                                   choices=('reduction',))],
        'detect_false_negatives': [Case(d.detect_false_negatives, dict(**views, k=2))],
        'false_negative_loss': [Case(d.false_negative_loss, dict(**views, false_negatives=flags, temperature=0.5,
                                                                 mode='eliminate', reduction='mean'),
                                     choices=('mode', 'reduction')),
                                Case(d.false_negative_loss, dict(**views, false_negatives=flags, mode='attract'),
                                     'attract', choices=('mode',))],
        'supcon_loss': [Case(d.supcon_loss, dict(features=feats(12, 4, seed=2), labels=labels, temperature=0.1,
                                                 variant='out', reduction='mean'), choices=('variant', 'reduction')),
                        Case(d.supcon_loss, dict(features=feats(12, 4, seed=2), labels=labels, variant='in',
                                                 reduction='none'), 'in', choices=('variant', 'reduction'))],
    }
