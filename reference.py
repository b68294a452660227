"""Portable reference for the leaderboard problems `nvfp4_dual_gemm` and `nvfp4_group_gemm`.

Inputs are exactly the leaderboard's tuples (dtypes, shapes, strides), produced by the same
sequence of torch calls, so on a CUDA device `generate_input(..., seed)` gives the same data
as the leaderboard's generator.  The reference decodes e2m1 and e4m3 and computes in fp32
(no `torch._scaled_mm`, which needs Blackwell), so it runs on CPU and on any CUDA GPU: the
device follows the inputs.

  generate_input(m, n, k, l, seed)            dual:    (a, b1, b2, sfa, sfb1, sfb2,
                                                        sfa_perm, sfb1_perm, sfb2_perm, c)
  generate_input(ms, ns, ks, g, seed)         grouped: (abc, sfasfb, sfasfb_perm, sizes)
  ref_kernel(data)                            dual: fp16 (m, n, l); grouped: list of those
  check_implementation(data, output)          (ok, message); rtol = atol = 1e-3

`generate_input(..., wide=True)` is not the leaderboard's draw but the wide test draw (every e2m1
code, every finite e4m3 scale on each operand; see WIDE_EXP_SUM), which the GPU tests take under
NVFP4_TEST_DRAW=wide and bench.py under --draw wide.
"""

from __future__ import annotations

import torch

from nvfp4gemm.formats import (E4M3_NAN, FP4, FP8, SF_VEC, ceil_div, decode_mn_k, decode_scales,
                               permuted_index, permuted_shape)

RTOL = ATOL = 1e-3


def _default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


# ------------------------------------------------------------------------------- inputs


def _fp4_operand(l: int, mn: int, k: int, device, loud=None) -> torch.Tensor:
    """(mn, k/2, l) float4_e2m1fn_x2, a permuted view of contiguous (l, mn, k/2) bytes.
    Like the leaderboard, each nibble keeps only its sign and 2 low bits: values
    {0, +-0.5, +-1, +-1.5}.  The wide draw passes its (sf_k,) bool `loud` scale columns: then
    every byte (all 16 codes, up to +-6, as real checkpoints hold) except in those columns."""
    if loud is None:
        raw = torch.randint(255, size=(l, mn, k // 2), dtype=torch.uint8, device=device)
        return (raw & 0b1011_1011).permute(1, 2, 0).view(FP4)
    raw = torch.randint(256, size=(l, mn, k // 2), dtype=torch.uint8, device=device)
    loud = loud.to(device).repeat_interleave(SF_VEC // 2)[: k // 2]  # 8 bytes per scale column
    raw = torch.where(loud, raw & 0b1011_1011, raw)
    return raw.permute(1, 2, 0).view(FP4)


# The "wide" test inputs (not the leaderboard's): e2m1 data over all 16 codes, and e4m3 scales
# over every finite non-negative encoding (0x00 = 0, the subnormals, ..., 0x7E = 448) on each
# operand.  The leaderboard's draws leave whole parts of the formats unexercised: its data never
# sets a code's top exponent bit (values 2 ... 6), its grouped scales are only 1 and 2 (no
# mantissa bits, no subnormals) and its dual scales never exceed 1.  Scales are drawn per scale
# column j (16 codes of K) in blocks of 16 columns.  In a probe block one operand, the probe,
# takes exponent field E = (j + offset) % 16 in every row (blocks alternate which operand probes,
# so each sees all 127 codes in two blocks: K >= 512), and the other takes E' = WIDE_EXP_SUM - E,
# so that scale products sit near 2^(WIDE_EXP_SUM - 14) (e4m3 bias 7); where E' would be below 0
# it takes the smallest nonzero scale, 2^-9.  Mantissas are uniform (0x7F, NaN, excluded).  The
# dual squares its magnitudes (silu(x1) x2), so it has two probe blocks at a random place in K,
# quiet columns elsewhere (both operands' codes uniform over 0x00-0x27: 0 ... 0.234), and its
# "loud" columns (a clamped partner beside probe E >= 12: scale products up to 0.875) keep the
# leaderboard's small data codes; grouped probes every block.  Outputs stay well inside fp16
# (tests/test_reference.py checks the range, and that per-code errors fail the check).
DRAWS = ("leaderboard", "wide")  # the input draws (NVFP4_TEST_DRAW, bench.py --draw, first_gpu_run --draws)
WIDE_EXP_SUM = {"dual": 8, "group": 14}
WIDE_PROBE_BLOCKS = {"dual": 2, "group": None}  # None: every block
WIDE_LOUD_MIN_EXP = {"dual": 12, "group": 16}  # 16: no loud columns
_QUIET = -2


def _wide_plan(problem: str, sf_k: int, offset: int, device):
    """Per scale column (sf_k,): A's and B's exponent fields under the wide draw (0-15; -1 a
    partner clamped below; _QUIET) and the loud columns (bool)."""
    j = torch.arange(sf_k, device=device)
    probe = (j + offset) % 16
    other = (WIDE_EXP_SUM[problem] - probe).clamp(min=-1)
    block = j // 16
    a_probes = (block + offset) % 2 == 0
    e_a, e_b = torch.where(a_probes, probe, other), torch.where(a_probes, other, probe)
    active = torch.ones_like(a_probes)
    n_probe = WIDE_PROBE_BLOCKS[problem]
    if n_probe is not None:
        start = offset % max(1, ceil_div(sf_k, 16) - n_probe + 1)
        active = (block >= start) & (block < start + n_probe)
        e_a, e_b = (torch.where(active, e, torch.full_like(e, _QUIET)) for e in (e_a, e_b))
    loud = active & (other == -1) & (probe >= WIDE_LOUD_MIN_EXP[problem])
    return e_a, e_b, loud


def _wide_scales(l: int, mn: int, sf_k: int, exponents: torch.Tensor, device) -> torch.Tensor:
    """(mn, sf_k, l) e4m3 scales with the given per-column exponent fields (sf_k,) and uniform
    mantissas (exponent 15 takes mantissa 0-6: 0x7F is NaN; -1 is the smallest nonzero scale,
    0x01 = 2^-9; quiet columns any code 0x00-0x27)."""
    e = exponents.to(device).view(1, 1, sf_k).expand(l, mn, sf_k)
    mant = torch.randint(0, 8, (l, mn, sf_k), dtype=torch.int64, device=device)
    quiet = torch.randint(0, 0x28, (l, mn, sf_k), dtype=torch.int64, device=device)
    mant = torch.where(e == 15, mant % 7, mant)
    code = torch.where(e == -1, torch.ones_like(mant), e * 8 + mant)
    code = torch.where(e == _QUIET, quiet, code)
    return code.to(torch.uint8).view(FP8).permute(1, 2, 0)


def _permute_scales(sf_plain: torch.Tensor, fill: torch.Tensor) -> torch.Tensor:
    """Scatter plain scales (mn, sf_k, l) into the permuted layout whose backing
    (l, rm, rk, 32, 4, 4) tensor is `fill` (its padding stays as `fill` has it)."""
    mn, sf_k, l = sf_plain.shape
    out = fill.permute(3, 4, 1, 5, 2, 0)
    r, j, b = torch.meshgrid(torch.arange(mn, device=fill.device), torch.arange(sf_k, device=fill.device),
                             torch.arange(l, device=fill.device), indexing="ij")
    i0, i1, i2, i3, i4 = permuted_index(r, j)
    out[i0, i1, i2, i3, i4, b] = sf_plain.to(fill.device)
    return out


def _padding_fill(l, mn, sf_k, device, poison: bool, init) -> torch.Tensor:
    shape = (l, ceil_div(mn, 128), ceil_div(sf_k, 4), 32, 4, 4)
    if poison:  # NaN scales in the padding: any read of them shows up as NaN in C
        return torch.full(shape, E4M3_NAN, dtype=torch.uint8, device=device).view(FP8)
    return init(shape)


def generate_dual_input(m: int, n: int, k: int, l: int, seed: int, device=None, poison_padding=False,
                        wide=False):
    """The leaderboard's dual-GEMM input.  Scales drawn from [0, 1) (as fp32, then e4m3).
    `poison_padding` fills the permuted scales' padding with e4m3 NaN instead of the
    leaderboard's random 0 / 1 (as its generate_input fills it; session 51: a fill converted from
    `torch.empty` made torch's own copy kernel read uninitialized memory under initcheck).
    `wide`: the wide test draw (`WIDE_EXP_SUM`), same shapes, dtypes and layouts."""
    device = device or _default_device()
    torch.manual_seed(seed)
    sf_k = ceil_div(k, SF_VEC)
    plan = _wide_plan("dual", sf_k, int(torch.randint(0, 1 << 16, (1,)).item()), "cpu") if wide else None
    loud = plan[2] if wide else None
    a = _fp4_operand(l, m, k, device, loud)
    b1 = _fp4_operand(l, n, k, device, loud)
    b2 = _fp4_operand(l, n, k, device, loud)
    c = torch.randn((l, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)

    def scales(mn, is_a=False):
        if wide:
            plain = _wide_scales(l, mn, sf_k, plan[0] if is_a else plan[1], device)
        else:
            plain = torch.rand((l, mn, sf_k), dtype=torch.float32, device=device).to(FP8).permute(1, 2, 0)
        fill = _padding_fill(l, mn, sf_k, device, poison_padding,
                             lambda s: torch.randint(0, 2, s, dtype=torch.int8, device=device).to(FP8))
        return plain, _permute_scales(plain, fill)

    sfa, sfa_p = scales(m, is_a=True)
    sfb1, sfb1_p = scales(n)
    sfb2, sfb2_p = scales(n)
    return (a, b1, b2, sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c)


def generate_group_input(ms, ns, ks, g: int, seed: int, device=None, poison_padding=False,
                         scales_on_cpu=True, wide=False):
    """The leaderboard's grouped input: per group (a, b, c), plain scales (on the CPU, as
    the leaderboard leaves them, unless `scales_on_cpu=False`), permuted scales, (m, n, k, 1).
    Scales drawn from {1, 2}.  `wide`: the wide test draw (`WIDE_EXP_SUM`), same shapes,
    dtypes and layouts."""
    device = device or _default_device()
    torch.manual_seed(seed)
    l = 1
    abc, sfs, sfs_p, sizes = [], [], [], []
    for gi in range(g):
        m, n, k = ms[gi], ns[gi], ks[gi]
        sf_k = ceil_div(k, SF_VEC)
        plan = _wide_plan("group", sf_k, int(torch.randint(0, 1 << 16, (1,)).item()), "cpu") if wide else None
        a = _fp4_operand(l, m, k, device, plan[2] if wide else None)
        b = _fp4_operand(l, n, k, device, plan[2] if wide else None)
        c = torch.randn((l, m, n), dtype=torch.float16, device=device).permute(1, 2, 0)
        if wide:
            sfa, sfb = _wide_scales(l, m, sf_k, plan[0], "cpu"), _wide_scales(l, n, sf_k, plan[1], "cpu")
        else:
            sfa = torch.randint(1, 3, (l, m, sf_k), dtype=torch.int8).to(FP8).permute(1, 2, 0)
            sfb = torch.randint(1, 3, (l, n, sf_k), dtype=torch.int8).to(FP8).permute(1, 2, 0)

        def permuted(sf, mn):
            fill = _padding_fill(l, mn, sf_k, device, poison_padding,
                                 lambda s: torch.randint(1, 3, s, dtype=torch.int8, device=device).to(FP8))
            return _permute_scales(sf, fill)

        sfa_p, sfb_p = permuted(sfa, m), permuted(sfb, n)
        if not scales_on_cpu:
            sfa, sfb = sfa.to(device), sfb.to(device)
        abc.append((a, b, c))
        sfs.append((sfa, sfb))
        sfs_p.append((sfa_p, sfb_p))
        sizes.append((m, n, k, l))
    return (abc, sfs, sfs_p, sizes)


def generate_input(m, n, k, l_or_g, seed, **kw):
    """Leaderboard entry point for either problem: lists of m, n, k mean grouped."""
    if isinstance(m, (list, tuple)):
        return generate_group_input(m, n, k, l_or_g, seed, **kw)
    return generate_dual_input(m, n, k, l_or_g, seed, **kw)


# ---------------------------------------------------------------------------- reference


def is_dual(data) -> bool:
    return len(data) == 10


def _dequant(x: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """(mn, k/2, l) fp4 and (mn, k/16, l) e4m3 -> (l, mn, k) float32 on x's device."""
    return decode_mn_k(x) * decode_scales(sf.to(x.device))


def _matmul_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """(l, m, k) @ (l, n, k)^T in true fp32 (never TF32)."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return torch.bmm(a, b.transpose(1, 2))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev


@torch.no_grad()
def ref_dual(data) -> torch.Tensor:
    a, b1, b2, sfa, sfb1, sfb2, _, _, _, c = data
    fa = _dequant(a, sfa)
    x1 = _matmul_f32(fa, _dequant(b1, sfb1))
    x2 = _matmul_f32(fa, _dequant(b2, sfb2))
    out = torch.nn.functional.silu(x1) * x2  # fp32
    return out.to(torch.float16).permute(1, 2, 0)  # (m, n, l)


@torch.no_grad()
def ref_group(data) -> list[torch.Tensor]:
    abc, sfs, _, sizes = data
    outs = []
    for (a, b, _c), (sfa, sfb), _ in zip(abc, sfs, sizes):
        outs.append(_matmul_f32(_dequant(a, sfa), _dequant(b, sfb)).to(torch.float16).permute(1, 2, 0))
    return outs


def ref_kernel(data):
    return ref_dual(data) if is_dual(data) else ref_group(data)


# -------------------------------------------------------------------------------- check


def compare(received: torch.Tensor, expected: torch.Tensor, rtol=RTOL, atol=ATOL, max_print=5) -> list[str]:
    """Mismatch descriptions (empty when all close).  NaN or inf in `received` never passes, nor
    does a non-finite `expected` (the inputs overflow fp16: the tolerance cannot judge it, and
    |x - inf| > inf is False for every finite x)."""
    if tuple(received.shape) != tuple(expected.shape):
        return [f"shape mismatch: got {tuple(received.shape)}, expected {tuple(expected.shape)}"]
    if received.dtype != expected.dtype:
        return [f"dtype mismatch: got {received.dtype}, expected {expected.dtype}"]
    r = received.detach().to("cpu", torch.float32)
    e = expected.detach().to("cpu", torch.float32)
    bad = ~torch.isfinite(r) | ~torch.isfinite(e) | ((r - e).abs() > atol + rtol * e.abs())
    n_bad = int(bad.sum())
    if n_bad == 0:
        return []
    msgs = [f"{n_bad} of {bad.numel()} elements mismatch (rtol={rtol}, atol={atol})"]
    for idx in torch.nonzero(bad)[:max_print]:
        i = tuple(idx.tolist())
        msgs.append(f"at {i}: got {r[i].item()}, expected {e[i].item()}")
    return msgs


def check_implementation(data, output) -> tuple[bool, str]:
    expected = ref_kernel(data)
    if is_dual(data):
        if not isinstance(output, torch.Tensor):
            return False, f"output must be a tensor, got {type(output).__name__}"
        errs = compare(output, expected)
        return (not errs), "; ".join(errs)
    if not isinstance(output, (list, tuple)) or len(output) != len(expected):
        n = len(output) if isinstance(output, (list, tuple)) else type(output).__name__
        return False, f"output must be a list of {len(expected)} tensors, got {n}"
    for gi, (o, e) in enumerate(zip(output, expected)):
        errs = compare(o, e)
        if errs:
            return False, f"group {gi}: " + "; ".join(errs)
    return True, ""
