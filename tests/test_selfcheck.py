"""Package tests for contrastive_nb.selfcheck: the exercise checker must be able to fail, and say why."""
import math

import numpy as np
import pytest
import torch

from contrastive_nb.selfcheck import check, compare, describe

def rows(seed: int): return (torch.randn(3 + seed, 4, generator=torch.Generator().manual_seed(seed)),)
def mean(x): return x.mean(1)

def test_check_passes_the_reference_and_fails_a_wrong_answer(capsys):
    assert check(mean, mean, rows)
    assert '✓ matches the reference on 5 fresh inputs' in capsys.readouterr().out
    assert not check(lambda x: x.sum(1), mean, rows, hint='average')
    out = capsys.readouterr().out
    assert out.startswith('✗ trial 0 (Tensor(3, 4) float32): max error') and '\n  hint: average' in out

def test_check_tries_every_trial(capsys):
    "A function wrong only on the larger inputs fails at the first trial that reaches them."
    late = lambda x: x.mean(1) if len(x) < 6 else x.median(1).values
    assert not check(late, mean, rows, trials=5)
    assert '✗ trial 3 (Tensor(6, 4)' in capsys.readouterr().out
    assert check(late, mean, rows, trials=3)  # fewer trials cannot see it: the exercises vary their sizes

def test_check_stub_and_crash(capsys):
    def stub(x): raise NotImplementedError
    assert not check(stub, mean, rows)
    assert capsys.readouterr().out.startswith('Not attempted yet')
    assert not check(lambda x: x.mean(2), mean, rows, hint='rows')
    assert 'your function raised IndexError' in capsys.readouterr().out

@pytest.mark.parametrize('kwargs,error,match', [
    (dict(trials=0), ValueError, 'trials must lie in'),  # a check that cannot fail
    (dict(trials=-1), ValueError, 'trials must lie in'),
    (dict(trials=2.0), TypeError, 'trials must be an int'),
    (dict(trials=True), TypeError, 'trials must be an int'),
    (dict(atol=-1e-5), ValueError, 'atol must be'), (dict(rtol=math.nan), ValueError, 'rtol must be'),
    (dict(atol=math.inf), ValueError, 'atol must be'), (dict(atol='0.1'), TypeError, 'atol must be'),
    (dict(yours=None), TypeError, 'yours must be a function'),
    (dict(reference='x.mean(1)'), TypeError, 'reference must be a function'),
    (dict(make_inputs=[(torch.ones(2, 2),)]), TypeError, 'make_inputs must be a function'),
    (dict(make_inputs=lambda seed: torch.ones(3, 4)), TypeError, r'make_inputs must return a tuple .* \(x,\)'),
    (dict(hint=3), TypeError, 'hint must be a string'),
])
def test_check_refuses_bad_arguments(kwargs, error, match, capsys):
    args = dict(yours=mean, reference=mean, make_inputs=rows) | kwargs
    with pytest.raises(error, match=match): check(**args)
    assert capsys.readouterr().out == ''  # refused before anything ran

def test_compare():
    assert compare(torch.ones(3) + 1e-7, torch.ones(3)) is None
    assert compare(torch.ones(2), torch.ones(3)) == 'expected shape (3,), got (2,)'
    assert compare(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0])).startswith('max error 0.5 at index (1,)')
    assert 'NaN where the reference has none' in compare(torch.tensor([math.nan]), torch.tensor([1.0]))
    assert compare(torch.tensor([math.nan]), torch.tensor([math.nan])) is None
    assert compare((1.0, 2.0), (1.0, 3.0)).startswith('result 1: ')
    assert compare(torch.ones(2, requires_grad=True), torch.ones(2)) is None
    assert compare(torch.ones(2).half(), np.ones(2)) is None
    assert compare(torch.tensor([True, False]), torch.tensor([True, True])) == \
        '1 of 2 entries differ; the first at index (1,): got False, expected True'
    assert compare(1.0 + 1e-3, 1.0, atol=1e-2) is None and compare(1.0 + 1e-3, 1.0, atol=0, rtol=0) is not None
    assert 'expected a number' in compare('text', 1.0)
    with pytest.raises(ValueError, match='atol must be'): compare(1.0, 1.0, atol=-1)

def test_describe():
    assert describe((torch.ones(2, 3), np.zeros(4, dtype=np.int64), 0.5)) == \
        'Tensor(2, 3) float32, ndarray(4,) int64, 0.5'
    assert describe(['x' * 50]).endswith('...')
    with pytest.raises(TypeError, match='args must be a tuple'): describe(torch.ones(3))
