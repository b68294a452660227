"""Device, exp. 141: the kernel-time price of the auto switch -- custom_kernel on random grouped
shapes planned by the full rule (DYNAMIC_M off) against the device-scheduled form (on), same
inputs, one process; each checked (NaN-poisoned C), then 3 rounds x 20 timed calls (L2 flushed,
CUDA events around custom_kernel on a cached input), medians."""
import json, os, random, statistics, sys
os.environ["NVFP4_DYNAMIC_M"] = "0"
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs, torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import poisoned_check
from nvfp4gemm import dispatch

NK = [(4096, 7168), (7168, 2048), (2048, 7168), (14336, 4096), (3072, 4096), (4096, 2048)]
rnd = random.Random(int(os.environ.get("SEED", "1410")))
timer = Timer(20)
rows = []
for i in range(int(os.environ.get("NSHAPES", "12"))):
    n, k = NK[i % len(NK)]
    g = rnd.choice([4, 8, 8, 16])
    shape = tuple((rnd.randint(1, 256), n, k) for _ in range(g))
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, g, 4100 + i, device="cuda", poison_padding=True)
    outs = [c for _, _, c in data[0]]
    res = {}
    for dyn in (False, True):
        configs.DYNAMIC_M = dyn
        dispatch.clear_caches()
        cfg = configs.select_config("group", "sm_90a", shape)
        wrong = poisoned_check(lambda: dispatch.custom_kernel(data), data, outs, "group")
        if wrong:
            print("WRONG", dyn, cfg.short(), wrong, flush=True)
            continue
        res[dyn] = (cfg.short(), [])
    for _ in range(3):
        for dyn, (c, ts) in res.items():
            configs.DYNAMIC_M = dyn
            dispatch.clear_caches()
            dispatch.custom_kernel(data)
            ts.append(timer(lambda: dispatch.custom_kernel(data)))
    med = {d: statistics.median(ts) for d, (_c, ts) in res.items()}
    print(f"g{g} N{n} K{k} {ms}: full {res[False][0]} {med[False]:.1f}  device {res[True][0]} {med[True]:.1f}"
          f"  x{med[True] / med[False]:.3f}", flush=True)
    rows.append({"shape": shape, "full": [res[False][0], med[False]], "device": [res[True][0], med[True]]})
    del data, outs
    torch.cuda.empty_cache()
rs = [r["device"][1] / r["full"][1] for r in rows]
print(f"device / full: geomean {statistics.geometric_mean(rs):.3f}, min {min(rs):.3f}, max {max(rs):.3f} over {len(rs)}")
if os.environ.get("OUT"):
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, open(os.environ["OUT"] + "/exp141.json", "w"), indent=1)
