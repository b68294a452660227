"""The GPU tests' guard bands around each output (tests/test_gpu_kernels.py `_banded`, exp. 184),
checked on CPU tensors: a write one element past either end of C fails the check; writes inside
C, and the view's shape, strides and alignment, are what the kernels get."""

import pytest
import torch

import reference as R
from test_gpu_kernels import BAND, _banded


def _outputs(data, problem):
    return [data[-1]] if problem == "dual" else [c for _, _, c in data[0]]


@pytest.mark.parametrize("problem", ["dual", "group"])
def test_bands_catch_a_write_past_either_end(problem):
    data = (R.generate_input(200, 128, 256, 2, 5) if problem == "dual"
            else R.generate_input([40, 129], [128, 256], [256, 512], 2, 5))
    banded, check = _banded(data, problem)
    for c, cb in zip(_outputs(data, problem), _outputs(banded, problem)):
        assert cb.shape == c.shape and cb.stride() == c.stride() and cb.dtype == c.dtype
        assert cb.data_ptr() % 16 == 0
        cb.fill_(1.0)  # every element of C written: bands intact
    check("clean")
    last = _outputs(banded, problem)[-1]
    flat = torch.as_strided(last, (last.numel() + BAND,), (1,))  # C's storage and the band after it
    flat[last.numel()] = 0.0
    with pytest.raises(AssertionError, match="after it were written"):
        check("overrun")
    banded, check = _banded(data, problem)
    first = _outputs(banded, problem)[0]
    torch.as_strided(first, (1,), (1,), first.storage_offset() - 1).fill_(0.0)
    with pytest.raises(AssertionError, match="before it were written"):
        check("underrun")
