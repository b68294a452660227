"""Exp. 158 (line loads: whole 128-byte lines of 4 rows per warp-wide cp.async; needs
exp158_line_loads.patch applied): the dual sweep of exp156.py on 9 shapes, the rule with and
without line loads, then MaskedGroupedGemm's skinny decode steps.  (As it ran, with the dual
loop inlined from exp156.py; merged afterwards.)"""
import json, os, sys
from dataclasses import replace
sys.path.insert(0, "benchmarks")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing as T
import configs
from exp156 import save, sweep

SHAPES = [(1, 4096, 7168), (16, 4096, 7168), (1, 14336, 4096), (16, 14336, 4096), (1, 28672, 8192),
          (16, 28672, 8192), (16, 7168, 2048), (8, 1024, 4096), (16, 12288, 3072)]
VARIANTS = [None, "lines", "lines ab2", "lines ab4"]


def lines_config(rule, v):
    return rule if v is None else replace(rule, line_loads=True, ab_stages=rule.ab_stages if v == "lines" else int(v[-1]))


out, timer = sweep(SHAPES, VARIANTS, lines_config)
# grouped: MaskedGroupedGemm's skinny decode steps, the rule against the rule with line loads
orig = configs.sm90_group_skinny
T.MOE_ROUNDS = 2
for (g, n, k), cap in [((128, 2048, 768), 16), ((64, 7168, 2048), 16), ((32, 4096, 7168), 16), ((128, 1536, 2048), 8)]:
    for rnd in range(2):
        for lines in ((False, True) if rnd == 0 else (True, False)):
            configs.sm90_group_skinny = lambda shape, lines=lines: replace(orig(shape), line_loads=lines)
            r = T.moe_masked_case((g, n, k), cap, timer, capacity=cap)
            r.update(lines=lines, round=rnd)
            out["rows"].append(r)
            print(json.dumps({"s": [g, n, k], "cap": cap, "lines": lines, "gpu": round(r["gpu_us"], 2),
                              "ok": r["correct"], "cfg": r["config"]}), flush=True)
configs.sm90_group_skinny = orig
save(out, "exp158.json")
