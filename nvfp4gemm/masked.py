"""Grouped NVFP4 GEMM whose row counts M_g are read on the GPU: the masked layout of MoE layers.

An MoE layer knows how many tokens each expert got only on the GPU (its router's counts).
`custom_kernel` takes M_g from `problem_sizes` on the host, so such a caller copies the counts
to the host (a synchronization), builds a new input every call, pays ~120-250 µs of host per
call (notes/sm90.md exp. 143) and cannot put the layer in a CUDA graph.  Here, as in DeepGEMM's
masked grouped GEMM, every expert has a buffer of a fixed capacity and the counts stay on the
device:

    gemm = MaskedGroupedGemm(data)      # data: the grouped 4-tuple at capacity sizes
    outs = gemm(masked_m)               # masked_m: int32/int64 CUDA tensor (G,), on the GPU

Call g computes rows 0 .. masked_m[g] - 1 of C_g = A_g B_g^T into the first rows of C_g and
writes no other row; A_g rows past the count are not read (their values do not matter).  A
count is clamped to [0, capacity_g] on the device (no synchronization can report it; a count
of 0 computes nothing for that group).  The call enqueues the launch on the current stream
with no host work that depends on the counts: a `torch.cuda.graph` capture of it replays with
whatever counts the tensor holds at replay time.  The buffers of `data` (and their addresses)
are fixed at construction, and the object keeps them alive: write each call's activations into
them.

sm_90a only.  The device-scheduled grouped mixed-input kernel in its `masked` form (exps.
136-137, 145): each CTA reads the capacities M_g, N_g, K_g from the group table and the counts
from the caller's int32 tensor (its address is a launch argument), clamps each count to its
capacity and plans its tiles from them; the pre-pass strides over the call's rows (exp. 149).
Where every capacity <= 16 rows the skinny kernel's masked form runs instead (its launch
covers N_g only, exp. 138): each CTA clamps its group's count the same way and returns at once
where it is 0 (exp. 146).  Where capacities exceed 16 and the caller expects counts of at most
16 (`expected_m`, or `small=True`: MoE decode steps in buffers sized for prefill), both run
side by side (the mixed form on a side stream forked from the current stream and joined back:
exps. 148, 150): the skinny kernel computes the groups whose count is 1..16 rows (the mixed
form would pad them to 64-128 rows), and the mixed form, whose `masked_above` takes those
counts as 0, the rest (H100, capacity 256, exp. 150: 0.63-0.75x the mixed form alone on counts
of at most 16, 1.01-1.16x on larger ones, so not by default).  A call is these launches (int64, strided or unaligned counts
first go through one device copy into an int32 buffer of the object's own); no host-side
table depends on the counts.  One object's calls run in stream order on its own table and
workspaces: calls of one object on two streams at once race.  A CUDA graph of a call reads the
counts tensor it captured.

More groups than one launch's table (16): where every capacity <= 16 rows, one launch of the
skinny kernel's wide table takes up to 256 groups (exp. 153: H100, 128-256 experts 0.78-0.99x
the GPU time of exp. 152's chunks and ~10 us of host per call instead of 85-160); otherwise, and
beyond 256, one object per range of groups (exp. 152: `configs.group_chunks`, boundaries at
multiples of 4 groups so each range's counts stay 16-byte aligned), side by side on streams
forked from the caller's and joined back (`CHUNK_STREAMS`), each reading its slice of the counts.
"""

from __future__ import annotations

import torch
from cuda.bindings.driver import CUstream

import configs
from nvfp4gemm.cache import private_buffers
from nvfp4gemm.dispatch import PackedLaunch, _current_device, _stream_handle, compiled_for
from nvfp4gemm.side_streams import SideStreams
from nvfp4gemm.validate import InputError, arch_of_capability, validate_device, validate_group

# Exp. 152: more than GROUPS_PER_LAUNCH groups run as one object per range of groups, side by side on
# streams forked from the caller's (H100: 0.66-0.99x the GPU time of the same launches in stream
# order on 5 structures; CUDA graphs capture the fork and joins).  False: in stream order.
CHUNK_STREAMS = True


class MaskedGroupedGemm:
    """C_g[:masked_m[g]] = A_g[:masked_m[g]] B_g^T for buffers of a fixed capacity (module doc).

    `data`: the grouped 4-tuple (abc, sfasfb, sfasfb_perm, problem_sizes) of the leaderboard
    format at capacity sizes (M_g = the rows of each buffer), validated as `custom_kernel`
    validates it.  `expected_m` (optional, one int per group): typical counts, used only to
    choose the kernels (default: the capacities).  `small` (where some capacity exceeds 16):
    True / False to launch the skinny kernel beside the mixed form for the groups whose count is
    <= 16 rows, or not; None (default): where every expected_m is <= 16
    (`configs.sm90_group_masked_picks`, exps. 147-150).  `configs`: the launches' configs (the
    skinny kernel's first); `cfg`, the last.  Raises
    InputError, naming the broken constraint, for bad inputs, a GPU other than sm_90 and shapes
    no device-scheduled tile divides (N_g not multiples of 128 with a capacity over 16)."""

    def __init__(self, data, expected_m=None, small=None):
        shape, used = validate_group(data)
        self.device = validate_device(used)
        arch = arch_of_capability(torch.cuda.get_device_capability(self.device))
        if arch != "sm_90a":
            raise InputError(f"MaskedGroupedGemm runs on sm_90 (H100/H200) only; this GPU is {arch} "
                             "(the sm_100a grouped kernel plans M_g on the host: use custom_kernel)")
        if expected_m is not None and len(expected_m) != len(shape):
            raise InputError(f"expected_m must have one entry per group ({len(shape)}), got {len(expected_m)}")
        self.shape, self.groups = tuple(shape), len(shape)
        self.outputs = [c for _a, _b, c in data[0]]
        # (counts the kernels cannot read in place are copied here first)
        self._counts32 = torch.zeros(self.groups, dtype=torch.int32, device=self.device)
        self.chunks = None
        self._sides = SideStreams(self.device)  # (the split's mixed form, exps. 148, 150; or chunks 1.., exp. 152)
        # groups one launch takes: the masked skinny kernel's wide table where every capacity fits
        # its tile (exp. 153), else GROUPS_PER_LAUNCH
        per_launch = configs.WIDE_TABLE_GROUPS if configs.group_skinny_ok(shape) else configs.GROUPS_PER_LAUNCH
        if self.groups > per_launch:
            # more groups than one launch's table (exp. 152): one object per range of at most
            # that many groups, each boundary at a multiple of 4 groups so that every range's
            # int32 counts stay 16-byte aligned
            self._ranges = configs.group_chunks(self.groups, align=4, per_launch=per_launch)
            self.chunks = [MaskedGroupedGemm(tuple(x[lo:hi] for x in data),
                                             None if expected_m is None else expected_m[lo:hi], small)
                           for lo, hi in self._ranges]
            self.configs = tuple(c for sub in self.chunks for c in sub.configs)
            self.cfg = self.chunks[-1].cfg
            return
        cfgs = configs.sm90_group_masked_picks(tuple(shape), expected_m, small)
        if not cfgs:
            raise InputError("MaskedGroupedGemm needs every N_g to be a multiple of 128 (the device-scheduled "
                             "kernel's B rows per tile) unless every capacity M_g <= "
                             f"{configs.SKINNY_MAX_M}; got N_g {[n for _m, n, _k in shape]}")
        # the launches: the skinny kernel's groups of few rows, then the rest (exp. 147; they
        # run side by side, exps. 148, 150)
        self.configs, self.cfg = cfgs, cfgs[-1]
        # (the launches hold these tensors' addresses: they must live as long as this object)
        self._tensors = tuple(t for _name, t in used)
        self._keep = []
        from cutlass.cute.runtime import _Pointer

        from nvfp4gemm.sm90.grouped_gemm import COUNTS_ARG, group_table, table_entries

        # the group table (argument 0 of every kernel here): a private copy, since the modules
        # cache tables by their entries
        self.table = group_table(self.device, table_entries(data), cfgs[0].table_groups)
        if any(c.table_groups != cfgs[0].table_groups for c in cfgs):
            raise RuntimeError(f"launches of one table with tables of other sizes: {[c.short() for c in cfgs]}")
        self._kernels = []  # (compiled function, arguments, index of the stream argument)
        self._counts_args = []  # every launch's counts argument (COUNTS_ARG)
        for cfg in cfgs:
            mod, ck = compiled_for("group", arch, cfg, self.shape)
            with private_buffers():  # (workspaces of its own: no dispatcher template shares them)
                args = list(mod.runtime_args(data, cfg, CUstream(0), keep=self._keep))
            for a in args:  # (each pointer's C storage, `_desc`, which a packed launch points at)
                if isinstance(a, _Pointer):
                    a.__c_pointers__()
            args[0]._desc.value = self.table.data_ptr()
            streams = [i for i, a in enumerate(args) if isinstance(a, CUstream)]
            if len(streams) != 1:
                raise RuntimeError(f"{cfg.short()}: expected one stream argument, got {len(streams)}")
            self._kernels.append((ck.fn, args, streams[0]))
            self._counts_args.append(args[COUNTS_ARG])
        self._counts_at = None  # (the address the counts arguments hold now)
        self._launches = {}  # (stream handle, kernel index) -> its PackedLaunch

    def _launch_on(self, handle, i: int) -> PackedLaunch:
        """Kernel i's packed launch on stream `handle` (made at its first use)."""
        launch = self._launches.get((handle, i))
        if launch is None:
            fn, args, at = self._kernels[i]
            args = list(args)
            args[at] = CUstream(handle)
            launch = self._launches[(handle, i)] = PackedLaunch(fn, tuple(args))
        return launch

    def __call__(self, masked_m: torch.Tensor) -> list:
        """Enqueue C_g[:masked_m[g]] for every group on the current stream; returns the C_g
        buffers (whole: rows past masked_m[g] are not written)."""
        if not isinstance(masked_m, torch.Tensor) or masked_m.dtype not in (torch.int32, torch.int64):
            raise InputError(f"masked_m must be an int32 or int64 tensor, got "
                             f"{getattr(masked_m, 'dtype', type(masked_m).__name__)}")
        if masked_m.device != self.device or tuple(masked_m.shape) != (self.groups,):
            raise InputError(f"masked_m must have shape ({self.groups},) on {self.device} (one count per group); "
                             f"got {tuple(masked_m.shape)} on {masked_m.device}")
        index = self.device.index
        if index is not None and index != _current_device():
            with torch.cuda.device(index):
                self._enqueue(masked_m)
        else:
            self._enqueue(masked_m)
        return list(self.outputs)

    def _enqueue(self, masked_m) -> None:
        src = masked_m
        if masked_m.dtype != torch.int32 or not masked_m.is_contiguous() or masked_m.data_ptr() % 16:
            # (the kernels read 32-bit counts at a 16-byte-aligned address: one device copy, on
            # the current stream, so ordered before the launch and captured with it)
            src = self._counts32
            src.copy_(masked_m)
        self._enqueue_at(src.data_ptr(), None)

    def _enqueue_at(self, at: int, cur) -> None:
        """The launches on stream `cur` (a torch.cuda.Stream; None: the current one) for the int32
        counts at address `at` (16-byte aligned)."""
        if self.chunks is not None:
            # more than GROUPS_PER_LAUNCH groups (exp. 152): each range's object on its counts
            cur = cur if cur is not None else torch.cuda.current_stream(self.device)
            if CHUNK_STREAMS:  # (the chunks side by side: range i > 0 on side stream i - 1)
                side_work = [lambda side, sub=sub, lo=lo: sub._enqueue_at(at + 4 * lo, side)
                             for sub, (lo, _hi) in zip(self.chunks[1:], self._ranges[1:])]
                self._sides.run(cur, side_work, lambda: self.chunks[0]._enqueue_at(at, cur))
            else:
                for sub, (lo, _hi) in zip(self.chunks, self._ranges):
                    sub._enqueue_at(at + 4 * lo, cur)
            return
        if at != self._counts_at:
            for arg in self._counts_args:
                arg._desc.value = at
            self._counts_at = at
        if len(self._kernels) == 2:
            # the mixed form on a side stream forked from the current one, then the skinny kernel
            # on the current one, joined after both (exp. 148: side by side, 0.90-0.95x the two in
            # stream order on decode-sized counts; exp. 150: this way round 0.98-1.0x the skinny
            # kernel on the side stream; a CUDA graph captures the fork and the join)
            cur = cur if cur is not None else torch.cuda.current_stream(self.device)
            self._sides.run(cur, [lambda side: self._launch_on(side.cuda_stream, 1)()],
                            lambda: self._launch_on(cur.cuda_stream, 0)())
        else:
            self._launch_on(_stream_handle(self.device) if cur is None else cur.cuda_stream, 0)()
