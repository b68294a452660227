"""Exp. 102: the grouped mixed kernel under configs.mixed_group_wave_plan (whole waves + lockstep
stream-K tail) against configs.mixed_group_plan; each checked, then alternating rounds."""
import os, sys, statistics
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import parse_shapes
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch

timer = Timer(20)
real_plan = configs.mixed_group_plan


def orig(shapes, sms, tile=(256, 128), pairs=False, waves=False):
    """The stream-K plan of sessions 22-29 (what `mixed_group_plan(..., waves=False)` returns)."""
    return real_plan(shapes, sms, tile, pairs, waves=False)


def wave_plan(shapes, sms, tile=(256, 128), pairs=False, waves=True):
    return real_plan(shapes, sms, tile, pairs, waves=True)


keep = []
spec = sys.argv[1]
forms = sys.argv[2].split(",") if len(sys.argv) > 2 else ["mixed256"]
for shape in parse_shapes("group", spec):
    ms, ns, ks = (list(x) for x in zip(*shape))
    label = " ".join(map(str, ms)) + f" | N{ns[0]} K{ks[0]}"
    for form in forms:
        cfg = {"mixed256": configs.sm90_group_mixed(), "wide": configs.sm90_group_mixed(tile=(128, 256)),
               "two": configs.sm90_group_mixed_two_forms()}[form]
        if not configs.fits(cfg, shape):
            continue
        mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
        ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
        fns = {}
        for plan in ("std", "wave"):
            configs.mixed_group_plan = orig if plan == "std" else wave_plan
            data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda", poison_padding=True)
            keep.append(data)
            try:
                fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
            except ValueError as e:
                print(label, form, plan, "not valid:", e)
                continue
            outs = [c for _, _, c in data[0]]
            for _ in range(3):
                for c in outs:
                    c.fill_(float("nan"))
                ck.fn(*fargs)
                torch.cuda.synchronize()
                ok, msg = R.check_implementation(data, outs)
                nan = sum(int(torch.isnan(c).sum()) for c in outs)
                if not ok or nan:
                    print(label, form, plan, "WRONG", nan, msg[:200], flush=True)
                    break
            fns[plan] = (PackedLaunch(ck.fn, fargs), [])
        configs.mixed_group_plan = real_plan
        for _ in range(3):
            for plan, (fn, ts) in fns.items():
                ts.append(timer(fn))
        base = statistics.median(fns["std"][1])
        for plan, (fn, ts) in fns.items():
            print(f"{label:44s} {form:8s} {plan:4s} " + " ".join(f"{t:6.1f}" for t in ts)
                  + f" med {statistics.median(ts):6.1f} x{statistics.median(ts) / base:.3f}", flush=True)
