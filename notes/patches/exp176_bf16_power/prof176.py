"""Exp. 176b: exp. 176's operand sets, each matmul run twice, for Nsight Compute
(`--clock-control none`): the SM clock and cycles per kernel, free of the previous op's power
history (ncu serializes kernels).  bash -c 'ncu ... python3 prof176.py'"""
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import exp176  # noqa: E402

g = torch.Generator().manual_seed(176)
N = exp176.N
vals = {"randn": (torch.randn(N, N, generator=g), torch.randn(N, N, generator=g)),
        "nvfp4_lb": (exp176.nvfp4_values(g, False), exp176.nvfp4_values(g, False)),
        "nvfp4_wide": (exp176.nvfp4_values(g, True), exp176.nvfp4_values(g, True)),
        "zeros": (torch.zeros(N, N), torch.zeros(N, N))}
for k, (a, b) in vals.items():
    for dt in (torch.float16, torch.bfloat16):
        x, y = a.to(dt).cuda(), b.to(dt).cuda()
        print(f"OP {k} {dt}", flush=True)
        for _ in range(2):
            x @ y.T
        torch.cuda.synchronize()
