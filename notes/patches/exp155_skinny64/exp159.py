"""Exp. 159 (the dual skinny rule at 512-1100 CTAs, where 4-warp CTAs need a second wave): the dual skinny kernel's tile rows, warps and stages re-swept (exp. 42's sweep predates
the word decode, exp. 45, and the grouped findings of exps. 151, 154-155).  Each config compiled
once, timed per shape in alternating rounds (L2 flushed, median of 30), checked once per shape."""
import json, os, sys, tempfile, time
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import harness

SHAPES = [(16, n, k) for n, k in ((10240, 4096), (16384, 2048), (11008, 4096), (8448, 7168), (9216, 7168), (13824, 5120), (8192, 4096), (16896, 6144), (12288, 8192), (14336, 4096))]
VARIANTS = [None, (16, 2, 2), (16, 2, 3), (16, 4, 2)]
out = {"device": torch.cuda.get_device_name(), "rows": []}
timer = T.Timer(30)
t0 = time.time()
for m, n, k in SHAPES:
    shape = (m, n, k, 1)
    rule = configs.sm90_dual_skinny(shape)
    data = R.generate_input(*shape, 1560, device="cuda")
    cfgs = []
    for v in VARIANTS:
        c = rule if v is None else configs.KernelConfig("dual", "sm_90a", (v[0], rule.mma_tile_mn[1]), skinny=True,
                                                        k_warps=v[1], ab_stages=v[2])
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
with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp159.json"), "w") as f:
    json.dump(out, f, indent=1, default=str)
