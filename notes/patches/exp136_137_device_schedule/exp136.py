"""Exp. 136 (device): the device-scheduled grouped form against the host-planned DYNAMIC_M picks.
A: kernel time on random M_g shapes (direct launches, L2 flushed, poisoned check first).
B: host time of a custom_kernel call with new M_g (NVFP4_DYNAMIC_M), old pick vs device schedule.
C: 30 new-M_g inputs back to back (no sync between): wall time per call, old vs new."""
import json, os, random, statistics, sys, time
os.environ["NVFP4_DYNAMIC_M"] = "1"
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import poisoned_check
from nvfp4gemm import harness, dispatch
from nvfp4gemm.dispatch import PackedLaunch, custom_kernel

REAL_DYN = configs.sm90_group_dynamic_pick
def old_pick(shape):
    return configs.default_config.__wrapped__(shape) if False else _old(shape)
def _old(shape):
    keep = configs.sm90_group_dynamic_pick
    configs.sm90_group_dynamic_pick = lambda s: None
    try:
        return configs.default_config("group", "sm_90a", shape, dynamic_m=True)
    finally:
        configs.sm90_group_dynamic_pick = keep

res = {"device": torch.cuda.get_device_name()}
part = sys.argv[1] if len(sys.argv) > 1 else "ABC"
NK = [(4096, 7168), (7168, 2048), (2048, 7168), (14336, 4096), (3072, 4096)]
if "A" in part:
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
        dev = REAL_DYN(shape)
        cands = {"old": _old(shape), "dev": dev,
                 "dev256": configs.sm90_group_mixed_dynamic((256, 64 if max(ms) <= 64 else 128)) if n % 256 == 0 else None,
                 "dev128": configs.sm90_group_mixed_dynamic((128, 128))}
        runs = {}
        for label, cfg in cands.items():
            if cfg is None or (label != "dev" and cfg == dev):
                continue
            mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
            ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
            fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
            wrong = poisoned_check(lambda: ck.fn(*fargs), data, outs, "group")
            if wrong:
                print("WRONG", label, cfg.short(), wrong, flush=True)
                continue
            runs[label] = (cfg, PackedLaunch(ck.fn, fargs), [])
        for _ in range(3):
            for label, (_c, fn, ts) in runs.items():
                ts.append(timer(fn))
        meds = {l: statistics.median(ts) for l, (_c, _f, ts) in runs.items()}
        line = f"g{g} N{n} K{k} M {ms}: " + "  ".join(f"{l} {runs[l][0].short()} {v:.1f}" for l, v in meds.items())
        if "dev" in meds and "old" in meds:
            line += f"  dev/old x{meds['dev'] / meds['old']:.3f}"
        print(line, flush=True)
        rows.append({"shape": shape, **{l: [runs[l][0].short(), v] for l, v in meds.items()}})
    rs = [r["dev"][1] / r["old"][1] for r in rows if "dev" in r and "old" in r]
    if rs:
        print("A: dev/old geomean %.3f min %.3f max %.3f over %d shapes" % (statistics.geometric_mean(rs), min(rs), max(rs), len(rs)), flush=True)
    res["A"] = rows

def new_inputs(n, k, g, count, seed):
    rnd = random.Random(seed)
    return [R.generate_input([rnd.randint(1, 256) for _ in range(g)], [n] * g, [k] * g, g, seed + j, device="cuda")
            for j in range(count)]

if "B" in part or "C" in part:
    res["B"], res["C"] = {}, {}
    for n, k, g in [(4096, 7168, 8), (7168, 2048, 8), (2048, 7168, 8), (14336, 4096, 16)]:
        for mode in ("old", "dev"):
            configs.sm90_group_dynamic_pick = REAL_DYN if mode == "dev" else (lambda s: None)
            dispatch.clear_caches()
            dispatch._PLANS.clear()  # (plans are cached per shape: the other mode's picks)
            warm = new_inputs(n, k, g, 12, 7000 + n + k)
            for d in warm:
                custom_kernel(d)
            torch.cuda.synchronize()
            ins = new_inputs(n, k, g, 30, 9000 + n + k)
            torch.cuda.synchronize()
            host, comp = [], 0
            for d in ins:
                torch.cuda.synchronize()
                before = len(harness._CACHE)
                t = time.perf_counter()
                custom_kernel(d)
                dt = (time.perf_counter() - t) * 1e6
                torch.cuda.synchronize()
                if len(harness._CACHE) != before:
                    comp += 1
                else:
                    host.append(dt)
            host.sort()
            med = host[len(host) // 2] if host else float("nan")
            # C: the same 30 inputs' M_g, new tensors, back to back
            ins2 = new_inputs(n, k, g, 30, 9000 + n + k)
            torch.cuda.synchronize()
            t = time.perf_counter()
            for d in ins2:
                custom_kernel(d)
            torch.cuda.synchronize()
            per = (time.perf_counter() - t) / len(ins2) * 1e6
            print(f"g{g} N{n} K{k} {mode}: host per new-M_g call median {med:.0f} us (min {host[0]:.0f}, max {host[-1]:.0f}; {comp} compiled); back to back {per:.0f} us per call", flush=True)
            res["B"][f"g{g} N{n} K{k} {mode}"] = {"median_us": med, "min": host[0], "max": host[-1], "compiled": comp}
            res["C"][f"g{g} N{n} K{k} {mode}"] = per
    configs.sm90_group_dynamic_pick = REAL_DYN
if os.environ.get("OUT"):
    json.dump(res, open(os.environ["OUT"] + f"/exp136_{part}.json", "w"), indent=1, default=str)
