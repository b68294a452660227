import sys, os
sys.path.insert(0, "notes/patches/exp171_skinny_loads")
import torch
import nvfp4gemm  # noqa: F401
import cuda.bindings.driver as cuda
import cutlass, cutlass.cute as cute
from cutlass import Int32
from cutlass.cute.runtime import make_ptr
import loadbench as LB
rows, rb = 1024, 4096
b = torch.randint(0, 255, (rows, rb), dtype=torch.uint8, device="cuda")
o = torch.zeros(rows * 4, dtype=torch.int32, device="cuda")
stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
bp = make_ptr(cutlass.Uint8, b.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
op = make_ptr(cutlass.Int32, o.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
for S in (2, 3):
    try:
        f = cute.compile(LB.LoadBench(4, S, 4), bp, op, Int32(rows), Int32(rb), stream)
        f(bp, op, Int32(rows), Int32(rb), stream)
        torch.cuda.synchronize()
        print("S", S, "ok", o[:4].tolist())
    except Exception as e:
        print("S", S, "ERR", str(e)[:200])
