"""Bad-input registry of contrastive_nb.text (read by tests/test_bad_input.py)."""
import tempfile
from pathlib import Path

import torch
from test_bad_input import Case, feats, _mod

CONSTANTS = {'LEXICAL_METHODS', 'TEXT_LOSSES', 'FUSION_NORMALISATIONS'}

TEXTS = ['I was charged twice', 'my payment appears two times', 'the app crashes',
         'app quits on start', 'cancel my plan', 'stop my subscription']
LABELS = torch.tensor([0, 0, 1, 1, 2, 2])

def _encoder():
    torch.manual_seed(0)
    return _mod('text').TextEncoder(n_buckets=256, dim=8, hidden=8, out_dim=4)

def _search():
    return _mod('text').TicketSearch(_encoder()).fit(TEXTS)

def _saved() -> Path:
    return _search().save(Path(tempfile.mkdtemp(prefix='bad_input_')) / 'search.pt')

_PRETRAINED = []

def _pretrained():
    "One all-MiniLM-L6-v2 for every call (loading takes a second); fine-tuning changes it, harmlessly."
    if not _PRETRAINED:
        cache = Path(tempfile.gettempdir()) / 'contrastive_nb_bad_input_cache'
        _PRETRAINED.append(_mod('pretrained').load_pretrained(cache, device='cpu'))
    return _PRETRAINED[0]

def _pool_with_pairs() -> torch.Tensor:
    "Six rows in which rows 1, 3 and 5 lie close to rows 0, 2 and 4: pairs with positive cosines."
    anchors = feats(3, 4)
    return torch.stack([anchors, anchors + 0.1 * feats(3, 4, seed=1)], dim=1).reshape(6, 4)

def cases():
    t = _mod('text')
    enc = _encoder()
    ids, offsets = enc.featurize(TEXTS[:3])
    views = dict(anchors=feats(6, 4), positives=feats(6, 4, seed=1))
    return {
        'tokenize': [Case(t.tokenize, dict(text='I was charged twice'))],
        'hashed_ngrams': [Case(t.hashed_ngrams, dict(text='charged twice', n_buckets=64,
                                                     word_ngrams=2, char_ngrams=(3, 5)))],
        'TextEncoder': [Case(t.TextEncoder, dict(n_buckets=64, dim=4, hidden=4, out_dim=4,
                                                 word_ngrams=1, char_ngrams=(3, 4), init_std=0.1)),
                        Case(lambda texts: _encoder().featurize(texts), dict(texts=TEXTS),
                             'featurize'),
                        Case(lambda ids, offsets: enc(ids, offsets),
                             dict(ids=ids, offsets=offsets), 'forward', indices=('ids', 'offsets')),
                        Case(lambda texts, batch_size: _encoder().encode(texts, batch_size),
                             dict(texts=TEXTS, batch_size=2), 'encode')],
        'lexical_scores': [Case(t.lexical_scores, dict(queries=TEXTS[:2], corpus=TEXTS,
                                                       method='bm25', k1=1.5, b=0.75),
                                choices=('method',)),
                           Case(t.lexical_scores, dict(queries=TEXTS[:2], corpus=TEXTS,
                                                       method='tfidf'), 'tfidf',
                                choices=('method',))],
        'mnrl_loss': [Case(t.mnrl_loss, dict(**views, labels=LABELS, scale=20.0,
                                             reduction='mean'), choices=('reduction',)),
                      Case(t.mnrl_loss, dict(**views, labels=LABELS, scale=20.0,
                                             hard_negatives=feats(3, 4, seed=2),
                                             hard_labels=torch.tensor([1, 2, 0])),
                           'hard negatives')],
        'matryoshka_loss': [Case(t.matryoshka_loss, dict(anchors=feats(6, 8), positives=feats(6, 8, seed=1),
                                                         dims=(2, 4, 8), weights=(1.0, 1.0, 0.5)))],
        'mine_hard_negatives': [Case(t.mine_hard_negatives, dict(embeddings=feats(6, 4),
                                                                 labels=LABELS, k=2))],
        'train_text_encoder': [Case(t.train_text_encoder,
                                    dict(texts=TEXTS, labels=LABELS, loss='mnrl', epochs=1,
                                         batch_size=3, lr=3e-3, scale=20.0, temperature=0.05,
                                         seed=0, encoder=_encoder()),
                                    choices=('loss',), fixed=('encoder',)),
                               Case(t.train_text_encoder,
                                    dict(texts=TEXTS, labels=LABELS, epochs=1, batch_size=3, seed=0,
                                         encoder=_encoder(), matryoshka_dims=(2, 4)),
                                    'matryoshka', fixed=('encoder',))],
        'TextPairOptions': [Case(t.TextPairOptions, dict(loss='supcon', scale=10.0, temperature=0.1,
                                                         mask_false_negatives=False), choices=('loss',)),
                            Case(t.TextPairOptions, dict(loss='mnrl', matryoshka_dims=(2, 4)),
                                 'matryoshka', choices=('loss',))],
        'TextPairs': [Case(lambda texts, labels: t.TextPairs(_encoder(), texts, labels),
                           dict(texts=TEXTS, labels=LABELS)),
                      Case(lambda matryoshka_dims: t.TextPairs(_encoder(), TEXTS, LABELS, t.TextPairOptions(
                               matryoshka_dims=matryoshka_dims)), dict(matryoshka_dims=(2, 4)), 'matryoshka'),
                      Case(lambda anchors, positives: t.TextPairs(_encoder(), TEXTS, LABELS).loss(
                               _mod('methods').Batch([anchors, positives], anchors, LABELS[:2], None)),
                           dict(anchors=torch.tensor([0, 2]), positives=torch.tensor([1, 3])), 'loss',
                           indices=('anchors', 'positives'),
                           aliases={'anchors': ('views',), 'positives': ('views',)}),
                      Case(lambda texts, labels: t.TextPairs(_pretrained(), texts, labels).loss(
                               _mod('methods').Batch([torch.tensor([0, 2]), torch.tensor([1, 3])],
                                                     torch.tensor([0, 2]), LABELS[:2], None)),
                           dict(texts=TEXTS, labels=LABELS), 'pretrained', deterministic=False)],
        'margin_negatives': [Case(t.margin_negatives,
                                  dict(pool=_pool_with_pairs(), pairs=torch.tensor([[0, 1], [2, 3], [4, 5]]),
                                       margin=0.95), indices=('pairs',))],
        'fine_tune': [Case(lambda model, texts, labels, pairs, negatives, batch_size, lr, scale, seed:
                           t.fine_tune(model, texts, labels, pairs, negatives, batch_size=batch_size, lr=lr,
                                       scale=scale, seed=seed)[1],
                           dict(model=_pretrained(), texts=TEXTS, labels=LABELS,
                                pairs=torch.tensor([[0, 1], [2, 3], [4, 5]]), negatives=torch.tensor([2, 4, 0]),
                                batch_size=3, lr=1e-6, scale=20.0, seed=0),
                           indices=('pairs', 'negatives'), deterministic=False)],
        'bootstrap_ci': [Case(t.bootstrap_ci, dict(values=feats(20, 1).squeeze(1), n_boot=50,
                                                   level=0.9, seed=0))],
        'tie_ranks': [Case(t.tie_ranks, dict(scores=feats(3, 5)))],
        'reciprocal_rank_fusion': [Case(lambda dense, lexical, k: t.reciprocal_rank_fusion([dense, lexical], k=k),
                                        dict(dense=feats(3, 5), lexical=feats(3, 5, seed=1), k=60.0),
                                        aliases={'dense': ('scores',), 'lexical': ('scores',)})],
        'weighted_score_fusion': [Case(t.weighted_score_fusion,
                                       dict(dense=feats(3, 5), lexical=feats(3, 5, seed=1), weight=0.3,
                                            normalisation='zscore'), choices=('normalisation',)),
                                  # float64's extremes: scores near ±1e308 (their span overflows) and subnormal ones
                                  Case(t.weighted_score_fusion,
                                       dict(dense=feats(3, 5).double().sign() * 1.7e308,
                                            lexical=feats(3, 5, seed=1).double() * 1e-310, weight=0.3,
                                            normalisation='minmax'),
                                       'extremes', choices=('normalisation',))],
        'TicketSearch': [Case(t.TicketSearch, dict(encoder=_encoder())),
                         Case(lambda hybrid, rrf_k: t.TicketSearch(_encoder(), hybrid, rrf_k).fit(TEXTS)
                              .search('charged twice', 3), dict(hybrid=True, rrf_k=60.0), 'hybrid'),
                         Case(lambda texts: t.TicketSearch(_encoder()).fit(texts),
                              dict(texts=TEXTS), 'fit'),
                         Case(lambda query, k: _search().search(query, k),
                              dict(query='charged twice', k=3), 'search'),
                         Case(lambda path: _search().save(path),
                              dict(path=str(Path(tempfile.mkdtemp()) / 's.pt')), 'save',
                              os_errors=True),
                         Case(lambda path: t.TicketSearch.load(path), dict(path=str(_saved())),
                              'load', os_errors=True)],
    }
