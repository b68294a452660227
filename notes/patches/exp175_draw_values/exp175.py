"""Exp. 175: why do two grouped cases run 2-3% slower on the wide draw (exp. 174)?  Values or
placement?  For each case two inputs are made: X (leaderboard draw) and W (wide draw).  In
alternating rounds each buffer set is timed holding its own values and holding the other draw's
values (copied in place, so the addresses stay), with cuBLAS fp16 on pre-decoded operands of
both draws as the control.  If the time follows the values, the cause is in the data (power /
switching); if it follows the buffers, it is placement.  Then a sustained loop per value set
(back-to-back calls, no flush, ~1.5 s) with nvidia-smi sampling SM clock and power every 20 ms.

    python3 notes/patches/exp175_draw_values/exp175.py OUT.json
"""

import json
import statistics
import subprocess
import sys
import time

import torch

sys.path.insert(0, ".")
import configs  # noqa: E402
import reference as R  # noqa: E402
from benchmarks.timing import Timer, baselines, clone_input, measure_ceilings  # noqa: E402
from submission import custom_kernel  # noqa: E402

ROUNDS, ITERS, SUSTAIN_S = 5, 30, 1.5
CASES = [("group", configs.GROUP_BENCHMARKS[0]), ("group", configs.GROUP_BENCHMARKS[3]),
         ("group", configs.GROUP_BENCHMARKS[1]), ("dual", configs.DUAL_BENCHMARKS[0])]


def make(problem, shape, wide):
    if problem == "dual":
        return R.generate_input(*shape, 1111, device="cuda", wide=wide)
    ms, ns, ks = zip(*shape)
    return R.generate_input(list(ms), list(ns), list(ks), len(shape), 1111, device="cuda", wide=wide)


def tensors(x):
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in tensors(y)]
    return []


def set_values(dst, src):
    for d, s in zip(tensors(dst), tensors(src), strict=True):
        assert d.shape == s.shape and d.dtype == s.dtype and d.stride() == s.stride()
        d.copy_(s)
    torch.cuda.synchronize()


def sustained(fn):
    """(us per call, samples) of back-to-back calls for SUSTAIN_S with nvidia-smi sampling."""
    fn()
    torch.cuda.synchronize()
    q = "clocks.sm,power.draw,clocks_event_reasons.active"
    p = subprocess.Popen(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", "-lms", "20"],
                         stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n, t0 = 0, time.perf_counter()
    s.record()
    while time.perf_counter() - t0 < SUSTAIN_S:
        for _ in range(20):
            fn()
        n += 20
        if n % 200 == 0:
            torch.cuda.synchronize()
    e.record()
    torch.cuda.synchronize()
    time.sleep(0.1)
    p.terminate()
    out = p.communicate()[0]
    rows = []
    for line in out.strip().splitlines():
        f = [v.strip() for v in line.split(",")]
        try:
            rows.append((float(f[0]), float(f[1]), f[2]))
        except (ValueError, IndexError):
            pass
    busy = rows[len(rows) // 4: -3] if len(rows) > 8 else rows  # skip the ramp and the tail
    return {"us_per_call": s.elapsed_time(e) * 1e3 / n, "calls": n,
            "sm_mhz_mean": statistics.mean(r[0] for r in busy) if busy else None,
            "sm_mhz_min": min(r[0] for r in busy) if busy else None,
            "power_w_mean": statistics.mean(r[1] for r in busy) if busy else None,
            "reasons": sorted({r[2] for r in busy}), "samples": len(busy)}


def main(out_path):
    timer = Timer(ITERS)
    ceil = measure_ceilings(timer)
    print(json.dumps(ceil), flush=True)
    rows = []
    for problem, shape in CASES:
        x, w = make(problem, shape, False), make(problem, shape, True)
        vals = {"lb": clone_input(x), "wide": clone_input(w)}
        bufs = {"X": x, "W": w}
        for b, buf in bufs.items():  # correctness of every buffer x values pair
            for v in ("lb", "wide"):
                set_values(buf, vals[v])
                ok, msg = R.check_implementation(buf, custom_kernel(buf))
                assert ok, (problem, b, v, msg[:200])
        cub = {v: baselines(problem, vals[v], "sm_90a")["cuBLAS fp16 pre-decoded"] for v in vals}
        times = {}
        for _ in range(ROUNDS):
            for b, buf in bufs.items():
                for v in (("lb", "wide") if b == "X" else ("wide", "lb")):
                    set_values(buf, vals[v])
                    times.setdefault(f"kernel_{b}_{v}", []).append(timer(lambda buf=buf: custom_kernel(buf)))
            for v in vals:
                times.setdefault(f"cublas_{v}", []).append(timer(cub[v]))
        med = {k: statistics.median(t) for k, t in times.items()}
        sus = {}
        for v in ("lb", "wide"):
            set_values(x, vals[v])
            sus[f"kernel_X_{v}"] = sustained(lambda: custom_kernel(x))
            sus[f"cublas_{v}"] = sustained(cub[v])
        row = {"problem": problem, "case": [list(s) for s in shape] if problem == "group" else list(shape),
               "us": med, "rounds_us": times, "sustained": sus,
               "wide_over_lb": {"X": med["kernel_X_wide"] / med["kernel_X_lb"],
                                "W": med["kernel_W_wide"] / med["kernel_W_lb"],
                                "cublas": med["cublas_wide"] / med["cublas_lb"],
                                "sustained_kernel": sus["kernel_X_wide"]["us_per_call"] / sus["kernel_X_lb"]["us_per_call"],
                                "sustained_cublas": sus["cublas_wide"]["us_per_call"] / sus["cublas_lb"]["us_per_call"]},
               "W_over_X_same_values": {v: med[f"kernel_W_{v}"] / med[f"kernel_X_{v}"] for v in vals}}
        print(json.dumps({k: row[k] for k in ("problem", "us", "wide_over_lb", "W_over_X_same_values")}), flush=True)
        print(json.dumps(sus), flush=True)
        rows.append(row)
        del x, w, vals, bufs, cub
        torch.cuda.empty_cache()
    json.dump({"device": torch.cuda.get_device_name(0), "ceilings": ceil, "rows": rows}, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
