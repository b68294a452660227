"""Exp. 153: MaskedGroupedGemm at capacity 16 with more than 16 groups: one launch of the
skinny kernel's wide table against exp. 152's chunks of 16 side by side (same process,
alternating)."""
import json, os, sys, time
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs

out = {"device": torch.cuda.get_device_name(), "rows": []}
timer = T.Timer(30)
CASES = [(128, 1536, 2048), (128, 2048, 768), (32, 4096, 7168), (64, 7168, 2048), (256, 2048, 768)]
for rnd in range(2):
    for g, n, k in CASES:
        for wide in (256, 16):
            configs.WIDE_TABLE_GROUPS = wide
            t0 = time.time()
            r = T.moe_masked_case((g, n, k), 16, timer, capacity=16)
            r["wide"] = wide
            r["round"] = rnd
            print(json.dumps({k2: (round(v, 2) if isinstance(v, float) else v) for k2, v in r.items() if k2 != "config"}),
                  r["config"][:60], flush=True)
            out["rows"].append(r)
            torch.cuda.empty_cache()
configs.WIDE_TABLE_GROUPS = 256
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp153.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
