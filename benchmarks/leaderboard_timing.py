"""Time `custom_kernel` the ways gpu-mode's evaluators do (GPU only).

    python3 benchmarks/leaderboard_timing.py [--problem dual|group] [--cases leaderboard|SHAPES]
                                             [--calls 30] [--json OUT.json]

What gpu-mode ranks these two problems with (reference-kernels `problems/nvidia/*/task.yml`,
checked 2026-11-26): `eval_better_bench.py` (dual) and `eval_better_bench_grouped_gemm.py`
(grouped) -- 50 (dual) or 15 (grouped) inputs made once; each repeat synchronizes, flushes L2,
then calls them back to back between two CUDA events, the same objects every repeat; the mean per
call.  So the host time of a call counts where it exceeds the kernel's, and a submission may
remember inputs it has seen.  Per case, µs:

* `same`: one input object every call, each after a synchronize and an L2 flush;
* `eval`: gpu-mode eval.py's leaderboard mode (the generic evaluator, not these problems'
  ranked one) -- a new input made before every call (untimed) and dropped after it,
  synchronize, L2 flush, CUDA events around the call (bench.py's "fresh" column: the same
  `Timer.fresh`);
* `ranked`: eval_better_bench's loop as above (the correctness pass on clones first, untimed);
  median over repeats of the mean per call.

The L2 flush is bench.py's (a buffer of 4x the L2 written; eval.py fills 256 MB).  Also prints
the host time of the calls (perf_counter around `custom_kernel`; for `ranked` the loop's host
time per call).  Compare modes within one run: they share the GPU's state.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import nvfp4gemm  # noqa: E402,F401  (must precede cutlass)
import torch  # noqa: E402

from benchmarks.bench import case_name, cases_for  # noqa: E402
from benchmarks.timing import Timer, clone_input, make_input, ranked_inputs, ranked_time, timed_call  # noqa: E402


def time_case(problem: str, shape, calls: int, timer: Timer) -> dict:
    from submission import custom_kernel

    base = make_input(problem, shape, 1)
    custom_kernel(clone_input(base))  # compile, plan, first templates: not timed
    out = {"problem": problem, "case": [list(s) for s in shape] if problem == "group" else list(shape)}
    same = [timed_call(custom_kernel, base, timer.flush) for _ in range(calls)]
    out["same_us"] = statistics.median(t for t, _ in same)
    out["same_host_us"] = statistics.median(h for _, h in same)
    out["eval_us"], out["eval_host_us"] = timer.fresh(custom_kernel, lambda: clone_input(base), calls)
    inputs = ranked_inputs(problem, shape, 1)
    for d in inputs:  # the evaluator's correctness pass runs on clones
        custom_kernel(clone_input(d))
    out["ranked_us"], out["ranked_host_us"] = ranked_time(custom_kernel, inputs, timer.flush)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", choices=["dual", "group", "both"], default="both")
    ap.add_argument("--cases", default="leaderboard", help="leaderboard, tests, prefill, or explicit shapes (bench.py)")
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("leaderboard_timing.py needs a CUDA GPU (sm_90 or sm_100)", file=sys.stderr)
        return 2
    problems = ["dual", "group"] if args.problem == "both" else [args.problem]
    timer = Timer(1)  # (its L2 flush buffer)
    rows = []
    print(f"{torch.cuda.get_device_name()}: µs per call (host µs)")
    print(f"{'problem':7} {'case':44} {'same':>16} {'eval (new input)':>18} {'ranked loop':>16}")
    for problem in problems:
        for shape in cases_for(problem, args.cases):
            r = time_case(problem, shape, args.calls, timer)
            rows.append(r)
            cols = [f"{r[m + '_us']:7.1f} ({r[m + '_host_us']:4.0f})" for m in ("same", "eval", "ranked")]
            print(f"{problem:7} {case_name(problem, shape)[:44]:44} {cols[0]:>16} {cols[1]:>18} {cols[2]:>16}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
