"""Exp. 154: warps per CTA (k_warps) and stages of the grouped skinny kernel at short K, through
MaskedGroupedGemm's wide table (capacity 16, counts 1-16); 2 rounds, variants alternating."""
import dataclasses, json, os, sys
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs

orig = configs.sm90_group_skinny
VARIANTS = [(2, 2), (1, 2), (1, 3), (1, 4), (2, 3)]
CASES = [(128, 2048, 768), (128, 1536, 2048), (256, 2048, 768), (128, 4096, 1024), (64, 7168, 2048), (32, 4096, 7168)]
out = {"device": torch.cuda.get_device_name(), "rows": []}
timer = T.Timer(30)
T.MOE_ROUNDS = 2
for rnd in range(2):
    for g, n, k in CASES:
        for kw, ab in (VARIANTS if rnd == 0 else VARIANTS[::-1]):
            configs.sm90_group_skinny = lambda shape, kw=kw, ab=ab: dataclasses.replace(orig(shape), k_warps=kw, ab_stages=ab)
            r = T.moe_masked_case((g, n, k), 16, timer, capacity=16)
            r.update(kw=kw, ab=ab, round=rnd)
            print(json.dumps({"s": r["structure"], "kw": kw, "ab": ab, "rd": rnd, "gpu": round(r["gpu_us"], 2),
                              "us": round(r["us"], 2), "ok": r["correct"], "cfg": r["config"]}), flush=True)
            out["rows"].append(r)
            torch.cuda.empty_cache()
configs.sm90_group_skinny = orig
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp154.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
