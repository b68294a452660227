"""`custom_kernel(data)`: the leaderboard entry point for both problems on both GPUs.

First call with an input: validate (host, before anything is written) -> arch from the GPU
-> config -> compile once per (problem, arch, config) -> launch arguments.  Those steps cost
~50 µs (dual) to ~300 µs (8 groups) of Python, as much as the kernels themselves (and the
first call of each new grouped shape plans its schedule: ~7 ms on average and up to ~22 ms
on the CPU of CI where the rule weighs several tile forms, configs.mixed_group_forms_plan;
plans are cached), so the
prepared launch is kept for the most recent inputs and reused while the call passes the
very same tensor objects (identity, checked per tensor; the entry holds references, so an
id cannot be recycled) and the same problem sizes.  A new tensor anywhere, e.g. a list
element replaced in a grouped input, misses the cache and is validated in full.  (A tensor
whose storage is swapped in place with `Tensor.set_` keeps its identity: don't.)
"""

from __future__ import annotations

import operator
from collections import OrderedDict

import torch
from cuda.bindings.driver import CUstream

from configs import select_config
from nvfp4gemm import harness
from nvfp4gemm.cache import RECENT_PREPARED, lru_lookup
from nvfp4gemm.validate import InputError, arch_of_capability, validate_device, validate_dual, validate_group

_PLANS: OrderedDict = OrderedDict()  # (problem, shape, device) -> plan()
PLAN_ENTRIES = 4096
_RECENT: OrderedDict = OrderedDict()  # id(data) -> _Prepared
_RECENT_MAX = RECENT_PREPARED  # kernel-module caches keep these launches' buffers (nvfp4gemm/cache.py)


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


def _identity(data):
    """The tensor objects and sizes a prepared launch depends on."""
    if len(data) == 10:
        return tuple(data), None
    abc, sfs, sfs_p, sizes = data
    objs = tuple(t for grp in abc for t in grp) + tuple(t for grp in sfs_p for t in grp) + \
        tuple(t for grp in sfs for t in grp)
    return objs, [tuple(s) for s in sizes]


class _Prepared:
    __slots__ = ("data", "objs", "sizes", "device", "fn", "args", "stream_handle", "result", "launch")


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


def _prepare(data) -> _Prepared:
    if isinstance(data, (tuple, list)) and len(data) == 10:
        problem, (shape, used) = "dual", validate_dual(data)
    else:
        problem, (shape, used) = "group", validate_group(data)
    device = validate_device(used)
    _arch, cfg, ck, mod = plan(problem, shape, device)
    handle = torch.cuda.current_stream(device).cuda_stream
    p = _Prepared()
    p.data = data
    p.device = device
    p.objs, p.sizes = _identity(data)
    p.fn = ck.fn
    # kernel modules put the stream last (harness contract)
    p.args = mod.runtime_args(data, cfg, CUstream(handle))
    p.stream_handle = handle
    p.launch = PackedLaunch(p.fn, p.args)
    p.result = data[-1] if problem == "dual" else [c for (_a, _b, c) in data[0]]
    return p


def custom_kernel(data):
    p = _RECENT.get(id(data))
    if p is not None:
        objs, sizes = _identity(data)
        if not (sizes == p.sizes and len(objs) == len(p.objs) and all(map(operator.is_, objs, p.objs))):
            p = None
    if p is None:
        p = _prepare(data)
        _RECENT[id(data)] = p
        while len(_RECENT) > _RECENT_MAX:
            _RECENT.popitem(last=False)
    handle = torch.cuda.current_stream(p.device).cuda_stream
    if handle != p.stream_handle:  # e.g. inside CUDA-graph capture
        p.args = p.args[:-1] + (CUstream(handle),)
        p.stream_handle = handle
        p.launch = PackedLaunch(p.fn, p.args)
    p.launch()
    return p.result
