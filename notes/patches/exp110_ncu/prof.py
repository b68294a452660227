"""Exp. 110: one launch of a grouped mixed-input form, for Nsight Compute (the main kernel is
the launch named `kernel`).  python3 prof.py FORM M  (FORM: narrow | wide | n192 | m128)."""
import os, sys
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from nvfp4gemm import harness

form, m = sys.argv[1], int(sys.argv[2])
tile = {"narrow": (256, 128), "wide": (128, 256), "n192": (128, 192), "m128": (128, 128)}[form]
cfg = configs.sm90_group_mixed(tile=tile)
shape = tuple([(m, 4096, 7168)] * 8)
ms, ns, ks = (list(x) for x in zip(*shape))
data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda")
mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
for _ in range(3):
    ck.fn(*fargs)
torch.cuda.synchronize()
