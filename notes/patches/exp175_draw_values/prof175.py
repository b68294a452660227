"""Exp. 175d: one case's custom_kernel calls holding the leaderboard or the wide draw's values in
the same buffers, for Nsight Compute (--clock-control none): does the wide draw take more SM
cycles, or the same cycles at a lower clock?  python3 prof175.py {lb|wide} CASE_INDEX CALLS"""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
import configs  # noqa: E402
from benchmarks.timing import clone_input  # noqa: E402
from exp175 import make, set_values  # noqa: E402
from submission import custom_kernel  # noqa: E402

values, case, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
shape = configs.GROUP_BENCHMARKS[case]
x = make("group", shape, False)
if values == "wide":
    set_values(x, clone_input(make("group", shape, True)))
for _ in range(calls):
    custom_kernel(x)
torch.cuda.synchronize()
