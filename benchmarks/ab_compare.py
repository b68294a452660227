"""A/B timing of two source trees on one GPU: base vs new, in alternating processes.

Why: on the H200s we are lent, two processes of the *same* tree differ by up to 5-10% (the
GPU's clock and the fp16 rate it sustains move between processes), so a change worth 2-3%
cannot be judged from two separate benchmark runs.  This script runs base, new, base, new,
... as separate processes in one device call and reports, per case, every round's time and
the ratio new / base of the medians, with correctness checked in every process.

    # on the CPU machine: export the base tree (scratch/ is git-excluded, carry it)
    python3 benchmarks/ab_compare.py --prepare HEAD~1          # -> scratch/ab_base
    # on the GPU machine (run tool, carry [".whl", "scratch"]):
    python3 benchmarks/ab_compare.py --base scratch/ab_base --rounds 2 [--problems dual,group]
        [--cases leaderboard|tests|SHAPES] [--iters 40] [--new-env K=V ...] [--base-env K=V ...]

Each tree is imported on its own (its configs, dispatch and kernels: a CONFIG_MAP change is
compared too); only this driver's shape parsing and the timing method are shared: inputs
generated once per case, NaN-poisoned outputs, one checked call, then `iters` calls each
after an L2 flush, CUDA events around `custom_kernel`, median (as benchmarks/timing.py).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BASE = os.path.join(ROOT, "scratch", "ab_base")


def worker(tree: str, problem: str, shapes: list, iters: int) -> list[dict]:
    """Runs inside a fresh process with `tree` first on sys.path."""
    sys.path.insert(0, tree)
    # each shape's own plan: shapes of one (N_g, K_g) must not switch it to the device
    # schedule (exp. 139); a user's setting wins
    os.environ.setdefault("NVFP4_DYNAMIC_M", "0")
    import nvfp4gemm  # noqa: F401  (must precede cutlass)
    import torch

    import reference as R
    from configs import select_config
    from nvfp4gemm.dispatch import custom_kernel

    props = torch.cuda.get_device_properties(0)
    gpu = f"sm_{props.major}{props.minor}a"
    flush = torch.empty(max(4 * props.L2_cache_size, 256 << 20), dtype=torch.uint8, device="cuda")
    out = []
    for shape in shapes:
        shape = tuple(tuple(s) for s in shape) if problem == "group" else tuple(shape)
        if problem == "dual":
            data = R.generate_input(*shape, 1111, device="cuda")
            cs = [data[-1]]
        else:
            ms, ns, ks = zip(*shape)
            data = R.generate_input(list(ms), list(ns), list(ks), len(shape), 1111, device="cuda")
            cs = [c for _, _, c in data[0]]
        for c in cs:
            c.fill_(float("nan"))
        res = custom_kernel(data)
        torch.cuda.synchronize()
        ok, msg = R.check_implementation(data, res)
        for _ in range(5):
            custom_kernel(data)
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        for s, e in zip(starts, ends):
            flush.zero_()
            s.record()
            custom_kernel(data)
            e.record()
        torch.cuda.synchronize()
        us = statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3
        cfg = select_config(problem, gpu, shape)
        out.append({"problem": problem, "shape": shape, "config": cfg.short(), "ok": bool(ok),
                    "check": msg[:120], "us": us})
    return out


def fmt_us(rows) -> str:
    return " ".join(f"{x['us']:.1f}" for x in rows)


def run_side(tree: str, env_pairs, problem: str, shapes, iters: int) -> list[dict]:
    env = dict(os.environ)
    env.update(kv.split("=", 1) for kv in env_pairs)
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--tree", os.path.abspath(tree),
           "--problem", problem, "--shapes-json", json.dumps(shapes), "--iters", str(iters)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"worker for {tree} failed (rc {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def prepare(ref: str, dest: str) -> None:
    """Export git `ref` (the files, not .git) to `dest` for the device call to carry."""
    if os.path.exists(dest):
        subprocess.run(["rm", "-rf", dest], check=True)
    os.makedirs(dest)
    archive = subprocess.run(["git", "-C", ROOT, "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", dest], input=archive, check=True)
    sha = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", ref], check=True, capture_output=True,
                         text=True).stdout.strip()
    with open(os.path.join(dest, "AB_BASE_REF"), "w") as f:
        f.write(f"{ref} {sha}\n")
    print(f"exported {ref} ({sha}) to {dest}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prepare", metavar="REF", help="export git REF to --base (CPU machine) and exit")
    ap.add_argument("--base", default=DEFAULT_BASE, help="base tree (default scratch/ab_base)")
    ap.add_argument("--new", default=ROOT, help="new tree (default: this checkout)")
    ap.add_argument("--problems", default="dual,group")
    ap.add_argument("--cases", default="leaderboard", help="leaderboard | tests | SHAPES (as bench.py)")
    ap.add_argument("--rounds", type=int, default=2, help="base/new process pairs")
    ap.add_argument("--iters", type=int, default=40)
    ap.add_argument("--new-env", action="append", default=[], metavar="K=V")
    ap.add_argument("--base-env", action="append", default=[], metavar="K=V")
    ap.add_argument("--json", help="write all rounds' results here")
    # worker mode (internal)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tree", help=argparse.SUPPRESS)
    ap.add_argument("--problem", help=argparse.SUPPRESS)
    ap.add_argument("--shapes-json", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        print(json.dumps(worker(args.tree, args.problem, json.loads(args.shapes_json), args.iters)))
        return 0
    if args.prepare:
        prepare(args.prepare, args.base)
        return 0
    if args.rounds < 1 or args.iters < 1:
        ap.error("--rounds and --iters must be >= 1")
    if not os.path.isdir(os.path.join(args.base, "nvfp4gemm")):
        ap.error(f"base tree {args.base} has no nvfp4gemm/: run --prepare REF on the CPU machine first")

    sys.path.insert(0, ROOT)
    from benchmarks.bench import case_name, cases_for

    ref = open(os.path.join(args.base, "AB_BASE_REF")).read().strip() if os.path.exists(
        os.path.join(args.base, "AB_BASE_REF")) else args.base
    print(f"base: {ref}{'  env ' + ' '.join(args.base_env) if args.base_env else ''}")
    print(f"new:  {args.new}{'  env ' + ' '.join(args.new_env) if args.new_env else ''}")
    results = {"base": [], "new": []}
    failures = 0
    for problem in args.problems.split(","):
        shapes = [list(s) for s in cases_for(problem, args.cases)]
        rounds = {"base": [], "new": []}
        for r in range(args.rounds):
            for side, tree, env in (("base", args.base, args.base_env), ("new", args.new, args.new_env)):
                rows = run_side(tree, env, problem, shapes, args.iters)
                rounds[side].append(rows)
                results[side].append(rows)
                print(f"  round {r + 1} {side} {problem} done", file=sys.stderr, flush=True)
        print(f"\n{'case':<44} {'base config':<22} {'new config':<22} {'base us (rounds)':<22} "
              f"{'new us (rounds)':<22} new/base")
        for i, shape in enumerate(shapes):
            b = [rs[i] for rs in rounds["base"]]
            n = [rs[i] for rs in rounds["new"]]
            bad = [x for x in b + n if not x["ok"]]
            failures += len(bad)
            bm = statistics.median(x["us"] for x in b)
            nm = statistics.median(x["us"] for x in n)
            flag = "  INCORRECT: " + bad[0]["check"] if bad else ""
            label = f"{problem} {case_name(problem, tuple(tuple(x) for x in shape) if problem == 'group' else tuple(shape))}"
            print(f"{label:<44} {b[0]['config']:<22} {n[0]['config']:<22} "
                  f"{fmt_us(b):<22} {fmt_us(n):<22} {nm / bm:.3f}{flag}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
