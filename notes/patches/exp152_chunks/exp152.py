"""Exp. 152: grouped inputs of more than 16 groups, run in chunks of <= 16.
A: custom_kernel, uniform M_g: serial chunks vs chunks on forked streams, against the same
   structure at G=16 (one launch) per group, and against the floor.
B: MaskedGroupedGemm: capacity 16 (skinny) and 256 (mixed), serial vs side by side."""
import json, statistics, sys, time
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import reference as R
from nvfp4gemm import dispatch
from nvfp4gemm import masked as MK

which = sys.argv[1] if len(sys.argv) > 1 else "AB"
out = {"device": torch.cuda.get_device_name(), "A": [], "B": []}
timer = T.Timer(30)
ceil = T.measure_ceilings(timer)
out["ceil"] = ceil
print(ceil, flush=True)

A_CASES = [  # (g, m, n, k)
    (16, 32, 4096, 7168), (32, 32, 4096, 7168), (48, 32, 4096, 7168),
    (16, 64, 1536, 2048), (64, 64, 1536, 2048), (128, 64, 1536, 2048),
    (16, 64, 2048, 768), (128, 64, 2048, 768),
    (16, 256, 2048, 2048), (40, 256, 2048, 2048),
]
if "A" in which:
    for g, m, n, k in A_CASES:
        shape = tuple((m, n, k) for _ in range(g))
        data = R.generate_input([m] * g, [n] * g, [k] * g, g, 152 + g, device="cuda")
        flops, byts = T.flops_bytes("group", shape)
        floor = max(flops / (ceil["fp16_tflops"] * 1e12), byts / (ceil["copy_tbps"] * 1e12)) * 1e6
        row = {"g": g, "m": m, "n": n, "k": k, "floor_us": floor}
        for mode in (False, True):
            dispatch.CHUNK_STREAMS = mode
            for c in data[0]:
                c[2].fill_(float("nan"))
            o = dispatch.custom_kernel(data)
            torch.cuda.synchronize()
            ok, msg = R.check_implementation(data, o)
            row[f"ok_{int(mode)}"] = bool(ok) and not any(torch.isnan(c).any() for c in o)
        ts = {0: [], 1: []}
        for r in range(3):
            for mode in (False, True):
                dispatch.CHUNK_STREAMS = mode
                ts[int(mode)].append(timer(lambda: dispatch.custom_kernel(data)))
        dispatch.CHUNK_STREAMS = False
        row["serial_us"] = statistics.median(ts[0])
        row["streams_us"] = statistics.median(ts[1])
        row["rounds"] = ts
        print(json.dumps({k2: (round(v, 2) if isinstance(v, float) else v) for k2, v in row.items() if k2 != "rounds"}), flush=True)
        out["A"].append(row)
        del data
        torch.cuda.empty_cache()

B_CASES = [  # (g, n, k, capacity, max_m)
    (16, 1536, 2048, 16, 16), (128, 1536, 2048, 16, 16),
    (16, 2048, 768, 16, 16), (128, 2048, 768, 16, 16),
    (16, 4096, 7168, 16, 16), (32, 4096, 7168, 16, 16),
    (16, 1536, 2048, 256, 256), (64, 1536, 2048, 256, 256),
    (16, 4096, 7168, 256, 256), (32, 4096, 7168, 256, 256),
]
if "B" in which:
    for g, n, k, cap, mx in B_CASES:
        for mode in ((False, True) if g > 16 else (False,)):
            MK.CHUNK_STREAMS = mode
            t0 = time.time()
            r = T.moe_masked_case((g, n, k), mx, timer, capacity=cap)
            r["streams"] = mode
            r["wall_s"] = time.time() - t0
            print(json.dumps({k2: (round(v, 2) if isinstance(v, float) else v) for k2, v in r.items()}), flush=True)
            out["B"].append(r)
            torch.cuda.empty_cache()
    MK.CHUNK_STREAMS = False
import os
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), f"exp152_{which}.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
