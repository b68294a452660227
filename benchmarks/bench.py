"""The project's main job: compile report (any machine) and, on a GPU, the benchmark.

    python benchmarks/bench.py --compile-only --problem dual --arch sm_100a
    python benchmarks/bench.py                       # GPU: time both problems; CPU: compile report

Compile-only mode compiles every CONFIG_MAP entry of the problem(s) for the arch(s) (and,
with --cases tests, the leaderboard test shapes' configs) without a GPU and prints one row
per config: compile seconds, shared memory, registers, spills.  Exit status 1 if any fails.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# A benchmark times each shape's own plan: cases of one (N_g, K_g) with three or more M_g sets
# must not switch that structure to the device schedule (exp. 139).  A user's setting wins (and
# --moe then runs under it; else with the auto switch, as a caller's MoE layer would).
_USER_DYNAMIC_M = "NVFP4_DYNAMIC_M" in os.environ
os.environ.setdefault("NVFP4_DYNAMIC_M", "0")
import nvfp4gemm  # noqa: E402,F401  (sets up compile-only mode before cutlass is imported)
from configs import (ARCHS, CONFIG_MAP, DUAL_BENCHMARKS, DUAL_TESTS, GROUP_BENCHMARKS,  # noqa: E402
                     GROUP_TESTS, PROBLEMS, select_config)


def case_name(problem: str, shape, with_ms: bool = True) -> str:
    """'MxNxK' (+ 'xL' when L > 1) for dual; 'gG M[m1,...] N K' for grouped (without the
    M list for chart labels)."""
    if problem == "dual":
        m, n, k, l = shape
        return f"{m}x{n}x{k}" + (f"x{l}" if l != 1 else "")
    ms = f" M[{','.join(str(m) for m, _, _ in shape)}]" if with_ms else ""
    return f"g{len(shape)}{ms} N{shape[0][1]} K{shape[0][2]}"


# Model-sized prefill shapes (Llama-style MLP: hidden 4096 / 8192, intermediate 14336 /
# 28672; MoE with 8 experts of 384-640 tokens each).  Far larger than the leaderboard's, so a
# user can see the compute-bound regime (H200 / H100 figures: MEMORY.md session 16).
_PREFILL_MS = "512,384,640,512,448,576,512,512"
PREFILL_CASES = {
    "dual": "2048x14336x4096; 4096x14336x4096; 4096x28672x8192",
    "group": f"{_PREFILL_MS}/14336/4096; {_PREFILL_MS}/4096/14336",
}


def cases_for(problem: str, which: str):
    if which == "leaderboard":
        return list(DUAL_BENCHMARKS if problem == "dual" else GROUP_BENCHMARKS)
    if which == "tests":
        return list(DUAL_TESTS if problem == "dual" else GROUP_TESTS)
    if which == "prefill":
        return parse_shapes(problem, PREFILL_CASES[problem])
    return parse_shapes(problem, which)


def parse_shapes(problem: str, text: str):
    """Explicit shapes: dual 'MxNxKxL;...'; grouped 'M1,M2/N/K;...' (N and K shared)."""
    out = []
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        if problem == "dual":
            dims = [int(x) for x in part.lower().split("x")]
            out.append(tuple(dims + [1] * (4 - len(dims))))
        else:
            ms, n, k = part.split("/")
            out.append(tuple((int(m), int(n), int(k)) for m in ms.split(",")))
    return out


def compile_report(problems, archs, which: str, progress=True) -> tuple[list[dict], int]:
    """Compile every config the cases need (CONFIG_MAP entries for 'leaderboard'); one row
    per distinct config.  Returns (rows, failures)."""
    from nvfp4gemm.harness import compile_kernel

    jobs = []
    for problem in problems:
        for arch in archs:
            seen = set()
            for shape in cases_for(problem, which):
                cfg = select_config(problem, arch, shape)
                if cfg in seen:
                    continue
                seen.add(cfg)
                jobs.append((problem, arch, shape, cfg, (arch, problem, shape) in CONFIG_MAP))
    rows, failures = [], 0
    for i, (problem, arch, shape, cfg, pinned) in enumerate(jobs):
        if progress:
            print(f"[{i + 1}/{len(jobs)}] compiling {problem} {arch} {cfg.short()} ...", file=sys.stderr, flush=True)
        row = {"problem": problem, "arch": arch, "case": case_name(problem, shape), "config": cfg.short(),
               "pinned": pinned}
        try:
            ck = compile_kernel(problem, arch, cfg, shape, stats=True)
            row.update(ok=True, seconds=round(ck.seconds, 2), smem=ck.smem_bytes, registers=ck.registers,
                       spills=ck.spill_bytes)
        except Exception as e:  # report and go on: the exit status says it failed
            failures += 1
            row.update(ok=False, error=f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}")
            if os.environ.get("BENCH_TRACEBACK"):
                traceback.print_exc()
        rows.append(row)
    return rows, failures


def print_compile_table(rows) -> None:
    head = f"{'problem':7} {'arch':8} {'config':38} {'case':38} {'ok':4} {'sec':>6} {'smem':>7} {'regs':>5} {'spill':>5}"
    print(head)
    print("-" * len(head))
    for r in rows:
        if r["ok"]:
            print(f"{r['problem']:7} {r['arch']:8} {r['config']:38} {r['case'][:38]:38} {'yes':4} {r['seconds']:6.2f} "
                  f"{r['smem']:7d} {str(r['registers'] or '?'):>5} {str(r['spills'] if r['spills'] is not None else '?'):>5}")
        else:
            print(f"{r['problem']:7} {r['arch']:8} {r['config']:38} {r['case'][:38]:38} {'FAIL':4} {r['error']}")


def moe_structures(text: str) -> list:
    """--moe's structures (g, N, K): 'leaderboard' (those of the g8 leaderboard cases) or 'G/N/K;...'."""
    if text == "leaderboard":
        return [(len(s), s[0][1], s[0][2]) for s in GROUP_BENCHMARKS if len(s) == 8]
    out = []
    for part in text.split(";"):
        try:
            g, n, k = (int(x) for x in part.strip().split("/"))
        except ValueError:
            raise SystemExit(f"--moe: '{part}' is not G/N/K (e.g. 8/4096/7168)") from None
        if g < 1 or n < 1 or k < 1:
            raise SystemExit(f"--moe: '{part}': G, N and K must be positive")
        out.append((g, n, k))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="NVFP4 GEMM benchmark and compile report")
    ap.add_argument("--problem", choices=[*PROBLEMS, "all"], default="all")
    ap.add_argument("--arch", choices=[*ARCHS, "all"], default="all",
                    help="compile-only: which arch(s) to compile for")
    ap.add_argument("--cases", default="leaderboard",
                    help="'leaderboard', 'tests', 'prefill' (model-sized shapes), or explicit shapes "
                         "(dual 'MxNxKxL;...', grouped 'M1,M2/N/K;...')")
    ap.add_argument("--moe", default=None,
                    help="GPU: also time MoE-style grouped calls, new M_g every call over the same weights, for "
                         "'leaderboard' (the g8 leaderboard structures) or explicit 'G/N/K;...'")
    ap.add_argument("--moe-max-m", type=int, default=256, help="--moe: M_g drawn uniformly from 1..this")
    ap.add_argument("--moe-capacity", type=int, default=None,
                    help="--moe on sm_90a: MaskedGroupedGemm's expert buffers hold this many rows (default "
                         "--moe-max-m; e.g. 256 with --moe-max-m 16: decode steps in buffers sized for prefill)")
    from reference import DRAWS

    ap.add_argument("--draw", choices=DRAWS, default="leaderboard",
                    help="GPU: the cases' inputs as the leaderboard draws them, or reference.py's wide test draw "
                         "(every e2m1 code, every finite e4m3 scale: closer to real checkpoints); not with --moe")
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--json", default=None, help="write results here")
    ap.add_argument("--png", default=None, help="write a chart here")
    args = ap.parse_args(argv)
    args.moe_structures = moe_structures(args.moe) if args.moe else []
    if args.moe_capacity is None:
        args.moe_capacity = args.moe_max_m
    if not 1 <= args.moe_max_m <= args.moe_capacity:
        raise SystemExit(f"--moe-max-m {args.moe_max_m} must be in 1..--moe-capacity ({args.moe_capacity})")
    args.moe_auto = not _USER_DYNAMIC_M
    if args.draw == "wide" and args.moe:
        # the MoE inputs share one set of expert weights, but the wide draw plans each input's A and B
        # scales together (their products stay inside fp16 only as a pair)
        raise SystemExit("--draw wide: not with --moe (its calls share one set of weights; the wide draw "
                         "pairs each input's A and B scales)")

    problems = list(PROBLEMS) if args.problem == "all" else [args.problem]
    archs = list(ARCHS) if args.arch == "all" else [args.arch]
    from nvfp4gemm.harness import device_arch

    gpu = device_arch()
    if args.compile_only or gpu is None:
        if not args.compile_only:
            print("No supported GPU here (CUDA driver absent or GPU is neither sm_100 nor sm_90): "
                  "running the compile-only report for " + ", ".join(archs) + ".")
        t0 = time.time()
        rows, failures = compile_report(problems, archs, args.cases)
        print_compile_table(rows)
        print(f"{len(rows) - failures} compiled, {failures} failed, {time.time() - t0:.1f} s")
        if args.json:
            import json

            with open(args.json, "w") as f:
                json.dump({"mode": "compile-only", "rows": rows}, f, indent=1)
        return 1 if failures else 0
    from benchmarks.timing import run_benchmark  # GPU path

    return run_benchmark(problems, args, gpu)


if __name__ == "__main__":
    sys.exit(main())
