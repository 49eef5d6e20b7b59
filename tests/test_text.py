"""Tests of contrastive_nb.text beyond the lesson's own asserts: the bootstrap interval, the loss mask,
determinism, the search round trip (dense and hybrid) and rank fusion (the ranking metrics are in
test_evaluate.py)."""
import math
import random
import re
import string
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from contrastive_nb import text as T
from contrastive_nb.data import load_tickets
from contrastive_nb.infonce import info_nce
from contrastive_nb.runs import CheckpointError


@pytest.fixture(scope='module')
def tickets():
    return load_tickets()


def labels_of(frame, index):
    return torch.tensor([index[p] for p in frame.problem_id])


# --- tokeniser and features -----------------------------------------------------------------------

def test_tokenize():
    assert T.tokenize("Hi, I'm CHARGED twice (2x)!") == ['hi', "i'm", 'charged', 'twice', '2x']
    assert T.tokenize('') == [] and T.tokenize(' ,. ') == []


OLD_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")  # the ASCII-only tokeniser before issue 23


def test_tokenize_ascii_unchanged(tickets):
    "ASCII text gives the old tokens exactly, so lesson 11's numbers and its bm25s check stand."
    rng = random.Random(0)
    chars = string.printable + "'" * 5  # apostrophes often, to exercise the suffix
    noise = [''.join(rng.choice(chars) for _ in range(rng.randint(0, 50))) for _ in range(3000)]
    for text in list(tickets.text) + noise:
        assert T.tokenize(text) == OLD_TOKEN.findall(text.lower()), text


@pytest.mark.parametrize('text, tokens', [
    ('Caf\u00e9 na\u00efve', ['caf\u00e9', 'na\u00efve']),          # precomposed é, ï
    ('Cafe\u0301 nai\u0308ve', ['caf\u00e9', 'na\u00efve']),        # decomposed: NFKC composes
    ('CAF\u00c9 Stra\u00dfe', ['caf\u00e9', 'strasse']),             # case folding, ß -> ss
    ('\uff21\uff22\uff23\uff11\uff12 \ufb01x', ['abc12', 'fix']),  # full width, ligature
    ('Привет, МИР! Ёжик', ['привет', 'мир', 'ёжик']),
    ('ΟΔΟΣ Σίσυφος', ['οδοσ', 'σίσυφοσ']),                          # final sigma folded
    ('हिन्दी भाषा', ['हिन्दी', 'भाषा']),                                # vowel signs are marks
    ('\u0130stanbul', ['i\u0307stanbul']),                      # İ folds to i + combining dot
    ('退款申请', ['退款', '款申', '申请']),
    ('退', ['退']),                                              # a lone ideograph: a unigram
    ('我的iPhone坏了，请退款', ['我的', 'iphone', '坏了', '请退', '退款']),
    ('漢字かな', ['漢字', '字か', 'かな']),                       # bigrams cross from Han to kana
    ('パスワード', ['パス', 'スワ', 'ワー', 'ード']),
    ('\uff8a\uff9f\uff7d\uff9c\uff70\uff84\uff9e', ['パス', 'スワ', 'ワー', 'ード']),  # half width
    ('비밀번호 잊음', ['비밀', '밀번', '번호', '잊음']),
    ('中・日', ['中', '日']),                                     # the katakana dot separates
    ('can\u2019t log_in', ["can't", 'log', 'in']),               # typographic apostrophe
])
def test_tokenize_beyond_ascii(text, tokens):
    assert T.tokenize(text) == tokens


def test_features_and_scores_beyond_ascii():
    "The n-gram encoder, BM25 and TF-IDF take the new tokens as they are."
    composed, decomposed = 'Caf\u00e9 cr\u00e8me', 'Cafe\u0301 cre\u0300me'
    assert torch.equal(T.hashed_ngrams(composed), T.hashed_ngrams(decomposed))  # integer ids
    ids = T.hashed_ngrams('退款申请', word_ngrams=1, char_ngrams=(3, 3))
    assert len(ids) == 3 + 3 * 2  # three bigrams; each '<ab>' gives '<ab' and 'ab>'
    enc = T.TextEncoder(n_buckets=64, dim=4, hidden=4, out_dim=4)
    assert enc.encode(['我要退款', 'Привет']).shape == (2, 4)
    corpus = ['我要退款', '密码忘了', '应用崩溃了', 'app crashes']
    for method in T.LEXICAL_METHODS:
        scores = T.lexical_scores(['请给我退款', '应用又崩溃', 'the APP'], corpus, method)
        assert scores.argmax(1).tolist() == [0, 2, 3]


def test_hashed_ngrams_count_and_range():
    text = 'charged twice today'
    ids = T.hashed_ngrams(text, n_buckets=97, word_ngrams=2, char_ngrams=(3, 4))
    words = ['charged', 'twice', 'today']
    chars = sum(len(w) + 2 - n + 1 for w in words for n in (3, 4))
    assert len(ids) == 3 + 2 + chars
    assert ids.dtype == torch.int64 and ids.min() >= 0 and ids.max() < 97


def test_char_ngrams_must_be_a_pair_tuple():
    "A list or a triple is refused, not read as (lo, hi) with the rest ignored (or -> and)."
    for bad in ([3, 5], (3, 4, 5)):
        with pytest.raises(TypeError, match=r'char_ngrams must be a \(shortest, longest\) tuple'):
            T.hashed_ngrams('charged twice', char_ngrams=bad)


def test_hashed_ngrams_same_in_another_process():
    "CRC32 ids do not depend on the process (Python's hash() would)."
    code = ("from contrastive_nb.text import hashed_ngrams; "
            "print(hashed_ngrams('charged twice').tolist())")
    other = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                           env={'PYTHONHASHSEED': '123', 'PATH': ''}, check=True)
    assert other.stdout.strip() == str(T.hashed_ngrams('charged twice').tolist())


def test_encoder_shapes_and_determinism():
    torch.manual_seed(0)
    a = T.TextEncoder(n_buckets=500, dim=8, hidden=12, out_dim=5)
    torch.manual_seed(0)
    b = T.TextEncoder(n_buckets=500, dim=8, hidden=12, out_dim=5)
    texts = ['charged twice', 'the app crashes', 'charged twice', 'x']
    za, zb = a.encode(texts, batch_size=3), b.encode(texts)
    assert za.shape == (4, 5)
    assert torch.allclose(za.norm(dim=1), torch.ones(4))
    assert torch.allclose(za, zb)
    assert torch.allclose(za[0], za[2])
    assert not torch.allclose(za[0], za[1])
    assert abs(a.bag.weight.std().item() - 0.1) < 0.01  # small rows: unseen n-grams stay small
    ids, offsets = a.featurize(texts)
    assert offsets.tolist() == [0, *np.cumsum([len(T.hashed_ngrams(t, 500)) for t in texts[:-1]])]
    # forward is the mean of the bag rows through the MLP
    rows = a.bag.weight[T.hashed_ngrams('the app crashes', 500)].mean(0)
    assert torch.allclose(a(ids, offsets)[1], a.mlp(rows), atol=1e-6)


def test_narrow_offsets_are_compared_as_numbers_not_wrapped():
    "In uint8, 300 wraps to 44 and a decrease of 100 to a step of 156: both checks must see the numbers."
    torch.manual_seed(0)
    enc = T.TextEncoder(n_buckets=500, dim=8, hidden=12, out_dim=5)
    ids = torch.arange(300) % 500
    with pytest.raises(ValueError, match='never decrease'):
        enc(ids, torch.tensor([0, 200, 100], dtype=torch.uint8))
    want = enc(ids, torch.tensor([0, 250]))
    torch.testing.assert_close(enc(ids, torch.tensor([0, 250], dtype=torch.uint8)), want)

def test_encoder_refuses_text_without_words():
    with pytest.raises(ValueError, match='no words'):
        T.TextEncoder(n_buckets=50, dim=4, hidden=4, out_dim=4).encode(['fine', '?!'])


# --- the loss ---------------------------------------------------------------------------------------

def mnrl_loop(a, p, labels, scale, hard=None, hard_labels=None):
    "Per-anchor loop: candidates are the positives (and hard negatives) not sharing the label."
    a, p = F.normalize(a, dim=1), F.normalize(p, dim=1)
    keys = p if hard is None else torch.cat([p, F.normalize(hard, dim=1)])
    key_labels = labels if hard is None else torch.cat([labels, hard_labels])
    out = []
    for i in range(len(a)):
        cands = [j for j in range(len(keys)) if j == i or key_labels[j] != labels[i]]
        logits = torch.stack([scale * a[i] @ keys[j] for j in cands])
        out.append(logits.logsumexp(0) - scale * a[i] @ keys[i])
    return torch.stack(out).mean()


def test_mnrl_false_negative_mask_against_loop():
    g = torch.Generator().manual_seed(0)
    a, p, h = torch.randn(3, 7, 5, generator=g, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 1, 3])
    hard_labels = torch.tensor([2, 0, 5, 1, 4, 3, 0])
    assert torch.isclose(T.mnrl_loss(a, p, labels, 13.0), mnrl_loop(a, p, labels, 13.0))
    assert torch.isclose(T.mnrl_loss(a, p, labels, 7.0, h, hard_labels),
                         mnrl_loop(a, p, labels, 7.0, h, hard_labels))
    # the mask changes the loss exactly where labels repeat
    unmasked = T.mnrl_loss(a, p, reduction='none')
    masked = T.mnrl_loss(a, p, labels, reduction='none')
    repeated = (labels[:, None] == labels[None, :]).sum(1) > 1
    assert torch.all(masked[repeated] < unmasked[repeated])
    assert torch.allclose(masked[~repeated], unmasked[~repeated])


def test_mnrl_is_info_nce_at_inverse_scale():
    g = torch.Generator().manual_seed(1)
    a, p = torch.randn(2, 6, 4, generator=g, dtype=torch.float64)
    assert torch.isclose(T.mnrl_loss(a, p, scale=20.0), info_nce(a, p, temperature=0.05))
    assert torch.isclose(T.mnrl_loss(a, p, scale=20.0, reduction='sum'),
                         info_nce(a, p, temperature=0.05, reduction='sum'))


def test_mnrl_gradient():
    g = torch.Generator().manual_seed(2)
    a, p = (torch.randn(5, 3, generator=g, dtype=torch.float64, requires_grad=True)
            for _ in range(2))
    labels = torch.tensor([0, 0, 1, 2, 1])
    assert torch.autograd.gradcheck(lambda x, y: T.mnrl_loss(x, y, labels, 5.0), (a, p))


@pytest.mark.parametrize('reduction', T.REDUCTIONS)
def test_mnrl_of_a_perfect_pair_is_zero_not_below(reduction):
    "One pair whose query is its key: loss 0; unfloored, cross_entropy returns -0.0."
    z = torch.randn(1, 8, generator=torch.Generator().manual_seed(5))
    for labels in (None, torch.tensor([3])):
        loss = T.mnrl_loss(z, z.clone(), labels, reduction=reduction)
        assert (loss >= 0).all() and not loss.signbit().any()  # -0.0 >= 0 holds: see the sign bit
        assert torch.allclose(loss, torch.zeros_like(loss), atol=1e-6)
    # a batch of one label: every other pair is masked, every row is such a pair
    z = torch.randn(4, 8, generator=torch.Generator().manual_seed(6))
    rows = T.mnrl_loss(z, z + 0.3, torch.zeros(4, dtype=torch.long), reduction='none')
    assert (rows >= 0).all() and not rows.signbit().any()


def test_mnrl_floor_keeps_the_gradient():
    "The straight-through floor changes no gradient: the same as the plain formula's."
    g = torch.Generator().manual_seed(7)
    a, p, h = (torch.randn(n, 5, generator=g, dtype=torch.float64, requires_grad=True)
               for n in (6, 6, 3))
    labels, hard_labels = torch.tensor([0, 1, 0, 2, 1, 3]), torch.tensor([2, 0, 4])
    ours = torch.autograd.grad(T.mnrl_loss(a, p, labels, 9.0, h, hard_labels), (a, p, h))
    plain = torch.autograd.grad(mnrl_loop(a, p, labels, 9.0, h, hard_labels), (a, p, h))
    for x, y in zip(ours, plain):
        assert torch.allclose(x, y, atol=1e-10)

def test_mine_hard_negatives_label_check():
    g = torch.Generator().manual_seed(3)
    z = torch.randn(20, 4, generator=g)
    labels = torch.arange(20) % 4
    mined = T.mine_hard_negatives(z, labels, k=3)
    assert (labels[mined] != labels[:, None]).all()
    sim = F.normalize(z, dim=1) @ F.normalize(z, dim=1).T
    for i in range(20):
        others = sorted((j for j in range(20) if labels[j] != labels[i]), key=lambda j: -sim[i, j])
        assert mined[i].tolist() == others[:3]
    unchecked = T.mine_hard_negatives(z, labels, k=1, check_labels=False).squeeze(1)
    assert (unchecked != torch.arange(20)).all()


# --- metrics ----------------------------------------------------------------------------------------

def test_bootstrap_ci_covers_and_is_seeded():
    values = np.random.default_rng(0).random(200)
    mean, low, high = T.bootstrap_ci(values, n_boot=500)
    assert low < mean < high and math.isclose(mean, values.mean())
    se = values.std(ddof=1) / np.sqrt(200)
    assert abs((high - low) - 2 * 1.96 * se) < 0.3 * 2 * 1.96 * se
    assert np.allclose(T.bootstrap_ci(values, n_boot=500), (mean, low, high), rtol=1e-12)
    assert not np.allclose(T.bootstrap_ci(values, n_boot=500, seed=1), (mean, low, high))
    assert np.allclose(T.bootstrap_ci([1.0, 1.0, 1.0]), (1.0, 1.0, 1.0))


def test_bootstrap_ci_each_tail_is_half_of_the_rest():
    "Each end of the 95 % interval lies 1.96 SE from the mean (guards the (1 -/+ level) / 2 tails)."
    values = np.random.default_rng(0).random(400)
    se = values.std() / np.sqrt(len(values))
    mean, low, high = T.bootstrap_ci(values, n_boot=20000)
    assert abs((mean - low) / (1.959964 * se) - 1) < 0.03
    assert abs((high - mean) / (1.959964 * se) - 1) < 0.03


def test_bootstrap_ci_refuses_a_column():
    "A (Q, 1) array is refused as not 1-D, even though it is numeric (mutation: or -> and)."
    with pytest.raises(TypeError, match='1-D'):
        T.bootstrap_ci(np.ones((5, 1)))


# --- BM25 ----------------------------------------------------------------------------------------------

def test_bm25_by_hand():
    corpus = ['cat cat dog', 'dog', 'bird sings']
    s = T.lexical_scores(['cat bird'], corpus, k1=1.2, b=0.5)[0]
    avg = 2.0
    idf = lambda n: math.log(1 + (3 - n + 0.5) / (n + 0.5))
    tf = lambda f, dl: f / (f + 1.2 * (1 - 0.5 + 0.5 * dl / avg))
    expected = [idf(1) * tf(2, 3), 0.0, idf(1) * tf(1, 2)]
    assert torch.allclose(s, torch.tensor(expected, dtype=torch.float64))


def test_bm25_matches_bm25s(tickets):
    bm25s = pytest.importorskip('bm25s')
    corpus, queries = list(tickets.text[:80]), list(tickets.text[80:100])
    ours = T.lexical_scores(queries, corpus, k1=1.2, b=0.6).numpy()
    ret = bm25s.BM25(k1=1.2, b=0.6, method='lucene')
    ret.index([T.tokenize(t) for t in corpus], show_progress=False)
    ref = np.stack([ret.get_scores(T.tokenize(q)) for q in queries])
    assert np.abs(ours - ref).max() < 1e-4


def test_tfidf_matches_sklearn(tickets):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.metrics.pairwise import cosine_similarity
    corpus, queries = list(tickets.text[:50]), list(tickets.text[50:60])
    vec = TfidfVectorizer(tokenizer=T.tokenize, lowercase=False, token_pattern=None).fit(corpus)
    ref = cosine_similarity(vec.transform(queries), vec.transform(corpus))
    assert np.allclose(T.lexical_scores(queries, corpus, 'tfidf').numpy(), ref)


# --- training and search ----------------------------------------------------------------------------------

def test_training_learns_and_is_seeded(tickets):
    index = {p: i for i, p in enumerate(sorted(tickets.problem_id.unique()))}
    few = tickets[tickets.problem_id.isin(['P001', 'P013', 'P042', 'P047', 'P025', 'P054'])]
    labels = labels_of(few, index)
    enc = T.TextEncoder(n_buckets=2**12, dim=16, hidden=32, out_dim=16)
    before = enc.encode(list(few.text))
    enc, losses = T.train_text_encoder(list(few.text), labels, epochs=30, batch_size=8, seed=0,
                                       encoder=enc)
    after = enc.encode(list(few.text))
    same = (labels[:, None] == labels[None, :]) & ~torch.eye(len(labels), dtype=torch.bool)
    gap = lambda z: (z @ z.T)[same].mean() - (z @ z.T)[~same & ~torch.eye(len(z), dtype=bool)].mean()
    assert gap(after) > gap(before) + 0.3
    assert np.mean(losses[-5:]) < np.mean(losses[:5])
    _, again = T.train_text_encoder(list(few.text), labels, epochs=2, batch_size=8, seed=0)
    _, other = T.train_text_encoder(list(few.text), labels, epochs=2, batch_size=8, seed=1)
    _, same_seed = T.train_text_encoder(list(few.text), labels, epochs=2, batch_size=8, seed=0)
    assert np.allclose(again, same_seed, rtol=1e-6) and not np.allclose(again, other, rtol=1e-3)


def test_search_round_trip(tmp_path, tickets):
    texts = list(tickets.text[:30])
    torch.manual_seed(0)
    search = T.TicketSearch(T.TextEncoder(n_buckets=1000, dim=8, hidden=8, out_dim=8)).fit(texts)
    hits = search.search('I was charged twice', k=30)
    assert sorted(hits['index']) == list(range(30))
    assert hits.score.is_monotonic_decreasing and list(hits.index) == list(range(1, 31))
    z = search.encoder.encode(['I was charged twice'])[0]
    assert np.allclose(hits.score, (search.encoder.encode(texts) @ z)[hits['index'].tolist()].numpy(),
                       atol=1e-6)
    assert search.search(texts[4], k=1)['index'][1] == 4  # a text finds itself
    loaded = T.TicketSearch.load(search.save(tmp_path / 's.pt'))
    assert loaded.texts == texts and len(loaded) == 30
    pd.testing.assert_frame_equal(loaded.search('I was charged twice', k=5),
                                  search.search('I was charged twice', k=5))


def _saved_search(folder):
    torch.manual_seed(0)
    search = T.TicketSearch(T.TextEncoder(n_buckets=100, dim=4, hidden=4, out_dim=4))
    return search.fit(['charged twice', 'app crashes', 'refund please']).save(folder / 'search.pt')


def flip_a_weight_bit(data: bytes, saved: dict) -> bytes:
    "The saved file with one bit flipped inside a weight's bytes: torch.load alone would read it."
    weight = next(v for v in saved['state'].values() if v.numel() > 64)
    at = data.find(weight.numpy().tobytes()[:64])
    assert at > 0
    damaged = bytearray(data)
    damaged[at + 40] ^= 1
    return bytes(damaged)

def test_load_refuses_every_bad_file_naming_it(tmp_path):
    good = _saved_search(tmp_path)
    data, saved = good.read_bytes(), torch.load(good, weights_only=True)
    def write(name, content):
        path = tmp_path / name
        if isinstance(content, bytes): path.write_bytes(content)
        else: torch.save(content, path)
        return path
    cases = [
        (write('truncated.pt', data[:len(data) // 2]), 'truncated or not a torch.save file'),
        (write('empty.pt', b''), 'truncated or not a torch.save file'),
        (write('noise.pt', np.random.default_rng(0).bytes(4096)), 'truncated or not a torch.save file'),
        (write('flipped.pt', flip_a_weight_bit(data, saved)), 'fails its CRC-32 check'),
        (write('frame.pt', pd.DataFrame({'a': [1]})), 'truncated or not a torch file'),  # pickled code
        (write('tensor.pt', torch.zeros(3)), 'not a TicketSearch file: it holds a Tensor'),
        (write('trainer.pt', {'model': {}, 'step': 3}), 'not a TicketSearch file: it holds a dict'),
        (write('clip.pt', {**saved, 'format': 'CLIP'}), "not a TicketSearch file: it holds a 'CLIP'"),
        (write('newer.pt', {**saved, 'version': 4}), 'TicketSearch file of version 4; this'),
        (write('bool_version.pt', {**saved, 'version': True}), 'TicketSearch file of version True'),  # True == 1
        (write('nan_weights.pt', {**saved, 'state': {k: v * math.nan if v.is_floating_point() else v
                                                     for k, v in saved['state'].items()}}),
         'damaged TicketSearch file (ValueError: the encoder gives NaN or inf embeddings'),  # NaN scores
        (write('bad_search.pt', {**saved, 'search': {'hybrid': 'yes'}}), 'damaged TicketSearch file'),
        (write('odd_search.pt', {**saved, 'search': {'fusion': 'rrf'}}), 'damaged TicketSearch file'),
        (write('damaged.pt', {**saved, 'config': {**saved['config'], 'dim': 5}}), 'damaged'),
        (write('no_texts.pt', {**saved, 'texts': []}), 'damaged TicketSearch file'),
        (tmp_path / 'missing.pt', 'does not exist'),
        (tmp_path, 'is a folder'),
    ]
    for path, why in cases:
        with pytest.raises(CheckpointError, match=re.escape(why)) as e:
            T.TicketSearch.load(path)
        assert str(path) in str(e.value) and isinstance(e.value, ValueError), e.value
    with pytest.raises(ValueError, match='path must name a file'): T.TicketSearch.load('')
    with pytest.raises(TypeError, match='path must be a str'): T.TicketSearch.load(3)


def test_load_reads_files_saved_before_the_version(tmp_path):
    "A file from before the format and version keys is version 1 and loads as before."
    good = _saved_search(tmp_path)
    old = {k: v for k, v in torch.load(good, weights_only=True).items()
           if k not in ('format', 'version')}
    torch.save(old, tmp_path / 'old.pt')
    a, b = T.TicketSearch.load(good), T.TicketSearch.load(tmp_path / 'old.pt')
    assert a.texts == b.texts
    assert torch.allclose(a.embeddings, b.embeddings, atol=1e-6)

@pytest.mark.parametrize('call, error', [
    (lambda s: s.search('', k=3), ValueError), (lambda s: s.search('!?', k=3), ValueError),
    (lambda s: s.search('charged', k=0), ValueError), (lambda s: s.search('charged', k=6), ValueError),
    (lambda s: s.search(3, k=1), TypeError), (lambda s: s.search(['charged'], k=1), TypeError),
    (lambda s: s.fit([]), ValueError), (lambda s: s.fit('charged twice'), TypeError),
    (lambda s: s.fit(['a b', None]), TypeError),
    (lambda s: T.TicketSearch(s.encoder).search('charged'), ValueError),
])
def test_search_bad_input(call, error):
    search = T.TicketSearch(T.TextEncoder(n_buckets=100, dim=4, hidden=4, out_dim=4))
    search.fit(['charged twice', 'app crashes', 'sync fails', 'refund please', 'dark mode'])
    with pytest.raises(error):
        call(search)


def test_fit_refuses_an_encoder_whose_embeddings_are_not_finite():
    # a diverged encoder's NaN embeddings were searched: every score NaN, the ranking arbitrary
    torch.manual_seed(0)
    encoder = T.TextEncoder(n_buckets=100, dim=4, hidden=4, out_dim=4)
    search = T.TicketSearch(encoder).fit(['charged twice', 'app crashes'])
    with torch.no_grad(): next(encoder.parameters()).fill_(math.inf)
    with pytest.raises(ValueError, match=r'NaN or inf embeddings for 2 of the 2 texts \(texts\[0\] first\)'):
        search.fit(['charged twice', 'app crashes'])
    assert search.texts == ['charged twice', 'app crashes']  # the fitted search is left as it was


def test_ticket_search_warns_about_an_untrained_encoder_and_not_a_trained_one():
    "An untrained encoder scores every text alike (mean cosine above 0.99): fit says so, once, naming the fix."
    tickets = load_tickets()
    texts, labels = list(tickets.text), torch.as_tensor(pd.factorize(tickets.problem_id)[0])
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match=r'mean pairwise cosine of 0\.9\d\d.*train_text_encoder'):
        T.TicketSearch(T.TextEncoder()).fit(texts)
    encoder, _ = T.train_text_encoder(texts, labels, epochs=1, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # any warning fails the test
        T.TicketSearch(encoder).fit(texts)


# --- hybrid search: rank fusion ----------------------------------------------------------------------------------

def test_tie_ranks_take_the_worst_rank_of_their_group():
    scores = torch.tensor([[0.9, 0.5, 0.5, 0.1], [0.0, 0.0, 0.0, 0.0], [3.0, -math.inf, math.inf, 3.0]])
    assert T.tie_ranks(scores).tolist() == [[1, 3, 3, 4], [4, 4, 4, 4], [3, 4, 1, 3]]
    assert T.tie_ranks(scores.long()[:2]).tolist() == [[4, 4, 4, 4], [4, 4, 4, 4]]  # 0.9 -> 0 ...
    assert T.tie_ranks(torch.zeros(0, 3)).shape == (0, 3)

def rrf_by_sorting(mats, k):
    "For each system, sort each row; a document's rank is the last place of its score's group."
    out = torch.zeros(mats[0].shape, dtype=torch.float64)
    for m in mats:
        for q, row in enumerate(m.tolist()):
            order = sorted(row, reverse=True)
            for j, s in enumerate(row):
                out[q, j] += 1 / (k + len(order) - order[::-1].index(s))
    return out

@pytest.mark.parametrize('seed', [0, 1, 2])
def test_reciprocal_rank_fusion_against_sorting_with_ties(seed):
    g = torch.Generator().manual_seed(seed)
    mats = [torch.randint(0, 5, (7, 12), generator=g).double() for _ in range(3)]
    for k in (0.0, 1.0, 60.0):
        assert torch.allclose(T.reciprocal_rank_fusion(mats, k=k), rrf_by_sorting(mats, k), atol=1e-14)

def test_reciprocal_rank_fusion_by_hand():
    dense = torch.tensor([[0.9, 0.5, 0.5, 0.1]])
    bm25 = torch.tensor([[0.0, 2.0, 0.0, 0.0]], dtype=torch.float64)
    want = [1 / 61 + 1 / 64, 1 / 63 + 1 / 61, 1 / 63 + 1 / 64, 2 / 64]
    fused = T.reciprocal_rank_fusion([dense, bm25])
    assert fused.dtype == torch.float64 and torch.allclose(fused, torch.tensor([want], dtype=torch.float64))
    assert T.reciprocal_rank_fusion((dense,), k=0).tolist() == [[1.0, 1 / 3, 1 / 3, 1 / 4]]

def test_weighted_score_fusion_by_hand_and_flat_rows():
    dense = torch.tensor([[0.9, 0.5, 0.5, 0.1]])
    bm25 = torch.tensor([[0.0, 2.0, 0.0, 0.0]])
    assert torch.allclose(T.weighted_score_fusion(dense, bm25, 0.5),
                          torch.tensor([[0.5, 0.75, 0.25, 0.0]], dtype=torch.float64))
    assert torch.allclose(T.weighted_score_fusion(dense, bm25, 1.0), torch.tensor([[1.0, 0.5, 0.5, 0.0]],
                                                                                  dtype=torch.float64))
    assert torch.allclose(T.weighted_score_fusion(dense, bm25, 0.0), torch.tensor([[0.0, 1.0, 0.0, 0.0]],
                                                                                  dtype=torch.float64))
    z = T.weighted_score_fusion(dense, torch.zeros(1, 4), 0.25, 'zscore')  # a flat BM25 row adds 0
    d = dense.double()
    assert torch.allclose(z, 0.25 * (d - d.mean()) / d.std(correction=0))

@pytest.mark.parametrize('normalisation', T.FUSION_NORMALISATIONS)
@pytest.mark.parametrize('scale', [1e308, 2.0 ** -1070])  # near float64's top, and subnormal
def test_weighted_score_fusion_is_exact_at_float64s_limits(normalisation, scale):
    # Normalised scores do not change with a factor per row: at ±1e308 the span overflowed (NaN), and
    # subnormal z-scores underflowed to a "flat" row of zeros.
    unit = torch.tensor([[1.0, -1.0, 0.0, 0.5], [0.25, 1.0, -0.5, 1.0]], dtype=torch.float64)
    other = torch.tensor([[0.0, 2.0, 1.0, 3.0], [1.0, 0.0, 2.0, 5.0]], dtype=torch.float64)
    fused = T.weighted_score_fusion(unit * scale, other, 0.5, normalisation)
    assert torch.isfinite(fused).all()
    assert torch.allclose(fused, T.weighted_score_fusion(unit, other, 0.5, normalisation), atol=1e-12)

@pytest.mark.parametrize('normalisation', T.FUSION_NORMALISATIONS)
@pytest.mark.parametrize('value', [0.1, 0.7, 1.7e308, 3])
def test_a_row_of_equal_scores_adds_nothing(normalisation, value):
    # z-scores used to read the rounding of the mean of equal scores as a spread: ±1, not 0
    flat = torch.full((2, 7), value, dtype=torch.float64 if isinstance(value, float) else torch.int64)
    assert T.weighted_score_fusion(flat, flat, 0.5, normalisation).abs().max() == 0

@pytest.mark.parametrize('dtype, scale', [(torch.float32, 1e30), (torch.float64, 1e200)])
def test_matryoshka_loss_at_huge_values_is_its_loss_at_1(dtype, scale):
    # each prefix's squares overflowed in F.normalize: every row became zero and mnrl_loss said "zero vector"
    g = torch.Generator().manual_seed(3)
    a, p = (torch.randn(6, 8, generator=g, dtype=dtype) for _ in range(2))
    assert torch.allclose(T.matryoshka_loss(scale * a, scale * p, dims=(2, 4, 8)),
                          T.matryoshka_loss(a, p, dims=(2, 4, 8)), rtol=1e-5)

@pytest.mark.parametrize('scale', [0.01, 3.7, 250.0])
def test_matryoshka_prefixes_are_scaled_exactly_so_ordinary_values_give_the_same_bits(scale):
    "Rows are scaled by 2^-k before F.normalize: the same loss and gradient, bit for bit, as without scaling"
    "(dividing by the largest value instead moved the last bits, and so lesson 11's committed numbers)."
    import torch.nn.functional as F
    g = torch.Generator().manual_seed(5)
    a, p = (scale * torch.randn(16, 32, generator=g) for _ in range(2))
    a1, a2 = a.clone().requires_grad_(), a.clone().requires_grad_()
    scaled = T.matryoshka_loss(a1, p, dims=(8, 32))
    plain = sum(T.mnrl_loss(F.normalize(a2[:, :m], dim=1), F.normalize(p[:, :m], dim=1)) for m in (8, 32))
    scaled.backward(), plain.backward()
    assert torch.equal(scaled, plain) and torch.equal(a1.grad, a2.grad)  # the same operations on one machine

def test_matryoshka_loss_refuses_positives_of_another_width():
    g = torch.Generator().manual_seed(3)
    a, p = torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)
    with pytest.raises(ValueError, match=r'anchors \(6, 8\) and positives \(6, 4\) must have the same shape'):
        T.matryoshka_loss(a, p, dims=(2, 4))  # every prefix fits both: the narrower positive went unnoticed

def test_mnrl_loss_refuses_a_scale_whose_logits_overflow():
    g = torch.Generator().manual_seed(3)
    a, p = torch.randn(6, 8, generator=g), torch.randn(6, 8, generator=g)
    overflow = r'scale \(1e\+308\) makes the logits overflow torch.float32: at most 8.51e\+37'
    with pytest.raises(ValueError, match=overflow):
        T.mnrl_loss(a, p, scale=1e308)  # was NaN
    assert torch.isfinite(T.mnrl_loss(a, p, scale=1e30))
    assert torch.isfinite(T.mnrl_loss(a.double(), p.double(), scale=1e300))

def test_mnrl_loss_takes_anchors_and_positives_of_two_float_dtypes():
    # float64 anchors and float32 positives: torch's "expected m1 and m2 to have the same dtype" from the product
    g = torch.Generator().manual_seed(3)
    a, p = torch.randn(6, 8, generator=g, dtype=torch.float64), torch.randn(6, 8, generator=g)
    loss = T.mnrl_loss(a, p)
    assert loss.dtype == torch.float64 and torch.allclose(loss, T.mnrl_loss(a, p.double()))
    assert torch.allclose(T.mnrl_loss(p.half(), a), T.mnrl_loss(p.half().double(), a))

@pytest.mark.parametrize('call, error, match', [
    (lambda d, b: T.reciprocal_rank_fusion(d), TypeError, 'scores must be a non-empty list'),
    (lambda d, b: T.reciprocal_rank_fusion([]), TypeError, 'scores must be a non-empty list'),
    (lambda d, b: T.reciprocal_rank_fusion([d, b[:, :2]]), ValueError, 'one shape'),
    (lambda d, b: T.reciprocal_rank_fusion([d, b * math.nan]), ValueError, r'scores\[1\] contains NaN'),
    (lambda d, b: T.reciprocal_rank_fusion([d, b > 0]), TypeError, r'scores\[1\] must be real'),
    (lambda d, b: T.reciprocal_rank_fusion([d[0]]), ValueError, r'scores\[0\] must have 2 dimensions'),
    (lambda d, b: T.reciprocal_rank_fusion([d[:, :0]]), ValueError, 'has no documents'),
    (lambda d, b: T.reciprocal_rank_fusion([d], k=-1), ValueError, 'k must'),
    (lambda d, b: T.tie_ranks(d.tolist()), TypeError, 'scores must be a torch.Tensor'),
    (lambda d, b: T.weighted_score_fusion(d, b, 1.5), ValueError, 'weight must'),
    (lambda d, b: T.weighted_score_fusion(d, b, 0.5, 'rank'), ValueError, 'normalisation'),
    (lambda d, b: T.weighted_score_fusion(d, b + math.inf), ValueError, 'lexical contains inf'),
    (lambda d, b: T.weighted_score_fusion(d, b[:, :3]), ValueError, 'dense and lexical must have one shape'),
])
def test_fusion_bad_inputs(call, error, match):
    dense, bm25 = torch.tensor([[0.9, 0.5, 0.5, 0.1]]), torch.tensor([[0.0, 2.0, 0.0, 0.0]])
    with pytest.raises(error, match=match): call(dense, bm25)

def test_hybrid_search_round_trip_and_old_files(tmp_path, tickets):
    texts = list(tickets.text[:30])
    torch.manual_seed(0)
    encoder = T.TextEncoder(n_buckets=1000, dim=8, hidden=8, out_dim=8)
    dense, hybrid = T.TicketSearch(encoder).fit(texts), T.TicketSearch(encoder, hybrid=True).fit(texts)
    query = 'I was charged twice'
    hits = hybrid.search(query, k=30)
    want = T.reciprocal_rank_fusion([(dense.embeddings @ encoder.encode([query])[0])[None],
                                     T.lexical_scores([query], texts)])[0]
    assert np.allclose(hits.score, want[hits['index'].tolist()].numpy())
    assert hits.score.is_monotonic_decreasing and sorted(hits['index']) == list(range(30))
    loaded = T.TicketSearch.load(hybrid.save(tmp_path / 'h.pt'))
    assert loaded.hybrid and loaded.rrf_k == 60.0
    pd.testing.assert_frame_equal(loaded.search(query, k=5), hybrid.search(query, k=5))
    assert T.TicketSearch.load(hybrid.save(tmp_path / 'h.pt')).search(query, k=5).equals(hits.iloc[:5])
    saved = torch.load(tmp_path / 'h.pt', weights_only=True)
    assert saved['version'] == 2 and saved['search'] == {'hybrid': True, 'rrf_k': 60.0}
    v1 = {k: v for k, v in saved.items() if k != 'search'} | {'version': 1}
    torch.save(v1, tmp_path / 'v1.pt')  # written before hybrid search: loads as the dense search
    old = T.TicketSearch.load(tmp_path / 'v1.pt')
    assert not old.hybrid
    pd.testing.assert_frame_equal(old.search(query, k=5), dense.search(query, k=5))
    # the fusion's k is the search's own, and is saved with it
    sharp = T.TicketSearch(encoder, hybrid=True, rrf_k=1.0).fit(texts)
    want1 = T.reciprocal_rank_fusion([(dense.embeddings @ encoder.encode([query])[0])[None],
                                      T.lexical_scores([query], texts)], k=1.0)[0]
    got1 = sharp.search(query, k=30)
    assert np.allclose(got1.score, want1[got1['index'].tolist()].numpy())
    assert T.TicketSearch.load(sharp.save(tmp_path / 'k1.pt')).rrf_k == 1.0
    with pytest.raises(TypeError, match='hybrid must be'): T.TicketSearch(encoder, hybrid='yes')
    with pytest.raises(ValueError, match='rrf_k'): T.TicketSearch(encoder, rrf_k=-1.0)


# --- Matryoshka loss -----------------------------------------------------------------------------------------

@pytest.mark.parametrize('seed', [0, 1])
def test_matryoshka_loss_is_the_sum_of_per_prefix_losses(seed):
    g = torch.Generator().manual_seed(seed)
    a, p = (torch.randn(10, 32, generator=g, dtype=torch.float64) for _ in range(2))
    labels = torch.randint(0, 3, (10,), generator=g)
    dims, weights = (2, 4, 8, 32), (1.0, 0.5, 2.0, 1.0)
    want = sum(w * T.mnrl_loss(a[:, :m] / a[:, :m].norm(dim=1, keepdim=True),
                               p[:, :m] / p[:, :m].norm(dim=1, keepdim=True), labels, scale=10.0)
               for m, w in zip(dims, weights))
    got = T.matryoshka_loss(a, p, dims, weights, labels=labels, scale=10.0)
    assert torch.isclose(got, want)
    # a prefix is re-normalised: scaling its coordinates beyond the prefix changes nothing there
    far = p.clone()
    far[:, 8:] *= 100
    assert torch.isclose(T.matryoshka_loss(a, far, (2, 4, 8), labels=labels),
                         T.matryoshka_loss(a, p, (2, 4, 8), labels=labels))
    # default: mnrl_loss on the prefixes 8 ... 128 with weight 1
    a2, p2 = (torch.randn(6, 128, generator=g, dtype=torch.float64) for _ in range(2))
    assert torch.isclose(T.matryoshka_loss(a2, p2), sum(T.mnrl_loss(a2[:, :m], p2[:, :m])
                                                        for m in (8, 16, 32, 64, 128)))
    # the gradient is the sum of the per-prefix gradients
    a3 = a.clone().requires_grad_()
    T.matryoshka_loss(a3, p, (4, 32)).backward()
    a4 = a.clone().requires_grad_()
    (T.mnrl_loss(a4[:, :4], p[:, :4]) + T.mnrl_loss(a4, p)).backward()
    assert torch.allclose(a3.grad, a4.grad)

def test_matryoshka_loss_takes_another_loss():
    a, p = torch.randn(5, 8, dtype=torch.float64), torch.randn(5, 8, dtype=torch.float64)
    seen = []
    def spy(x, y, **options):
        seen.append((x.shape[1], options))
        assert torch.allclose(x.norm(dim=1), torch.ones(5, dtype=torch.float64))
        return x.sum() * 0 + x.shape[1]
    assert T.matryoshka_loss(a, p, (2, 8), loss=spy, scale=3.0).item() == 10.0
    assert seen == [(2, {'scale': 3.0}), (8, {'scale': 3.0})]

@pytest.mark.parametrize('kwargs, error, match', [
    (dict(dims=(8, 4)), ValueError, 'dims must be increasing'),
    (dict(dims=(4, 4)), ValueError, 'dims must be increasing'),
    (dict(dims=(4, 64)), ValueError, 'dims must lie in'),
    (dict(dims=(0, 4)), ValueError, 'dims must lie in'),
    (dict(dims=()), TypeError, 'dims must be a non-empty tuple'),
    (dict(dims=8), TypeError, 'dims must be a non-empty tuple'),
    (dict(dims=(4, 8), weights=(1.0,)), ValueError, 'weights must be a tuple of 2'),
    (dict(dims=(4, 8), weights=(1.0, -1.0)), ValueError, 'weights'),
    (dict(dims=(4, 8), weights=(1.0, math.nan)), ValueError, 'weights'),
    (dict(dims=(4, 8), loss='mnrl'), TypeError, 'loss must be callable'),
])
def test_matryoshka_bad_inputs(kwargs, error, match):
    a, p = torch.randn(5, 8), torch.randn(5, 8)
    with pytest.raises(error, match=match): T.matryoshka_loss(a, p, **kwargs)


# --- Matryoshka training: the method's option matryoshka_dims ----------------------------------------------

MRL_TEXTS = ['refund my order', 'money back please', 'reset password', 'forgot my password',
             'app crashes on start', 'the app quits']
MRL_LABELS = torch.tensor([0, 0, 1, 1, 2, 2])

@pytest.mark.parametrize('mask', [True, False])
def test_matryoshka_option_sums_the_prefix_losses(mask):
    from contrastive_nb.methods import Batch
    torch.manual_seed(0)
    enc = T.TextEncoder(n_buckets=512, dim=16, hidden=16, out_dim=8)
    options = T.TextPairOptions(scale=10.0, mask_false_negatives=mask, matryoshka_dims=[2, 4, 8])
    assert options.matryoshka_dims == (2, 4, 8)  # a list (a TOML array) becomes a tuple
    method = T.TextPairs(enc, MRL_TEXTS, MRL_LABELS, options)
    a, p, h = torch.tensor([0, 2, 4]), torch.tensor([1, 3, 5]), torch.tensor([2, 4, 0])
    z = enc(*enc.featurize(MRL_TEXTS))  # raw embeddings; every loss re-normalises its prefix
    lab = lambda rows: MRL_LABELS[rows] if mask else None
    for views, hard in (([a, p], None), ([a, p, h], h)):
        got = method.loss(Batch(views, a, MRL_LABELS[a], None))
        want = sum(T.mnrl_loss(z[a, :m], z[p, :m], lab(a), 10.0,
                               None if hard is None else z[hard, :m], None if hard is None else lab(hard))
                   for m in (2, 4, 8))
        assert torch.isclose(got, want, rtol=1e-5)
        # one prefix of full width is the plain method
        full = T.TextPairs(enc, MRL_TEXTS, MRL_LABELS, T.TextPairOptions(
            scale=10.0, mask_false_negatives=mask, matryoshka_dims=(8,)))
        plain = T.TextPairs(enc, MRL_TEXTS, MRL_LABELS, T.TextPairOptions(
            scale=10.0, mask_false_negatives=mask))
        batch = Batch(views, a, MRL_LABELS[a], None)
        assert torch.isclose(full.loss(batch), plain.loss(batch), rtol=1e-5)

def test_train_text_encoder_passes_matryoshka_dims(tickets):
    index = {p: i for i, p in enumerate(sorted(tickets.problem_id.unique()))}
    few = tickets[tickets.problem_id.isin(['P001', 'P013', 'P042', 'P047'])]
    texts, labels = list(few.text), labels_of(few, index)
    def train(**options):
        torch.manual_seed(0)
        enc = T.TextEncoder(n_buckets=2**10, dim=16, hidden=16, out_dim=16)
        return T.train_text_encoder(texts, labels, epochs=2, batch_size=8, seed=0, encoder=enc,
                                    **options)[1]
    plain, full, nested = train(), train(matryoshka_dims=(16,)), train(matryoshka_dims=(4, 16))
    assert np.allclose(full, plain, rtol=1e-4, atol=1e-6)  # one prefix of full width: the plain loss
    assert nested[0] > plain[0] + 0.5  # the same first batch, plus the loss of the 4-prefix
    assert all(math.isfinite(v) for v in nested)

@pytest.mark.parametrize('options, error, match', [
    (dict(matryoshka_dims=(8, 4)), ValueError, 'matryoshka_dims must be increasing'),
    (dict(matryoshka_dims=(0, 8)), ValueError, 'matryoshka_dims must lie in'),
    (dict(matryoshka_dims=(4.0, 8)), TypeError, 'matryoshka_dims must be an int'),
    (dict(matryoshka_dims=(True, 8)), TypeError, 'matryoshka_dims must be an int'),
    (dict(matryoshka_dims=8), TypeError, 'matryoshka_dims must be a non-empty tuple'),
    (dict(matryoshka_dims=()), TypeError, 'matryoshka_dims must be a non-empty tuple'),
    (dict(matryoshka_dims=(8,), loss='supcon'), ValueError, "matryoshka_dims needs loss='mnrl'"),
])
def test_matryoshka_option_bad_values(options, error, match):
    with pytest.raises(error, match=match): T.TextPairOptions(**options)

def test_matryoshka_dims_longer_than_the_encoder():
    torch.manual_seed(0)
    enc = T.TextEncoder(n_buckets=512, dim=16, hidden=16, out_dim=8)
    with pytest.raises(ValueError, match=r"matryoshka_dims \(4, 16\) reaches beyond .* 8 output"):
        T.TextPairs(enc, MRL_TEXTS, MRL_LABELS, T.TextPairOptions(matryoshka_dims=(4, 16)))
    with pytest.raises(ValueError, match='matryoshka_dims'):
        T.train_text_encoder(MRL_TEXTS, MRL_LABELS, batch_size=2, encoder=enc, matryoshka_dims=(32,))
    with pytest.raises(ValueError, match='matryoshka_dims'):  # the default encoder has 128 outputs
        T.train_text_encoder(MRL_TEXTS, MRL_LABELS, batch_size=2, matryoshka_dims=(8, 256))


# --- the pretrained model fine-tuned (issue 44) ---------------------------------------------------------------------

def margin_negatives_loop(pool, pairs, margin):
    "Brute force: for each pair, the closest candidate (not the pair) below margin × the positive's cosine."
    z = F.normalize(pool.double(), dim=1)
    out = []
    for a, p in pairs.tolist():
        bar = margin * float(z[a] @ z[p])
        candidates = [(float(z[a] @ z[j]), j) for j in range(len(z)) if j not in (a, p) and float(z[a] @ z[j]) < bar]
        out.append(max(candidates)[1])
    return out


@pytest.mark.parametrize('seed', range(5))
@pytest.mark.parametrize('margin', [0.5, 0.9, 0.95, 1.0])
def test_margin_negatives_match_brute_force(seed, margin):
    g = torch.Generator().manual_seed(seed)
    anchors = torch.randn(12, 6, generator=g, dtype=torch.float64)
    pool = torch.cat([anchors, anchors + 0.4 * torch.randn(12, 6, generator=g, dtype=torch.float64),
                      torch.randn(20, 6, generator=g, dtype=torch.float64)])
    pairs = torch.stack([torch.arange(12), torch.arange(12, 24)], dim=1)
    assert T.margin_negatives(pool, pairs, margin).tolist() == margin_negatives_loop(pool, pairs, margin)


def test_margin_negatives_skip_near_copies_and_the_pair():
    z = torch.tensor([[1.0, 0.0], [0.99, 0.1], [0.98, 0.2], [0.0, 1.0]])
    # anchor 0, positive 2 (cosine 0.98): row 1 (0.995) is above it, row 3 (0) is the only one below 0.93
    assert T.margin_negatives(z, torch.tensor([[0, 2]])).tolist() == [3]
    # the positive itself is never its negative, even where it is the only candidate below the bar
    with pytest.raises(ValueError, match='pair 0 has no candidate'):
        T.margin_negatives(z[:3], torch.tensor([[0, 2]]))
    with pytest.raises(ValueError, match=r'pairs must be \(P, 2\)'):
        T.margin_negatives(z, torch.tensor([[0, 1, 2]]))


@pytest.fixture(scope='module')
def minilm_cache(tmp_path_factory):
    pytest.importorskip('sentence_transformers')
    return tmp_path_factory.mktemp('minilm')


def tuned(cache, **options):
    from contrastive_nb.pretrained import load_pretrained
    texts = ['charged twice this month', 'two payments for one plan', 'the app crashes at start',
             'app closes right after opening', 'cancel my plan', 'stop my subscription']
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    pairs = torch.tensor([[0, 1], [1, 0], [2, 3], [3, 2], [4, 5], [5, 4]])
    defaults = dict(epochs=3, batch_size=3, lr=1e-4, seed=0)
    return T.fine_tune(load_pretrained(cache, 'cpu'), texts, labels, pairs, **{**defaults, **options})


def test_fine_tune_learns_and_is_seeded(minilm_cache):
    model, losses = tuned(minilm_cache)
    _, again = tuned(minilm_cache)
    assert len(losses) == 6 and np.allclose(losses, again, rtol=1e-4)
    assert np.mean(losses[-2:]) < np.mean(losses[:2])
    assert not model.training
    _, other = tuned(minilm_cache, seed=1)
    assert not np.allclose(losses, other, rtol=1e-3)  # another order of the pairs


def test_fine_tune_passes_the_negatives_and_the_mask_on(minilm_cache):
    base = tuned(minilm_cache, epochs=1)[1]
    assert not np.allclose(base, tuned(minilm_cache, epochs=1, negatives=torch.tensor([2, 4, 0, 5, 1, 3]))[1])
    # seed 0 puts a pair and its twin, (a, b) and (b, a), in one batch: the mask changes that loss
    assert not np.allclose(base, tuned(minilm_cache, epochs=1, mask_false_negatives=False)[1])


def test_text_pairs_loss_on_a_pretrained_model(minilm_cache):
    from contrastive_nb.methods import Batch
    from contrastive_nb.pretrained import load_pretrained
    texts = ['charged twice', 'two payments', 'billed two times', 'app crashes', 'cancel my plan']
    labels = torch.tensor([0, 0, 0, 1, 2])
    model = load_pretrained(minilm_cache, 'cpu')
    def loss(views, mask=True):
        options = T.TextPairOptions(mask_false_negatives=mask)
        method = T.TextPairs(model, texts, labels, options).eval()
        with torch.no_grad(): return method.loss(Batch(views, views[0], labels[views[0]], None)).item()
    a, p = torch.tensor([0, 3, 4]), torch.tensor([1, 3, 4])
    assert loss([a, p, torch.tensor([2, 4, 3])], mask=False) > loss([a, p], mask=False)  # one more candidate
    a, p = torch.tensor([0, 1, 3]), torch.tensor([2, 0, 4])  # anchor 0's candidate 0 is its own problem
    assert loss([a, p], mask=False) > loss([a, p]) + 1e-3


def test_text_pairs_embed_a_pretrained_model_as_it_encodes(minilm_cache):
    from contrastive_nb.pretrained import load_pretrained
    model = load_pretrained(minilm_cache, 'cpu')
    texts = ['a printer that will not print', 'refund please', 'the app crashes']
    method = T.TextPairs(model, texts, torch.tensor([0, 1, 2])).eval()
    with torch.no_grad():
        rows = method.embed_rows(torch.tensor([2, 0]))
    assert torch.allclose(rows, model.encode([texts[2], texts[0]], convert_to_tensor=True), atol=1e-5)
    with pytest.raises(TypeError, match='model must be a model from load_pretrained'):
        T.fine_tune(T.TextEncoder(), texts, torch.tensor([0, 1, 2]), torch.tensor([[0, 1]]))


def test_pair_batches_cover_every_pair_once_per_epoch_in_a_new_order():
    pairs = torch.stack([torch.arange(10), torch.arange(10).roll(1)], dim=1)
    data = T._PairBatches(torch.zeros(10, dtype=torch.long), pairs, torch.arange(10).flip(0), 3, seed=0)
    assert data.steps_per_epoch == 3  # the ragged last batch is dropped
    epochs = [[data.batch(step) for step in range(e * 3, e * 3 + 3)] for e in range(3)]
    anchors = [torch.cat([b.views[0] for b in epoch]) for epoch in epochs]
    for seen, epoch in zip(anchors, epochs):
        assert len(set(seen.tolist())) == 9  # no pair twice in an epoch
        for b in epoch:
            assert torch.equal(b.views[1], pairs[b.views[0], 1]) and torch.equal(b.views[2], 9 - b.views[0])
    assert not torch.equal(anchors[0], anchors[1]) or not torch.equal(anchors[1], anchors[2])


def test_fine_tune_refuses_what_is_not_a_pretrained_model():
    for model in (T.TextEncoder(n_buckets=64, dim=4, hidden=4, out_dim=4), torch.nn.Linear(2, 2)):
        with pytest.raises(TypeError, match='model must be a model from load_pretrained'):
            T.fine_tune(model, ['a', 'b'], torch.tensor([0, 0]), torch.tensor([[0, 1]]))


def test_ticket_search_on_the_pretrained_model_saves_its_record_not_its_weights(minilm_cache, tmp_path):
    "Untouched: the file names the release (hashes, no weights) and loads the same ranking; tuned: weights saved."
    from contrastive_nb.pretrained import load_pretrained
    texts = ['charged twice this month', 'the app crashes at start', 'cancel my plan', 'reset my password']
    search = T.TicketSearch(load_pretrained(minilm_cache, 'cpu')).fit(texts)
    hits = search.search('I was billed two times', k=2)
    assert hits['index'].tolist()[0] == 0 and hits.score.is_monotonic_decreasing
    path = search.save(tmp_path / 'minilm.pt')
    saved = torch.load(path, weights_only=True)
    assert saved['version'] == 3 and saved['pretrained']['state'] is None and path.stat().st_size < 100_000
    again = T.TicketSearch.load(path)
    assert torch.allclose(again.embeddings, search.embeddings, atol=1e-5)
    model, _ = tuned(minilm_cache, epochs=1)
    tuned_search = T.TicketSearch(model, hybrid=True).fit(texts)
    path = tuned_search.save(tmp_path / 'tuned.pt')
    back = T.TicketSearch.load(path)
    assert back.hybrid and torch.allclose(back.embeddings, tuned_search.embeddings, atol=1e-5)
    assert not torch.allclose(back.embeddings, search.embeddings, atol=1e-4)  # the tuned weights, not the release's
    torch.save(saved | {'pretrained': saved['pretrained'] | {'files': {}}}, tmp_path / 'other.pt')
    with pytest.raises(CheckpointError, match=r'other\.pt: the record names'):
        T.TicketSearch.load(tmp_path / 'other.pt')


def test_ticket_search_refuses_what_is_not_an_encoder():
    with pytest.raises(TypeError, match='encoder must be a TextEncoder or a model from load_pretrained'):
        T.TicketSearch(torch.nn.Linear(2, 2))
