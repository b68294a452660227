"""Input validation for `custom_kernel`: every constraint the kernels rely on, checked on the
host before anything is launched or written.  Each error names the broken constraint."""

from __future__ import annotations

import operator

import torch

from configs import K_BLOCK, check_shape
from nvfp4gemm.formats import FP4, FP8, SF_VEC, permuted_shape


class InputError(ValueError):
    """Bad input to custom_kernel; raised before any output is written."""


def _need(cond: bool, msg) -> None:
    """InputError(msg) unless cond; `msg` a string or a function giving it (formatted only on
    failure: a grouped call checks ~60 tensors, and eager messages were most of its cost)."""
    if not cond:
        raise InputError(msg() if callable(msg) else msg)


def _check_operand(name: str, x, mn: int, k: int, l: int) -> None:
    _need(isinstance(x, torch.Tensor), lambda: f"{name} must be a torch.Tensor, got {type(x).__name__}")
    _need(x.dtype == FP4, lambda: f"{name} must have dtype torch.float4_e2m1fn_x2 (packed NVFP4), got {x.dtype}")
    _need(tuple(x.shape) == (mn, k // 2, l), lambda: f"{name} must have shape {(mn, k // 2, l)} (mn, K/2, L), got {tuple(x.shape)}")
    _need(x.stride(1) == 1 and x.stride(0) == k // 2,
          lambda: f"{name} must be K-major with strides ({k // 2}, 1, ...), got {x.stride()}")
    _need(l == 1 or x.stride(2) == mn * k // 2, lambda: f"{name}: batches must be contiguous (stride(2) == {mn * k // 2}), got {x.stride()}")


def _check_scales(name: str, sf, mn: int, k: int, l: int) -> None:
    _need(isinstance(sf, torch.Tensor), lambda: f"{name} must be a torch.Tensor")
    _need(sf.dtype == FP8, lambda: f"{name} must have dtype torch.float8_e4m3fn, got {sf.dtype}")
    _need(tuple(sf.shape) == (mn, k // SF_VEC, l), lambda: f"{name} must have shape {(mn, k // SF_VEC, l)} (mn, K/16, L), got {tuple(sf.shape)}")


def permuted_strides(rm: int, rk: int) -> tuple:
    """Strides of a permuted scale tensor (32, 4, rm, 4, rk, L): the permutation (3,4,1,5,2,0) of a
    contiguous (L, rm, rk, 32, 4, 4) tensor."""
    return (16, 4, rk * 512, 1, 512, rm * rk * 512)


def _check_permuted(name: str, sfp, mn: int, k: int, l: int) -> None:
    want = permuted_shape(mn, k // SF_VEC, l)
    _need(isinstance(sfp, torch.Tensor), lambda: f"{name} must be a torch.Tensor")
    _need(sfp.dtype == FP8, lambda: f"{name} must have dtype torch.float8_e4m3fn, got {sfp.dtype}")
    _need(tuple(sfp.shape) == want, lambda: f"{name} must have the permuted shape {want} (32, 4, ceil(mn/128), 4, ceil(K/64), L), got {tuple(sfp.shape)}")
    rm, rk = want[2], want[4]
    strides = permuted_strides(rm, rk)
    _need(sfp.stride() == strides, lambda: f"{name} must be the permutation (3,4,1,5,2,0) of a contiguous (L, rm, rk, 32, 4, 4) tensor, strides {strides}; got {sfp.stride()}")


def _check_output(name: str, c, m: int, n: int, l: int) -> None:
    _need(isinstance(c, torch.Tensor), lambda: f"{name} must be a torch.Tensor")
    _need(c.dtype == torch.float16, lambda: f"{name} must have dtype torch.float16, got {c.dtype}")
    _need(tuple(c.shape) == (m, n, l), lambda: f"{name} must have shape {(m, n, l)} (M, N, L), got {tuple(c.shape)}")
    _need(c.stride(1) == 1 and c.stride(0) == n and (l == 1 or c.stride(2) == m * n),
          lambda: f"{name} must be row-major per batch with strides ({n}, 1, {m * n}), got {c.stride()}")


def _check_aligned(tensors) -> None:
    for name, t in tensors:
        _need(t.data_ptr() % 16 == 0, lambda: f"{name} must be 16-byte aligned (TMA), data_ptr % 16 = {t.data_ptr() % 16}")


def _span(t) -> tuple[int, int]:
    """[first, last + 1) bytes of `t`'s elements in memory (from its strides; empty for no elements)."""
    if t.numel() == 0:
        return t.data_ptr(), t.data_ptr()
    last = sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
    return t.data_ptr(), t.data_ptr() + (last + 1) * t.element_size()


def _check_no_overlap(outputs, inputs) -> None:
    """No output's memory overlaps another output's or any input's: kernels writing an input they
    still read, or two groups' CUDA blocks writing one place, would give wrong results without an
    error (inputs may overlap each other: they are only read)."""
    spans = sorted((*_span(t), is_out, name) for is_out, named in ((True, outputs), (False, inputs))
                   for name, t in named if t.numel())
    # (a sweep in address order: the interval ending last among those started so far overlaps any
    # later one that starts before that end)
    last_any = last_out = None
    for start, end, is_out, name in spans:
        prev = last_any if is_out else last_out  # (an input only matters against an output)
        _need(prev is None or start >= prev[0],
              lambda: f"{name if is_out else prev[1]} overlaps {prev[1] if is_out else name} in memory: "
                      "outputs must not overlap each other or any input")
        if last_any is None or end > last_any[0]:
            last_any = (end, name)
        if is_out and (last_out is None or end > last_out[0]):
            last_out = (end, name)


def validate_dual(data):
    """Checks the 10-tuple; returns the shape (m, n, k, l)."""
    _need(isinstance(data, (tuple, list)) and len(data) == 10,
          "dual input must be the 10-tuple (a, b1, b2, sfa, sfb1, sfb2, sfa_perm, sfb1_perm, sfb2_perm, c)")
    a, b1, b2, sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    _need(isinstance(a, torch.Tensor) and a.dim() == 3, "a must be a 3-D tensor (M, K/2, L)")
    _need(isinstance(c, torch.Tensor) and c.dim() == 3, "c must be a 3-D tensor (M, N, L)")
    m, kh, l = a.shape
    n = c.shape[1]
    k = 2 * kh
    for err in check_shape("dual", (m, n, k, l)):
        raise InputError(err)
    # (M and K come from a, N from c: name both sides where a B disagrees with them)
    for name, b in (("b1", b1), ("b2", b2)):
        if isinstance(b, torch.Tensor) and b.dim() == 3:
            _need(b.shape[0] == n, lambda: f"{name} has N={b.shape[0]} rows but c has N={n} columns")
            _need(b.shape[1] == kh, lambda: f"{name} has K/2={b.shape[1]} packed bytes per row but a has K/2={kh} (K={k})")
    _check_operand("a", a, m, k, l)
    _check_operand("b1", b1, n, k, l)
    _check_operand("b2", b2, n, k, l)
    _check_scales("sfa", sfa, m, k, l)
    _check_scales("sfb1", sfb1, n, k, l)
    _check_scales("sfb2", sfb2, n, k, l)
    _check_permuted("sfa_perm", sfa_p, m, k, l)
    _check_permuted("sfb1_perm", sfb1_p, n, k, l)
    _check_permuted("sfb2_perm", sfb2_p, n, k, l)
    _check_output("c", c, m, n, l)
    used = [("a", a), ("b1", b1), ("b2", b2), ("sfa", sfa), ("sfb1", sfb1), ("sfb2", sfb2),
            ("sfa_perm", sfa_p), ("sfb1_perm", sfb1_p), ("sfb2_perm", sfb2_p), ("c", c)]
    _check_no_overlap(used[-1:], used[:-1])
    return (m, n, k, l), used


def validate_group(data):
    """Checks the grouped 4-tuple (any number of groups: the dispatcher runs more than
    configs.GROUPS_PER_LAUNCH in chunks); returns the shape as per-group (m, n, k)."""
    _need(isinstance(data, (tuple, list)) and len(data) == 4,
          "grouped input must be the 4-tuple (abc, sfasfb, sfasfb_perm, problem_sizes)")
    abc, sfs, sfs_p, sizes = data
    _need(all(isinstance(x, (tuple, list)) for x in (abc, sfs, sfs_p, sizes)),
          "abc, sfasfb, sfasfb_perm and problem_sizes must be lists (one entry per group)")
    _need(all(isinstance(x, (tuple, list)) and len(x) == n for grp, n in ((abc, 3), (sfs, 2), (sfs_p, 2))
              for x in grp), "each group's entry must be (a, b, c) in abc and (sfa, sfb) in sfasfb and sfasfb_perm")
    g = len(sizes)
    _need(len(abc) == g and len(sfs) == g and len(sfs_p) == g,
          lambda: f"abc, sfasfb, sfasfb_perm and problem_sizes must have one entry per group; got {len(abc)}, {len(sfs)}, {len(sfs_p)}, {g}")
    shape = []
    for gi, size in enumerate(sizes):
        _need(hasattr(size, "__len__") and len(size) == 4,
              lambda: f"problem_sizes[{gi}] must be (M, N, K, L), got {size!r}")
        try:  # (integers only: int() would cut 256.9 to 256 where the kernels read the sizes as given)
            m, n, k, l = map(operator.index, size)
        except TypeError:
            raise InputError(f"problem_sizes[{gi}] must be four integers (M, N, K, L), got {size!r}") from None
        _need(l == 1, lambda: f"group {gi}: L={l}; grouped problems need L == 1")
        shape.append((m, n, k))
    # (the sizes first: a group of M = 0 is named so, not as a tensor that fails to match it)
    for err in check_shape("group", shape, launch=False):  # (more groups than a launch takes: chunks)
        raise InputError(err)
    used = []
    outputs, inputs = [], []
    for gi, ((a, b, c), (sfa, sfb), (sfa_p, sfb_p), (m, n, k)) in enumerate(zip(abc, sfs, sfs_p, shape)):
        l = 1
        pre = f"group {gi}: "
        _check_operand(pre + "a", a, m, k, l)
        _check_operand(pre + "b", b, n, k, l)
        _check_scales(pre + "sfa", sfa, m, k, l)
        _check_scales(pre + "sfb", sfb, n, k, l)
        _check_permuted(pre + "sfa_perm", sfa_p, m, k, l)
        _check_permuted(pre + "sfb_perm", sfb_p, n, k, l)
        _check_output(pre + "c", c, m, n, l)
        used += [(pre + "a", a), (pre + "b", b), (pre + "sfa_perm", sfa_p), (pre + "sfb_perm", sfb_p), (pre + "c", c)]
        outputs.append((pre + "c", c))
        inputs += [(pre + "a", a), (pre + "b", b), (pre + "sfa", sfa), (pre + "sfb", sfb), (pre + "sfa_perm", sfa_p),
                   (pre + "sfb_perm", sfb_p)]
    _check_no_overlap(outputs, inputs)
    return tuple(shape), used


def group_rows_match(used, shape) -> bool:
    """For the dispatcher's any-M path (exps. 136, 138): whether the grouped input whose used
    tensors are `used` (each group's a, b, c, then each group's sfa_perm, sfb_perm) has, in the
    dims and strides that follow M_g, what `validate_group` wants for `shape` ((M_g, N_g, K_g) per
    group): a_g and c_g M_g rows, sfa_perm_g ceil(M_g / 128) row atoms and their batch stride.
    The caller checks every other dim and stride (a guard taken from a validated input)."""
    g = len(shape)
    for i, (m, _n, _k) in enumerate(shape):
        sfa = used[3 * g + 2 * i]
        rm = -(-m // 128)
        if used[3 * i].shape[0] != m or used[3 * i + 2].shape[0] != m or sfa.shape[2] != rm \
                or sfa.stride(5) != permuted_strides(rm, sfa.shape[4])[5]:
            return False
    return True


def validate_device(used) -> torch.device:
    """All tensors the kernel reads or writes on one CUDA device, 16-byte aligned."""
    dev = used[0][1].device
    for name, t in used:
        _need(t.device.type == "cuda", lambda: f"{name} is on {t.device}: the kernels need CUDA tensors on an sm_100 (B200) or sm_90 (H100/H200) GPU")
        _need(t.device == dev, lambda: f"{name} is on {t.device}, but {used[0][0]} is on {dev}: all tensors must share one GPU")
    _check_aligned(used)
    return dev


def arch_of_capability(cap: tuple[int, int]) -> str:
    """Our kernels' arch name for a compute capability, or InputError if unsupported."""
    major, minor = cap
    if major == 10:
        return "sm_100a"
    if (major, minor) == (9, 0):
        return "sm_90a"
    raise InputError(f"GPU sm_{major}{minor} is not supported: kernels exist for sm_100 (B200, tcgen05) and sm_90 (H100/H200, wgmma) only")


__all__ = ["InputError", "validate_dual", "validate_group", "validate_device", "arch_of_capability", "K_BLOCK"]
