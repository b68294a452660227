"""exp. 114: SM clock and power while the LB0 kernel runs back to back, per launch plan."""
import os, sys, time, subprocess, datetime, statistics, json
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import configs, reference as R
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch
from benchmarks.forms import forms_variant

out = sys.argv[1]
shapes = [configs.GROUP_BENCHMARKS[0], configs.GROUP_BENCHMARKS[1]]
variants = sys.argv[2].split(",")
launches = {}
for si, shape in enumerate(shapes):
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda")
    cfg = configs.select_config("group", "sm_90a", shape)
    mod, cls = harness.kernel_module("group", "sm_90a", cfg)
    ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
    for v in variants:
        fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream(), forms_variant(v))
        launches[(si, v)] = (PackedLaunch(ck.fn, fargs), data)
smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active",
                        "--format=csv,noheader,nounits", "-lms", "10"], stdout=open(f"{out}/smi.csv", "w"))
time.sleep(1.0)
windows = []
for rep in range(3):
    for (si, v), (fn, _d) in launches.items():
        for _ in range(50):
            fn()
        torch.cuda.synchronize()
        t0 = time.time()
        n = 3000 if si == 0 else 5000
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        for _ in range(n):
            fn()
        ev1.record()
        torch.cuda.synchronize()
        t1 = time.time()
        windows.append((si, v, t0, t1, ev0.elapsed_time(ev1) * 1e3 / n))
        time.sleep(0.3)
time.sleep(0.5)
smi.terminate(); smi.wait()
rows = []
for line in open(f"{out}/smi.csv"):
    parts = [p.strip() for p in line.split(",")]
    try:
        ts = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f").timestamp()
        rows.append((ts, float(parts[1]), float(parts[2]), parts[3]))
    except Exception:
        pass
res = []
for si, v, t0, t1, us in windows:
    inside = [r for r in rows if t0 + 0.05 <= r[0] <= t1 - 0.02]
    clk = statistics.median(r[1] for r in inside) if inside else float("nan")
    pw = statistics.median(r[2] for r in inside) if inside else float("nan")
    reasons = sorted({r[3] for r in inside})
    res.append({"shape": si, "variant": v, "us_per_launch": us, "sm_mhz": clk, "power_w": pw, "reasons": reasons, "samples": len(inside)})
    print(f"LB{si} {v:10s} {us:7.1f} us/launch (back to back, no flush)  SM {clk:6.0f} MHz  {pw:5.0f} W  {reasons} n={len(inside)}", flush=True)
json.dump(res, open(f"{out}/clock_probe.json", "w"))
