"""Exp. 118 (device): multi-form plans where chosen forms use the stream-K fill instead of the wave plan."""
import json, os, statistics, sys
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import poisoned_check, parse_shapes
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch
from nvfp4gemm.sm90 import grouped_gemm

orig = configs.mixed_group_plan
FILL = set()
def patched(shapes, sms, tile=(256, 128), pairs=False, waves=True):
    return orig(shapes, sms, tile, pairs=pairs, waves=waves and tuple(tile) not in FILL)

def T(s):
    return tuple(int(v) for v in s.split("x"))

# shape spec ; variants "label=fill1+fill2@P:Q" (fill tiles, split; '-' none, split 'auto')
CASES = json.loads(sys.argv[1])
rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
timer = Timer(20)
keep, out = [], []
for spec, variants in CASES:
    shape = parse_shapes("group", spec)[0]
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda", poison_padding=True)
    outs = [c for _, _, c in data[0]]
    cfg = configs.select_config("group", "sm_90a", shape)
    mod, cls = harness.kernel_module("group", "sm_90a", cfg)
    ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
    runs = {}
    for v in variants:
        label, _, rest = v.partition("=")
        fills, _, split = rest.partition("@")
        FILL.clear()
        FILL.update(T(t) for t in fills.split("+") if t and t != "-")
        configs._PLAN_CACHE.clear()
        configs.mixed_group_plan = patched
        try:
            given = None if split in ("", "auto") else tuple(int(x) for x in split.split(":"))
            if given is None and FILL:
                sp_ = [0] + configs.mixed_group_forms_plan(list(shape), 132, cfg.forms)["splits"]
                given = tuple(b - a for a, b in zip(sp_, sp_[1:]))
            fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream(), given)
            keep.append(dict(grouped_gemm._TABLES)); grouped_gemm._TABLES.clear()
            p = configs.mixed_group_forms_plan(list(shape), 132, cfg.forms, given)
        finally:
            configs.mixed_group_plan = orig
            configs._PLAN_CACHE.clear()
        loads = configs.plan_cta_loads(p)
        sp = [0] + p["splits"] + [p["ctas"]]
        mod_us = [round(max(loads[sp[i]:sp[i+1]]) * configs.FORM_KB_US[t], 1) for i, t in enumerate(cfg.forms)]
        wrong = poisoned_check(lambda: ck.fn(*fargs), data, outs, "group")
        print(spec[:40], label, "split", p["splits"], "model", mod_us, "WRONG " + wrong if wrong else "ok", flush=True)
        if wrong:
            continue
        runs[label] = (PackedLaunch(ck.fn, fargs), [], mod_us, p["splits"])
    for _ in range(rounds):
        for label, (fn, ts, _m, _s) in runs.items():
            ts.append(timer(fn))
    base = statistics.median(next(iter(runs.values()))[1])
    for label, (fn, ts, m, spl) in runs.items():
        med = statistics.median(ts)
        print(f"{spec[:30]:30s} {label:12s} {str(spl):12s} model max {max(m):6.1f} " + " ".join(f"{t:6.1f}" for t in ts) + f" med {med:6.1f} x{med/base:.3f}", flush=True)
        out.append({"shape": spec, "variant": label, "splits": spl, "model": m, "rounds_us": ts, "us": med, "ratio": med / base})
if os.environ.get("OUT"):
    json.dump({"device": torch.cuda.get_device_name(), "rows": out}, open(os.environ["OUT"] + "/exp118.json", "w"), indent=1)
