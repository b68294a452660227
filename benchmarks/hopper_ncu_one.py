"""Device-only: run one benchmark case a few times so that Nsight Compute can profile a
launch, e.g. `ncu --clock-control none -k regex:Sm90Dual --launch-skip 1 --launch-count 1
--section WarpStateStats python3 benchmarks/hopper_ncu_one.py dual` (or `group`)."""
import os, sys
sys.path.insert(0, os.getcwd())
import nvfp4gemm
import torch
import reference as R
from nvfp4gemm.dispatch import custom_kernel
prob = sys.argv[1]
if prob == "dual":
    data = R.generate_input(512, 4096, 7168, 1, 3, device="cuda")
else:
    data = R.generate_input([80, 176, 128, 72, 64, 248, 96, 160], [4096] * 8, [7168] * 8, 8, 3, device="cuda")
for _ in range(3):
    custom_kernel(data)
torch.cuda.synchronize()
print("done")
