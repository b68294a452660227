"""Exp. 175e: the SM clock under Nsight Compute for the dual 256x4096x7168 call on each draw's
values (same buffers) and for the fp16-rate probe (torch 8192^3 fp16 matmul on randn data, as
benchmarks/timing.measure_ceilings).  python3 prof175e.py"""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
import configs  # noqa: E402
from benchmarks.timing import clone_input  # noqa: E402
from exp175 import make, set_values  # noqa: E402
from submission import custom_kernel  # noqa: E402

shape = configs.DUAL_BENCHMARKS[0]
x = make("dual", shape, False)
lb, wide = clone_input(x), clone_input(make("dual", shape, True))
for vals in (lb, wide, lb, wide):
    set_values(x, vals)
    custom_kernel(x)
a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
for _ in range(2):
    a @ b
torch.cuda.synchronize()
