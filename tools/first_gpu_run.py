"""The first session on a GPU whose kernels have never run here (a B200: sm_100a): one command for
the checks README's "What has run where" asks for, in that order, with every output kept.

    python3 tools/first_gpu_run.py [--out first_gpu_run] [--quick] [--no-timing] [--sanitize]
                                   [--sanitize-tools T,..] [--gpus N] [--draws leaderboard,wide]
                                   [--budget SECONDS] [--resume] [--chunk K] [--test-timeout S]
                                   [--tests FILE_OR_ID,..] [--max-bisect N]

Steps (each writes DIR/<step>*.log; DIR/summary.json holds what they found, rewritten after every
pytest process and every step, so a run cut short keeps what it had found):
  1. device     the GPU, its capability and driver, and the arch our kernels compile for there
  2. gpu_tests  pytest tests/test_gpu_kernels.py tests/test_gpu_bundle.py tests/test_gpu_masked.py
                (every GPU test), once per input draw
                (NVFP4_TEST_DRAW): the leaderboard's, then the wide one (every e2m1 code, every finite
                e4m3 scale on each operand: what real checkpoints hold and the leaderboard's inputs
                never set); steps gpu_tests and gpu_tests_wide.  The draw's node ids are cut into
                chunks of --chunk tests, run one pytest process per GPU at a time (CUDA_VISIBLE_DEVICES
                = that GPU; logs DIR/<step>.cI.log), then the tests marked `two_gpus` with every GPU
                visible.  A test that reports nothing for --test-timeout seconds (a hung kernel; 300
                by default) is killed and counted failed, as is a test whose process dies under it (a
                fault that kills python) and one after which the process's CUDA context was lost (a
                kernel fault: tools/cuda_context_guard.py ends the pytest session there, naming it),
                and its chunk goes on after it in a new process.  A hang or death after a test reported
                and before the next one started (its teardown, the guard's synchronize) is that
                test's.  --tests runs other files instead, in this step and in step 6
                (tests/planted_gpu_faults.py: this tool's own check on a GPU).
  3. bisect     each failed test (the first --max-bisect, 12) again, alone, with NVFP4_GRAPHS=0
                (no CUDA-graph replay), then also NVFP4_TABLE_WRITER=0 (grouped: no
                table-writer kernel; each address set's workspace uploaded once): which layer a
                failure lives in -- it passes once the layer is off -- or the kernel itself (it
                fails with both off); one failure per GPU at a time (a two-GPU test with every GPU
                visible).  A test marked `graphs` captures graphs or sets a layer's switch itself, so
                its "the kernel" says it may be that layer; a rerun that skips gets no verdict
  4. timing     benchmarks/leaderboard_timing.py, by default and with NVFP4_GRAPHS=0
  5. bench      benchmarks/bench.py --json --png (the main job)
                (a timing or bench step whose log stops growing for --test-timeout is killed and
                recorded as hung, so a --resume does not run it again)
  6. sanitize   with --sanitize: tools/sanitize_sweep.py, one tool after another (--sanitize-tools;
                default all four), each tool's slice in interleaved shards (`--shard I/N`, N at least
                4 and a multiple of the GPUs), one process per GPU at a time; logs in
                DIR/sanitize/<tool>/shardI.  A shard is what a --resume redoes (racecheck's whole slice
                took 15-22 minutes of one GPU in sessions 51 and 61; a quarter of it, ~5).  A shard whose
                folder stops growing for --test-timeout seconds (a kernel hung under the tool) is killed
                and recorded as hung, naming the test it was in, so a --resume does not run it again
Timing runs only for a problem whose tests all passed: a number from a wrong kernel is no number.

Calls with a time limit (the device tool's 10 minutes a command): --budget SECONDS ends the run
before that many seconds -- no new process starts within 30 s of it, and what still runs at it is
stopped and left for later -- then summary.json says "complete": false and the exit code is 3.
A SIGTERM (`timeout`) ends it the same way, its child processes included.
Run the same command again with --resume (the same DIR, kept on the machine between calls) and it
goes on: the stored test seed, every test with a result and every finished step are kept, the rest
run.  A whole first run on a B200 machine, each call ending with its logs packed:
    timeout 590 python3 tools/first_gpu_run.py --out first_b200 --sanitize --budget 540 --resume; \\
    tar czf $OUT/first_b200.tgz first_b200
repeated until summary.json says "complete": true.

--quick limits step 2 to the leaderboard's test and benchmark shapes of both problems
(`test_dual`, `test_grouped`), the single-file bundles and the three sm_100a layer checks
(the grouped setup kernel's descriptors, the grouped and the dual launch paths with a probe
kernel: all three ran on an H200), for a first look in a few minutes.  On a B200, a failure with
those checks passing points at the main kernel.
A failure that is not clearly one problem's (e.g. a table-writer test) holds back both timings.
Exit code: 0 when every test passed and every step ran, 1 when any test failed, 2 without a CUDA
GPU (nothing run), 3 when --budget ran out first (rerun with --resume).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_context_guard import lost_in_log  # noqa: E402
from sanitize_sweep import TOOLS as SANITIZER_TOOLS, collect as sweep_collect, split_tests, visible_gpus  # noqa: E402

# every GPU test file (on sm_100 test_gpu_masked.py checks MaskedGroupedGemm's refusal of the GPU)
GPU_TESTS = ["tests/test_gpu_kernels.py", "tests/test_gpu_bundle.py", "tests/test_gpu_masked.py"]
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
PYTEST = [sys.executable, "-m", "pytest"]  # (CPU tests put a stand-in here)
TWO_GPU_MARK = "two_gpus"
GRAPHS_MARK = "graphs"  # (captures CUDA graphs itself or forces a layer's switch: bisection cannot remove it)
LAST_START_S = 30.0  # no process starts this close to --budget's end
POLL_S = 1.0
# pytest -v's line for a finished test: "<node id> PASSED   [ 12%]" (node ids may hold spaces)
_RESULT = re.compile(r"^(.+?) (PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)(?:\s|$)")
BAD = ("FAILED", "ERROR")


def problem_of(node_id: str) -> str:
    """'dual', 'group' or 'other' for a GPU test id (by the test's name and parameters)."""
    name = node_id.split("::", 1)[-1].lower()
    if "group" in name or "masked" in name or "moe" in name:
        return "group"
    return "dual" if "dual" in name else "other"


def verdict(results: dict) -> str:
    """Where a failure lives, from its bisect results {step: passed, or "skipped"}."""
    if "skipped" in results.values():
        return "no verdict: it skipped when rerun alone (see its bisect log)"
    if results.get("graphs_off") is True:
        return "CUDA-graph replay (passes with NVFP4_GRAPHS=0)"
    if results.get("graphs_and_writer_off") is True:
        return "table writer / descriptor setup (passes with NVFP4_TABLE_WRITER=0 as well)"
    return "the kernel (fails with both layers off)"


def results_in_log(text: str, nodes) -> dict:
    """{node id: outcome} of the tests of `nodes` that pytest -v reported in `text`; a test with a
    passing call and a failing teardown (two lines) counts as failed."""
    known, out = set(nodes), {}
    for line in text.splitlines():
        m = _RESULT.match(line)
        if m and m.group(1) in known and out.get(m.group(1)) not in BAD:
            out[m.group(1)] = m.group(2)
    return out


def running_in_log(text: str, nodes) -> str | None:
    """The test of `nodes` pytest -v had started and not reported when `text` was read: the last line
    that begins with a node id not followed by an outcome.  pytest prints the id as a test starts and
    the outcome on the same line once it ends; a hung test's id ends the log, and a process that
    died under a test has its faulthandler's "Fatal Python error: ..." after the id (exp. 189: the
    first version looked only at an id alone on the log's last line, so a real death went unnamed)."""
    reported = results_in_log(text, nodes)
    running = None
    for line in text.splitlines():
        for node in nodes:
            after = line[len(node):len(node) + 1]  # ("" or a space: not a longer id that begins alike)
            if node not in reported and line.startswith(node) and (not after or after.isspace()):
                running = node
    return running


def folder_bytes(path: str) -> int:
    """The bytes of every file under `path` (0 if there is none yet): a sanitizer shard's progress."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def started_not_finished(path: str) -> str | None:
    """In the newest pytest output (`*.out`) under `path`, the last line that starts a test and
    reports no outcome (pytest -v: the node id, then the outcome on the same line): the test a hung
    sanitizer run was in."""
    outs = [os.path.join(root, f) for root, _d, files in os.walk(path) for f in files if f.endswith(".out")]
    if not outs:
        return None
    lines = open(max(outs, key=os.path.getmtime), errors="replace").read().splitlines()
    started = [ln.strip() for ln in lines if ln.startswith("tests/") and "::" in ln and not _RESULT.match(ln)]
    return started[-1] if started else None


def chunk_size(n_tests: int, gpus: int, asked: int | None) -> int:
    """Tests per pytest process: --chunk, else about three chunks per GPU, 8 to 60 tests each (one
    process compiles each config it needs once: fewer, larger chunks compile less)."""
    if asked:
        return asked
    return max(8, min(60, math.ceil(n_tests / (3 * max(1, gpus)))))


def sanitize_shards(gpus: int) -> int:
    """Shards of each sanitizer tool's slice: at least 4 (~18 of the 71 tests each: racecheck's
    shard then fits a 10-minute call on one GPU, exp. 185's 303-359 s per 18 tests on an H200), a
    multiple of the GPUs so they end together."""
    return gpus * math.ceil(4 / gpus)


def kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        p.kill()


class Run:
    """One first_gpu_run: its output folder, summary (saved after every change), deadline and
    GPUs.  Methods that start processes return None when the budget stopped them (nothing
    recorded: a --resume runs them again)."""

    def __init__(self, out_dir: str, summary: dict, gpus: list[str], deadline: float | None,
                 test_timeout: float, seed_env: dict):
        self.out_dir, self.summary, self.gpus = out_dir, summary, gpus
        self.deadline, self.test_timeout, self.seed_env = deadline, test_timeout, seed_env
        self.lock = threading.RLock()
        self.stopped = False  # the budget ran out, or a SIGTERM came
        self.interrupted = False
        self.live: set[subprocess.Popen] = set()

    def interrupt(self, *_signal) -> None:
        """SIGTERM (`timeout`'s): stop every process this run started -- each is in a session of its
        own, so no signal to this process reaches them -- and end as the budget would (exit 3)."""
        self.interrupted = self.stopped = True
        for p in list(self.live):
            kill_group(p)

    def save(self) -> None:
        with self.lock:
            tmp = os.path.join(self.out_dir, "summary.json.tmp")
            with open(tmp, "w") as f:
                json.dump(self.summary, f, indent=1)
            os.replace(tmp, os.path.join(self.out_dir, "summary.json"))

    def may_start(self) -> bool:
        if self.deadline is not None and time.time() > self.deadline - LAST_START_S:
            self.stopped = True
        return not self.stopped

    def _watch(self, cmd, log_path, env, progress):
        """Run `cmd` (output to log_path) until it ends, the budget ends (-> "budget") or
        `progress()` (a value that changes as the process gets on: tests reported, bytes written)
        stays the same for test_timeout seconds (-> "timeout")."""
        t0 = time.time()
        with open(log_path, "w") as log:
            log.write(f"$ {' '.join(cmd)}  (env {env})\n")
            log.flush()
            p = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **env},
                                 start_new_session=True)
            self.live.add(p)
            why, seen, last = None, 0, time.time()
            while p.poll() is None and not self.interrupted:
                time.sleep(POLL_S)
                now = time.time()
                n = progress()
                if n != seen:
                    seen, last = n, now
                if self.deadline is not None and now >= self.deadline:
                    why = "budget"
                elif now - last > self.test_timeout:
                    why = "timeout"
                if why:
                    kill_group(p)
                    break
            if self.interrupted:
                why = "budget"
                kill_group(p)
            rc = p.wait()
            self.live.discard(p)
        if why == "budget":
            self.stopped = True
        return rc, time.time() - t0, why

    def step(self, name: str, cmd: list[str], env: dict | None = None, progress=None) -> dict | None:
        """A whole step in one process (timing, bench, a sanitizer shard), run unbuffered; its log
        DIR/<name>.log.  A step that makes no progress -- `progress()` (see _watch), by default its
        log's size: timing and bench print as each case and phase ends -- for test_timeout seconds
        is killed and recorded with "hung", so a --resume does not run it again (a budget stop
        records nothing: a --resume runs the step again)."""
        if not self.may_start():
            return None
        log_path = os.path.join(self.out_dir, f"{name}.log")
        rc, secs, why = self._watch(cmd, log_path, {**(env or {}), "PYTHONUNBUFFERED": "1"},
                                    progress or (lambda: os.path.getsize(log_path)))
        print(f"[{name}] rc {rc} in {secs:.0f} s{f' (stopped: {why})' if why else ''}", flush=True)
        if why == "budget":
            return None
        return {"rc": rc, "seconds": round(secs),
                **({"hung": f"no progress in {self.test_timeout:.0f} s"} if why == "timeout" else {})}

    def pytest(self, name: str, nodes: list[str], env: dict) -> dict | None:
        """`nodes` in one pytest -v process (log DIR/<name>.log): {"results": {node: outcome},
        "lost": the test that was running when the process hung (killed after test_timeout) or
        died -- the last one reported, if none had started after it -- or after which the CUDA context
        was found lost (cuda_context_guard), or None; "why": how;
        "rest": nodes not run, "rc", "seconds", "stopped"}.
        A budget stop also returns what finished before it (nothing lost, unless the guard's line
        says so), less a last test stopped in its teardown or context check."""
        if not self.may_start():
            return None
        log_path = os.path.join(self.out_dir, f"{name}.log")
        cmd = [*PYTEST, "-v", "-rs", "--durations=10", "-p", "no:cacheprovider", *nodes]
        # (unbuffered: the log shows each test as it starts, which names a hung one)
        rc, secs, why = self._watch(cmd, log_path, {**self.seed_env, **env, "PYTHONUNBUFFERED": "1"},
                                    lambda: len(results_in_log(open(log_path).read(), nodes)))
        text = open(log_path).read()
        results = results_in_log(text, nodes)
        rest = [n for n in nodes if n not in results]
        lost, lost_why = None, None
        context = lost_in_log(text)  # (also after a budget stop: the guard's line was written before it)
        running = running_in_log(text, rest)
        if context and context[0] in nodes:
            # (the test was reported, passed or failed; what it left behind fails it)
            lost, lost_why = context[0], f"CUDA context lost after it: {context[1]}"
            rest = [n for n in rest if n != lost]
        elif why == "budget":
            if running is None and results:
                # stopped after a test reported and before the next began: in its teardown or the
                # context check, which could still have hung or found the context lost -- not final,
                # so a --resume runs it again (kept, a late hang or fault there passed for good)
                del results[list(results)[-1]]
                rest = [n for n in nodes if n not in results]
        elif why == "timeout" or rc not in (0, 1) or running:
            # (rc 0 or 1 with a test started and never reported: the process ended inside it, e.g.
            # os._exit; counted here, or its chunk would start again at the same test forever)
            hung = why == "timeout"
            lost = running
            if lost is None and results:
                # every test it started reported: the hang or death came after the last one, in its
                # teardown, the context check's synchronize (work it left running) or the process's
                # exit, so it is that test's
                lost = list(results)[-1]
                lost_why = (f"hung after it was reported: nothing finished in {self.test_timeout:.0f} s" if hung else
                            f"process died after it was reported, rc {rc}")
            else:
                if lost is None and hung and rest:
                    lost = rest[0]  # (nothing reported and none started: the first, so the chunk goes on)
                if lost:
                    rest.remove(lost)
                lost_why = (f"hung: no test finished in {self.test_timeout:.0f} s" if hung else
                            f"process died, rc {rc}")
        print(f"[{name}] {len(results)} of {len(nodes)} tests reported, rc {rc} in {secs:.0f} s"
              f"{f' ({why})' if why else ''}", flush=True)
        return {"results": results, "lost": lost, "why": lost_why if lost else None, "rest": rest, "rc": rc,
                "seconds": round(secs), "stopped": why}

    def on_gpus(self, jobs: list, work) -> None:
        """work(job, gpu) for every job, one at a time per GPU, the jobs taken in order."""
        jobs = list(jobs)
        take = threading.Lock()

        def worker(gpu):
            while True:
                with take:
                    if not jobs or self.stopped:
                        return
                    job = jobs.pop(0)
                work(job, gpu)

        threads = [threading.Thread(target=worker, args=(g,)) for g in self.gpus]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def tests(self, step: str, draw: str, nodes: list[str], two_gpu: set[str], size: int) -> dict:
        """Every test of `nodes` not yet reported in summary[step]: chunks of `size` on the GPUs,
        then the two-GPU tests with every GPU visible.  After a lost test (hung or its process
        died) its chunk goes on in a new process."""
        rec = self.summary.setdefault(step, {"draw": draw, "results": {}, "lost": {}, "chunks": []})
        rec.update(draw=draw, tests=len(nodes))
        todo = [n for n in nodes if n not in rec["results"] and n not in rec["lost"]]
        together = [n for n in todo if n in two_gpu] if len(self.gpus) > 1 else []
        alone = [n for n in todo if n not in together]
        count = [len(rec["chunks"])]

        def run_chunk(chunk, gpu):
            while chunk:
                with self.lock:
                    # (the next unused name: a chunk killed with the whole tool left a log but no record)
                    while os.path.exists(os.path.join(self.out_dir, f"{step}.c{count[0]}.log")):
                        count[0] += 1
                    name = f"{step}.c{count[0]}"
                    count[0] += 1
                r = self.pytest(name, chunk, {"NVFP4_TEST_DRAW": draw, "CUDA_VISIBLE_DEVICES": gpu})
                if r is None:
                    return
                with self.lock:
                    rec["results"].update(r["results"])
                    if r["lost"]:
                        rec["lost"][r["lost"]] = r["why"]
                    rec["chunks"].append({"log": f"{name}.log", "gpus": gpu, "tests": len(chunk), "rc": r["rc"],
                                          "seconds": r["seconds"], "stopped": r["stopped"]})
                self.save()
                if r["stopped"] == "budget" or (not r["lost"] and r["rc"] not in (0, 1)) or r["rest"] == chunk:
                    # (pytest itself failed, or ended reporting none of them: its tests stay unreported,
                    # the step incomplete -- never the same chunk again in this call)
                    return
                chunk = r["rest"]

        self.on_gpus([alone[i:i + size] for i in range(0, len(alone), size)], run_chunk)
        if together and not self.stopped:
            run_chunk(together, ",".join(self.gpus))
        left = [n for n in nodes if n not in rec["results"] and n not in rec["lost"]]
        rec["failed"] = [n for n in nodes if rec["results"].get(n) in BAD or n in rec["lost"]]
        rec["complete"] = not left
        rec["not_run"] = len(left)
        if left and not self.stopped:
            rec["note"] = f"{len(left)} tests not run: pytest did not complete; see {step}.c*.log"
        else:
            rec.pop("note", None)
        self.save()
        return rec

    def bisect(self, failures: list[tuple[str, str]], two_gpu: set[str] = frozenset(),
               sets_layers: set[str] = frozenset()) -> None:
        """Each (draw, node) again with one layer off after another, until it passes; a two-GPU test
        with every GPU visible (on one it skips), after the others.  A test in `sets_layers` (marked
        `graphs`: it captures CUDA graphs itself, or forces the graph or table-writer switch) keeps
        that layer whatever the bisection's environment says, so its verdict says so."""
        done = self.summary.setdefault("bisect", {})

        def one(item, gpu):
            draw, node = item
            key = f"{draw}: {node}"
            res = {}
            # (the draw kept whole and a hash of the key: a cut key left the same test's bisections
            # under both draws one log name, which two GPUs wrote and read at once)
            tail = "".join(ch if ch.isalnum() else "_" for ch in node)[-64:]
            safe = f"{draw}_{tail}_{hashlib.sha1(key.encode()).hexdigest()[:8]}"
            for step, env in BISECT_STEPS:
                r = self.pytest(f"bisect_{step}_{safe}", [node],
                                {"NVFP4_TEST_DRAW": draw, "CUDA_VISIBLE_DEVICES": gpu, **env})
                if r is None or r["stopped"] == "budget":
                    return
                if r["results"].get(node) == "SKIPPED" and r["lost"] != node:
                    res[step] = "skipped"
                    break
                # (a test that reported PASSED and then lost the context, hung or died still failed)
                res[step] = r["results"].get(node) == "PASSED" and r["lost"] != node
                if res[step]:
                    break
            why = verdict(res)
            if why.startswith("the kernel") and node in sets_layers:
                why += (", or a layer the test sets itself (marked `graphs`: NVFP4_GRAPHS=0 and "
                        "NVFP4_TABLE_WRITER=0 do not reach it); compare a test of the same kernel without it")
            with self.lock:
                done[key] = {**res, "verdict": why}
            self.save()

        todo = [f for f in failures if f"{f[0]}: {f[1]}" not in done]
        together = [f for f in todo if f[1] in two_gpu] if len(self.gpus) > 1 else []
        self.on_gpus([f for f in todo if f not in together], one)
        for f in together:
            if not self.stopped:
                one(f, ",".join(self.gpus))

    def sanitize(self, tools: list[str], files: list[str] | None = None) -> None:
        """Each tool's slice (tools/sanitize_sweep.py; of `files` if given: --tests) in `sanitize_shards`
        interleaved shards, one process per GPU at a time, each shard a unit a resumed call need not
        redo (racecheck's whole slice took 15-22 minutes of one GPU: more than a 10-minute call)."""
        steps = self.summary.setdefault("steps", {})
        n = self.summary.setdefault("sanitize_shards", sanitize_shards(len(self.gpus)))
        seed = self.seed_env["NVFP4_TEST_SEED"]
        units = {f"sanitize_{t}_{i}of{n}": (t, i) for t in tools for i in range(n)}

        def one(name, gpu):
            tool, i = units[name]
            shard_dir = os.path.join(self.out_dir, "sanitize", tool, f"shard{i}")
            cmd = [sys.executable, "tools/sanitize_sweep.py", "--tools", tool, "--shard", f"{i}/{n}", "--seed", seed,
                   "--out", shard_dir, *(["--files", ",".join(files)] if files else [])]
            # A kernel that hangs under the tool would otherwise hold its shard until the budget, and a
            # --resume would run that shard again, forever: a shard whose folder (the tool's logs,
            # pytest -v's lines, unbuffered) stops growing for --test-timeout is killed and recorded as hung.
            r = self.step(name, cmd, {"CUDA_VISIBLE_DEVICES": gpu}, progress=lambda: folder_bytes(shard_dir))
            if r is not None and "hung" in r:
                r["hung"] += f"; running: {started_not_finished(shard_dir)}"
            if r is not None:
                with self.lock:
                    steps[name] = r
                self.save()

        self.on_gpus([u for u in units if u not in steps], one)
        per_tool = {t: [steps.get(u) for u, (tool, _i) in units.items() if tool == t] for t in tools}
        self.summary["sanitize"] = {
            "gpus": len(self.gpus), "shards": n, "units": list(units),
            "tools": {t: {"shards_done": sum(r is not None for r in rs),
                          "clean": all(r is not None and r["rc"] == 0 for r in rs),
                          "hung": [u for u, (tool, _i) in units.items() if tool == t and "hung" in (steps.get(u) or {})]}
                      for t, rs in per_tool.items()},
            "clean": all(r is not None and r["rc"] == 0 for rs in per_tool.values() for r in rs)}
        self.save()


def collect(paths: list[str], env: dict, marker: str | None = None) -> list[str]:
    """pytest's node ids of `paths` (or of those marked `marker`) with `env` added, collection only."""
    return sweep_collect({**os.environ, **env}, marker, paths, PYTEST, ROOT)


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
    t_start = time.time()
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="first_gpu_run", help="folder for the logs and summary.json")
    ap.add_argument("--quick", action="store_true", help="only the leaderboard's benchmark shapes and the bundles")
    ap.add_argument("--tests", default=None,
                    help="comma-separated test files or node ids for step 2 instead of the GPU tests "
                         "(tests/planted_gpu_faults.py: this tool's own check on a GPU)")
    ap.add_argument("--no-timing", action="store_true", help="stop after the tests and their bisection")
    ap.add_argument("--max-bisect", type=int, default=12,
                    help="bisect at most this many failures, the first ones")
    ap.add_argument("--sanitize", action="store_true",
                    help="last, the GPU tests' slice under compute-sanitizer (tools/sanitize_sweep.py)")
    ap.add_argument("--sanitize-tools", default=",".join(SANITIZER_TOOLS),
                    help="the sanitizer tools, run one after another (default: %(default)s)")
    ap.add_argument("--gpus", type=int, default=None,
                    help="GPUs to spread the tests, the bisection and the sanitizer over (default: every GPU visible)")
    ap.add_argument("--chunk", type=int, default=None,
                    help="tests per pytest process (default: about three chunks per GPU, 8 to 60 tests)")
    ap.add_argument("--test-timeout", type=float, default=300.0,
                    help="seconds a pytest process may go without a test finishing before its test counts as hung")
    ap.add_argument("--budget", type=float, default=None,
                    help="end the run within this many seconds (exit 3 if unfinished; go on with --resume)")
    ap.add_argument("--resume", action="store_true",
                    help="go on from DIR/summary.json: its seed, its tests' results and its finished steps")
    sys.path.insert(0, ROOT)
    from reference import DRAWS  # NVFP4_TEST_DRAW's values (tests/conftest.py)

    ap.add_argument("--draws", default=",".join(DRAWS),
                    help="the test input draws to run, in order (NVFP4_TEST_DRAW; default: %(default)s)")
    args = ap.parse_args(argv)
    if args.gpus is not None and args.gpus < 1:
        ap.error("--gpus: at least 1")
    if args.chunk is not None and args.chunk < 1:
        ap.error("--chunk: at least 1")
    draws = [d for d in args.draws.split(",") if d]
    if not draws or any(d not in DRAWS for d in draws):
        ap.error(f"--draws: a comma-separated subset of {','.join(DRAWS)}")
    tools = [t for t in args.sanitize_tools.split(",") if t]
    if not tools or any(t not in SANITIZER_TOOLS for t in tools):
        ap.error(f"--sanitize-tools: a comma-separated subset of {','.join(SANITIZER_TOOLS)}")
    if args.tests is not None and not split_tests(args.tests):
        ap.error("--tests: names no test file or node id")

    dev = device_info()
    if dev is None:
        print("first_gpu_run: no CUDA GPU here; nothing run (the GPU tests would all skip)", file=sys.stderr)
        return 2
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "summary.json")
    old = json.load(open(path)) if args.resume and os.path.exists(path) else {}
    # One test seed for the test run and every rerun and resumed call: test_dual / test_grouped name it
    # in their node ids, so a rerun in a new process finds its test only with the same NVFP4_TEST_SEED.
    seed = str(old["test_seed"] if "test_seed" in old else
               os.environ.get("NVFP4_TEST_SEED") or random.randrange(1 << 30))
    seed_env = {"NVFP4_TEST_SEED": seed}
    gpus = visible_gpus(min(args.gpus or dev.get("gpus", 1), dev.get("gpus", 1)))
    summary = {**old, "device": dev, "quick": args.quick, "tests": args.tests, "test_seed": int(seed),
               "gpus": len(gpus), "complete": False}
    summary.setdefault("date", time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    summary.setdefault("calls", []).append(time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()))
    deadline = t_start + args.budget if args.budget else None
    run = Run(out_dir, summary, gpus, deadline, args.test_timeout, seed_env)
    run.save()
    print(json.dumps(dev), flush=True)
    # (say which: a --resume that finds no summary -- e.g. a folder the machine did not keep between calls --
    # starts afresh with a new seed, and that should not pass unseen; exp. 191 lost ~500 s of device time so)
    done = sum(len({*rec.get("results", {}), *rec.get("lost", {})}) for step, rec in summary.items()
               if step == "gpu_tests" or step.startswith("gpu_tests_"))  # (a lost test is not run again either)
    print(f"first_gpu_run: {'resuming' if old else 'a fresh run in'} {out_dir} (call {len(summary['calls'])}, "
          f"NVFP4_TEST_SEED={seed}, {done} tests with a result kept)"
          + ("" if old or not args.resume else f"; --resume found no {path}"), flush=True)
    previous = signal.signal(signal.SIGTERM, run.interrupt)
    try:
        return run_all(run, args, draws, tools)
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_all(run: Run, args, draws: list[str], tools: list[str]) -> int:
    """Steps 2-6 (the module's text) on `run`; the exit code."""
    summary, gpus, out_dir, seed_env = run.summary, run.gpus, run.out_dir, run.seed_env
    paths = split_tests(args.tests) if args.tests else QUICK_TESTS if args.quick else GPU_TESTS
    failures = []  # (draw, node id)
    ran = set()  # every node id of every draw
    two_gpu, sets_layers = set(), set()  # (by pytest mark, over every draw)
    all_ran = True
    for draw in draws:
        if run.stopped:
            all_ran = False
            break
        step = "gpu_tests" if draw == "leaderboard" else f"gpu_tests_{draw}"
        env = {**seed_env, "NVFP4_TEST_DRAW": draw}
        nodes = collect(paths, env)
        ran.update(nodes)
        two_gpu.update(collect(paths, env, TWO_GPU_MARK))
        rec = run.tests(step, draw, nodes, two_gpu, chunk_size(len(nodes), len(gpus), args.chunk))
        all_ran &= rec["complete"]
        failures += [(draw, node) for node in rec["failed"]]

    summary["not_bisected"] = [f"{draw}: {node}" for draw, node in failures[args.max_bisect:]]
    for draw in sorted({d for d, _n in failures[:args.max_bisect]}):
        sets_layers.update(collect(paths, {**seed_env, "NVFP4_TEST_DRAW": draw}, GRAPHS_MARK))
    run.bisect(failures[:args.max_bisect], two_gpu, sets_layers)

    # a problem is timed only where some of its tests ran and none of them (or of neither problem's) failed:
    # with --tests a problem may have no test at all
    clean = set() if args.no_timing else {
        p for p in ("dual", "group") if all_ran and any(problem_of(n) == p for n in ran)
        and not any(problem_of(n) in (p, "other") for _d, n in failures)}
    summary["timed_problems"] = sorted(clean)
    steps = summary.setdefault("steps", {})
    todo = []
    if not args.no_timing:
        for p in sorted(clean):
            for tag, env in (("", {}), ("_graphs_off", {"NVFP4_GRAPHS": "0"})):
                js = os.path.join(out_dir, f"timing_{p}{tag}.json")
                todo.append((f"timing_{p}{tag}", [sys.executable, "benchmarks/leaderboard_timing.py", "--problem", p,
                                                  "--json", js], env))
        if clean == {"dual", "group"}:
            todo.append(("bench", [sys.executable, "benchmarks/bench.py", "--json", os.path.join(out_dir, "bench.json"),
                                   "--png", os.path.join(out_dir, "bench.png")], {}))
    for name, cmd, env in todo:
        if name not in steps:
            r = run.step(name, cmd, env)  # (watched by its log: a silent step is recorded hung)
            if r is not None:
                steps[name] = r
                run.save()
    needed = [name for name, _c, _e in todo]
    if args.sanitize:
        run.sanitize(tools, split_tests(args.tests) if args.tests else None)
        needed += summary["sanitize"]["units"]
    summary["complete"] = all_ran and not run.stopped and all(name in steps for name in needed)
    run.save()
    print(json.dumps({"failed": len(failures), "bisect": {k: v["verdict"] for k, v in summary["bisect"].items()},
                      "timed": sorted(clean), "complete": summary["complete"], "out": out_dir}, indent=1))
    if run.stopped:
        return 3
    return 0 if all_ran and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
