"""Exp. 158 (line loads: whole 128-byte lines of 4 rows per warp-wide cp.async): the dual skinny kernel's tile rows, warps and stages re-swept (exp. 42's sweep predates
the word decode, exp. 45, and the grouped findings of exps. 151, 154-155).  Each config compiled
once, timed per shape in alternating rounds (L2 flushed, median of 30), checked once per shape."""
import json, os, sys, tempfile, time
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import harness

SHAPES = [(1, 4096, 7168), (16, 4096, 7168), (1, 14336, 4096), (16, 14336, 4096), (1, 28672, 8192),
          (16, 28672, 8192), (16, 7168, 2048), (8, 1024, 4096), (16, 12288, 3072)]
from dataclasses import replace
VARIANTS = [None, "lines", "lines ab2", "lines ab4"]
out = {"device": torch.cuda.get_device_name(), "rows": []}
timer = T.Timer(30)
t0 = time.time()
for m, n, k in SHAPES:
    shape = (m, n, k, 1)
    rule = configs.sm90_dual_skinny(shape)
    data = R.generate_input(*shape, 1560, device="cuda")
    cfgs = []
    for v in VARIANTS:
        c = rule if v is None else replace(rule, line_loads=True, ab_stages=rule.ab_stages if v == "lines"
                                           else int(v[-1]))
        if configs.check_config(c) or not configs.fits(c, shape):
            continue
        ck = harness.compile_kernel("dual", "sm_90a", c, shape, dump_dir=tempfile.mkdtemp())
        mod, _ = harness.kernel_module("dual", "sm_90a", c)
        args = mod.runtime_args(data, c, torch.cuda.current_stream())
        data[-1].fill_(float("nan"))
        ck.fn(*args)
        torch.cuda.synchronize()
        ok, msg = R.check_implementation(data, data[-1])
        cfgs.append((v, c, ck, args, ok, ck.registers))
    times = {str(v): [] for v, *_ in cfgs}
    for rnd in range(3):
        for v, c, ck, args, ok, regs in (cfgs if rnd % 2 == 0 else cfgs[::-1]):
            times[str(v)].append(timer(lambda: ck.fn(*args)))
    base = min(times["None"])
    for v, c, ck, args, ok, regs in cfgs:
        t = min(times[str(v)])
        row = {"shape": list(shape), "variant": v, "config": c.short(), "regs": regs, "ok": ok,
               "us": times[str(v)], "ratio": t / base}
        out["rows"].append(row)
        print(json.dumps({"s": shape, "cfg": c.short(), "regs": regs, "ok": ok, "us": round(t, 2),
                          "ratio": round(t / base, 3), "t": round(time.time() - t0)}), flush=True)
    torch.cuda.empty_cache()
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp158.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)

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
with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp158.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
