"""Exp. 186: why a compute-sanitizer memcheck process on exact allocations
(PYTORCH_NO_CUDA_MEMORY_CACHING=1) ran out of GPU memory after ~53 of the sweep's tests (exp. 184).
Runs the sweep's exact-allocation tests (the slice less the graph tests) in one pytest process with
memlog_plugin, logging device memory after each test -- plain, and (with --memcheck) under memcheck.

    python3 notes/patches/exp186_memgrowth/run_memgrowth.py --out DIR [--memcheck] [--seed S]
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import sanitize_sweep as S  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--memcheck", action="store_true")
ap.add_argument("--seed", default="61031")
args = ap.parse_args()
os.makedirs(args.out, exist_ok=True)
env = {**os.environ, "NVFP4_TEST_SEED": args.seed, **S.EXACT_ALLOCATIONS,
       "PYTHONPATH": HERE + os.pathsep + os.environ.get("PYTHONPATH", ""),
       "MEMLOG": os.path.join(args.out, "memcheck.mem" if args.memcheck else "plain.mem")}
graphs = set(S.collect(env, "graphs"))
nodes = [n for n in S.select_nodes(S.collect(env), 1) if n not in graphs]
cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "memlog_plugin", *nodes]
if args.memcheck:
    binary = S.sanitizer_binary()
    cmd = [binary, "--tool", "memcheck", "--report-api-errors", "no", "--kernel-name", S.OUR_KERNELS,
           "--log-file", os.path.join(args.out, "memcheck.log")] + cmd
print(f"{len(nodes)} tests, memcheck={args.memcheck}", flush=True)
sys.exit(subprocess.run(cmd, cwd=ROOT, env=env).returncode)
