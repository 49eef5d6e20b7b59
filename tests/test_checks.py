"""contrastive_nb._checks: index checks that see a mask for what torch reads it as, and bounds compared in int64."""
import warnings

import pandas as pd
import pytest
import torch

from contrastive_nb._checks import check_indices, check_length, check_number

U8 = torch.uint8

# --- masks are refused -------------------------------------------------------------------------------------------

def test_a_uint8_index_as_long_as_the_rows_is_refused_not_read_as_a_mask():
    # the silent case: torch would index with it as a mask (rows 0 and 2), not as the row numbers 1, 0, 1
    index = torch.tensor([1, 0, 1], dtype=U8)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # torch warns that this reading of uint8 is deprecated
        assert torch.arange(3)[index].tolist() == [0, 2]  # what torch itself does with it
    with pytest.raises(TypeError, match=r'i must hold int64 \(or int32\) indices, got torch.uint8.*boolean mask'):
        check_indices(index, 'i', 3)

def test_a_uint8_index_is_refused_as_a_mask_not_as_out_of_range():
    # 250 < 300 rows: the old check compared in uint8, where 300 wraps to 44, and called 250 out of range
    with pytest.raises(TypeError, match=r'uint8.*\.long\(\)'):
        check_indices(torch.tensor([250], dtype=U8), 'i', 300)

def test_bool_indices_are_refused_with_the_way_to_their_indices():
    with pytest.raises(TypeError, match=r'got torch.bool.*boolean mask.*nonzero\(\)'):
        check_indices(torch.tensor([True, False, True]), 'i', 3)

# --- integer indices are compared in int64 -------------------------------------------------------------------------

@pytest.mark.parametrize('dtype, value, size', [
    (torch.int8, 100, 300),      # 300 wraps to 44 in int8
    (torch.int16, 30_000, 40_000),  # 40 000 wraps to -25 536 in int16
    (torch.int32, 250, 300),
    (torch.int64, 299, 300),
])
def test_small_integer_dtypes_are_compared_in_int64(dtype, value, size):
    out = check_indices(torch.tensor([0, value], dtype=dtype), 'i', size)
    assert out.dtype == torch.int64 and out.tolist() == [0, value]

@pytest.mark.parametrize('dtype', [torch.int8, torch.int16, torch.int32, torch.int64])
def test_out_of_range_and_negative_indices_still_raise_in_every_dtype(dtype):
    with pytest.raises(ValueError, match=r'\[0, 9\] for 10 rows, got \[10\]'):
        check_indices(torch.tensor([3, 10], dtype=dtype), 'i', 10)
    with pytest.raises(ValueError, match=r'got \[-1\].*negatives are refused'):
        check_indices(torch.tensor([-1, 3], dtype=dtype), 'i', 10)

def test_int32_indices_come_back_as_equal_int64_ones():
    out = check_indices(torch.tensor([2, 0, 2], dtype=torch.int32), 'i', 3)
    assert out.dtype == torch.int64 and out.tolist() == [2, 0, 2]
    assert torch.arange(10, 13)[out].tolist() == [12, 10, 12]  # row numbers, repeats kept

def test_no_upper_bound_with_size_none():
    assert check_indices(torch.tensor([10 ** 9, 0]), 'i', None).tolist() == [10 ** 9, 0]
    with pytest.raises(ValueError, match=r'i must be row numbers >= 0, got \[-3\]'):
        check_indices(torch.tensor([-3]), 'i', None)
    with pytest.raises(TypeError, match='uint8'): check_indices(torch.tensor([1], dtype=U8), 'i', None)

@pytest.mark.parametrize('bad, error, match', [
    ([0, 1], TypeError, 'torch.Tensor'),
    (torch.tensor([0.0, 1.0]), TypeError, 'integer dtype'),
    (torch.tensor([[0, 1]]), ValueError, '1 dimension'),
])
def test_other_bad_indices(bad, error, match):
    with pytest.raises(error, match=match): check_indices(bad, 'i', 3)

# --- the message of check_number -----------------------------------------------------------------------------------

def test_a_number_without_bounds_is_asked_to_be_finite_not_to_lie_in_minus_inf_inf():
    for value in (float('nan'), float('inf'), -float('inf')):
        with pytest.raises(ValueError) as info: check_number(value, 'lr')
        assert str(info.value) == f'lr must be a finite number, got {value}'
    with pytest.raises(ValueError, match=r'^lr must be a finite number in \[0, inf\), got nan$'):
        check_number(float('nan'), 'lr', low=0.0)  # a bound: still named
    assert check_number(-1e300, 'lr') == -1e300 and check_number(1e300, 'lr') == 1e300  # what is accepted stays

# --- check_length ------------------------------------------------------------------------------------------------

def test_check_length_takes_tensors_frames_and_lists_and_names_the_argument_and_both_lengths():
    for value in (torch.zeros(3, 2), pd.DataFrame(dict(a=[1, 2, 3])), [0, 1, 2]):
        assert check_length(value, 'x', 3) is value
        with pytest.raises(ValueError, match=r'^x has 3 entries for 4 images$'): check_length(value, 'x', 4, 'images')
