"""The first session on a GPU whose kernels have never run here (a B200: sm_100a): one command for
the checks README's "What has run where" asks for, in that order, with every output kept.

    python3 tools/first_gpu_run.py [--out first_gpu_run] [--quick] [--no-timing] [--sanitize]
                                   [--sanitize-gpus N] [--draws leaderboard,wide]

Steps (each writes DIR/<step>.log; DIR/summary.json holds what they found):
  1. device     the GPU, its capability and driver, and the arch our kernels compile for there
  2. gpu_tests  pytest tests/test_gpu_kernels.py tests/test_gpu_bundle.py (junit XML kept), once per
                input draw (NVFP4_TEST_DRAW): the leaderboard's, then the wide one (every e2m1 code,
                every finite e4m3 scale on each operand: what real checkpoints hold and the
                leaderboard's inputs never set); steps gpu_tests and gpu_tests_wide
  3. bisect     each failed test (the first --max-bisect, 12) again, alone, with NVFP4_GRAPHS=0
                (no CUDA-graph replay), then also NVFP4_TABLE_WRITER=0 (grouped: no
                table-writer kernel; each address set's workspace uploaded once): which layer a
                failure lives in -- it passes once the layer is off -- or the kernel itself (it
                fails with both off)
  4. timing     benchmarks/leaderboard_timing.py, by default and with NVFP4_GRAPHS=0
  5. bench      benchmarks/bench.py --json --png (the main job)
  6. sanitize   with --sanitize: tools/sanitize_sweep.py into DIR/sanitize (a slice of the GPU tests
                under compute-sanitizer memcheck, racecheck, synccheck and initcheck, side by side;
                on an H100 in session 51, each beside other tools: memcheck 7 min, initcheck 6,
                synccheck 8, racecheck ~15 in two parts), whatever steps 2-5 found; with several GPUs
                one interleaved shard of the slice per GPU (the sweep's --gpus; --sanitize-gpus N
                caps it; exp. 185: the whole slice on two H200s in one 10-minute call), logs in
                DIR/sanitize/shardI
Timing runs only for a problem whose tests all passed: a number from a wrong kernel is no number.

--quick limits step 2 to the leaderboard's test and benchmark shapes of both problems
(`test_dual`, `test_grouped`), the single-file bundles and the three sm_100a layer checks
(the grouped setup kernel's descriptors, the grouped and the dual launch paths with a probe
kernel: all three ran on an H200), for a first look in a few minutes.  On a B200, a failure with
those checks passing points at the main kernel.
A failure that is not clearly one problem's (e.g. a table-writer test) holds back both timings.
Exit code: 0 when every test passed, 1 when any failed, 2 without a CUDA GPU (nothing run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GPU_TESTS = ["tests/test_gpu_kernels.py", "tests/test_gpu_bundle.py"]
# (the three sm_100a layer checks first: the grouped setup kernel's descriptors and both problems'
# launch paths with a probe for the main kernel; all passed on an H200, sessions 55-56, so a
# failure with them passing here points at the main kernel)
QUICK_TESTS = ["tests/test_gpu_kernels.py::test_sm100_setup_descriptors_match_host_encoding",
               "tests/test_gpu_kernels.py::test_sm100_grouped_launch_path_on_this_gpu",
               "tests/test_gpu_kernels.py::test_sm100_dual_launch_path_on_this_gpu",
               "tests/test_gpu_kernels.py::test_dual", "tests/test_gpu_kernels.py::test_grouped", "tests/test_gpu_bundle.py"]
# the layers a failure may live in, switched off one after another (README "What has run where")
BISECT_STEPS = (("graphs_off", {"NVFP4_GRAPHS": "0"}),
                ("graphs_and_writer_off", {"NVFP4_GRAPHS": "0", "NVFP4_TABLE_WRITER": "0"}))


def failed_tests(junit_xml: str) -> list[str]:
    """pytest node ids of the failed or errored test cases in a junit XML report."""
    out = []
    for case in ET.parse(junit_xml).getroot().iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            path = case.get("classname", "").replace(".", "/") + ".py"
            out.append(f"{path}::{case.get('name')}")
    return out


def problem_of(node_id: str) -> str:
    """'dual', 'group' or 'other' for a GPU test id (by the test's name and parameters)."""
    name = node_id.split("::", 1)[-1].lower()
    if "group" in name or "masked" in name or "moe" in name:
        return "group"
    return "dual" if "dual" in name else "other"


def verdict(results: dict) -> str:
    """Where a failure lives, from its bisect results {step: passed}."""
    if results.get("graphs_off"):
        return "CUDA-graph replay (passes with NVFP4_GRAPHS=0)"
    if results.get("graphs_and_writer_off"):
        return "table writer / descriptor setup (passes with NVFP4_TABLE_WRITER=0 as well)"
    return "the kernel (fails with both layers off)"


def run(step: str, cmd: list[str], out_dir: str, env: dict | None = None) -> tuple[int, float]:
    """Run `cmd` in the repository root with `env` added; its output to out_dir/step.log."""
    t0 = time.time()
    with open(os.path.join(out_dir, f"{step}.log"), "w") as log:
        log.write(f"$ {' '.join(cmd)}  (env {env or {}})\n")
        log.flush()
        rc = subprocess.call(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    secs = time.time() - t0
    print(f"[{step}] rc {rc} in {secs:.0f} s", flush=True)
    return rc, secs


def device_info() -> dict | None:
    sys.path.insert(0, ROOT)
    import nvfp4gemm  # noqa: F401  (before cutlass, as everywhere)
    import torch

    if not torch.cuda.is_available():
        return None
    from nvfp4gemm import harness

    p = torch.cuda.get_device_properties(0)
    try:
        driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", "0"],
                                capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        driver = None
    return {"name": p.name, "gpus": torch.cuda.device_count(), "capability": list(torch.cuda.get_device_capability(0)),
            "sms": p.multi_processor_count, "memory_gb": round(p.total_memory / 2**30, 1), "driver": driver,
            "torch": torch.__version__, "cuda": torch.version.cuda, "kernel_arch": harness.device_arch()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="first_gpu_run", help="folder for the logs and summary.json")
    ap.add_argument("--quick", action="store_true", help="only the leaderboard's benchmark shapes and the bundles")
    ap.add_argument("--no-timing", action="store_true", help="stop after the tests and their bisection")
    ap.add_argument("--max-bisect", type=int, default=12,
                    help="bisect at most this many failures, the first ones (a kernel fault that breaks the CUDA "
                         "context fails every later test of its process; the first failures tell)")
    ap.add_argument("--sanitize", action="store_true",
                    help="last, the GPU tests' slice under compute-sanitizer (tools/sanitize_sweep.py)")
    ap.add_argument("--sanitize-gpus", type=int, default=None,
                    help="GPUs to spread the sanitizer slice over, one shard each (default: every GPU visible)")
    sys.path.insert(0, ROOT)
    from reference import DRAWS  # NVFP4_TEST_DRAW's values (tests/conftest.py)

    ap.add_argument("--draws", default=",".join(DRAWS),
                    help="the test input draws to run, in order (NVFP4_TEST_DRAW; default: %(default)s)")
    args = ap.parse_args(argv)
    if args.sanitize_gpus is not None and args.sanitize_gpus < 1:
        ap.error("--sanitize-gpus: at least 1")
    draws = [d for d in args.draws.split(",") if d]
    if not draws or any(d not in DRAWS for d in draws):
        ap.error(f"--draws: a comma-separated subset of {','.join(DRAWS)}")

    dev = device_info()
    if dev is None:
        print("first_gpu_run: no CUDA GPU here; nothing run (the GPU tests would all skip)", file=sys.stderr)
        return 2
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    # One fresh seed for the test run and every rerun: test_dual / test_grouped name it in their node
    # ids, so a rerun in a new process finds its test only with the same NVFP4_TEST_SEED.
    seed_env = {"NVFP4_TEST_SEED": os.environ.get("NVFP4_TEST_SEED") or str(random.randrange(1 << 30))}
    summary = {"device": dev, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "quick": args.quick,
               "test_seed": int(seed_env["NVFP4_TEST_SEED"])}
    print(json.dumps(dev), flush=True)

    tests = QUICK_TESTS if args.quick else GPU_TESTS
    failures = []  # (draw, node id)
    all_ran = True
    for draw in draws:
        step = "gpu_tests" if draw == "leaderboard" else f"gpu_tests_{draw}"
        junit = os.path.join(out_dir, f"{step}.xml")
        rc, secs = run(step, [sys.executable, "-m", "pytest", "-q", "-rs", *tests, f"--junitxml={junit}"], out_dir,
                       {**seed_env, "NVFP4_TEST_DRAW": draw})
        failed = failed_tests(junit) if os.path.exists(junit) else []
        summary[step] = {"rc": rc, "seconds": round(secs), "failed": failed, "draw": draw}
        if rc not in (0, 1):  # (1: some tests failed; anything else: pytest itself did not run them)
            summary[step]["note"] = f"pytest did not complete; see {step}.log"
            all_ran = False
        failures += [(draw, node) for node in failed]

    bisect = {}
    summary["not_bisected"] = [f"{draw}: {node}" for draw, node in failures[args.max_bisect:]]
    for draw, node in failures[:args.max_bisect]:
        res = {}
        for step, env in BISECT_STEPS:
            safe = "".join(ch if ch.isalnum() else "_" for ch in f"{draw}_{node}")[-80:]
            r, _ = run(f"bisect_{step}_{safe}", [sys.executable, "-m", "pytest", "-q", node], out_dir,
                       {**seed_env, "NVFP4_TEST_DRAW": draw, **env})
            res[step] = r == 0
            if r == 0:
                break
        bisect[f"{draw}: {node}"] = {**res, "verdict": verdict(res)}
    summary["bisect"] = bisect

    clean = {p for p in ("dual", "group")
             if all_ran and not any(problem_of(n) in (p, "other") for _d, n in failures)}
    summary["timed_problems"] = sorted(clean)
    if not args.no_timing:
        for p in sorted(clean):
            for tag, env in (("", {}), ("_graphs_off", {"NVFP4_GRAPHS": "0"})):
                js = os.path.join(out_dir, f"timing_{p}{tag}.json")
                run(f"timing_{p}{tag}", [sys.executable, "benchmarks/leaderboard_timing.py", "--problem", p,
                                         "--json", js], out_dir, env)
        if clean == {"dual", "group"}:
            run("bench", [sys.executable, "benchmarks/bench.py", "--json", os.path.join(out_dir, "bench.json"),
                          "--png", os.path.join(out_dir, "bench.png")], out_dir)
    if args.sanitize:
        gpus = min(args.sanitize_gpus or dev.get("gpus", 1), dev.get("gpus", 1))
        rc_s, secs_s = run("sanitize", [sys.executable, "tools/sanitize_sweep.py", "--out",
                                        os.path.join(out_dir, "sanitize"), "--seed", seed_env["NVFP4_TEST_SEED"],
                                        "--gpus", str(gpus)], out_dir)
        summary["sanitize"] = {"rc": rc_s, "seconds": round(secs_s), "gpus": gpus, "clean": rc_s == 0}
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps({"failed": len(failures), "bisect": {k: v["verdict"] for k, v in bisect.items()},
                      "timed": sorted(clean), "out": out_dir}, indent=1))
    return 0 if all_ran and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
