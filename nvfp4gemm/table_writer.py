"""A one-warp kernel that writes a grouped launch's group table from its kernel parameters.

Why (notes/sm90.md exp. 122): a grouped call on new tensors needs a device table of the new
addresses, and a 1 KB host-to-device copy costs the host ~20 us with the GPU idle but ~90 us
while a kernel runs (the leaderboard's L2 flush runs then).  Kernel parameters travel with the
launch instead: the entries a signature uses (rounded up to ENTRIES_STEP) are pointer-typed
parameters of this kernel, so the dispatcher's launch template rewrites them per call like any
data address (`_Pointer._desc`), and the kernel stores them (zeros in the table's other rows),
stream-ordered before the main kernel that reads the table.  Captured in a CUDA graph, each
replay writes its own values first.

The dispatcher's default since session 38 (`NVFP4_TABLE_WRITER=0` uploads tables instead), for
the sm_90a group table (128 entries) and the sm_100a descriptor workspace's pointer rows (80);
run on H100s (tests/test_gpu_kernels.py, the `table_writer` tests and every grouped test through
the dispatcher), compiled only for sm_100a.  Arch-neutral (plain global stores).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute

ENTRIES = 128  # MAX_GROUPS (16) x META_FIELDS (8) int64 of the sm_90a grouped kernels' table
# A template's writer takes its signature's entries rounded up to this many parameters
# (`entries_for`) and writes zeros to the rest of the table.  Why (exp. 130): in a CUDA graph the
# writer node of one store per entry cost ~0.2 us per entry on an H100 (128: +24.5 us, 64:
# +10.5, 32: +2).  Fewer parameters alone gained nothing -- the coalesced stores below were the
# fix -- and whether the parameter count matters with them was not measured: this rounding is
# kept as it ran, not because it was shown to help.
ENTRIES_STEP = 32


def entries_for(used: int, table: int) -> int:
    """How many parameters a writer for `used` entries of a `table`-entry table takes: `used`
    rounded up to ENTRIES_STEP, at most `table`."""
    return min(table, -(-max(used, 1) // ENTRIES_STEP) * ENTRIES_STEP)


class TableWriter:
    """dst[i] = entries[i] (int64) for i < n, 0 for n <= i < total; `entries` are pointer-typed
    parameters whose integer values are the table's (addresses, and sizes passed as 1-byte-
    aligned "pointers").  total: ENTRIES for the sm_90a group table, 80 for the sm_100a
    workspace's pointer rows; n: the entries a signature uses, rounded up (`entries_for`)."""

    def __init__(self, n: int = ENTRIES, total: int | None = None):
        self.n, self.total = n, n if total is None else total

    @cute.jit
    def __call__(self, dst: cute.Pointer, entries: tuple, stream: cuda.CUstream):
        self.kernel(dst, entries).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)

    @cute.kernel
    def kernel(self, dst: cute.Pointer, entries: tuple):
        lane, _, _ = cute.arch.thread_idx()
        table = cute.make_tensor(dst, cute.make_layout((self.total,)))
        # one coalesced store per 32 entries, each lane picking its entry by selects: a store per
        # entry (one lane each) cost ~0.2 us per store as a CUDA graph node on an H100 (exp. 130)
        for j in cutlass.range_constexpr((self.total + 31) // 32):
            v = cutlass.Int64(0)
            for lane_i in cutlass.range_constexpr(min(32, self.n - 32 * j) if 32 * j < self.n else 0):
                if lane == lane_i:
                    v = entries[32 * j + lane_i].toint()
            if 32 * j + lane < self.total:
                table[32 * j + lane] = v


def compile_args(n: int = ENTRIES, dst_addr: int = 1 << 20) -> tuple:
    """Arguments for `cute.compile(TableWriter(n), *args)` (fake addresses: CPU compile)."""
    from cutlass.cute.runtime import make_fake_stream

    return (entry_ptr(dst_addr, align=16), tuple(entry_ptr(i + 1) for i in range(n)), make_fake_stream())


def entry_ptr(value: int, align: int = 1):
    """One table entry as a pointer-typed parameter (any int64 value: align 1)."""
    from cutlass.cute.runtime import make_ptr

    return make_ptr(cutlass.Int64, value, cute.AddressSpace.gmem, assumed_align=align)


def entry_params(n: int = ENTRIES) -> tuple:
    """(n entry parameters, their values as one ctypes int64 array): each parameter's C
    storage (`_Pointer._desc`, which a packed launch points at) is a view into the array, so one
    slice assignment rewrites them all (~60 single `_desc.value` writes cost ~25 µs on the H100
    machine's host).  Relies on DSL 4.3.5's `_Pointer.__c_pointers__`, which keeps a `_desc` set
    before its first call (pinned; checked by tests/test_dispatch_cache.py and, launched, by
    tests/test_gpu_kernels.py::test_table_writer_kernel_alone)."""
    values = (ctypes.c_int64 * n)()
    params = tuple(entry_ptr(0) for _ in range(n))
    for i, p in enumerate(params):
        p._desc = ctypes.c_void_p.from_buffer(values, 8 * i)
        p._c_pointer = ctypes.addressof(p._desc)
        assert p.__c_pointers__() == [ctypes.addressof(values) + 8 * i]
    return params, values


@dataclass(frozen=True)
class Target:
    """Where a dispatcher template's writer writes, from a kernel module's `writer_target`."""

    owner: object  # the buffer written into (the template holds it)
    dst: int  # its address (16-byte aligned)
    n: int  # entries written per launch (the module's `table_entries`, zero-padded)
    arg_pairs: tuple  # ((argument index, address), ...): the kernel's arguments into `owner`
    after: object = None  # a launch to run after the writer, or None (sm_100a: descriptor setup)
    # a launch to run before the writer, or None (sm_100a: a workspace made inside a capture copies
    # its size rows again from their source, so no later capture's graph depends on that capture's)
    before: object = None


_COMPILED: dict = {}


def compiled(arch: str, runnable: bool, n: int = ENTRIES, total: int | None = None):
    """The compiled writer of n entries (and zeros up to `total`) for `arch` (once per process;
    compile-only where not runnable)."""
    key = (arch, runnable, n, total)
    if key not in _COMPILED:
        _COMPILED[key] = cute.compile(TableWriter(n, total), *compile_args(n),
                                      options="" if runnable else f"--gpu-arch {arch}")
    return _COMPILED[key]
