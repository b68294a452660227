"""e2m1 codes, nibble order and the permuted scale layout, against independent formulas."""

import pytest
import torch

from nvfp4gemm.formats import (E4M3_NAN, FP4, FP8, decode_e2m1, from_permuted, permuted_shape,
                               to_permuted)


def e2m1_by_bits(code: int) -> float:
    """Independent decode: 1 sign, 2 exponent (bias 1), 1 mantissa bit; exponent 0 is
    subnormal (0 or 0.5)."""
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    mag = 0.5 * m if e == 0 else 2.0 ** (e - 1) * (1 + 0.5 * m)
    return -mag if s else mag


def test_all_16_codes():
    # byte i holds code i in the low nibble and code 15-i in the high nibble
    packed = torch.tensor([(i | ((15 - i) << 4)) for i in range(16)], dtype=torch.uint8)
    vals = decode_e2m1(packed.view(FP4))
    assert vals.shape == (32,)
    for i in range(16):
        assert vals[2 * i].item() == e2m1_by_bits(i), f"code {i}"
        assert vals[2 * i + 1].item() == e2m1_by_bits(15 - i), f"code {15 - i}"
    assert sorted(set(abs(e2m1_by_bits(c)) for c in range(16))) == [0, 0.5, 1, 1.5, 2, 3, 4, 6]


def test_nibble_order_low_first():
    # 0x21: low nibble code 1 (0.5) is element 0, high nibble code 2 (1.0) is element 1
    vals = decode_e2m1(torch.tensor([0x21], dtype=torch.uint8))
    assert vals.tolist() == [0.5, 1.0]


def permuted_offset(r, j, b, rm, rk):
    """Byte offset of plain scale (r, j, b) in the contiguous (L, rm, rk, 32, 4, 4) backing
    store: 512-byte atoms of 128 rows x 4 columns, row r%32 strides 16, (r%128)//32 strides 4."""
    return (((b * rm + r // 128) * rk + j // 4) * 512) + (r % 32) * 16 + ((r % 128) // 32) * 4 + (j % 4)


@pytest.mark.parametrize("mn,sf_k,l", [(128, 16, 1), (72, 16, 1), (300, 32, 2), (40, 8, 1)])
def test_permuted_layout_matches_index_formula(mn, sf_k, l):
    torch.manual_seed(mn + sf_k)
    sf = torch.randint(1, 120, (mn, sf_k, l), dtype=torch.uint8).view(FP8)
    sfp = to_permuted(sf, pad_byte=E4M3_NAN)
    assert tuple(sfp.shape) == permuted_shape(mn, sf_k, l)
    rm, rk = sfp.shape[2], sfp.shape[4]
    # the permuted view's storage is one contiguous (l, rm, rk, 32, 4, 4) block
    storage = sfp.permute(5, 2, 4, 0, 1, 3).contiguous().view(torch.uint8).flatten()
    assert storage.numel() == l * rm * rk * 512
    written = torch.zeros_like(storage, dtype=torch.bool)
    for b in range(l):
        for r in range(mn):
            for j in range(sf_k):
                off = permuted_offset(r, j, b, rm, rk)
                assert storage[off].item() == sf[r, j, b].view(torch.uint8).item()
                written[off] = True
    # everything else is padding, and padding is what we asked for
    assert (storage[~written] == E4M3_NAN).all()
    assert int((~written).sum()) == l * rm * rk * 512 - mn * sf_k * l
    assert torch.equal(from_permuted(sfp, mn, sf_k).view(torch.uint8), sf.view(torch.uint8))


@pytest.mark.parametrize("mn,sf_k,l", [(300, 32, 2), (40, 8, 1)])
@pytest.mark.parametrize("pad", [None, 0x7F])
def test_to_permuted_memory_layout_is_the_leaderboards(mn, sf_k, l, pad):
    """to_permuted's result has the strides validate.py requires (the permutation of a contiguous
    (L, rm, rk, 32, 4, 4) tensor), not only the right index mapping.  Fails on: rm / rk storage order
    swapped."""
    from nvfp4gemm.formats import FP8, to_permuted
    from nvfp4gemm.validate import permuted_strides

    sf = torch.randint(1, 120, (mn, sf_k, l), dtype=torch.uint8).view(FP8)
    sfp = to_permuted(sf, pad_byte=pad)
    assert sfp.stride() == permuted_strides(sfp.shape[2], sfp.shape[4])
