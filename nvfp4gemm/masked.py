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
capacity and plans its tiles from them; the pre-pass covers the A16 buffer's capacity.  Where
every capacity <= 16 rows the skinny kernel's masked form runs instead (its launch covers N_g
only, exp. 138): each CTA clamps its group's count the same way and returns at once where it
is 0 (exp. 146).  A call is that one launch (int64, strided or unaligned counts first go
through one device copy into an int32 buffer of the object's own); no host-side table depends
on the counts.  One object's calls run in stream order on its own table and workspaces: calls
of one object on two streams at once race.  A CUDA graph of a call reads the counts tensor it
captured.
"""

from __future__ import annotations

import torch
from cuda.bindings.driver import CUstream

import configs
from nvfp4gemm.cache import private_buffers
from nvfp4gemm.dispatch import PackedLaunch, _current_device, _stream_handle, compiled_for
from nvfp4gemm.validate import InputError, arch_of_capability, validate_device, validate_group

class MaskedGroupedGemm:
    """C_g[:masked_m[g]] = A_g[:masked_m[g]] B_g^T for buffers of a fixed capacity (module doc).

    `data`: the grouped 4-tuple (abc, sfasfb, sfasfb_perm, problem_sizes) of the leaderboard
    format at capacity sizes (M_g = the rows of each buffer), validated as `custom_kernel`
    validates it.  `expected_m` (optional, one int per group): typical counts, used only to
    choose the kernel's tile (default: the capacities).  Raises InputError, naming the broken
    constraint, for bad inputs, a GPU other than sm_90 and shapes no device-scheduled tile
    divides (N_g not multiples of 128 with a capacity over 16)."""

    def __init__(self, data, expected_m=None):
        shape, used = validate_group(data)
        self.device = validate_device(used)
        arch = arch_of_capability(torch.cuda.get_device_capability(self.device))
        if arch != "sm_90a":
            raise InputError(f"MaskedGroupedGemm runs on sm_90 (H100/H200) only; this GPU is {arch} "
                             "(the sm_100a grouped kernel plans M_g on the host: use custom_kernel)")
        cfg = configs.sm90_group_masked_pick(tuple(shape), expected_m)
        if cfg is None:
            raise InputError("MaskedGroupedGemm needs every N_g to be a multiple of 128 (the device-scheduled "
                             "kernel's B rows per tile) unless every capacity M_g <= "
                             f"{configs.SKINNY_MAX_M}; got N_g {[n for _m, n, _k in shape]}")
        self.cfg, self.shape, self.groups = cfg, tuple(shape), len(shape)
        mod, self.ck = compiled_for("group", arch, cfg, self.shape)
        self.outputs = [c for _a, _b, c in data[0]]
        # (the launch holds these tensors' addresses: they must live as long as this object)
        self._tensors = tuple(t for _name, t in used)
        self._keep = []
        with private_buffers():  # (workspaces of its own: no dispatcher template shares them)
            args = list(mod.runtime_args(data, cfg, CUstream(0), keep=self._keep))
        # the group table: a private copy (the module caches tables by their entries), argument 0
        # of both kernels
        from cutlass.cute.runtime import _Pointer

        from nvfp4gemm.sm90.grouped_gemm import COUNTS_ARG, group_table, table_entries

        self.table = group_table(self.device, table_entries(data, cfg))
        for a in args:  # (each pointer's C storage, `_desc`, which a packed launch points at)
            if isinstance(a, _Pointer):
                a.__c_pointers__()
        args[0]._desc.value = self.table.data_ptr()
        # both masked kernels read the counts through argument COUNTS_ARG (`_counts_arg`)
        self._counts_arg = args[COUNTS_ARG]
        self._counts_at = None  # (the address that argument holds now)
        # (counts the kernels cannot read in place are copied here first)
        self._counts32 = torch.zeros(self.groups, dtype=torch.int32, device=self.device)
        streams = [i for i, a in enumerate(args) if isinstance(a, CUstream)]
        if len(streams) != 1:
            raise RuntimeError(f"{cfg.short()}: expected one stream argument, got {len(streams)}")
        self._args, self._stream_at = args, streams[0]
        self._launches = {}  # stream handle -> PackedLaunch

    def _launch_on(self, handle):
        launch = self._launches.get(handle)
        if launch is None:
            args = list(self._args)
            args[self._stream_at] = CUstream(handle)
            launch = self._launches[handle] = PackedLaunch(self.ck.fn, tuple(args))
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
        at = src.data_ptr()
        if at != self._counts_at:
            self._counts_arg._desc.value = self._counts_at = at
        self._launch_on(_stream_handle(self.device))()
