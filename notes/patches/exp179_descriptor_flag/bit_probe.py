"""Which host-encoded descriptor bytes change with a tensor's sizes (exp. 179).  On a GPU of sm_90
or later, from the repository root: python3 notes/patches/exp179_descriptor_flag/bit_probe.py
(prints, per config and size set, byte 10 and 11 of each Desc and the bytes that differ from
the 128 x 256 x 256 encoding; its H200 output: docs/exp179_descriptor_flag_probe_h200.txt)."""
import os, sys
sys.path.insert(0, os.getcwd()); sys.path.insert(0, "tests")
import torch, cutlass, cutlass.cute as cute
from cutlass.cute.runtime import make_ptr
import sm100_descriptor_check as S
from nvfp4gemm.sm100 import grouped_gemm as gg
import test_sm100_group_compile as G
arch = S.target_arch()
buf = torch.zeros(1 << 26, dtype=torch.uint8, device="cuda")
base = (buf.data_ptr() + 4095) // 4096 * 4096
import cuda.bindings.driver as cuda
st = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
out = torch.empty(gg.NUM_DESC * 128, dtype=torch.uint8, device="cuda")
def enc(cfg, mm, nn, k, off=0):
    f = S.compile_dump(cfg, arch)
    out.fill_(0xA5)
    f(make_ptr(cutlass.Int64, out.data_ptr(), cute.AddressSpace.gmem, assumed_align=128),
      *(cutlass.Int64(base + off + i * (1 << 23)) for i in range(gg.NUM_DESC)),
      cutlass.Int32(mm), cutlass.Int32(nn), cutlass.Int32(k), st)
    torch.cuda.synchronize()
    return out.view(gg.NUM_DESC, 128).cpu()
for ci, (cfg, _s) in enumerate(G.CASES):
    print("==", cfg.short(), "mma tile", cfg.mma_tile_mn, "swap", cfg.swap_ab)
    ref = enc(cfg, 128, 256, 256)
    for mm, nn, k in [(1, 256, 256), (64, 256, 256), (127, 256, 256), (128, 256, 256), (129, 256, 256), (192, 256, 256),
                      (255, 256, 256), (256, 256, 256), (257, 256, 256), (512, 256, 256), (1024, 256, 256), (4096, 256, 256),
                      (128, 64, 256), (128, 128, 256), (128, 129*0+192, 256), (128, 512, 256), (128, 1024, 256), (128, 7168, 256),
                      (128, 256, 512), (128, 256, 1024), (128, 256, 2048), (128, 256, 7168), (40, 7168, 2048), (168, 7168, 2048)]:
        if cfg.swap_ab and mm % 64: continue
        e = enc(cfg, mm, nn, k)
        row = []
        for d in gg.Desc:
            diff = (e[d] != ref[d]).nonzero().flatten().tolist()
            row.append(f"{d.name}:b10={int(e[d][10]):3d} b11={int(e[d][11]):3d} diff={diff}")
        print(f"  mm={mm:5d} nn={nn:5d} k={k:5d} | " + " | ".join(row))
    if ci == 0:
        print("  ref bytes A:", ref[0].tolist())
