"""Exp. 101 diagnostic: grouped mixed kernel with half the A16 or B bytes loaded (NVFP4_EXP101 =
a16half / bhalf / a16half,bhalf; results wrong on purpose), a CTA-count scan, and SM clock /
power sampled by nvidia-smi over hot loops (no flush)."""
import os, sys, statistics, subprocess, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.timing import Timer
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch
from nvfp4gemm.sm90 import grouped_mixed as gm

var = os.environ.get("NVFP4_EXP101", "base") or "base"
timer = Timer(20)
LB0 = configs.GROUP_BENCHMARKS[0]
U128 = tuple([(128, 4096, 7168)] * 8)
U256 = tuple([(256, 4096, 7168)] * 8)
real_sm = gm.sm_count
keep = []  # inputs stay alive: launch tables are cached by buffer addresses


def hot(fn, secs=1.2):
    """Mean us per call over a hot loop, with nvidia-smi's SM clock and power means."""
    p = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_event_reasons.active", "--format=csv,noheader,nounits",
                          "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    n = 0
    t0 = time.time()
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    while time.time() - t0 < secs:
        for _ in range(50):
            fn()
        n += 50
        torch.cuda.synchronize()
    e.record(); torch.cuda.synchronize()
    us = s.elapsed_time(e) * 1e3 / n
    time.sleep(0.1)
    p.terminate()
    out = p.communicate()[0].split("\n")
    vals = [tuple(float(x) for x in l.split(",")[:2]) + (l.split(",")[2].strip(),) for l in out if l.strip() and "N/A" not in l]
    vals = vals[6:-2] if len(vals) > 10 else vals
    clk = statistics.mean(v[0] for v in vals) if vals else 0
    pw = statistics.mean(v[1] for v in vals) if vals else 0
    reasons = sorted(set(v[2] for v in vals))
    return us, clk, pw, reasons


def run(label, shape, cfg, ctas=None, do_hot=True):
    gm.sm_count = (lambda dev: ctas) if ctas else real_sm
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda")
    keep.append(data)
    mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
    ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
    fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
    fn = PackedLaunch(ck.fn, fargs)
    ts = [timer(fn) for _ in range(3)]
    msg = f"{var:14s} {label:10s} {cfg.short():36s} ctas {ctas}: " + " ".join(f"{t:.1f}" for t in ts) \
        + f" med {statistics.median(ts):.1f}"
    if do_hot:
        us, clk, pw, rs = hot(fn)
        msg += f" | hot {us:.1f} us {clk:.0f} MHz {pw:.0f} W {rs}"
    print(msg, flush=True)


import dataclasses
narrow = configs.sm90_group_mixed()
if "ab3" in var:
    narrow = dataclasses.replace(narrow, ab_stages=3)
wide = configs.sm90_group_mixed(tile=(128, 256))
if "a16s6" not in var:  # (a 6-stage A16 ring cannot stage a stream-K partial)
    run("LB0", LB0, narrow)
run("U128", U128, narrow)
run("U256n", U256, narrow)
if var == "base":
    run("U256w", U256, wide)
if os.environ.get("EXP101_SCAN"):
    for c in (32, 64):
        run("U128", U128, narrow, ctas=c)
        run("U256w", U256, wide, ctas=c)
