"""Exp. 184 probe: does compute-sanitizer initcheck count `tensormap.cp_fenceproxy` (shared ->
global, 128 bytes, the sm_100a grouped setup kernel's descriptor publish) as a *read* of its global
destination?  One CTA of 32 threads fills 128 bytes (16 int64) of shared memory, then copies them with
cp_fence_tma_desc_release into a global buffer nothing has written (torch.empty; run with
PYTORCH_NO_CUDA_MEMORY_CACHING=1 so the buffer is a fresh allocation).  Under initcheck, reports
"Uninitialized __global__ memory read" at the destination mean the tool models it as a read.

    PYTORCH_NO_CUDA_MEMORY_CACHING=1 compute-sanitizer --tool initcheck python3 cp_fenceproxy_probe.py
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))

import nvfp4gemm  # noqa: F401,E402
import cuda.bindings.driver as cuda  # noqa: E402
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
import cutlass.utils as utils  # noqa: E402
import torch  # noqa: E402
from cutlass.cute.nvgpu import cpasync  # noqa: E402
from cutlass.cute.runtime import make_ptr  # noqa: E402

from nvfp4gemm.sm100.common import tensormap_ptr  # noqa: E402


class Probe:
    @cute.jit
    def __call__(self, dst: cute.Pointer, stream):
        self.kernel(dst).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)

    @cute.kernel
    def kernel(self, dst: cute.Pointer):
        tidx, _, _ = cute.arch.thread_idx()
        smem = utils.SmemAllocator()
        buf = smem.allocate_tensor(cutlass.Int64, cute.make_layout((16,)), byte_alignment=128)
        if tidx < 16:
            buf[tidx] = cutlass.Int64(tidx)
        cute.arch.sync_warp()
        cute.arch.fence_proxy(cute.arch.ProxyKind.async_shared, space=cute.arch.SharedSpace.shared_cta)
        gdesc = cute.make_tensor(dst, cute.make_layout((16,)))
        cpasync.cp_fence_tma_desc_release(tensormap_ptr(gdesc.iterator), buf.iterator)


out = torch.empty(16, dtype=torch.int64, device="cuda")
ptr = make_ptr(cutlass.Int64, out.data_ptr(), cute.AddressSpace.gmem, assumed_align=128)
stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
fn = cute.compile(Probe(), ptr, stream)
fn(ptr, stream)
torch.cuda.synchronize()
print("copied:", out.tolist() == list(range(16)))
