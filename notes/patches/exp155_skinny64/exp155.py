"""Exps. 155 / 155b (`python3 exp155.py 155|155b`): 64 B rows per skinny CTA (four m16 row
groups per warp) against the rule's 32, at short and long K, then at the rule's boundaries,
through MaskedGroupedGemm's wide table; 2 rounds, variants alternating.  The two runs were
copies of this script differing only in SETS' lists and the output name (merged afterwards)."""
import dataclasses, json, os, sys, time
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs

orig = configs.sm90_group_skinny
# (variants: (B rows per CTA, k_warps, ab_stages), None = the rule; cases: ((G, N, K), capacity))
SETS = {
    "155": ([None, (64, 1, 2), (64, 1, 3), (64, 2, 2)],
            [((128, 2048, 768), 16), ((128, 2048, 768), 8), ((256, 2048, 768), 16), ((128, 4096, 1024), 16),
             ((128, 1536, 2048), 16), ((64, 7168, 2048), 16), ((32, 4096, 7168), 16), ((8, 4096, 1024), 16)]),
    "155b": ([None, (64, 1, 2), (64, 2, 2)],
             [((4, 2048, 2048), 16), ((8, 2048, 2048), 16), ((8, 7168, 2048), 16), ((16, 2048, 768), 16),
              ((32, 4096, 4096), 16), ((128, 1536, 2048), 8), ((8, 4096, 7168), 16), ((2, 2048, 768), 16)]),
}
WHICH = sys.argv[1] if len(sys.argv) > 1 else "155"
VARIANTS, CASES = SETS[WHICH]
out = {"device": torch.cuda.get_device_name(), "rows": []}
timer = T.Timer(30)
T.MOE_ROUNDS = 2
t0 = time.time()
for rnd in range(2):
    for (g, n, k), cap in CASES:
        for v in (VARIANTS if rnd == 0 else VARIANTS[::-1]):
            def pick(shape, v=v):
                c = orig(shape)
                if v is None:
                    return c
                return dataclasses.replace(c, mma_tile_mn=(v[0], c.mma_tile_mn[1]), k_warps=v[1], ab_stages=v[2])
            configs.sm90_group_skinny = pick
            r = T.moe_masked_case((g, n, k), cap, timer, capacity=cap)
            r.update(variant=v, round=rnd)
            print(json.dumps({"s": r["structure"], "cap": cap, "v": v, "rd": rnd, "gpu": round(r["gpu_us"], 2),
                              "us": round(r["us"], 2), "ok": r["correct"], "cfg": r["config"],
                              "t": round(time.time() - t0)}), flush=True)
            out["rows"].append(r)
            torch.cuda.empty_cache()
configs.sm90_group_skinny = orig
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), f"exp{WHICH}.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
