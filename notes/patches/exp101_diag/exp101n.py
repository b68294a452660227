"""Exp. 101: one grouped mixed case for Nsight Compute (NVFP4_EXP101 variant switches apply)."""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch
shape = {"LB0": configs.GROUP_BENCHMARKS[0], "G1": ((1408, 3072, 7168),)}[sys.argv[1]]
cfg = configs.sm90_group_mixed()
ms, ns, ks = (list(x) for x in zip(*shape))
data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda")
mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
fn = PackedLaunch(ck.fn, mod.runtime_args(data, cfg, torch.cuda.current_stream()))
for _ in range(3):
    fn()
torch.cuda.synchronize()
print("done", os.environ.get("NVFP4_EXP101"), sys.argv[1])
