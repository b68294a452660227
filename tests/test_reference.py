"""The portable reference: leaderboard formats, float64 brute force, check_implementation."""

import math

import pytest
import torch

import reference as R
from nvfp4gemm.formats import FP4, FP8, from_permuted


def e4m3_by_bits(byte: int) -> float:
    s, e, m = byte >> 7, (byte >> 3) & 0xF, byte & 7
    if e == 0xF and m == 7:
        return math.nan
    mag = (m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -mag if s else mag


def e2m1_by_bits(code: int) -> float:
    s, e, m = code >> 3, (code >> 1) & 3, code & 1
    mag = 0.5 * m if e == 0 else 2.0 ** (e - 1) * (1 + 0.5 * m)
    return -mag if s else mag


def brute_dequant(x, sf):
    """float64 (l, mn, k) from packed bytes and scale bytes by per-element bit decoding."""
    xb = x.view(torch.uint8).permute(2, 0, 1)
    sb = sf.view(torch.uint8).permute(2, 0, 1)
    l, mn, kh = xb.shape
    t2 = torch.tensor([e2m1_by_bits(c) for c in range(16)], dtype=torch.float64)
    t8 = torch.tensor([e4m3_by_bits(c) for c in range(256)], dtype=torch.float64)
    lo, hi = t2[(xb & 0xF).long()], t2[(xb >> 4).long()]
    vals = torch.stack((lo, hi), -1).reshape(l, mn, 2 * kh)
    return vals * t8[sb.long()].repeat_interleave(16, dim=-1)


@pytest.mark.parametrize("m,n,k,l,seed", [(128, 64, 256, 1, 1), (256, 128, 512, 2, 7)])
def test_dual_reference_matches_float64(m, n, k, l, seed):
    d = R.generate_input(m, n, k, l, seed, device="cpu")
    out = R.ref_kernel(d)
    a = brute_dequant(d[0], d[3])
    x1 = a @ brute_dequant(d[1], d[4]).transpose(1, 2)
    x2 = a @ brute_dequant(d[2], d[5]).transpose(1, 2)
    want = (x1 / (1 + torch.exp(-x1)) * x2).permute(1, 2, 0)
    assert out.shape == (m, n, l) and out.dtype == torch.float16
    # fp32 accumulation then one fp16 rounding: within half an fp16 ulp plus fp32 noise
    err = (out.double() - want).abs()
    assert (err <= want.abs() * 2.0**-11 + 1e-5).all(), err.max()
    assert want.abs().max() > 1  # not a trivially small problem


def test_group_reference_matches_float64():
    d = R.generate_input([72, 128], [128, 64], [256, 512], 2, 3, device="cpu")
    outs = R.ref_kernel(d)
    for (a, b, _), (sfa, sfb), o in zip(d[0], d[1], outs):
        want = (brute_dequant(a, sfa) @ brute_dequant(b, sfb).transpose(1, 2)).permute(1, 2, 0)
        assert o.shape == want.shape
        assert ((o.double() - want).abs() <= want.abs() * 2.0**-11 + 1e-5).all()


def test_dual_input_formats():
    m, n, k, l = 256, 192, 512, 2
    d = R.generate_input(m, n, k, l, 5, device="cpu")
    a, b1, b2, sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c = d
    for x, mn in ((a, m), (b1, n), (b2, n)):
        assert x.dtype == FP4 and x.shape == (mn, k // 2, l) and x.stride() == (k // 2, 1, mn * k // 2)
    for s, mn in ((sfa, m), (sfb1, n), (sfb2, n)):
        assert s.dtype == FP8 and s.shape == (mn, k // 16, l) and s.stride() == (k // 16, 1, mn * k // 16)
        v = s.to(torch.float32)
        assert (v >= 0).all() and (v <= 1).all() and v.std() > 0.1  # [0, 1) rounded to e4m3
    for sp, s, mn in ((sfa_p, sfa, m), (sfb1_p, sfb1, n), (sfb2_p, sfb2, n)):
        assert sp.shape == (32, 4, (mn + 127) // 128, 4, k // 64, l)
        assert torch.equal(from_permuted(sp, mn, k // 16).view(torch.uint8), s.view(torch.uint8))
    assert c.dtype == torch.float16 and c.shape == (m, n, l) and c.stride() == (n, 1, m * n)
    assert c.abs().sum() > 0  # pre-filled with random values, not zeros
    codes = a.view(torch.uint8)
    assert ((codes & 0b0100_0100) == 0).all()  # the generator keeps sign + 2 low bits


def test_group_input_formats():
    d = R.generate_input([40, 200], [128, 256], [256, 512], 2, 9, device="cpu", poison_padding=True)
    abc, sfs, sfs_p, sizes = d
    assert sizes == [(40, 128, 256, 1), (200, 256, 512, 1)]
    for (a, b, c), (sfa, sfb), (sfa_p, sfb_p), (m, n, k, l) in zip(abc, sfs, sfs_p, sizes):
        assert a.shape == (m, k // 2, 1) and b.shape == (n, k // 2, 1) and c.shape == (m, n, 1)
        assert set(sfa.to(torch.float32).unique().tolist()) <= {1.0, 2.0}
        assert sfa.device.type == "cpu"  # like the leaderboard, plain scales stay on the CPU
        assert torch.equal(from_permuted(sfa_p, m, k // 16).view(torch.uint8), sfa.view(torch.uint8))
        # rows m..127 of the permuted SFA are padding: poisoned with e4m3 NaN
        pad = sfa_p.view(torch.uint8)[:, :, -1, :, :, 0].permute(2, 3, 1, 0).reshape(-1, 128)[:, m % 128 or 128:]
        assert (pad == 0x7F).all()


def test_check_implementation_accepts_reference_and_rejects_errors():
    d = R.generate_input(128, 64, 256, 1, 11, device="cpu")
    good = R.ref_kernel(d)
    assert R.check_implementation(d, good.clone()) == (True, "")
    bad = good.clone()
    bad[5, 7, 0] += max(0.01, 0.01 * abs(bad[5, 7, 0].item()))
    ok, msg = R.check_implementation(d, bad)
    assert not ok and "(5, 7, 0)" in msg and "1 of" in msg
    nan = good.clone()
    nan[0, 0, 0] = float("nan")
    ok, msg = R.check_implementation(d, nan)
    assert not ok and "(0, 0, 0)" in msg
    ok, msg = R.check_implementation(d, good[:, :32])
    assert not ok and "shape" in msg
    g = R.generate_input([72], [64], [256], 1, 2, device="cpu")
    outs = R.ref_kernel(g)
    assert R.check_implementation(g, outs)[0]
    assert not R.check_implementation(g, [])[0]
    outs[0][71, 63, 0] = float("inf")
    assert not R.check_implementation(g, outs)[0]


def test_check_implementation_judges_every_element():
    """An error anywhere fails: in the last group only, in the second batch only, below the
    reference as well as above it; an output of another dtype or a missing group fails; the
    tolerance is rtol = atol = 1e-3 (an error of 1.5x it fails, 0.5x passes); a reference that
    overflowed fp16 fails whatever the output (session 56's review: any finite value passed)."""
    g = R.generate_input([40, 72, 24], [64, 128, 64], [256, 256, 512], 3, 21, device="cpu")
    for sign in (1, -1):
        outs = R.ref_kernel(g)
        outs[2][23, 63, 0] += sign * max(0.01, 0.01 * abs(outs[2][23, 63, 0].item()))
        ok, msg = R.check_implementation(g, outs)
        assert not ok and msg.startswith("group 2:") and "(23, 63, 0)" in msg
    outs = R.ref_kernel(g)
    assert not R.check_implementation(g, outs[:2])[0]
    assert not R.check_implementation(g, [o.float() for o in outs])[0]
    d = R.generate_input(128, 64, 256, 2, 22, device="cpu")
    good = R.ref_kernel(d)
    bad = good.clone()
    bad[100, 50, 1] -= max(0.01, 0.01 * abs(bad[100, 50, 1].item()))
    ok, msg = R.check_implementation(d, bad)
    assert not ok and "(100, 50, 1)" in msg
    assert not R.check_implementation(d, good.float())[0]
    # the tolerance: a value whose fp16 neighbours bracket 0.5x and 1.5x of atol + rtol * |e|
    e = torch.tensor([[[2.0]]], dtype=torch.float16)
    tol = R.ATOL + R.RTOL * 2.0
    assert (R.RTOL, R.ATOL) == (1e-3, 1e-3)
    assert R.compare(e + 0.5 * tol, e) == [] and R.compare(e - 0.5 * tol, e) == []
    assert R.compare(e + 1.5 * tol, e) and R.compare(e - 1.5 * tol, e)
    for special in (float("inf"), float("-inf"), float("nan")):
        assert R.compare(torch.zeros_like(e), torch.full_like(e, special)), special


# ------------------------------------------------------------------- the wide test draw


def _dequant_with(x, sf, scale_fn=None, value_fn=None):
    """(l, mn, k) float32 like reference._dequant, with an optional error injected: `value_fn`
    on the e2m1 values, `scale_fn(values, codes)` on the repeated scales and their bytes."""
    from nvfp4gemm.formats import decode_mn_k, decode_scales

    v = decode_mn_k(x)
    s = decode_scales(sf)
    if value_fn is not None:
        v = value_fn(v)
    if scale_fn is not None:
        s = scale_fn(s, sf.view(torch.uint8).to(torch.int64).permute(2, 0, 1).repeat_interleave(16, dim=-1))
    return v * s


def _ref_with(d, a_fn=None, b_fn=None, value_fn=None):
    """The reference's output with an error injected into A's scales (a_fn), every B's scales
    (b_fn) or every operand's e2m1 values (value_fn)."""
    if R.is_dual(d):
        a, b1, b2, sfa, sfb1, sfb2 = d[:6]
        fa = _dequant_with(a, sfa, a_fn, value_fn)
        x1 = torch.bmm(fa, _dequant_with(b1, sfb1, b_fn, value_fn).transpose(1, 2))
        x2 = torch.bmm(fa, _dequant_with(b2, sfb2, b_fn, value_fn).transpose(1, 2))
        return (torch.nn.functional.silu(x1) * x2).to(torch.float16).permute(1, 2, 0)
    return [torch.bmm(_dequant_with(a, sfa, a_fn, value_fn), _dequant_with(b, sfb, b_fn, value_fn).transpose(1, 2))
            .to(torch.float16).permute(1, 2, 0) for (a, b, _), (sfa, sfb) in zip(d[0], d[1])]


def _wide_and_leaderboard(problem, seed):
    if problem == "dual":
        args = (256, 128, 1024, 1, seed)
    else:
        args = ([128, 72], [128, 256], [1024, 512], 2, seed)
    return R.generate_input(*args, device="cpu", wide=True), R.generate_input(*args, device="cpu")


@pytest.mark.parametrize("problem", ["dual", "group"])
def test_wide_draw_covers_every_code_in_the_leaderboard_layouts(problem):
    """The wide draw (reference.py, NVFP4_TEST_DRAW=wide) has the leaderboard draw's dtypes,
    shapes, strides and devices, its permuted scales hold its plain ones, and each operand
    holds every e2m1 code and every finite non-negative e4m3 scale (0x00 ... 0x7E) once K >= 512."""
    wide, lb = _wide_and_leaderboard(problem, 21)
    flat = lambda d: [t for t in (d if problem == "dual" else [x for g in d[:3] for p in g for x in p])  # noqa: E731
                      if isinstance(t, torch.Tensor)]
    for w, b in zip(flat(wide), flat(lb), strict=True):
        assert (w.dtype, w.shape, w.stride(), w.device) == (b.dtype, b.shape, b.stride(), b.device)
    if problem == "dual":
        operands = [(wide[i], wide[3 + i], wide[6 + i]) for i in range(3)]
    else:
        operands = [(x, s, p) for (a, b, _), sfs, sfs_p in zip(*wide[:3]) for x, s, p in zip((a, b), sfs, sfs_p)]
    every_scale = set(range(0x7F))
    for x, sf, sf_p in operands:
        mn, sf_k, _ = sf.shape
        assert torch.equal(from_permuted(sf_p, mn, sf_k).view(torch.uint8), sf.view(torch.uint8))
        codes = x.view(torch.uint8)
        assert set(torch.cat([codes & 0xF, codes >> 4]).unique().tolist()) == set(range(16))
        if sf_k >= 32:
            assert set(sf.view(torch.uint8).unique().tolist()) == every_scale


@pytest.mark.parametrize("problem, shape", [
    ("dual", (256, 3072, 4096, 1)), ("dual", (512, 768, 7168, 1)), ("dual", (7168, 384, 2304, 1)),
    ("group", ([40, 76, 168, 72, 164, 148, 196, 160], [7168] * 8, [2048] * 8)),
    ("group", ([192, 320], [3072] * 2, [4096] * 2))])
def test_wide_draw_outputs_stay_inside_fp16(problem, shape):
    """Leaderboard shapes under the wide draw: every output finite, the largest 8x or more
    below fp16's 65504 (so no fresh seed lands on an overflow), and not trivially small."""
    args = (*shape, 5) if problem == "dual" else (*shape, len(shape[0]), 5)
    outs = R.ref_kernel(R.generate_input(*args, device="cpu", wide=True))
    x = torch.cat([o.float().abs().flatten() for o in (outs if problem == "group" else [outs])])
    assert torch.isfinite(x).all() and x.max() < 65504 / 8, x.max()
    assert x.median() > 0.5


def _class_errors():
    """Errors that a decode could make: a scale mantissa off by 1/8 for one exponent field (each
    of the 16, on A or on B), subnormal scales flushed to zero, adjacent scale columns
    swapped, the e2m1 top exponent bit dropped."""
    def mantissa(e):
        return lambda s, c: torch.where((c >> 3) & 0xF == e, s * 1.125, s)

    def swap(s, c):
        return s.view(*s.shape[:-1], -1, 2, 16).flip(-2).reshape(s.shape)

    errs = {f"{op} mantissa, exponent field {e}": {f"{op}_fn": mantissa(e)} for op in "ab" for e in range(16)}
    errs.update({f"{op} subnormals flushed": {f"{op}_fn": lambda s, c: torch.where((c >> 3) & 0xF == 0, 0 * s, s)}
                 for op in "ab"})
    errs["a scale columns swapped in pairs"] = {"a_fn": swap}
    errs["e2m1 top exponent bit dropped"] = {"value_fn": lambda v: torch.where(v.abs() >= 2, v / 4, v)}
    return errs


@pytest.mark.parametrize("problem", ["dual", "group"])
def test_wide_draw_catches_what_the_leaderboard_draw_cannot(problem):
    """Each decode error of `_class_errors` fails check_implementation on the wide draw.  The
    leaderboard's draw passes most of them (why NVFP4_TEST_DRAW=wide exists): its data never
    sets the top exponent bit, and its scales cover few exponent fields."""
    wide, lb = _wide_and_leaderboard(problem, 22)
    missed_by_lb = []
    for name, err in _class_errors().items():
        ok, _ = R.check_implementation(wide, _ref_with(wide, **err))
        assert not ok, f"the wide draw misses: {name}"
        if R.check_implementation(lb, _ref_with(lb, **err))[0]:
            missed_by_lb.append(name)
    assert "e2m1 top exponent bit dropped" in missed_by_lb
    assert len(missed_by_lb) >= 16, missed_by_lb  # dual 17 (fields 8-15 on A and B), grouped 31
