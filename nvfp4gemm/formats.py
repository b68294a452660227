"""NVFP4 data formats on the host (torch; CPU or GPU): e2m1 codes, e4m3 scales and the
permuted ("blocked") scale-factor layout the tensor cores read.

e2m1: 1 sign, 2 exponent, 1 mantissa bit; two codes per byte, element 2i in the LOW
nibble.  Magnitudes of codes 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6.

Permuted scales: shape (32, 4, ceil(mn/128), 4, ceil(sf_k/4), L), a permutation of a
contiguous (L, ceil(mn/128), ceil(sf_k/4), 32, 4, 4) byte tensor: row r and scale column j
sit at [r % 32, (r % 128) // 32, r // 128, j % 4, j // 4, l].  Each 512-byte atom holds
128 rows x 4 scale columns.
"""

from __future__ import annotations

import torch

E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_VALUES = E2M1_MAGNITUDES + tuple(-v for v in E2M1_MAGNITUDES)  # codes 0..15
FP4 = torch.float4_e2m1fn_x2
FP8 = torch.float8_e4m3fn
SF_VEC = 16
ATOM_MN, ATOM_K = 128, 4  # rows and scale columns of one permuted-layout atom
E4M3_NAN = 0x7F  # e4m3fn has no inf; 0x7F / 0xFF are NaN: used to poison padding
# (kernel argument, index in the dual 10-tuple (a, b1, b2, sfa, sfb1, sfb2, sfa_perm, sfb1_perm,
# sfb2_perm, c)) of the dual kernels whose arguments start (a, b1, b2, sfa_perm, sfb1_perm,
# sfb2_perm, c): a module's DATA_SLOTS, which the dispatcher's launch template rewrites per call
DUAL_DATA_SLOTS = ((0, 0), (1, 1), (2, 2), (3, 6), (4, 7), (5, 8), (6, 9))


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def unpack_e2m1_codes(packed: torch.Tensor) -> torch.Tensor:
    """(..., kb) bytes (uint8 or float4_e2m1fn_x2) -> (..., 2*kb) int64 codes 0..15;
    element 2i is the low nibble of byte i."""
    b = packed.view(torch.uint8).to(torch.int64)
    return torch.stack((b & 0xF, b >> 4), dim=-1).flatten(-2)


def decode_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """(..., kb) packed e2m1 -> (..., 2*kb) float32 values."""
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=packed.device)
    return table[unpack_e2m1_codes(packed)]


def decode_mn_k(x: torch.Tensor) -> torch.Tensor:
    """Leaderboard operand (mn, k/2, l) float4_e2m1fn_x2 -> (l, mn, k) float32."""
    return decode_e2m1(x.permute(2, 0, 1))


def decode_scales(sf: torch.Tensor) -> torch.Tensor:
    """Plain scales (mn, k/16, l) e4m3 -> (l, mn, k) float32, each scale repeated over
    its 16 elements."""
    return sf.permute(2, 0, 1).to(torch.float32).repeat_interleave(SF_VEC, dim=-1)


def permuted_index(r, j):
    """Index into the permuted layout of plain scale (row r, column j), without l."""
    return (r % 32, (r % ATOM_MN) // 32, r // ATOM_MN, j % ATOM_K, j // ATOM_K)


def permuted_shape(mn: int, sf_k: int, l: int) -> tuple[int, ...]:
    return (32, 4, ceil_div(mn, ATOM_MN), 4, ceil_div(sf_k, ATOM_K), l)


def to_permuted(sf: torch.Tensor, pad_byte: int | None = None) -> torch.Tensor:
    """Plain scales (mn, sf_k, l) e4m3 -> permuted (32, 4, rm, 4, rk, l) e4m3, laid out as
    the permutation of a contiguous (l, rm, rk, 32, 4, 4) tensor like the leaderboard's.
    Padding (rows >= mn, columns >= sf_k) is `pad_byte` (random bytes when None)."""
    mn, sf_k, l = sf.shape
    rm, rk = ceil_div(mn, ATOM_MN), ceil_div(sf_k, ATOM_K)
    if pad_byte is None:
        fill = torch.randint(0, 256, (l, rm, rk, 32, 4, 4), dtype=torch.uint8, device=sf.device)
    else:
        fill = torch.full((l, rm, rk, 32, 4, 4), pad_byte, dtype=torch.uint8, device=sf.device)
    out = fill.view(FP8).permute(3, 4, 1, 5, 2, 0)
    r = torch.arange(mn, device=sf.device).view(mn, 1, 1)
    j = torch.arange(sf_k, device=sf.device).view(1, sf_k, 1)
    b = torch.arange(l, device=sf.device).view(1, 1, l)
    i0, i1, i2, i3, i4 = permuted_index(r, j)
    out.view(torch.uint8)[i0, i1, i2, i3, i4, b] = sf.view(torch.uint8)
    return out


def from_permuted(sfp: torch.Tensor, mn: int, sf_k: int) -> torch.Tensor:
    """Inverse of `to_permuted`: (32, 4, rm, 4, rk, l) -> plain (mn, sf_k, l)."""
    l = sfp.shape[-1]
    r = torch.arange(mn, device=sfp.device).view(mn, 1, 1)
    j = torch.arange(sf_k, device=sfp.device).view(1, sf_k, 1)
    b = torch.arange(l, device=sfp.device).view(1, 1, l)
    i0, i1, i2, i3, i4 = permuted_index(r, j)
    return sfp.view(torch.uint8)[i0, i1, i2, i3, i4, b].view(FP8)
