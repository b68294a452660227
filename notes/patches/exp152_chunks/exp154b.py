"""Exp. 154b: k_warps 1 at few groups (the plain table) and at 8-row A tiles (capacity 8)."""
import dataclasses, json, os, sys
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs

orig = configs.sm90_group_skinny
CASES = [((8, 7168, 2048), 16), ((8, 4096, 1024), 16), ((16, 2048, 768), 16), ((8, 4096, 7168), 16),
         ((128, 2048, 768), 8), ((8, 7168, 2048), 8)]
out = {"device": torch.cuda.get_device_name(), "rows": []}
timer = T.Timer(30)
T.MOE_ROUNDS = 2
for rnd in range(2):
    for st, cap in CASES:
        rule = orig(((cap,) + st[1:],) * st[0])
        variants = [(rule.k_warps, rule.ab_stages), (1, 3), (1, 2)]
        for kw, ab in (variants if rnd == 0 else variants[::-1]):
            configs.sm90_group_skinny = lambda shape, kw=kw, ab=ab: dataclasses.replace(orig(shape), k_warps=kw, ab_stages=ab)
            r = T.moe_masked_case(st, cap, timer, capacity=cap)
            r.update(kw=kw, ab=ab, round=rnd)
            print(json.dumps({"s": r["structure"], "cap": cap, "kw": kw, "ab": ab, "rd": rnd, "gpu": round(r["gpu_us"], 2),
                              "ok": r["correct"], "cfg": r["config"]}), flush=True)
            out["rows"].append(r)
            torch.cuda.empty_cache()
configs.sm90_group_skinny = orig
with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp154b.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
