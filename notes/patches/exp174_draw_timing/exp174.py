"""Exp. 174: do kernel times depend on the input draw?  The 8 leaderboard cases, each on the
leaderboard's draw and on the wide test draw (reference.py: every e2m1 code, every finite e4m3
scale), through custom_kernel, with cuBLAS fp16 on the pre-decoded operands of each draw as the
control; the four timed in alternating rounds (median of round medians, L2 flushed per call).

    python3 notes/patches/exp174_draw_timing/exp174.py OUT.json
"""

import json
import statistics
import subprocess
import sys

import torch

sys.path.insert(0, ".")
import configs  # noqa: E402
import reference as R  # noqa: E402
from benchmarks.timing import Timer, baselines, measure_ceilings  # noqa: E402
from submission import custom_kernel  # noqa: E402

ROUNDS, ITERS = 5, 30


def make(problem, shape, wide):
    if problem == "dual":
        return R.generate_input(*shape, 1111, device="cuda", wide=wide)
    ms, ns, ks = zip(*shape)
    return R.generate_input(list(ms), list(ns), list(ks), len(shape), 1111, device="cuda", wide=wide)


def smi():
    q = "clocks.sm,power.draw,clocks_event_reasons.active"
    r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True)
    return r.stdout.strip()


def main(out_path):
    timer = Timer(ITERS)
    ceil = measure_ceilings(timer)
    rows = []
    cases = [("dual", s) for s in configs.DUAL_BENCHMARKS] + [("group", s) for s in configs.GROUP_BENCHMARKS]
    for problem, shape in cases:
        data = {d: make(problem, shape, d == "wide") for d in ("lb", "wide")}
        fns = {}
        for d, x in data.items():
            out = custom_kernel(x)
            ok, msg = R.check_implementation(x, out)
            assert ok, (problem, shape, d, msg[:200])
            fns[f"kernel_{d}"] = (lambda x=x: custom_kernel(x))
            fns[f"cublas_{d}"] = baselines(problem, x, "sm_90a")["cuBLAS fp16 pre-decoded"]
        times = {k: [] for k in fns}
        for _ in range(ROUNDS):
            for k, fn in fns.items():
                times[k].append(timer(fn))
        med = {k: statistics.median(v) for k, v in times.items()}
        row = {"problem": problem, "case": [list(s) for s in shape] if problem == "group" else list(shape),
               "us": med, "rounds_us": times, "kernel_wide_over_lb": med["kernel_wide"] / med["kernel_lb"],
               "cublas_wide_over_lb": med["cublas_wide"] / med["cublas_lb"], "smi_after": smi()}
        print(json.dumps({k: row[k] for k in ("problem", "us", "kernel_wide_over_lb", "cublas_wide_over_lb",
                                               "smi_after")}), flush=True)
        rows.append(row)
    res = {"device": torch.cuda.get_device_name(0), "ceilings": ceil, "rows": rows}
    json.dump(res, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
