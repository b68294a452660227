"""Device-only: run one case a few times so that Nsight Compute can profile a launch, e.g.
`ncu --clock-control none -k regex:Sm90Dual --launch-skip 1 --launch-count 1 --section
WarpStateStats python3 benchmarks/hopper_ncu_one.py dual` (or `group`).  Default cases: dual
512x4096x7168, grouped g8 N4096 K7168 (leaderboard M); or name one as bench.py's --cases
does: `dual 1x28672x8192`, `group 1,1,1,1,1,1,1,1/4096/7168`."""
import os, sys
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa: F401
import torch
import reference as R
from benchmarks.bench import parse_shapes
from nvfp4gemm.dispatch import custom_kernel
prob = sys.argv[1]
text = sys.argv[2] if len(sys.argv) > 2 else (
    "512x4096x7168" if prob == "dual" else "80,176,128,72,64,248,96,160/4096/7168")
shape = parse_shapes(prob, text)[0]
if prob == "dual":
    data = R.generate_input(*shape, 3, device="cuda")
else:
    ms, ns, ks = zip(*shape)
    data = R.generate_input(list(ms), list(ns), list(ks), len(ms), 3, device="cuda")
for _ in range(3):
    custom_kernel(data)
torch.cuda.synchronize()
print("done", prob, shape)
