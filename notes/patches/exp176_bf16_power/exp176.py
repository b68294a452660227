"""Exp. 176: does the tensor-core clock (power) limit depend on the operand format for the same
values?  cuBLAS 8192^3 matmuls on decoded-NVFP4 values held as fp16 and as bf16 (both exact),
leaderboard-like (e2m1 codes <= 1.5, scales {1, 2}) and wide-like (all 16 codes, e4m3 scales
2^-3 ... 2^3 with every mantissa), against randn fp16 / bf16 and all-zero operands; back-to-back
calls, alternating rounds; the median us per call and TFLOP/s.  If bf16 ran faster on the same
values, decoding to bf16 would be a lever for our power-limited kernels (exp. 175).

    python3 notes/patches/exp176_bf16_power/exp176.py OUT.json
"""

import json
import statistics
import sys

import torch

N, CALLS, ROUNDS = 8192, 20, 5
E2M1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6], dtype=torch.float32)


def nvfp4_values(g, wide):
    """(N, N) fp32 of e2m1 x e4m3-scale products, one scale per 16 columns."""
    mag = torch.randint(0, 8 if wide else 4, (N, N), generator=g)
    sign = torch.randint(0, 2, (N, N), generator=g) * 2 - 1
    v = E2M1[mag] * sign
    if wide:
        e = torch.randint(-3, 3, (N, N // 16), generator=g).float()
        m = 1 + torch.randint(0, 8, (N, N // 16), generator=g).float() / 8
        s = torch.exp2(e) * m
    else:
        s = torch.randint(1, 3, (N, N // 16), generator=g).float()
    return (v.view(N, N // 16, 16) * s[:, :, None]).view(N, N)


def main(out):
    g = torch.Generator().manual_seed(176)
    vals = {"randn": (torch.randn(N, N, generator=g), torch.randn(N, N, generator=g)),
            "nvfp4_lb": (nvfp4_values(g, False), nvfp4_values(g, False)),
            "nvfp4_wide": (nvfp4_values(g, True), nvfp4_values(g, True)),
            "zeros": (torch.zeros(N, N), torch.zeros(N, N))}
    ops = {}
    for k, (a, b) in vals.items():
        for dt in (torch.float16, torch.bfloat16):
            x, y = a.to(dt), b.to(dt)
            if k.startswith("nvfp4"):  # exact in both formats
                assert torch.equal(x.float(), a) and torch.equal(y.float(), b)
            ops[f"{k}_{str(dt)[6:]}"] = (x.cuda(), y.cuda())
    t = {k: [] for k in ops}
    for _ in range(ROUNDS):
        for k, (x, y) in ops.items():
            for _ in range(3):
                x @ y.T
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(CALLS):
                x @ y.T
            e.record()
            torch.cuda.synchronize()
            t[k].append(s.elapsed_time(e) * 1e3 / CALLS)
    med = {k: statistics.median(v) for k, v in t.items()}
    res = {"device": torch.cuda.get_device_name(0), "us": med, "rounds": t,
           "tflops": {k: 2 * N**3 / (v * 1e-6) / 1e12 for k, v in med.items()},
           "bf16_over_fp16": {k: med[f"{k}_bfloat16"] / med[f"{k}_float16"] for k in vals}}
    print(json.dumps({k: res[k] for k in ("device", "tflops", "bf16_over_fp16")}, indent=1))
    json.dump(res, open(out, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
