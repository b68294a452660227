"""Exp. 103b: the rule's config of each shape under the wave plan with the new tail cuts (configs)
# Needs scratch/oldconfigs.py, the configs.py before exp. 103:
#   git show bd72dc5:configs.py > scratch/oldconfigs.py; touch scratch/__init__.py
and with session 30's (scratch/oldconfigs.py), each with its own two-form split; checked, then
alternating rounds."""
import os, sys, statistics, json
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvfp4gemm  # noqa
import configs
import scratch.oldconfigs as O
import torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import parse_shapes
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch

timer = Timer(20)
new_wave = configs.mixed_group_wave_plan
sms = torch.cuda.get_device_properties(0).multi_processor_count
out, keep = [], []
for shape in parse_shapes("group", sys.argv[1]):
    ms, ns, ks = (list(x) for x in zip(*shape))
    label = f"g{len(ms)} M{min(ms)}-{max(ms)} N{ns[0]} K{ks[0]}"
    cfg = configs.select_config("group", "sm_90a", shape)
    mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
    ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
    fns = {}
    for v in ("old", "new"):
        configs.mixed_group_wave_plan = O.mixed_group_wave_plan if v == "old" else new_wave
        plan = configs.mixed_group_two_forms_plan(shape, sms) if cfg.two_forms else \
            configs.mixed_group_plan(shape, sms, cfg.mma_tile_mn)
        info = f"P={plan.get('narrow_ctas')} max={max(configs.plan_cta_loads(plan)):.0f}"
        data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda", poison_padding=True)
        keep.append(data)
        fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        outs = [c for _, _, c in data[0]]
        good = True
        for _ in range(2):
            for c in outs:
                c.fill_(float("nan"))
            ck.fn(*fargs)
            torch.cuda.synchronize()
            ok, msg = R.check_implementation(data, outs)
            nan = sum(int(torch.isnan(c).sum()) for c in outs)
            if not ok or nan:
                print(label, v, "WRONG", nan, msg[:200], flush=True)
                good = False
                break
        if good:
            fns[v] = (PackedLaunch(ck.fn, fargs), [], info)
    configs.mixed_group_wave_plan = new_wave
    for _ in range(3):
        for v, (fn, ts, _i) in fns.items():
            ts.append(timer(fn))
    base = statistics.median(fns["old"][1])
    for v, (fn, ts, info) in fns.items():
        med = statistics.median(ts)
        print(f"{label:28s} {cfg.short()[:34]:34s} {v:3s} {info:14s} " + " ".join(f"{t:6.1f}" for t in ts)
              + f" med {med:6.1f} x{med / base:.3f}", flush=True)
        out.append({"shape": shape, "config": cfg.short(), "plan": v, "info": info, "rounds_us": ts, "us": med,
                    "ratio": med / base})
json.dump({"device": torch.cuda.get_device_name(), "rows": out}, open(sys.argv[2], "w"), indent=1)
