"""`custom_kernel(data)`: the leaderboard entry point for both problems on both GPUs.

The leaderboard times every call on fresh tensors (gpu-mode eval.py: new inputs each timed call
in its leaderboard mode, cloned ones in eval_better_bench), with the GPU idle or only an L2
flush ahead, so the host work of a call on new tensors is part of the measured time.  Hence:

* Validation runs in full once per input *signature* (every tensor's dtype, shape, strides and
  device, and the problem sizes); a later input with the same signature is checked by comparing
  signatures and the data pointers' alignment (`_signature`, `_SIGS`), which proves the same
  constraints (dtype, shape, layout and device are all in the signature).
* The first call of a signature on a stream builds a launch template: the kernel module's
  runtime arguments, converted and packed once (`PackedLaunch`), with the workspaces they point
  into held by the template.  Every call then only writes the new data addresses into the
  packed pointer arguments (module `DATA_SLOTS`: arguments that are data tensors' addresses;
  or `pointer_args`: a per-address-set device table of group pointers, built once per set)
  and calls the compiled host function.
* A module with neither (the sm_100a grouped kernel) gets its arguments built on every call.

A first call of a signature costs ~50 µs (dual) to ~1 ms (8 groups) of Python plus, once per
config, the compile; the first call of a new grouped shape also plans its schedule (~7 ms on CI's
CPU, configs.mixed_group_forms_plan; plans are cached).
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from cuda.bindings.driver import CUstream

from configs import select_config
from nvfp4gemm import harness
from nvfp4gemm.cache import lru_lookup
from nvfp4gemm.validate import InputError, arch_of_capability, validate_device, validate_dual, validate_group

_PLANS: OrderedDict = OrderedDict()  # (problem, shape, device) -> plan()
PLAN_ENTRIES = 4096
_SIGS: OrderedDict = OrderedDict()  # input signature -> _Entry (validated, planned)
SIG_ENTRIES = 4096
_TEMPLATES: OrderedDict = OrderedDict()  # (signature, stream handle) -> _Template
# Each template holds its workspaces (A16 buffers up to tens of MB): at most this many live.
TEMPLATE_ENTRIES = 16


def _capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def plan(problem: str, shape, device: torch.device):
    """(arch, config, compiled kernel, kernel module) for this problem shape on `device` (cached
    per shape, the least recently used dropped beyond PLAN_ENTRIES: grouped M_g that change every
    call would grow it forever)."""
    return lru_lookup(_PLANS, (problem, shape, device), lambda: _plan(problem, shape, device), PLAN_ENTRIES)[0]


def _plan(problem: str, shape, device: torch.device):
    arch = arch_of_capability(_capability(device))
    cfg = select_config(problem, arch, shape)
    mod, cls = harness.kernel_module(problem, arch, cfg)
    try:  # arch-specific shape rules (e.g. sm_100a dual M % 128), before any launch
        cls.can_implement(cfg, *shape) if problem == "dual" else cls.can_implement(cfg, shape)
    except ValueError as e:
        raise InputError(f"{arch} {problem} kernel: {e}") from e
    ck = harness.compile_kernel(problem, arch, cfg, shape)
    return arch, cfg, ck, mod


class PackedLaunch:
    """Calls a compiled CuTe DSL function with its arguments converted once.

    `JitCompiledFunction.__call__` converts every argument to C pointers and packs them on
    each call, tens of µs of Python for our ~13-argument kernels.  Here the conversion runs
    once; later calls go straight to the compiled host function (`capi_func`) with the
    packed array.  Relies on DSL 4.3.5 internals (pinned); any missing attribute falls back
    to the public call.  Holds references to the arguments, their converted forms and the
    packed array, so every pointer in the array stays valid."""

    def __init__(self, fn, args):
        self.fn, self.args = fn, args
        self.capi = self.packed = self.result = None
        try:
            self.exe_args, self.adapted = fn.generate_execution_args(*args)
        except AttributeError:
            self.exe_args = None

    def __call__(self):
        if self.capi is not None:
            self.capi(self.packed)
            if self.result is not None and self.result.value != 0:
                raise RuntimeError(f"kernel launch failed: CUresult {self.result.value}")
        elif self.exe_args is None:
            self.fn(*self.args)
        else:  # first call: through the DSL, which creates its executor; then pack once
            self.fn.run_compiled_program(list(self.exe_args))
            ex = getattr(self.fn, "_default_executor", None)
            if ex is not None and hasattr(ex, "_get_invoke_packed_args"):
                self.packed = ex._get_invoke_packed_args(list(self.exe_args))
                self.result = ex.cuda_result
                self.capi = ex.jit_module.capi_func
            else:
                self.exe_args = None


def _flatten(data):
    """(problem, every tensor of the input in a fixed order, problem sizes or None).  Grouped:
    each group's (a, b, c), then each group's plain scales, then each group's permuted scales."""
    if isinstance(data, (tuple, list)) and len(data) == 10:
        return "dual", tuple(data), None
    if not (isinstance(data, (tuple, list)) and len(data) == 4):
        raise InputError("input must be the dual 10-tuple (a, b1, b2, sfa, sfb1, sfb2, sfa_perm, sfb1_perm, "
                         "sfb2_perm, c) or the grouped 4-tuple (abc, sfasfb, sfasfb_perm, problem_sizes)")
    abc, sfs, sfs_p, sizes = data
    flat = tuple(t for grp in abc for t in grp) + tuple(t for grp in sfs for t in grp) + \
        tuple(t for grp in sfs_p for t in grp)
    return "group", flat, sizes


def _signature(problem, flat, sizes):
    """Everything validation looks at except the data addresses; None where the input is not
    even made of tensors (full validation then names what is wrong)."""
    try:
        tens = tuple((t.dtype, t.shape, t.stride(), t.get_device()) for t in flat)
        return (problem, len(flat), None if sizes is None else tuple(map(tuple, sizes)), tens)
    except (AttributeError, TypeError):
        return None


class _Entry:
    """One validated input signature: its problem, shape, device and plan."""
    __slots__ = ("problem", "shape", "device", "cfg", "ck", "mod", "aligned_idx", "n_groups")


def _validated(problem, data, flat, sizes, sig) -> _Entry:
    """Full validation and the plan of a new signature (InputError before anything is written)."""
    shape, used = validate_dual(data) if problem == "dual" else validate_group(data)
    device = validate_device(used)
    _arch, cfg, ck, mod = plan(problem, shape, device)
    e = _Entry()
    e.problem, e.shape, e.device, e.cfg, e.ck, e.mod = problem, shape, device, cfg, ck, mod
    used_ids = {id(t) for _name, t in used}
    e.aligned_idx = tuple(i for i, t in enumerate(flat) if id(t) in used_ids)
    e.n_groups = None if sizes is None else len(sizes)
    if sig is not None:
        lru_lookup(_SIGS, sig, lambda: e, SIG_ENTRIES)
    return e


class _Template:
    """A packed launch of one signature on one stream whose data addresses are rewritten per call.
    Holds what its arguments point into (`keep`), so no cache eviction frees it while it lives."""

    def __init__(self, entry: _Entry, data, flat, handle):
        self.entry = entry
        mod = entry.mod
        self.keep = []
        self.args = mod.runtime_args(data, entry.cfg, CUstream(handle), keep=self.keep)
        from cutlass.cute.runtime import _Pointer

        for a in self.args:  # each pointer's C storage (`_desc`), which the packed array points at
            if isinstance(a, _Pointer):
                a.__c_pointers__()
        slots = getattr(mod, "DATA_SLOTS", None)
        self.slots = None if slots is None else tuple((self.args[ai], di) for ai, di in slots)
        self.launch = PackedLaunch(entry.ck.fn, self.args)

    def __call__(self, data, flat):
        if self.slots is not None:
            for ptr, di in self.slots:
                ptr._desc.value = flat[di].data_ptr()
        else:
            args = self.args
            for ai, addr in self.entry.mod.pointer_args(data, self.entry.cfg):
                args[ai]._desc.value = addr
        self.launch()


def _templated(mod) -> bool:
    return hasattr(mod, "DATA_SLOTS") or hasattr(mod, "pointer_args")


def custom_kernel(data):
    problem, flat, sizes = _flatten(data)
    sig = _signature(problem, flat, sizes)
    entry = _SIGS.get(sig) if sig is not None else None
    if entry is None:
        entry = _validated(problem, data, flat, sizes, sig)
    else:
        _SIGS.move_to_end(sig)
        for i in entry.aligned_idx:
            if flat[i].data_ptr() & 15:  # full validation names the misaligned tensor
                validate_device((validate_dual(data) if problem == "dual" else validate_group(data))[1])
    handle = torch.cuda.current_stream(entry.device).cuda_stream
    if sig is not None and _templated(entry.mod):
        key = (sig, handle)
        tpl = _TEMPLATES.get(key)
        if tpl is None:
            tpl = lru_lookup(_TEMPLATES, key, lambda: _Template(entry, data, flat, handle), TEMPLATE_ENTRIES)[0]
        else:
            _TEMPLATES.move_to_end(key)
        tpl(data, flat)
    else:  # arguments built on every call
        PackedLaunch(entry.ck.fn, entry.mod.runtime_args(data, entry.cfg, CUstream(handle)))()
    return data[-1] if problem == "dual" else [grp[2] for grp in data[0]]
