"""`custom_kernel(data)`: the leaderboard entry point for both problems on both GPUs.

gpu-mode ranks these problems with eval_better_bench: 50 (dual) or 15 (grouped) inputs made
once and called back to back, the same objects every repeat, so a call's host time counts
wherever it exceeds its kernel's; its generic eval.py makes a new input for every timed call
behind an L2 flush.  Both must be cheap on the host (MEMORY.md, "How the leaderboard times
calls").  Hence:

* Validation runs in full once per input *signature* (every tensor's dtype, shape, strides and
  device, and the problem sizes: all that validation looks at but the addresses).  A later input
  of a known signature is checked by its signature and its data pointers' alignment (`_SIGS`);
  the very same input object with the very same tensors as a recent call skips even that
  (`_LAST`; a tensor whose storage is swapped in place with `Tensor.set_` keeps its identity:
  don't).  The problem's latest signature is checked first, in C++ by torch's TensorGuards (the
  guards torch.compile checks its graphs' inputs with), over the tensors validation lists as
  used: a grouped input's plain scales, which no kernel reads, are validated with a signature's
  first input and not looked at after.  (The Python signature of 56 new tensors cost ~100 µs of
  the H100 machine's host, about the grouped kernels' own time: notes/sm90.md exp. 124.)
* Nothing here holds an input's tensors after its call (`_LAST` holds weak references, a
  template the addresses): a dropped input is freed where its caller drops it, not inside a
  later timed call (~75 µs for 56 tensors on the H100 machine: exp. 124).
* The first call of a signature on a stream builds a launch template (`_Template`): the kernel
  module's runtime arguments, converted and packed once (`PackedLaunch`), holding the workspaces
  they point into.  Later calls write the new data addresses into the packed pointer arguments
  and call the compiled host function, only when the used addresses changed.  Which
  arguments: the module's `DATA_SLOTS` (arguments that are data tensors' addresses: the dual
  kernels); with `writer_target` (the sm_90a grouped and dual swap kernels, sm_100a grouped) a
  group table (sm_100a: a descriptor workspace) per address set, whose address rows
  nvfp4gemm/table_writer.py writes once from its launch parameters (sm_100a: then the
  descriptor setup kernel), see `_Template._init_writer`; else the module's `pointer_args` (a
  device table of the group addresses, built and uploaded once per address set and cached --
  also the sm_90a kernels' path under NVFP4_TABLE_WRITER=0 -- and on sm_100a the per-address-set
  workspace of TMA descriptors and its setup kernel).
* Once an address set has been called GRAPH_AFTER (2) times, its launch (arguments pointed at
  it) is captured into a CUDA graph and replayed with one cuGraphLaunch (`_Template._capture`):
  ~5 µs of host per call instead of the DSL host function's ~4.5 µs per kernel plus its TMA
  descriptor encodes (exp. 128).  By default on sm_100a only (GRAPHS, NVFP4_GRAPHS).
* A module with neither gets its arguments built on every call (the grouped mixed kernel when
  compiled with NVFP4_CTA_TRACE, whose table also holds the trace slot; test stand-ins).
* A caller's own CUDA-graph capture of a call: the launch reads the table an eager call wrote
  for those addresses (else a writer node writes the template's own), and everything the graph
  points into is kept for the process's life (`_PINNED`, exps. 131-132).
* Each template builds workspaces of its own (`cache.private_buffers`, exp. 135); calls take
  turns on one lock (`_LOCK`, exp. 134) and run under the device their tensors are on (exp. 133).
* Grouped signatures of a config whose launch serves any M_g (`configs.launch_serves_any_m`: the
  device-scheduled mixed form, exps. 136-137, and the skinny kernel, exp. 138) share one template
  per (config, device, N_g and K_g) whatever their M_g (`_shared_templates`; a table is bound to addresses and M_g),
  and under NVFP4_DYNAMIC_M an input with new M_g of a known structure skips the signature,
  validation and plan: a
  guard that ignores the M-dependent dims, plus `validate.group_rows_match` (`_any_m_entry`).
  With NVFP4_DYNAMIC_M unset (auto, exp. 139) a structure switches to that mode once it has been
  planned for DYNAMIC_M_AFTER M_g sets (`_m_churns`).

A first call of a signature costs ~50 µs (dual) to ~1 ms (8 groups) of Python plus, once per
config, the compile; the first call of a new grouped shape also plans its schedule (~7 ms on CI's
CPU, configs.mixed_group_forms_plan; plans are cached).
"""

from __future__ import annotations

import ctypes
import os
import threading
import weakref
from collections import OrderedDict
from contextlib import nullcontext
from functools import reduce
from itertools import chain
from operator import is_ as _is
from operator import itemgetter, or_

import cuda.bindings.driver as _cu
import torch
from cuda.bindings.driver import CUstream

import configs
from configs import select_config
from nvfp4gemm import harness
from nvfp4gemm.cache import lru_lookup, private_buffers
from nvfp4gemm.side_streams import SideStreams
from nvfp4gemm.validate import (InputError, arch_of_capability, group_rows_match, validate_device, validate_dual,
                                validate_group)

_PLANS: OrderedDict = OrderedDict()  # (problem, shape, device, dynamic_m, STATIC_B) -> plan()
PLAN_ENTRIES = 4096
_SIGS: OrderedDict = OrderedDict()  # input signature -> _Entry (validated, planned)
SIG_ENTRIES = 4096
_TEMPLATES: OrderedDict = OrderedDict()  # (id(templates), stream handle) -> the entries' templates dict holding it
# Each template holds its workspaces (A16 buffers up to tens of MB): at most this many live.
TEMPLATE_ENTRIES = 16
# Grouped tables written by a kernel from its parameters (nvfp4gemm/table_writer.py; modules
# with `writer_target`) rather than uploaded once per address set; NVFP4_TABLE_WRITER=0: uploads.
TABLE_WRITER = os.environ.get("NVFP4_TABLE_WRITER", "1") != "0"
# An address set's launch replayed as a CUDA graph once it has been called GRAPH_AFTER times
# (`_Template._capture`): ~5 µs less host per call, ~0.5% more GPU time (exp. 128, H100).  So
# by default (NVFP4_GRAPHS unset or "auto": GRAPHS None) on sm_100a, whose leaderboard kernels
# take about what a plain launch's host work does, and not on sm_90a, whose kernels take 2-10x
# longer; NVFP4_GRAPHS=1 / 0: on / off everywhere.
GRAPHS = {"0": False, "1": True}.get(os.environ.get("NVFP4_GRAPHS", "auto"))
GRAPH_ARCHS = ("sm_100a",)  # where GRAPHS None means on
GRAPH_AFTER = 2
GRAPH_ENTRIES = 64  # captured address sets per template (LRU)


def _capability(device: torch.device) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device)


def plan(problem: str, shape, device: torch.device, dynamic_m: bool | None = None):
    """(arch, config, compiled kernel, kernel module) for this problem shape on `device` (cached
    per shape, the least recently used dropped beyond PLAN_ENTRIES: grouped M_g that change every
    call would grow it forever); `dynamic_m`: the rule for M_g that change every call (None:
    configs.DYNAMIC_M)."""
    dynamic_m = configs.DYNAMIC_M if dynamic_m is None else dynamic_m
    # (keyed by dynamic_m and STATIC_B too: a shape planned in both modes must not keep the other
    # mode's pick)
    key = (problem, shape, device, dynamic_m, configs.STATIC_B)
    return lru_lookup(_PLANS, key, lambda: _plan(problem, shape, device, dynamic_m), PLAN_ENTRIES)[0]


def _plan(problem: str, shape, device: torch.device, dynamic_m: bool):
    arch = arch_of_capability(_capability(device))
    cfg = select_config(problem, arch, shape, dynamic_m)
    # (compiled under the tensors' device: harness.compile_kernel makes a runnable kernel only
    # when the current device has the target arch, which on a host with GPUs of two
    # architectures the current device may not -- session 54's review)
    index = device.index if device.type == "cuda" and torch.cuda.is_available() else None
    with torch.cuda.device(index) if index is not None and index != _current_device() else nullcontext():
        mod, ck = compiled_for(problem, arch, cfg, shape)
    return arch, cfg, ck, mod


def compiled_for(problem: str, arch: str, cfg, shape) -> tuple:
    """(kernel module, compiled kernel) of `cfg` for a shape, after the kernel's own shape rules
    (e.g. sm_100a dual M % 128: InputError naming them, before any launch); the compile is cached
    per config (harness)."""
    mod, cls = harness.kernel_module(problem, arch, cfg)
    try:
        cls.can_implement(cfg, *shape) if problem == "dual" else cls.can_implement(cfg, shape)
    except ValueError as e:
        raise InputError(f"{arch} {problem} kernel: {e}") from e
    return mod, harness.compile_kernel(problem, arch, cfg, shape)


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
    return "group", tuple(chain(chain.from_iterable(abc), chain.from_iterable(sfs), chain.from_iterable(sfs_p))), sizes


def _signature(problem, flat, sizes_t):
    """Everything validation looks at except the data addresses; None where the input is not
    even made of tensors (full validation then names what is wrong)."""
    try:
        tens = tuple((t.dtype, t.shape, t.stride(), t.get_device()) for t in flat)
        return (problem, len(flat), sizes_t, tens)
    except (AttributeError, TypeError):
        return None


try:  # C++ tensor checks (dtype, device, shape, strides, dispatch keys, requires_grad)
    from torch._C._dynamo.guards import TensorGuards as _TensorGuards
except ImportError:  # (then only the Python signature)
    _TensorGuards = None


def _guard(flat):
    """A TensorGuards that passes tensors of exactly `flat`'s dtypes, devices, shapes and strides
    (and requires_grad, dispatch keys), or None where torch has none or it fails to check `flat`
    itself.  Stricter than the signature on the tensors it checks: a miss only takes the slower
    path."""
    if _TensorGuards is None:
        return None
    try:
        g = _TensorGuards(*flat, dynamic_dims_sizes=[list(t.shape) for t in flat],
                          dynamic_dims_strides=[list(t.stride()) for t in flat])
        return g if g.check(*flat) else None
    except Exception:  # noqa: BLE001  (a torch whose TensorGuards differs: no fast path)
        return None


class _Entry:
    """One validated input signature: its problem, shape, device, plan and launch templates;
    `used` picks the tensors the kernel reads or writes from the flattened input, and `guard`
    (over those), `sizes` and `n_flat` are the fast check of a later input (`_entry_of`)."""
    __slots__ = ("problem", "shape", "device", "cfg", "ck", "mod", "used", "pick", "templated", "templates",
                 "guard", "sizes", "n_flat", "any_m_guard")


def _validated(problem, data, flat, sig) -> _Entry:
    """Full validation and the plan of a new signature (InputError before anything is written)."""
    shape, used = validate_dual(data) if problem == "dual" else validate_group(data)
    device = validate_device(used)
    dynamic_m = configs.DYNAMIC_M or (problem == "group" and configs.DYNAMIC_M_AUTO and _m_churns(device, shape))
    _arch, cfg, ck, mod = plan(problem, shape, device, dynamic_m)
    e = _Entry()
    e.problem, e.shape, e.device, e.cfg, e.ck, e.mod = problem, shape, device, cfg, ck, mod
    used_ids = {id(t) for _name, t in used}
    idx = [i for i, t in enumerate(flat) if id(t) in used_ids]
    e.used = itemgetter(*idx) if len(idx) > 1 else (lambda f, i=idx[0]: (f[i],))
    # the used tensors straight from the input, without flattening it (`_entry_of`'s hit path):
    # dual, the input is its own flattening; grouped, the groups' (a, b, c) then permuted scales
    pick = e.used if problem == "dual" else _pick_group
    try:
        e.pick = pick if all(map(_is, pick(data), e.used(flat))) and len(pick(data)) == len(idx) else None
    except Exception:  # noqa: BLE001  (an input this shape of pick does not fit: no hit path)
        e.pick = None
    e.templated = hasattr(mod, "DATA_SLOTS") or hasattr(mod, "pointer_args")  # (else: arguments per call)
    # a device-scheduled or skinny config's launch does not depend on M_g: the signatures that
    # differ only there share their templates (exps. 136, 138)
    any_m = cfg is not None and configs.launch_serves_any_m(cfg)
    e.templates = _shared_templates(e) if any_m else {}
    e.guard, e.sizes, e.n_flat = None, sig[2] if sig is not None else None, len(flat)
    e.any_m_guard = None
    if sig is not None:
        e.guard = _guard(e.used(flat))
        lru_lookup(_SIGS, sig, lambda: e, SIG_ENTRIES)
        if any_m:
            _register_any_m(e, flat)
    return e


# Exps. 136, 138: a device-scheduled or skinny grouped entry serves inputs of any M_g (within its
# tile; `configs.launch_serves_any_m`) under NVFP4_DYNAMIC_M.  A new
# M_g set of a known (N_g, K_g, L) structure then skips full validation, the plan and the
# Python signature (~1 ms of host on the H100 machine): a TensorGuards that leaves the dims and
# strides that follow M_g unchecked passes its tensors, a few Python checks cover those
# (`validate.group_rows_match`), and `configs.any_m_tile` picks among the structure's entries.
_ANY_M: OrderedDict = OrderedDict()  # (device index, (N_g, K_g, L) per group) -> {tile: entry}

# Exp. 139, NVFP4_DYNAMIC_M unset or "auto" (configs.DYNAMIC_M_AUTO): a structure (device, N_g and
# K_g per group) validated for more than DYNAMIC_M_AFTER distinct M_g sets is an MoE-like caller's:
# its next new M_g sets are planned as under NVFP4_DYNAMIC_M=1 and take `_any_m_entry`.  Each new
# M_g set cost it the full rule before (9-12 ms of host on the H100 machine) and often a compile
# of its own (exp. 112's widths follow M_g: 6 of 8 calls, 9-14 s each there); after the switch
# ~0.15 ms, for kernels ~1.16x the full rule's (exp. 141).  Fixed shapes (the leaderboard's: one
# M_g set per structure) never switch.
DYNAMIC_M_AFTER = 2
_M_SETS: OrderedDict = OrderedDict()  # `_ANY_M`'s key (device index, (N_g, K_g, L) per group) -> M_g sets (up to DYNAMIC_M_AFTER + 1)


def _device_index(device) -> int:
    return device.index if device.index is not None else -1  # (as Tensor.get_device())


def _m_churns(device, shape) -> bool:
    """Counts a validated grouped shape's M_g set against its structure: whether the structure
    now has more than DYNAMIC_M_AFTER of them (this one included).  (Keyed as `_ANY_M`, L = 1:
    `_any_m_entry` checks with the key it has built already.)"""
    key = (_device_index(device), tuple((n, k, 1) for _m, n, k in shape))
    seen = lru_lookup(_M_SETS, key, set, SIG_ENTRIES)[0]
    if len(seen) <= DYNAMIC_M_AFTER:
        seen.add(tuple(m for m, _n, _k in shape))
    return len(seen) > DYNAMIC_M_AFTER


def _register_any_m(e, flat) -> None:
    """Make `e` (an entry of a config whose launch serves any M_g) serve the other M_g of its
    structure."""
    used = e.used(flat)
    g = len(e.shape)
    sizes, strides = [list(t.shape) for t in used], [list(t.stride()) for t in used]
    # (the dims and strides validate.group_rows_match checks instead)
    for i in range(g):  # a_g, c_g (M, cols, 1): rows and the batch stride (L = 1: unchecked)
        for j in (3 * i, 3 * i + 2):
            sizes[j][0] = strides[j][2] = None
        j = 3 * g + 2 * i  # sfa_perm_g (32, 4, ceil(M / 128), 4, rk, 1): its row atoms, batch stride
        sizes[j][2] = strides[j][5] = None
    if _TensorGuards is None:
        return
    try:
        e.any_m_guard = _TensorGuards(*used, dynamic_dims_sizes=sizes, dynamic_dims_strides=strides)
        if not e.any_m_guard.check(*used):
            e.any_m_guard = None
            return
    except Exception:  # noqa: BLE001  (a torch whose TensorGuards differs: no fast path)
        e.any_m_guard = None
        return
    key = (_device_index(e.device), tuple(s[1:] for s in e.sizes))
    lru_lookup(_ANY_M, key, dict, SIG_ENTRIES)[0][tuple(e.cfg.mma_tile_mn)] = e


def _any_m_entry(flat, sizes_t):
    """(entry, used tensors) of an entry whose launch serves this grouped input's M_g
    (`_register_any_m`), or None: then the full path (signature, validation) decides.  Under
    NVFP4_DYNAMIC_M=1, or in auto mode once the structure has switched."""
    if not (_ANY_M and (configs.DYNAMIC_M or configs.DYNAMIC_M_AUTO)):
        return None
    try:
        key = (flat[0].get_device(), tuple(s[1:] for s in sizes_t))
        fam = _ANY_M.get(key)
        # (auto mode: only a structure that has switched, `_m_churns`)
        if fam is None or not (configs.DYNAMIC_M or len(_M_SETS.get(key, ())) > DYNAMIC_M_AFTER):
            return None
        shape = tuple((int(m), n, k) for m, n, k, _l in sizes_t)
        if min(m for m, _n, _k in shape) < 1 or ("sm_90a", "group", shape) in configs.CONFIG_MAP:
            return None  # (bad sizes: validation names them; leaderboard shapes keep their pins)
        entry = fam.get(configs.any_m_tile(shape))
        if entry is None or entry.n_flat != len(flat):
            return None
        used = entry.used(flat)
        if not (entry.any_m_guard.check(*used) and group_rows_match(used, shape)):
            return None
        # (the pre-pass indexes halves in 32 bits: Sm90GroupedMixedKernel.can_implement)
        return (entry, used) if sum(m * (k // 32) for m, _n, k in shape) < 2**31 else None
    except Exception:  # noqa: BLE001  (anything unexpected: the full path names it)
        return None


_SHARED: OrderedDict = OrderedDict()  # (config, device, (N_g, K_g) per group) -> {stream: _Template}


def _shared_templates(e) -> dict:
    """The templates of every signature of `e`'s config (one whose launch serves any M_g:
    `configs.launch_serves_any_m`), device and group N_g, K_g: the one launch serves them all
    while the module's `device_fits` says so (the mixed form's A16 buffer has room; the skinny
    kernel's tile holds every M_g), so a caller whose M_g change every call builds no template
    per call."""
    return lru_lookup(_SHARED, (e.cfg, e.device, tuple((n, k) for _m, n, k in e.shape)), dict, SIG_ENTRIES)[0]


class _Template:
    """A packed launch of one signature on one stream whose data addresses are rewritten per call.
    Holds what its arguments point into (`keep`), so no cache eviction frees it while it lives."""

    def __init__(self, entry: _Entry, data, flat, handle, ptrs):
        from cutlass.cute.runtime import _Pointer

        self.entry = entry
        mod = entry.mod
        self.keep = []
        # a launch serving any M_g (exps. 136, 138: while `device_fits`): a table written for
        # one address set is bound to its M_g too (an input may keep its addresses and change
        # its M_g: slices of one buffer)
        self.fits = mod.device_fits if entry.cfg is not None and configs.launch_serves_any_m(entry.cfg) else None
        self.capturable = handle != 0  # (torch never captures on the default stream, handle 0)
        # workspaces of its own (exp. 135), except inside a caller's capture, where the latest
        # eager template's are reused: building would upload tables, which a capture may not
        with nullcontext() if self.capturable and _capturing() else private_buffers():
            self.args = mod.runtime_args(data, entry.cfg, CUstream(handle), keep=self.keep)
        for a in self.args:  # each pointer's C storage (`_desc`), which the packed array points at
            if isinstance(a, _Pointer):
                a.__c_pointers__()
        slots = getattr(mod, "DATA_SLOTS", None)
        self.slots = None if slots is None else tuple((self.args[ai], di) for ai, di in slots)
        self.launch = PackedLaunch(entry.ck.fn, self.args)
        self.handle = handle
        self.last = ptrs  # the used tensors' addresses the arguments hold now
        self.owner = None  # pointer_args' buffer the arguments point into now (besides `keep`)
        self.writer = None
        if self.slots is None and TABLE_WRITER and hasattr(mod, "writer_target"):
            self._init_writer(data, handle)
        # graphs where the arguments' targets live as long as the graph (data slots, written
        # tables): not with uploaded tables, whose buffers live in the module's own cache
        streams = [a for a in self.args if isinstance(a, CUstream)]
        graphs = GRAPHS if GRAPHS is not None else getattr(entry.ck, "arch", None) in GRAPH_ARCHS
        self.graph_ok = graphs and (self.slots is not None or self.writer is not None) and len(streams) == 1
        self.stream_arg = streams[0] if len(streams) == 1 else None
        self.graphs = OrderedDict()  # used addresses -> [calls, _Graph or None]
        self.cu_stream = CUstream(handle)
        self.cap_stream = None

    def _init_writer(self, data, handle):
        """Tables written by `table_writer` from launch parameters (the module's `writer_target`:
        sm_90a a group table, sm_100a a descriptor workspace whose pointer rows the writer fills
        and whose `after` launch, the setup kernel, builds the descriptors).  Eager calls bind
        each address set to a table of its own, written once (`bound`, least recently used
        dropped beyond BOUND_ENTRIES): the leaderboard's loops cycle through 15 or 50 inputs,
        which then cost the main launch alone.  A captured launch reads the table an eager call
        of the signature wrote for its addresses (`_bound_anywhere`, exp. 132), else writes the
        template's own table (`target`) in the capture, so each replay writes its rows first; no
        eager call reads that table, so replays cannot change what an eager call reads.  (The
        first input's group table that `runtime_args` built is unused here: 1 KB of the upload
        its schedule tables need anyway.)"""
        from nvfp4gemm import table_writer

        ck = self.entry.ck
        self.stream = CUstream(handle)
        self.target = self.entry.mod.writer_target(data, self.entry.cfg, self.stream)
        self.keep.append(self.target.owner)
        n = table_writer.entries_for(len(self.entry.mod.table_entries(data, self.entry.cfg)), self.target.n)
        entries, self.entry_values = table_writer.entry_params(n)
        self.writer_dst = table_writer.entry_ptr(self.target.dst, align=16)
        self.writer_dst.__c_pointers__()
        self.writer = PackedLaunch(table_writer.compiled(ck.arch, ck.runnable, n, self.target.n),
                                   (self.writer_dst, entries, self.stream))
        self.bound = OrderedDict()  # used addresses -> the Target written with them
        self.last = None  # (the arguments point at no written table yet)

    def __call__(self, data, flat, ptrs, side=None):
        """Launch on `data` (addresses `ptrs`); `side`: the torch stream of this template's
        handle where that is not the current stream (exp. 152's side chunks), made current only
        while a new address set is bound (`_point_at`), not on the hot path."""
        if self.fits is not None:
            ptrs = (ptrs, tuple(size[0] for size in data[3]))
        if self.capturable and _capturing():  # (someone captures this call: no graph of ours)
            _pin(self)  # (the caller's graph points into this template's buffers from now on)
            if self.writer is not None:
                t = self._bound_anywhere(ptrs)
                if t is not None:  # (written by an eager call before the capture: no writer node)
                    _pin(t)
                    self._point(t)
                else:
                    self._write(data, self.target)
                self.last = None  # (the arguments point at a table of no eager call's choosing)
            else:
                self._point_at(data, flat, ptrs)
                _pin(self.owner)  # (pointer_args' table: the module's cache would drop it)
            self.launch()
            return
        if _GRAVEYARD:
            _bury()
        rec = self.graphs.get(ptrs) if self.graph_ok else None
        if rec is not None and rec[1] is not None:  # the hot path: one graph launch
            self.graphs.move_to_end(ptrs)
            if self.writer is not None:
                self.bound.move_to_end(ptrs)  # (its table lives as long as its graph)
            rec[1].launch(self.cu_stream)
            return
        if side is not None and ptrs != self.last:
            with torch.cuda.stream(side):
                self._point_at(data, flat, ptrs)
        else:
            self._point_at(data, flat, ptrs)
        if self.graph_ok:
            if rec is None:
                rec = self.graphs[ptrs] = [0, None]
                while len(self.graphs) > GRAPH_ENTRIES:
                    self.graphs.popitem(last=False)
            else:
                self.graphs.move_to_end(ptrs)
            rec[0] += 1
            if rec[0] >= GRAPH_AFTER and self.launch.capi is not None:
                rec[1] = self._capture()
                if rec[1] is not None:
                    rec[1].launch(self.cu_stream)
                    return
        self.launch()

    def _point_at(self, data, flat, ptrs) -> None:
        """Point the arguments at `ptrs`'s data (writer path: at its table, written on first
        sight)."""
        if ptrs == self.last:
            return
        if self.writer is not None:
            t = self.bound.get(ptrs)
            if t is None:
                t = self.entry.mod.writer_target(data, self.entry.cfg, self.stream, like=self.target)
                self._write(data, t)
                self.bound[ptrs] = t
                while len(self.bound) > BOUND_ENTRIES:
                    self.graphs.pop(self.bound.popitem(last=False)[0], None)  # (its graph reads its table)
            else:
                self.bound.move_to_end(ptrs)
                self._point(t)
        elif self.slots is not None:
            if flat is None:
                flat = _flatten(data)[1]
            for ptr, di in self.slots:
                ptr._desc.value = flat[di].data_ptr()
        else:
            args = self.args
            pairs, self.owner = self.entry.mod.pointer_args(data, self.entry.cfg, stream_handle=self.handle)
            for ai, addr in pairs:
                args[ai]._desc.value = addr
        self.last = ptrs

    def _capture(self):
        """The packed launch as it stands (arguments pointed at one address set) captured into
        a CUDA graph on a private stream and instantiated: a replay costs one cuGraphLaunch
        (~3 µs of host on the H100 machine) where the DSL's host function costs ~4.5 µs per
        kernel it launches (it also encodes the TMA descriptors): exp. 128.  The packed
        stream argument is switched to the capture stream for the capture (the DSL reads it
        through `CUstream.getPtr()`).  None, and no more graphs for this template, where any
        step fails (the plain launch then runs)."""
        slot = ctypes.c_void_p.from_address(self.stream_arg.getPtr())
        home, graph = slot.value, None
        try:
            if self.cap_stream is None:
                self.cap_stream = _OwnedStream()
            slot.value = int(self.cap_stream.stream)
            _check(_cu.cuStreamBeginCapture(self.cap_stream.stream, _cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
            try:
                self.launch()
            finally:
                err, graph = _cu.cuStreamEndCapture(self.cap_stream.stream)
            _check((err,))
            err, exe = _cu.cuGraphInstantiate(graph, 0)
            _check((err,))
            return _Graph(exe)
        except Exception:  # noqa: BLE001  (any failure: this template launches plainly)
            self.graph_ok = False
            self.graphs.clear()
            return None
        finally:
            slot.value = home
            if graph is not None:
                _cu.cuGraphDestroy(graph)

    def _bound_anywhere(self, ptrs):
        """The table an eager call of this signature, on any stream, wrote for `ptrs`, or None.
        A captured launch reads it instead of the template's own table rewritten by a writer
        node on every replay (~2 us of GPU time per replay, exp. 132): a bound table is written
        once, before the capture (the caller orders its eager warm-up call before its replays;
        torch.cuda.graph synchronizes the device before capturing), and never rewritten, and
        the same signature means the same table layout whichever template wrote it."""
        for tpl in (self, *self.entry.templates.values()):
            t = tpl.bound.get(ptrs) if tpl.writer is not None else None
            if t is not None:
                return t
        return None

    def _write(self, data, t) -> None:
        """Write `data`'s entries into t (after t's `before` launch, then its `after` launch) and
        point the arguments at t."""
        vals = self.entry.mod.table_entries(data, self.entry.cfg)
        self.entry_values[:len(vals)] = vals  # (the signature fixes len(vals): the rest stay 0)
        if t.before is not None:
            t.before()
        self.writer_dst._desc.value = t.dst
        self.writer()
        if t.after is not None:
            t.after()
        self._point(t)

    def _point(self, t) -> None:
        for ai, addr in t.arg_pairs:
            self.args[ai]._desc.value = addr


def _capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


# What a caller's CUDA graph of a call points into -- the launch template (its workspaces, its
# own group table), an uploaded table -- kept for the life of the process: the caller may replay
# its graph long after the dispatcher dropped the template (TEMPLATE_ENTRIES) and the modules'
# caches their buffers, and would then write into memory that is someone else's (exp. 131: a
# server captures one graph per batch size, more than TEMPLATE_ENTRIES of them).  We cannot
# know when the caller destroys its graph; torch keeps a capture's own allocations as long.
_PINNED: dict = {}  # id -> object


def _pin(obj) -> None:
    if obj is not None:
        _PINNED.setdefault(id(obj), obj)


def _check(res) -> None:
    if res[0]:
        raise RuntimeError(f"CUDA driver call failed: {res[0]!r}")


# Graph executables and capture streams of dropped templates and records, destroyed at the next
# eager call (`_bury`), never where they are dropped: a template evicted while the caller
# captures a CUDA graph in torch's default (global) mode would otherwise destroy them inside
# that capture, which invalidates it (exp. 128: every later test failed).
_GRAVEYARD: list = []


def _bury() -> None:
    while _GRAVEYARD:
        destroy, handle = _GRAVEYARD.pop()
        try:
            destroy(handle)
        except Exception:  # noqa: BLE001  (a failed destroy leaks one handle; the call goes on)
            pass


class _Graph:
    """An instantiated CUDA graph of one template launch at one address set.  Destroyed after
    its record is dropped (`_GRAVEYARD`); the driver frees one still running when it
    completes."""
    __slots__ = ("exe",)

    def __init__(self, exe):
        self.exe = exe

    def launch(self, stream) -> None:
        err, = _cu.cuGraphLaunch(self.exe, stream)
        if err:
            raise RuntimeError(f"graph launch failed: {err!r}")

    def __del__(self):
        _GRAVEYARD.append((_cu.cuGraphExecDestroy, self.exe))


class _OwnedStream:
    """A non-blocking stream that graphs are captured on (destroyed after its template is
    dropped, `_GRAVEYARD`)."""
    __slots__ = ("stream",)

    def __init__(self):
        err, self.stream = _cu.cuStreamCreate(_cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value)
        _check((err,))

    def __del__(self):
        _GRAVEYARD.append((_cu.cuStreamDestroy, self.stream))


_LAST: OrderedDict = OrderedDict()  # id(data) -> (weak refs to its used tensors, sizes, _Entry, used addresses)
# gpu-mode's ranked loops (eval_better_bench*.py) call 50 (dual) or 15 (grouped) inputs back to
# back, the same objects every repeat: all of them must fit.
LAST_ENTRIES = 64
BOUND_ENTRIES = 64  # address sets with a written table, per template (~1 KB each; sm_100a ~11 KB)


_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # (what torch.compile's code uses)


def _stream_handle(device) -> int:
    return _RAW_STREAM(device.index) if _RAW_STREAM is not None else torch.cuda.current_stream(device).cuda_stream


_RECENT: dict = {}  # problem -> the entry of its latest input (checked first, by its guard)
# Exp. 142: grouped problem sizes -> the entry of their latest signature (checked next, by its
# guard): a caller alternating among a few grouped shapes (layers of other N_g, K_g, or M_g sets
# seen before) skips the Python signature (~100 us for 8 groups), and after an auto switch
# (exp. 139) an M_g set planned before it keeps its host-planned kernel.
_BY_SIZES: OrderedDict = OrderedDict()


def clear_caches() -> None:
    """Forget every signature, template and recent input (tests; plans and compiles stay)."""
    for cache in (_SIGS, _TEMPLATES, _LAST, _RECENT, _SHARED, _ANY_M, _M_SETS, _BY_SIZES, _CHUNKED):
        cache.clear()
    if not (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()):
        _bury()


def _entry_of(data, remember: bool = True):
    """(entry, flattened tensors or None, addresses of the used tensors) of an input: the very
    same input object with the very same (live) used tensors and equal sizes as a recent call
    skips even the flattening (flat None for a grouped input: nothing downstream reads it;
    a dual input is its own); else the latest entry of the problem if its guard passes the
    tensors, else the signature's entry (either way, alignment checked), else full
    validation.  `remember` False: the input object is not kept as a recent one (a chunk of
    a larger grouped input, made anew every call)."""
    hit = _LAST.get(id(data)) if remember else None
    if hit is not None:
        refs, sizes, entry, ptrs = hit
        try:
            used = entry.pick(data)
            if len(used) == len(refs) and all(map(_is, used, map(_deref, refs))) and (sizes is None or data[3] == sizes):
                return entry, (data if sizes is None else None), ptrs
        except Exception:  # noqa: BLE001  (no pick, or not the input it was: the full path below)
            pass
    if remember and _in_chunks(data):  # (after the recent-input check: the hot path does not pay it)
        raise _ManyGroups
    try:
        problem, flat, sizes = _flatten(data)
    except (TypeError, ValueError):  # not even nested sequences: full validation names the problem
        validate_group(data)
        raise
    try:
        sizes_t = None if sizes is None else tuple(map(tuple, sizes))
    except TypeError:  # malformed sizes: full validation names them
        sizes_t = None
    entry = _RECENT.get(problem)
    used = entry.used(flat) if entry is not None and entry.sizes == sizes_t and entry.n_flat == len(flat) else None
    hit = used is not None and _guard_passes(entry, used)
    if not hit and sizes_t is not None:
        known = _sized_entry(sizes_t, len(flat))
        if known is not None:
            used = known.used(flat)
            hit = _guard_passes(known, used)
            if hit:
                entry = _RECENT[problem] = known
    if not hit and problem == "group" and sizes_t is not None:
        any_m = _any_m_entry(flat, sizes_t)  # (new M_g of a structure whose launch serves any M_g)
        if any_m is not None:
            (entry, used), hit = any_m, True
    if not hit:
        # (a miss: the full Python signature, all tensors)
        sig = _signature(problem, flat, sizes_t)
        entry = _SIGS.get(sig) if sig is not None else None
        if entry is None:
            entry = _validated(problem, data, flat, sig)
            if sig is None:  # (validation refuses what has no signature: not remembered)
                return entry, flat, _aligned_ptrs(entry, data, entry.used(flat))
        else:
            _SIGS.move_to_end(sig)
        if entry.guard is not None:
            _RECENT[problem] = entry
            if sizes_t is not None:
                _remember_sizes(sizes_t, entry)
        used = entry.used(flat)
    ptrs = _aligned_ptrs(entry, data, used)
    if entry.pick is not None and remember:
        try:  # (sizes kept as given, each size a copy: equal to the input's until it changes)
            kept = None if sizes is None else type(sizes)([type(x)(x) for x in sizes])
            _LAST[id(data)] = (tuple(map(weakref.ref, used)), kept, entry, ptrs)
        except (TypeError, IndexError):  # (not remembered: a later call takes the full path)
            return entry, flat, ptrs
        if len(_LAST) > LAST_ENTRIES:
            _LAST.popitem(last=False)
    return entry, flat, ptrs


def _sized_entry(sizes_t, n_flat):
    """The entry `_remember_sizes` holds for these grouped problem sizes, if it takes as many
    tensors."""
    try:
        e = _BY_SIZES.get(sizes_t)
    except TypeError:  # (unhashable sizes: the signature path)
        return None
    return e if e is not None and e.n_flat == n_flat else None


def _remember_sizes(sizes_t, entry) -> None:
    try:
        _BY_SIZES[sizes_t] = entry
    except TypeError:
        return
    _BY_SIZES.move_to_end(sizes_t)
    while len(_BY_SIZES) > SIG_ENTRIES:
        _BY_SIZES.popitem(last=False)


def _pick_group(data):
    return (*chain.from_iterable(data[0]), *chain.from_iterable(data[2]))


_deref = weakref.ref.__call__


def _guard_passes(entry, used) -> bool:
    try:
        return entry.guard.check(*used)
    except Exception:  # noqa: BLE001  (not tensors: the signature path names the problem)
        return False


def _aligned_ptrs(entry, data, used) -> tuple:
    """The addresses of `used` (`entry.used` of the input: the tensors the kernel reads or
    writes), each checked 16-byte aligned (a known signature's tensors may still sit anywhere;
    full validation names a misaligned one)."""
    ptrs = tuple(map(torch.Tensor.data_ptr, used))
    if reduce(or_, ptrs, 0) & 15:
        validate_device((validate_dual(data) if entry.problem == "dual" else validate_group(data))[1])
    return ptrs


# One call at a time: calls of one signature on one stream share a launch template, whose
# packed arguments a call rewrites and then launches; a thread switch in between let another
# thread's addresses in (exp. 134), and the caches are plain dicts.  ~0.1 us uncontended.
_LOCK = threading.Lock()


class _ManyGroups(Exception):
    """`_entry_of`'s answer to a grouped input of more than GROUPS_PER_LAUNCH groups, which
    `custom_kernel` then runs in chunks (`_grouped_in_chunks`, exp. 152)."""


def custom_kernel(data):
    try:
        with _LOCK:
            entry, flat, ptrs = _entry_of(data)
            index = entry.device.index
            if index is not None and index != _current_device():
                # the DSL launches (and captures, and the templates allocate) in the current
                # device's context: on another device's tensors a kernel wrote nothing and the next
                # call faulted (exp. 133, two H100s); torch's own ops switch devices the same way
                with torch.cuda.device(index):
                    _launch(entry, data, flat, ptrs)
            else:
                _launch(entry, data, flat, ptrs)
    except _ManyGroups:
        return _grouped_in_chunks(data)
    return data[-1] if entry.problem == "dual" else [grp[2] for grp in data[0]]


_current_device = getattr(torch._C, "_cuda_getDevice", None) or torch.cuda.current_device


def _in_chunks(data) -> bool:
    """Whether `data` is a grouped input of more groups than one launch takes (~0.1 us: made
    only where a call is not a recent input's; anything malformed is left to validation)."""
    try:
        return len(data) == 4 and len(data[3]) > configs.GROUPS_PER_LAUNCH
    except TypeError:
        return False


def configs_of(data) -> list:
    """The config of each launch `custom_kernel(data)` makes (several for more than
    GROUPS_PER_LAUNCH groups, one per chunk), validating the input as a call would; launches
    nothing (benchmarks report them)."""
    with _LOCK:
        if _in_chunks(data):
            return [_entry_of(sub, remember=False)[0].cfg for sub in _chunk_inputs(data)[1]]
        return [_entry_of(data)[0].cfg]


def _chunk_inputs(data) -> tuple:
    """(`configs.group_chunks`' [lo, hi) ranges, the grouped sub-input of each range).  Raises
    ValueError unless the four lists have one entry per group: the ranges come from the sizes,
    so a longer tensor list would leave its extra groups out of every chunk, unwritten."""
    abc, sfs, sfs_p, sizes = data
    if not len(abc) == len(sfs) == len(sfs_p) == len(sizes):
        raise ValueError("one entry per group")  # (the caller re-raises validate_group's error)
    ranges = configs.group_chunks(len(sizes))
    return ranges, [(abc[lo:hi], sfs[lo:hi], sfs_p[lo:hi], sizes[lo:hi]) for lo, hi in ranges]


# Exp. 152: recent inputs of more than GROUPS_PER_LAUNCH groups, by id: (weak references to their
# used tensors, their problem sizes, each chunk's (entry, addresses)) -- as `_LAST` for one launch:
# the same input object called again skips each chunk's lookup (which costs a new input's host
# time per chunk, ~40-75 us on the H100 machine).
_CHUNKED: OrderedDict = OrderedDict()


def _grouped_in_chunks(data):
    """A grouped input of more than GROUPS_PER_LAUNCH groups (exp. 152): the launches of
    `configs.group_chunks`' ranges, side by side (`CHUNK_STREAMS`) or in stream order, each
    through the path of any grouped input of that many groups (its own signature, plan and
    template).  Every chunk is validated (or
    found) before the first launch, so bad input raises before anything is written; an error
    in a chunk is re-raised by validating the whole input, which names the group by its index
    in the input."""
    try:
        ranges, subs = _chunk_inputs(data)
    except (TypeError, ValueError):
        validate_group(data)  # (names what is malformed)
        raise
    with _LOCK:
        resolved = _chunks_seen(data)
        if resolved is None:
            try:
                resolved = [_entry_of(sub, remember=False) for sub in subs]
            except InputError:
                validate_device(validate_group(data)[1])  # (the error with the input's own group index)
                raise
            device = resolved[0][0].device
            for (lo, hi), (entry, _flat, _ptrs) in zip(ranges, resolved):
                if entry.device != device:
                    raise InputError(f"groups {lo}..{hi - 1} are on {entry.device}, but group 0 is on "
                                     f"{device}: all tensors must share one GPU")
            _remember_chunks(data, resolved)
        device = resolved[0][0].device
        index = device.index
        with (torch.cuda.device(index) if index is not None and index != _current_device() else nullcontext()):
            if CHUNK_STREAMS and not _capturing():
                _launch_side_by_side(device, subs, resolved)
            else:
                for sub, (entry, flat, ptrs) in zip(subs, resolved):
                    _launch(entry, sub, flat, ptrs)
    return [grp[2] for grp in data[0]]


def _chunks_seen(data):
    """Each chunk's (entry, None, addresses) if `data` is the very input object of a recent call
    with the very same (live) used tensors and equal problem sizes, else None."""
    hit = _CHUNKED.get(id(data))
    if hit is None:
        return None
    refs, sizes, resolved = hit
    try:
        used = _pick_group(data)
        if len(used) == len(refs) and all(map(_is, used, map(_deref, refs))) and data[3] == sizes:
            _CHUNKED.move_to_end(id(data))
            return resolved
    except Exception:  # noqa: BLE001  (not the input it was: the chunks' own lookups)
        pass
    return None


def _remember_chunks(data, resolved) -> None:
    try:
        kept = type(data[3])([type(x)(x) for x in data[3]])
        _CHUNKED[id(data)] = (tuple(map(weakref.ref, _pick_group(data))), kept,
                              [(entry, None, ptrs) for entry, _flat, ptrs in resolved])
    except (TypeError, IndexError):  # (not remembered: the next call looks each chunk up)
        return
    _CHUNKED.move_to_end(id(data))
    if len(_CHUNKED) > LAST_ENTRIES:
        _CHUNKED.popitem(last=False)


# Exp. 152: the chunks of a grouped input side by side, on streams forked from the current one
# (chunk i > 0 on side stream i - 1, each joined back; the side streams' own templates), not in
# stream order: H100, 0.72-0.98x the GPU time in stream order on 6 shapes of 32-128 groups (the
# gain is largest where each chunk is short: one launch's tail overlaps the next one's head).
# Inside a caller's capture the chunks stay in stream order (a template sees a capture only on
# the capturing stream).  False: stream order.
CHUNK_STREAMS = True
_CHUNK_SIDE: dict = {}  # device -> SideStreams (side stream i - 1 takes chunk i)


def _launch_side_by_side(device, subs, resolved) -> None:
    sides = _CHUNK_SIDE.get(device)
    if sides is None:
        sides = _CHUNK_SIDE[device] = SideStreams(device)
    side_work = [lambda side, sub=sub, r=r: _launch(r[0], sub, r[1], r[2], side.cuda_stream, side)
                 for sub, r in zip(subs[1:], resolved[1:])]
    entry, flat, ptrs = resolved[0]
    sides.run(torch.cuda.current_stream(device), side_work, lambda: _launch(entry, subs[0], flat, ptrs))


def _launch(entry, data, flat, ptrs, handle=None, side=None) -> None:
    """Launch `entry`'s kernel on `data` on the current stream, or on `handle`'s; `side`: the
    torch stream of `handle` when it is not the current one (exp. 152's side-by-side chunks), so
    that whatever the launch allocates or uploads first (a new template's workspaces and tables;
    the per-call tables of the pointer-table path) is made on the stream that reads it."""
    if handle is None:  # (the current stream)
        handle = _stream_handle(entry.device)
    if entry.templated:
        templates = entry.templates  # (shared by the signatures of a config serving any M_g)
        tpl = templates.get(handle)
        key = (id(templates), handle)
        if tpl is None or (tpl.fits is not None and not tpl.fits(entry.cfg, tpl.args, data)):
            with torch.cuda.stream(side) if side is not None else nullcontext():
                tpl = templates[handle] = _Template(entry, data, flat, handle, ptrs)
            _TEMPLATES[key] = templates
            _TEMPLATES.move_to_end(key)
            while len(_TEMPLATES) > TEMPLATE_ENTRIES:
                (_tid, h), old = _TEMPLATES.popitem(last=False)
                old.pop(h, None)
        else:
            _TEMPLATES.move_to_end(key)
        # (`side` is made current while the template binds a new address set: what that
        # allocates or copies on torch's current stream -- the pointer-table path's upload, the
        # writer path's new table, and on sm_100a its new workspace, whose shape rows are copied
        # from the template's -- is then ordered before the side stream's launches that read it;
        # session 54's review found the sm_100a copy on the caller's stream, unordered)
        tpl(data, flat, ptrs, side)
    elif side is not None:
        with torch.cuda.stream(side):
            _launch(entry, data, flat, ptrs, handle)
    else:  # arguments built on every call
        if _capturing():  # (the workspaces the caller's graph points into are kept: `_PINNED`)
            keep = []
            PackedLaunch(entry.ck.fn, entry.mod.runtime_args(data, entry.cfg, CUstream(handle), keep=keep))()
            _pin(keep)
        else:
            PackedLaunch(entry.ck.fn, entry.mod.runtime_args(data, entry.cfg, CUstream(handle)))()
