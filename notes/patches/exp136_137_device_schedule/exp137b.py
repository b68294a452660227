"""Exp. 137 check (device): the device plan's rule on shapes not used to fit it: old host-planned
DYNAMIC_M pick vs device schedule with stream-K (the rule) vs whole tiles only."""
import json, os, random, statistics, sys
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs, torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import poisoned_check
from nvfp4gemm import harness, scheduler
from nvfp4gemm.dispatch import PackedLaunch

def old_pick(shape):
    keep = configs.sm90_group_dynamic_pick
    configs.sm90_group_dynamic_pick = lambda s: None
    try:
        return configs.default_config("group", "sm_90a", shape, dynamic_m=True)
    finally:
        configs.sm90_group_dynamic_pick = keep

NK = [(4096, 7168), (7168, 2048), (2048, 7168), (14336, 4096), (3072, 4096), (4096, 2048)]
random.seed(int(os.environ.get("SEED", "1370")))
timer = Timer(20)
rows = []
for i in range(int(os.environ.get("NSHAPES", "10"))):
    n, k = NK[i % len(NK)]
    g = random.choice([2, 4, 8, 8, 16])
    hi = random.choice([64, 256, 512])
    shape = tuple((random.randint(1, hi), n, k) for _ in range(g))
    if max(m for m, _n, _k in shape) <= 16:
        continue
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), 2222 + i, device="cuda", poison_padding=True)
    outs = [c for _, _, c in data[0]]
    dev = configs.sm90_group_dynamic_pick(shape)
    runs = {}
    for label, cfg, sk in (("old", old_pick(shape), True), ("rule", dev, True), ("whole", dev, False)):
        scheduler.DEVICE_STREAM_K = sk
        harness._CACHE.clear()
        mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
        ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
        fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        wrong = poisoned_check(lambda: ck.fn(*fargs), data, outs, "group")
        if wrong:
            print("WRONG", label, cfg.short(), wrong, flush=True)
            continue
        runs[label] = (cfg, PackedLaunch(ck.fn, fargs), [])
    scheduler.DEVICE_STREAM_K = True
    for _ in range(3):
        for label, (_c, fn, ts) in runs.items():
            ts.append(timer(fn))
    meds = {l: statistics.median(ts) for l, (_c, _f, ts) in runs.items()}
    print(f"g{g} N{n} K{k} M<={hi} {ms}: " + "  ".join(f"{l} {runs[l][0].short()} {v:.1f}" for l, v in meds.items())
          + (f"  rule/old x{meds['rule'] / meds['old']:.3f} rule/whole x{meds['rule'] / meds['whole']:.3f}" if len(meds) == 3 else ""), flush=True)
    rows.append({"shape": shape, **{l: [runs[l][0].short(), v] for l, v in meds.items()}})
for a, b in (("rule", "old"), ("rule", "whole"), ("whole", "old")):
    rs = [r[a][1] / r[b][1] for r in rows if a in r and b in r]
    print(f"{a}/{b}: geomean {statistics.geometric_mean(rs):.3f} min {min(rs):.3f} max {max(rs):.3f} over {len(rs)}")
if os.environ.get("OUT"):
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.environ["OUT"] + "/exp137b.json", "w"), indent=1, default=str)
