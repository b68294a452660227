"""Exp. 137 (device): the device plan's stream-K modes on the exp. 136 shapes (kernel time, direct launches)."""
import json, os, random, statistics, sys
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs, torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import poisoned_check
from nvfp4gemm import harness, scheduler
from nvfp4gemm.dispatch import PackedLaunch
MODES = ["none", "all", "tail", "tail2"]
NK = [(4096, 7168), (7168, 2048), (2048, 7168), (14336, 4096), (3072, 4096)]
random.seed(136)
timer = Timer(20)
rows = []
for i in range(int(os.environ.get("NSHAPES", "10"))):
    n, k = NK[i % len(NK)]
    g = random.choice([4, 8, 8, 16])
    shape = tuple((random.randint(1, 256), n, k) for _ in range(g))
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), 1111 + i, device="cuda", poison_padding=True)
    outs = [c for _, _, c in data[0]]
    cfg = configs.sm90_group_dynamic_pick(shape)
    mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
    runs = {}
    for mode in MODES:
        scheduler.DEVICE_SK_MODE = mode
        harness._CACHE.clear()
        ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
        fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        wrong = poisoned_check(lambda: ck.fn(*fargs), data, outs, "group")
        if wrong:
            print("WRONG", mode, wrong, flush=True)
            continue
        runs[mode] = (PackedLaunch(ck.fn, fargs), [])
    for _ in range(3):
        for mode, (fn, ts) in runs.items():
            ts.append(timer(fn))
    meds = {m: statistics.median(ts) for m, (_f, ts) in runs.items()}
    print(f"g{g} N{n} K{k} {cfg.short()}: " + "  ".join(f"{m} {v:.1f}" for m, v in meds.items()), flush=True)
    rows.append({"shape": shape, "cfg": cfg.short(), **meds})
for m in MODES[1:]:
    rs = [r[m] / r["none"] for r in rows if m in r and "none" in r]
    print(f"{m}/none geomean {statistics.geometric_mean(rs):.3f} min {min(rs):.3f} max {max(rs):.3f}")
if os.environ.get("OUT"):
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.environ["OUT"] + "/exp137.json", "w"), indent=1, default=str)
