"""Exp. 175b: is the wide draw's per-call loss on g8 N4096 K7168 the clock (power) or the kernel?
Per case, buffers X (leaderboard draw) and W (wide draw), each timed holding each draw's values
(copied in place), three ways:
  flush: the leaderboard's method (L2 flush before each call, calls back to back);
  idle:  each call after 40 ms of idle GPU (power history low, so the SM clock is at its top);
  flush_sustained: flush + call pairs for 1 s with nvidia-smi sampling the SM clock and power.
If the loss is power, it shows under flush and flush_sustained (lower clock) and vanishes idle.

    python3 notes/patches/exp175_draw_values/exp175b.py OUT.json
"""

import json
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, ".")
import configs  # noqa: E402
from benchmarks.timing import Timer, clone_input, measure_ceilings  # noqa: E402
from exp175 import make, set_values  # noqa: E402
from submission import custom_kernel  # noqa: E402

ROUNDS, ITERS, IDLE_CALLS, IDLE_S, SUSTAIN_S = 3, 30, 25, 0.04, 1.0
CASES = [("group", configs.GROUP_BENCHMARKS[0]), ("group", configs.GROUP_BENCHMARKS[3]),
         ("dual", configs.DUAL_BENCHMARKS[0])]


def idle_time(fn, timer):
    ts = []
    for _ in range(IDLE_CALLS):
        torch.cuda.synchronize()
        time.sleep(IDLE_S)
        timer.flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ts)


def flush_sustained(fn, timer):
    q = "clocks.sm,power.draw,clocks_event_reasons.active"
    p = subprocess.Popen(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "20"],
                         stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    ts, t0 = [], time.perf_counter()
    while time.perf_counter() - t0 < SUSTAIN_S:
        ev = []
        for _ in range(20):
            timer.flush()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            ev.append((s, e))
        torch.cuda.synchronize()
        ts += [s.elapsed_time(e) * 1e3 for s, e in ev]
    time.sleep(0.1)
    p.terminate()
    rows = []
    for line in p.communicate()[0].strip().splitlines():
        f = [v.strip() for v in line.split(",")]
        try:
            rows.append((float(f[0]), float(f[1]), f[2]))
        except (ValueError, IndexError):
            pass
    busy = rows[len(rows) // 4: -3] if len(rows) > 8 else rows
    return {"us_median": statistics.median(ts), "calls": len(ts),
            "sm_mhz_mean": statistics.mean(r[0] for r in busy), "sm_mhz_min": min(r[0] for r in busy),
            "power_w_mean": statistics.mean(r[1] for r in busy), "reasons": sorted({r[2] for r in busy})}


def main(out_path):
    timer = Timer(ITERS)
    ceil = measure_ceilings(timer)
    print(json.dumps(ceil), flush=True)
    rows = []
    for problem, shape in CASES:
        x, w = make(problem, shape, False), make(problem, shape, True)
        vals = {"lb": clone_input(x), "wide": clone_input(w)}
        bufs = {"X": x, "W": w}
        custom_kernel(x), custom_kernel(w)
        t = {}
        for _ in range(ROUNDS):
            for b, buf in bufs.items():
                for v in (("lb", "wide") if b == "X" else ("wide", "lb")):
                    set_values(buf, vals[v])
                    fn = (lambda buf=buf: custom_kernel(buf))
                    t.setdefault(f"flush_{b}_{v}", []).append(timer(fn))
                    t.setdefault(f"idle_{b}_{v}", []).append(idle_time(fn, timer))
        med = {k: statistics.median(v) for k, v in t.items()}
        sus = {}
        for v in ("lb", "wide"):
            set_values(x, vals[v])
            sus[v] = flush_sustained(lambda: custom_kernel(x), timer)
        ratio = {f"{m}_{b}": med[f"{m}_{b}_wide"] / med[f"{m}_{b}_lb"] for m in ("flush", "idle") for b in bufs}
        ratio["flush_sustained"] = sus["wide"]["us_median"] / sus["lb"]["us_median"]
        row = {"problem": problem, "case": [list(s) for s in shape] if problem == "group" else list(shape),
               "us": med, "rounds_us": t, "flush_sustained": sus, "wide_over_lb": ratio}
        print(json.dumps({k: row[k] for k in ("problem", "us", "wide_over_lb", "flush_sustained")}), flush=True)
        rows.append(row)
        del x, w, vals, bufs
        torch.cuda.empty_cache()
    json.dump({"device": torch.cuda.get_device_name(0), "ceilings": ceil, "rows": rows}, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
