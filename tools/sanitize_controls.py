"""Positive controls for tools/sanitize_sweep.py: tiny CuTe DSL kernels, each with one planted bug
that one compute-sanitizer tool must report; and two planted faults for tools/first_gpu_run.py's
own check on a GPU (tests/planted_gpu_faults.py).

Why (exp. 184): a sweep that reports "0 errors" shows nothing unless the tool, run the way the
sweep runs it (the same kernel-name filter, the same environment), sees a bug of that kind in a
kernel of ours.  Each control is a CuTe DSL kernel, so its name starts `kernel_cutlass` like every
kernel of this project and passes the sweep's filter.

    python3 tools/sanitize_controls.py CONTROL      (run under compute-sanitizer by the sweep)

Controls, and the tool that must report each:
  oob_store      memcheck   one 4-byte store just past the end of a torch tensor of 1001 int32.
                            Inside a segment of torch's caching allocator that address belongs to
                            no tensor but to the segment, which memcheck treats as allocated: the
                            sweep sets PYTORCH_NO_CUDA_MEMORY_CACHING=1 for memcheck (exp. 184)
  smem_race      racecheck  warp 0 stores a shared word that warp 1 loads, with no barrier between
  uninit_read    initcheck  one load from a torch.empty tensor that nothing has written
  warp_sync_mask synccheck  bar.warp.sync with the member mask 0xffff run by all 32 lanes of warp
                            0: lanes 16-31 are not in the mask they pass ("Invalid arguments").
                            Two other barrier bugs went unreported by synccheck 2025.3 on an H100
                            (exp. 184): bar.sync reached by half of each warp's lanes, and
                            bar.warp.sync with a full mask reached by 16 lanes

Each kernel runs one CTA; none of these bugs crashes or hangs the process without the tool (the
store lands in the allocation's rounding, the race and the read only produce an undefined value,
and the warp barrier returned on an H100 without the tool).  Exit status 0 once the kernel has run.

Planted faults (FAULTS), the two ways a never-run kernel most often fails, which do break the run:
  illegal_address  one store through a pointer to an unmapped address (0x100): a sticky fault,
                   the process's CUDA context is lost
  mbarrier_hang    every thread waits on phase 0 of an mbarrier nothing arrives on, as a pipeline
                   whose producer never signals: the kernel never ends
"""

from __future__ import annotations

import os
import sys

CONTROLS = {"oob_store": "memcheck", "smem_race": "racecheck", "uninit_read": "initcheck",
            "warp_sync_mask": "synccheck"}
FAULTS = ("illegal_address", "mbarrier_hang")
N = 1001  # int32 elements of the control's tensor (not a multiple of any allocation granule)
UNMAPPED = 0x100  # illegal_address's store target (the null page: no allocation lives there)


def control_for(tool: str) -> str:
    """The control whose bug `tool` must report."""
    return next(c for c, t in CONTROLS.items() if t == tool)


def _kernel_class():
    import cutlass
    import cutlass.cute as cute
    from cutlass import Int32

    class PlantedBug:
        """One CTA of 64 threads (two warps) running the control `name` (module doc)."""

        def __init__(self, name: str):
            assert name in CONTROLS or name in FAULTS, name
            self.name = name

        @cute.jit
        def __call__(self, src: cute.Pointer, dst: cute.Pointer, n: Int32, stream):
            self.kernel(src, dst, n).launch(grid=(1, 1, 1), block=(64, 1, 1), stream=stream)

        @cute.kernel
        def kernel(self, src: cute.Pointer, dst: cute.Pointer, n: Int32):
            tidx, _, _ = cute.arch.thread_idx()
            # (n + 1,) int32: one element more than `dst` holds, so index n is past its end
            out = cute.make_tensor(dst, cute.make_layout((n + 1,)))
            inp = cute.make_tensor(src, cute.make_layout((n,)))
            if cutlass.const_expr(self.name == "oob_store"):
                if tidx == 0:
                    out[n] = Int32(7)
            if cutlass.const_expr(self.name == "uninit_read"):
                if tidx == 0:
                    out[0] = inp[0]
            if cutlass.const_expr(self.name == "smem_race"):
                smem = cutlass.utils.SmemAllocator()
                word = smem.allocate_tensor(cutlass.Int32, cute.make_layout((1,)), byte_alignment=16)
                if tidx == 0:
                    word[0] = Int32(5)
                if tidx == 32:
                    out[0] = word[0]
            if cutlass.const_expr(self.name == "warp_sync_mask"):
                if tidx < 32:
                    cute.arch.sync_warp(0x0000FFFF)
            if cutlass.const_expr(self.name == "illegal_address"):
                if tidx == 0:
                    out[0] = Int32(7)  # (dst is UNMAPPED)
            if cutlass.const_expr(self.name == "mbarrier_hang"):
                smem = cutlass.utils.SmemAllocator()
                bar = smem.allocate_tensor(cutlass.Int64, cute.make_layout((1,)), byte_alignment=8)
                if tidx == 0:
                    cute.arch.mbarrier_init(bar.iterator, 1)
                cute.arch.mbarrier_init_fence()
                cute.arch.sync_threads()
                cute.arch.mbarrier_wait(bar.iterator, 0)  # no thread arrives: phase 0 never completes
                if tidx == 0:
                    out[0] = Int32(1)

    return PlantedBug


# Compiled faults launched with sync=False, held until the process ends.  Dropping one unloads its CUDA
# module, and the unload waits for the module's running kernel: the planted hang then hung inside its
# own test, before pytest reported it, instead of in the guard's synchronize after (exp. 190, H200).
_OUTLIVING: list = []


def run(name: str, sync: bool = True) -> None:
    """Compile the control (or planted fault) for this GPU and launch it once on torch tensors; with
    `sync` False, return right after the launch (a planted fault that outlives its test)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import nvfp4gemm  # noqa: F401  (sets CUTE_DSL_ARCH before cutlass on CPU machines)
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    import torch
    from cutlass.cute.runtime import make_ptr

    src = torch.empty(N, dtype=torch.int32, device="cuda")  # never written (uninit_read)
    dst = torch.zeros(N, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()

    def ptr(addr):
        return make_ptr(cutlass.Int32, addr, cute.AddressSpace.gmem, assumed_align=16)

    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    args = (ptr(src.data_ptr()), ptr(UNMAPPED if name == "illegal_address" else dst.data_ptr()), cutlass.Int32(N),
            stream)
    fn = cute.compile(_kernel_class()(name), *args)
    fn(*args)
    if sync:
        torch.cuda.synchronize()
    else:
        _OUTLIVING.append(fn)
    print(f"sanitize_controls: {name} {'ran' if sync else 'launched'}")


def compile_only(name: str, dump_dir: str, arch: str = "sm_90a") -> str:
    """The control's PTX, compiled without a GPU into `dump_dir` (CI keeps each control compiling)."""
    import glob

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import nvfp4gemm  # noqa: F401
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    from nvfp4gemm.harness import read_ptx

    def ptr(addr):
        return make_ptr(cutlass.Int32, addr, cute.AddressSpace.gmem, assumed_align=16)

    os.makedirs(dump_dir, exist_ok=True)
    cute.compile(_kernel_class()(name), ptr(1 << 20), ptr(2 << 20), cutlass.Int32(N), make_fake_stream(),
                 options=f"--gpu-arch {arch} --keep-ptx --dump-dir {dump_dir}")
    return read_ptx(sorted(glob.glob(os.path.join(dump_dir, f"*.{arch}.ptx")))[-1])


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in (*CONTROLS, *FAULTS):
        raise SystemExit(f"usage: sanitize_controls.py {{{','.join((*CONTROLS, *FAULTS))}}}")
    run(sys.argv[1])
