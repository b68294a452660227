"""Run a slice of the GPU tests under NVIDIA compute-sanitizer: memcheck, racecheck, synccheck and
initcheck, one process per tool (side by side by default), every log kept.

    python3 tools/sanitize_sweep.py --out sanitize [--tools memcheck,racecheck] [--per-test 1] [--serial]
                                    [--start N] [--count N] [--shard I/N] [--marker M]
                                    [--gpus N] [--all-kernels] [--files FILE_OR_ID,..]

The slice: the first --per-test parametrizations of every test function in tests/test_gpu_kernels.py
and tests/test_gpu_masked.py (one per function by default: every kernel family, form and schedule
the suite names), less the few tests about host-side behaviour that call many inputs
(`HOST_SIDE_TESTS`); --files takes other files, test functions or node ids instead, sliced the same
way but for a parametrization named whole, which is kept (first_gpu_run's --tests: e.g.
tests/planted_gpu_faults.py, that tool's own check of a sanitizer run that hangs).  NVFP4_TEST_SEED is drawn once and set for the collection and every run, so the
node ids of the fresh-seed tests are the same in each process.

What each tool can see (compute-sanitizer 2025.x; flash-attention's AI/RACECHECK_TMA_HAZARD.md
for the TMA point):
  memcheck   out-of-bounds / misaligned global, local and shared accesses by threads and TMA
  racecheck  shared-memory hazards between *threads* (ld/st.shared, cp.async, DSMEM stores).  A
             TMA tensor copy's write belongs to no thread and wgmma reads shared memory outside
             the threads, so neither side of a TMA-to-wgmma hand-off is checked by it
  synccheck  invalid barrier use it can observe.  2025.3 on an H100 (exp. 184) reported a warp
             barrier whose mask leaves out lanes running it, but not bar.sync reached by half of
             each warp's lanes, nor a full-mask warp barrier reached by half the warp
  initcheck  reads of global memory nothing has written (workspace padding read on purpose
             shows up here: see the log's kernel names before calling it a bug)

Unless --all-kernels, memcheck, racecheck and synccheck check only our kernels (names starting
kernel_cutlass: every CuTe DSL kernel), which is faster: torch's kernels run uninstrumented.
initcheck always checks every kernel: it tracks writes only in the kernels it instruments, so
filtered it would call every input torch wrote uninitialized (session 51: 100 false reports in
the dual pre-pass, then an 8-minute stall).

Positive control (exp. 184): before its tests, each tool runs on a kernel of ours with one planted
bug of its kind (tools/sanitize_controls.py), with the same filter and environment; a tool that
does not report it makes the sweep unclean, whatever the tests gave.  Exact allocations:
memcheck and initcheck run with PYTORCH_NO_CUDA_MEMORY_CACHING=1, because inside a segment of
torch's caching allocator a store past a tensor's end lands in memory memcheck counts as allocated
(exp. 184: its control went unreported with the cache on, reported with it off).  CUDA-graph
capture needs the cache, so the tests marked `graphs` run in a second process of the tool with it
on (their overruns inside a segment stay unseen; the rest of the slice runs their kernels).

Writes DIR/<tool>.log (the sanitizer's report), DIR/<tool>.out (pytest's output) -- for memcheck
and initcheck DIR/<tool>.1.{log,out}, .2, ... (chunks of EXACT_CHUNK tests) and .graphs --, the control's DIR/<tool>.control.{log,out}, and
DIR/summary.json.  Exit code: 0 when every tool caught its control, reported 0 errors on the tests
and every test passed, 1 otherwise, 2 without a CUDA GPU or without compute-sanitizer (nothing run).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = ("memcheck", "racecheck", "synccheck", "initcheck")
TEST_FILES = ("tests/test_gpu_kernels.py", "tests/test_gpu_masked.py")
# Tests about the dispatcher's host side over many inputs or devices: their kernels are the ones
# the rest of the slice runs, and under a sanitizer they take minutes.
HOST_SIDE_TESTS = {"test_ranked_loop_cycles_inputs", "test_kept_launch_outlives_many_new_outputs",
                   "test_tensors_on_another_device", "test_two_streams_at_once"}


def sanitizer_binary() -> str | None:
    """compute-sanitizer from $COMPUTE_SANITIZER, PATH or the CUDA toolkit's usual places."""
    for cand in (os.environ.get("COMPUTE_SANITIZER"), shutil.which("compute-sanitizer"),
                 "/usr/local/cuda/bin/compute-sanitizer"):
        if cand and os.path.exists(cand):
            return cand
    return None


def select_nodes(collected: list[str], per_test: int, skip=HOST_SIDE_TESTS) -> list[str]:
    """The first `per_test` node ids of each test function, in collection order, less `skip`."""
    taken: dict[str, int] = {}
    out = []
    for node in collected:
        func = node.split("[", 1)[0]  # (file::function)
        if func.split("::")[-1] in skip or taken.get(func, 0) >= per_test:
            continue
        taken[func] = taken.get(func, 0) + 1
        out.append(node)
    return out


def slice_nodes(env: dict, paths: list[str], per_test: int) -> list[str]:
    """The slice of `paths`: of each file or test function named, the first `per_test` parametrizations
    of every test function, less HOST_SIDE_TESTS (`select_nodes`); a parametrization named whole (an id
    with [...]) is kept as named."""
    named = [p for p in paths if "[" in p]
    rest = [p for p in paths if "[" not in p]
    nodes = select_nodes(collect(env, None, rest), per_test) if rest else []
    nodes += collect(env, None, named) if named else []
    return list(dict.fromkeys(nodes))


def pick_nodes(nodes: list[str], start: int = 0, count: int | None = None, shard: str | None = None,
               only: set[str] | None = None) -> list[str]:
    """The part of the slice one process runs: `nodes[start:][:count]`, then of those the ones in
    `only` (when given), then every N-th from the I-th for `shard` "I/N" (interleaved, so shards on
    several GPUs get a like mix of the slow, large-shape tests at the slice's head)."""
    nodes = nodes[start:]
    nodes = nodes if count is None else nodes[:count]
    if only is not None:
        nodes = [n for n in nodes if n in only]
    if shard:
        i, n = parse_shard(shard)
        nodes = nodes[i::n]
    return nodes


def parse_shard(shard: str) -> tuple[int, int]:
    """(I, N) of --shard "I/N", or SystemExit naming the rule."""
    m = re.fullmatch(r"(\d+)/(\d+)", shard)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise SystemExit(f"sanitize_sweep: --shard wants I/N with 0 <= I < N, got {shard!r}")
    return int(m.group(1)), int(m.group(2))


def visible_gpus(count: int) -> list[str]:
    """The CUDA_VISIBLE_DEVICES entries of the first `count` GPUs this process sees (its own list
    when one is set, else 0..count-1)."""
    listed = [d.strip() for d in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if d.strip()]
    return listed[:count] if listed else [str(i) for i in range(count)]


def shard_runs(argv: list[str], gpus: list[str], out_dir: str, seed: int) -> list[tuple[list[str], dict]]:
    """[(command, extra environment)] of --gpus: this sweep again once per GPU, as interleaved shard
    I of N (`--shard`), seeing only that GPU, with the parent's seed and DIR/shardI for its logs
    (appended after the parent's `argv`: argparse takes an option's last value)."""
    n = len(gpus)
    return [([sys.executable, os.path.abspath(__file__), *argv, "--gpus", "1", "--shard", f"{i}/{n}",
              "--seed", str(seed), "--out", os.path.join(out_dir, f"shard{i}")], {"CUDA_VISIBLE_DEVICES": gpu})
            for i, gpu in enumerate(gpus)]


def merge_shards(out_dir: str, rcs: list[int]) -> dict:
    """The parent's summary of a --gpus run: each shard's own summary.json (or None where the shard
    wrote none) and exit status; clean only when every shard exited 0 and wrote its summary."""
    shards = []
    for i, rc in enumerate(rcs):
        path = os.path.join(out_dir, f"shard{i}", "summary.json")
        shards.append({"rc": rc, "summary": json.load(open(path)) if os.path.exists(path) else None})
    return {"gpus": len(rcs), "shards": shards,
            "clean": all(sh["rc"] == 0 and sh["summary"] is not None for sh in shards)}


def split_tests(text: str) -> list[str]:
    """Comma-separated files and node ids; a comma inside a node id's [...] (the dual tests' shape
    tuples) is part of the id.  (first_gpu_run's --tests too.)"""
    return [t.strip() for t in re.split(r",(?![^\[]*\])", text) if t.strip()]


def collect(env: dict, marker: str | None = None, paths=TEST_FILES, pytest=None, cwd: str = ROOT) -> list[str]:
    """pytest's node ids of `paths` (TEST_FILES), or of those marked `marker` (collection only: it
    runs no kernel); `pytest` is the command (default: this python's), `env` the whole environment.
    Also first_gpu_run's."""
    mark = ["-m", marker] if marker else []
    res = subprocess.run([*(pytest or (sys.executable, "-m", "pytest")), "--collect-only", "-q", "-p",
                          "no:cacheprovider", *mark, *paths], cwd=cwd, capture_output=True, text=True, env=env)
    nodes = [ln.strip() for ln in res.stdout.splitlines() if "::" in ln]
    if not nodes and not marker:
        raise SystemExit(f"pytest collected nothing from {' '.join(paths)}:\n{res.stdout[-2000:]}{res.stderr[-2000:]}")
    return nodes


# Every CuTe DSL kernel's name starts so; the filter leaves torch's own kernels (the tests' input
# generation and reference) unchecked and uninstrumented, which makes the run faster.
OUR_KERNELS = "kns=kernel_cutlass"


def kernel_filter(tool: str, all_kernels: bool) -> str | None:
    """The --kernel-name filter for `tool`: ours, except for initcheck (see the module's text)."""
    return None if all_kernels or tool == "initcheck" else OUR_KERNELS


# memcheck and initcheck see each tensor's own bounds only without torch's caching allocator (module
# doc); graph capture needs it, so tests marked `graphs` run apart with it on.  Without the cache a
# process under memcheck ran out of GPU memory after ~50 of the slice's tests (exp. 184: memcheck's
# own device memory grows ~1 GB per test where the plain process stays under 1.7 GB, exp. 186), so
# those runs take at most EXACT_CHUNK tests per process.
EXACT_ALLOCATIONS = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
EXACT_TOOLS = ("memcheck", "initcheck")
EXACT_CHUNK = 16


def runs_of(tool: str, nodes: list[str], graph_nodes) -> list[tuple[str, list[str], dict]]:
    """[(log suffix, nodes, extra environment)]: one run of the whole slice, or for EXACT_TOOLS the
    slice without `graph_nodes` on exact allocations in chunks of EXACT_CHUNK (".1", ".2", ...)
    and those nodes apart (".graphs") with the caching allocator; empty runs left out."""
    if tool not in EXACT_TOOLS:
        return [("", list(nodes), {})]
    graph_nodes = set(graph_nodes)
    plain = [n for n in nodes if n not in graph_nodes]
    graphs = [n for n in nodes if n in graph_nodes]
    runs = [(f".{i // EXACT_CHUNK + 1}", plain[i:i + EXACT_CHUNK], EXACT_ALLOCATIONS)
            for i in range(0, len(plain), EXACT_CHUNK)]
    return runs + ([(".graphs", graphs, {})] if graphs else [])


def control_command(binary: str, tool: str, log: str, kernels: str | None = OUR_KERNELS) -> list[str]:
    """compute-sanitizer `tool` over the positive control of its kind (tools/sanitize_controls.py),
    with the sweep's filter."""
    from sanitize_controls import control_for

    cmd = sanitizer_command(binary, tool, log, [], kernels)
    return cmd[:cmd.index(sys.executable)] + [sys.executable, os.path.join(ROOT, "tools", "sanitize_controls.py"),
                                              control_for(tool)]


def control_caught(parsed: dict) -> bool:
    """Whether the tool reported the control's planted bug in a kernel of ours (`parse_sanitizer`
    plus `reported_kernels` of its log)."""
    found = parsed.get("hazards") if "hazards" in parsed else parsed.get("errors")
    return bool(found) and parsed.get("printed", {}).get("ours", 0) > 0


def sanitizer_command(binary: str, tool: str, log: str, nodes: list[str], kernels: str | None = OUR_KERNELS) -> list[str]:
    """One compute-sanitizer process over pytest on `nodes` (API errors off: torch and the DSL probe
    driver entry points at import, which memcheck would count); -v so a run cut short still says
    which tests it finished."""
    filt = ["--kernel-name", kernels] if kernels else []
    # Every report of a tool with known reports is printed (session 60 ran a print limit of 3000;
    # a few MB of log per thousand reports), so each can be told from the known ones
    # (`parse_sanitizer`).
    limit = ["--print-limit", "100000"] if tool in KNOWN_TOOLS else ["--print-limit", "100"]
    return [binary, "--tool", tool, "--report-api-errors", "no", "--target-processes", "all", *filt,
            *limit, "--log-file", log, sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider", *nodes]


# Reports known to be the tool's, not our kernels' (each with its evidence): parse_sanitizer counts
# them as "known", and `clean` lets them pass.  (tool, report line, kernel-name prefix, why)
KNOWN_REPORTS = (
    ("initcheck", "Uninitialized __global__ memory read of size 4 bytes", "kernel_cutlass_setup_kernel",
     "exp. 184: initcheck counts tensormap.cp_fenceproxy (the sm_100a grouped setup kernel's descriptor "
     "publish, 128 bytes shared -> global) as a read of each 4-byte word of its global destination: a "
     "probe kernel copying into a buffer nothing wrote gets 32 such reports, and its copy is exact "
     "(notes/patches/exp184_sanitizer/cp_fenceproxy_probe.py).  The setup kernel's own table reads are "
     "16 and 8 bytes wide, so they are not covered by this entry"),
)
KNOWN_TOOLS = {k[0] for k in KNOWN_REPORTS}


_ERRORS = re.compile(r"=+ ERROR SUMMARY: (\d+) errors?")
_RACES = re.compile(r"=+ RACECHECK SUMMARY: (\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_PYTEST = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected|xfailed|xpassed)\b")


_AT = re.compile(r"^=+\s+at (?:void )?([A-Za-z_][\w:]*)", re.M)
# racecheck names the kernel in the report's own line, once per hazard pair (session 61, H200: its
# control's "Error: Race reported between Write access at kernel_cutlass_...+0xb0" has no "at" frame
# line, so the sweep called the caught control missed).
_RACE_AT = re.compile(r"^=+ (?:Error|Warning): Race reported between \w+ access at (?:void )?([A-Za-z_][\w:]*)", re.M)


def reported_kernels(text: str) -> dict:
    """How many printed reports name each kernel family: {"ours": n, "other": n} (ours: CuTe DSL
    kernels, kernel_cutlass_*), from each report's device frame line ("at <kernel>+0x..") or, for
    racecheck, its "Race reported between ... access at <kernel>+0x.." line."""
    names = _AT.findall(text) + _RACE_AT.findall(text)
    ours = sum(n.startswith("kernel_cutlass") for n in names)
    return {"ours": ours, "other": len(names) - ours}


_REPORT = re.compile(r"^=+ (\S[^\n]*)\n=+\s+at (?:void )?([A-Za-z_][\w:]*)", re.M)


def known_reports(text: str, tool: str) -> int:
    """How many printed reports in `text` are one of KNOWN_REPORTS for `tool` (the report line and
    the kernel of its "at" line)."""
    known = [(line, kernel) for t, line, kernel, _why in KNOWN_REPORTS if t == tool]
    return sum(any(head == line and name.startswith(kernel) for line, kernel in known)
               for head, name in _REPORT.findall(text))


def parse_sanitizer(text: str, tool: str | None = None) -> dict:
    """Errors a sanitizer log reports: {"errors": n} (racecheck: also "hazards" and "warnings";
    with a `tool` that has KNOWN_REPORTS: also "known", how many of the errors are those);
    "errors" None when the log holds no summary line (the tool or the process died first).
    With --target-processes all every process writes a summary; they are added up."""
    races = _RACES.findall(text)
    if races:
        return {"errors": sum(int(e) for _h, e, _w in races), "hazards": sum(int(h) for h, _e, _w in races),
                "warnings": sum(int(w) for _h, _e, w in races)}
    errs = _ERRORS.findall(text)
    out = {"errors": sum(int(e) for e in errs) if errs else None}
    if tool in KNOWN_TOOLS:
        out["known"] = known_reports(text, tool)
    return out


def parse_pytest(text: str) -> dict:
    """pytest -q's final counts, e.g. {"passed": 60, "skipped": 2}."""
    lines = [ln for ln in text.splitlines() if re.search(r"\d+ (passed|failed|errors?)\b", ln)]
    if not lines:
        return {}
    out = {}
    for n, what in _PYTEST.findall(lines[-1]):
        out["errors" if what.startswith("error") else what] = int(n)
    return out


def clean(result: dict) -> bool:
    """No error but known ones (KNOWN_REPORTS), a summary line, pytest's counts (it ran to its end),
    and no test failed.  A known report makes the tool's exit status 1, so rc is not asked of a run
    whose every error is known."""
    san, tests = result["sanitizer"], result["pytest"]
    errors, known = san.get("errors"), san.get("known", 0)
    return errors is not None and errors == known and (result["rc"] == 0 or known > 0) \
        and not tests.get("failed") and not tests.get("errors") and bool(tests.get("passed") or tests.get("skipped"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="sanitize", help="folder for the logs and summary.json")
    ap.add_argument("--tools", default=",".join(TOOLS), help=f"comma-separated, of {', '.join(TOOLS)}")
    ap.add_argument("--per-test", type=int, default=1, help="parametrizations per test function")
    ap.add_argument("--serial", action="store_true", help="one tool after another (default: side by side)")
    ap.add_argument("--seed", type=int, default=None, help="NVFP4_TEST_SEED (default: $NVFP4_TEST_SEED, else drawn here)")
    ap.add_argument("--start", type=int, default=0, help="skip the slice's first START tests (resume a cut run)")
    ap.add_argument("--count", type=int, default=None, help="run at most COUNT tests from START")
    ap.add_argument("--shard", default=None, help="I/N: every N-th test of the slice from the I-th (one GPU each)")
    ap.add_argument("--marker", default=None, help="only the slice's tests with this pytest mark (e.g. graphs)")
    ap.add_argument("--gpus", type=int, default=1,
                    help="spread the slice over this many GPUs, one interleaved shard each (DIR/shardI; "
                         "exp. 185 ran it on two H200s in one 10-minute call)")
    ap.add_argument("--all-kernels", action="store_true",
                    help="check torch's kernels too (default: ours only; initcheck always checks all)")
    ap.add_argument("--files", default=",".join(TEST_FILES),
                    help="comma-separated test files or node ids whose tests make the slice (default: %(default)s)")
    argv = sys.argv[1:] if argv is None else list(argv)
    args = ap.parse_args(argv)
    if args.shard:
        parse_shard(args.shard)  # a bad --shard fails before any GPU work
    paths = split_tests(args.files)
    if not paths:
        raise SystemExit("sanitize_sweep: --files names no test file")
    if args.gpus < 1 or (args.gpus > 1 and args.shard):
        raise SystemExit("sanitize_sweep: --gpus wants N >= 1, and makes its own shards (no --shard with it)")
    tools = [t for t in args.tools.split(",") if t]
    bad = [t for t in tools if t not in TOOLS]
    if bad:
        raise SystemExit(f"sanitize_sweep: unknown tool(s) {bad}; known: {', '.join(TOOLS)}")

    binary = sanitizer_binary()
    sys.path.insert(0, ROOT)
    import torch

    if binary is None or not torch.cuda.is_available():
        print(f"sanitize_sweep: {'no CUDA GPU' if binary else 'no compute-sanitizer'} here; nothing run",
              file=sys.stderr)
        return 2
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    seed = args.seed if args.seed is not None else int(os.environ.get("NVFP4_TEST_SEED") or random.randrange(1 << 30))
    if min(args.gpus, torch.cuda.device_count()) > 1:
        gpus = visible_gpus(min(args.gpus, torch.cuda.device_count()))
        procs = [subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **extra})
                 for cmd, extra in shard_runs(argv, gpus, out_dir, seed)]
        merged = {"seed": seed, **merge_shards(out_dir, [p.wait() for p in procs])}
        with open(os.path.join(out_dir, "summary.json"), "w") as f:
            json.dump(merged, f, indent=1)
        print(f"sanitize_sweep: {len(gpus)} shards, exit statuses {[sh['rc'] for sh in merged['shards']]}", flush=True)
        return 0 if merged["clean"] else 1
    env = {**os.environ, "NVFP4_TEST_SEED": str(seed)}
    graph_nodes = set(collect(env, "graphs", paths))
    only = None if not args.marker else graph_nodes if args.marker == "graphs" else set(collect(env, args.marker, paths))
    nodes = pick_nodes(slice_nodes(env, paths, args.per_test), args.start, args.count, args.shard, only)
    if not nodes:  # pytest given no node ids would run every test under tests/
        raise SystemExit(f"sanitize_sweep: no test left to run of {','.join(paths)} after --start {args.start} "
                         f"--count {args.count} --shard {args.shard} --marker {args.marker}")
    version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    summary = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
               "device": torch.cuda.get_device_name(0), "sanitizer": version[-1] if version else binary,
               "seed": seed, "files": paths, "start": args.start, "shard": args.shard, "marker": args.marker,
               "nodes": nodes, "tools": {}}
    print(f"sanitize_sweep: {len(nodes)} tests x {tools}, NVFP4_TEST_SEED={seed}", flush=True)

    def sanitize(tool, cmd, log, out, extra_env) -> dict:
        """One compute-sanitizer process: its exit status, time and the errors its log reports."""
        t0 = time.time()
        with open(out, "w") as fh:
            rc = subprocess.run(cmd, cwd=ROOT, env={**env, **extra_env}, stdout=fh, stderr=subprocess.STDOUT).returncode
        text = open(log).read() if os.path.exists(log) else ""
        return {"rc": rc, "seconds": round(time.time() - t0),
                "sanitizer": {**parse_sanitizer(text, tool), "printed": reported_kernels(text)},
                "pytest": parse_pytest(open(out).read())}

    def one_tool(tool):
        kernels = kernel_filter(tool, args.all_kernels)
        exact = EXACT_ALLOCATIONS if tool in EXACT_TOOLS else {}
        base = os.path.join(out_dir, tool)
        control = sanitize(tool, control_command(binary, tool, base + ".control.log", kernels),
                           base + ".control.log", base + ".control.out", exact)
        control = {"caught": control_caught(control["sanitizer"]), "exact_allocations": bool(exact),
                   **control["sanitizer"]}
        runs = []
        for suffix, run_nodes, extra in runs_of(tool, nodes, graph_nodes):
            log, out = base + suffix + ".log", base + suffix + ".out"
            r = sanitize(tool, sanitizer_command(binary, tool, log, run_nodes, kernels), log, out, extra)
            runs.append({"log": os.path.basename(log), "tests": len(run_nodes), "exact_allocations": bool(extra),
                         **r, "clean": clean(r)})
        result = {"kernels": kernels or "all", "control": control, "runs": runs,
                  "clean": control["caught"] and all(r["clean"] for r in runs)}
        summary["tools"][tool] = result
        print(f"[{tool}] {json.dumps(result)}", flush=True)

    if args.serial:
        for tool in tools:
            one_tool(tool)
    else:
        threads = [threading.Thread(target=one_tool, args=(t,)) for t in tools]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return 0 if tools and all(summary["tools"].get(t, {}).get("clean") for t in tools) else 1


if __name__ == "__main__":
    sys.exit(main())
