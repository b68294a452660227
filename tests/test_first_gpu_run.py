"""tools/first_gpu_run.py (the first session on a GPU our kernels have never run on), on CPU: its
pytest -v parsing and verdicts, and whole runs against a stand-in pytest (real processes: chunks
on several "GPUs", a hung test, a process that dies, a budget that runs out and the --resume that
goes on); and that without a GPU it runs nothing and says so."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import cuda_context_guard as G  # noqa: E402
import first_gpu_run as F  # noqa: E402

# pytest -v's lines as it prints them (node ids with spaces; a passing call with a failing teardown)
LOG = """$ python -m pytest -v ...
tests/test_gpu_kernels.py::test_dual[(256, 4096, 7168, 1)-1111] PASSED   [ 20%]
tests/test_gpu_kernels.py::test_dual[(256, 3072, 4096, 1)-1111] FAILED   [ 40%]
tests/test_gpu_kernels.py::test_grouped[96x128x256-1111] PASSED   [ 60%]
tests/test_gpu_kernels.py::test_grouped[96x128x256-1111] ERROR   [ 60%]
tests/test_gpu_bundle.py::test_bundle_runs_on_gpu[group] SKIPPED (no GPU)   [ 80%]
tests/test_gpu_kernels.py::test_table_writer_kernel_alone """
NODES = ["tests/test_gpu_kernels.py::test_dual[(256, 4096, 7168, 1)-1111]",
         "tests/test_gpu_kernels.py::test_dual[(256, 3072, 4096, 1)-1111]",
         "tests/test_gpu_kernels.py::test_grouped[96x128x256-1111]",
         "tests/test_gpu_bundle.py::test_bundle_runs_on_gpu[group]",
         "tests/test_gpu_kernels.py::test_table_writer_kernel_alone"]


def test_results_and_the_running_test_from_the_log():
    assert F.results_in_log(LOG, NODES) == {NODES[0]: "PASSED", NODES[1]: "FAILED", NODES[2]: "ERROR",
                                            NODES[3]: "SKIPPED"}
    assert F.results_in_log(LOG, NODES[:1]) == {NODES[0]: "PASSED"}  # only the nodes asked about
    assert F.running_in_log(LOG, NODES) == NODES[4]
    assert F.running_in_log(LOG + "PASSED  [100%]\n", NODES) is None
    # a process that died under the test: pytest's faulthandler writes on after the node id (exp. 189)
    died = LOG + "Fatal Python error: Segmentation fault\n\nCurrent thread 0x7f31 (most recent call first):\n"
    assert F.running_in_log(died, NODES[4:]) == NODES[4]
    assert F.running_in_log(died, NODES) == NODES[4]  # (the reported ones are not running)
    assert F.running_in_log(LOG + "PASSED  [100%]\nFatal Python error: Aborted\n", NODES) is None


def test_problem_of_and_verdicts():
    assert F.problem_of("tests/test_gpu_kernels.py::test_dual[(256, 3072, 4096, 1)-1111]") == "dual"
    assert F.problem_of("tests/test_gpu_kernels.py::test_grouped[96x128x256-1111]") == "group"
    assert F.problem_of("tests/test_gpu_kernels.py::test_cuda_graph_replay[group]") == "group"
    assert F.problem_of("tests/test_gpu_kernels.py::test_table_writer_kernel_alone") == "other"
    assert F.problem_of("tests/test_gpu_masked.py::test_masked_counts_on_the_gpu[4]") == "group"
    assert F.problem_of("tests/test_gpu_kernels.py::test_moe_calls[x]") == "group"
    assert F.verdict({"graphs_off": True}).startswith("CUDA-graph replay")
    assert F.verdict({"graphs_off": False, "graphs_and_writer_off": True}).startswith("table writer")
    assert F.verdict({"graphs_off": False, "graphs_and_writer_off": False}).startswith("the kernel")
    # each bisect step switches off one more layer than the one before
    (s1, e1), (s2, e2) = F.BISECT_STEPS
    assert e1.items() < e2.items()


def test_chunk_size():
    assert F.chunk_size(440, 8, None) == 19 and F.chunk_size(440, 1, None) == 60
    assert F.chunk_size(20, 8, None) == 8 and F.chunk_size(440, 8, 5) == 5


def test_two_gpu_tests_are_marked():
    """The test step covers every GPU test file, and its two-GPU tests carry the mark that runs them
    with every GPU visible."""
    assert sorted(F.GPU_TESTS) == sorted(f"tests/{f}" for f in os.listdir(os.path.join(ROOT, "tests"))
                                         if f.startswith("test_gpu") and f.endswith(".py"))
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", F.TWO_GPU_MARK, *F.GPU_TESTS],
                       cwd=ROOT, capture_output=True, text=True)
    nodes = [ln for ln in r.stdout.splitlines() if "::" in ln]
    assert sorted(n.split("::")[1].split("[")[0] for n in nodes) == [
        "test_masked_on_another_device", "test_tensors_on_another_device", "test_tensors_on_another_device"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU this would run the tool's whole sequence")
@pytest.mark.parametrize("tool, says", [("first_gpu_run.py", "no CUDA GPU"), ("sanitize_sweep.py", "nothing run")])
def test_gpu_tools_without_gpu_run_nothing(tmp_path, tool, says):
    """The two GPU session tools (first_gpu_run, sanitize_sweep) on a machine without a GPU: exit 2,
    say so, and write nothing."""
    out = tmp_path / "run"
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", tool), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 2 and says in r.stderr
    assert not out.exists()


# A stand-in for pytest: --collect-only prints the plan's node ids (its "two" ones under -m); a run
# prints each given node id as pytest -v does, then acts as the plan says for the draw and the layers
# switched off ("PASSED", "FAILED", "SLOW" (passes after 0.4 s), "HANG", "DIE" (SIGSEGV), "LOSE" (fails,
# then ends as tools/cuda_context_guard.py ends a session whose CUDA context is lost), "HANG_AFTER" /
# "DIE_AFTER" (reports PASSED, then hangs / dies before the next test starts), "EXIT1" (the process
# exits 1 inside the test, printing nothing), "LOSE_LATE" (reports PASSED, then the guard's line, then
# hangs)), and exits 1
# if a test failed (or, with "exit_at_start", exits so before any test).  Every run appends its nodes and environment to the calls file.
FAKE_PYTEST = textwrap.dedent('''
    import faulthandler, json, os, signal, sys, time
    plan = json.load(open(os.environ["FAKE_PLAN"]))
    args = sys.argv[1:]
    if "--collect-only" in args:
        marks = {"two_gpus": "two", "graphs": "graphs"}
        print("\\n".join(plan.get(marks[args[args.index("-m") + 1]], []) if "-m" in args else plan["nodes"]))
        sys.exit(0)
    nodes = [a for a in args if "::" in a]
    keys = ("CUDA_VISIBLE_DEVICES", "NVFP4_TEST_DRAW", "NVFP4_TEST_SEED", "NVFP4_GRAPHS", "NVFP4_TABLE_WRITER")
    with open(os.environ["FAKE_CALLS"], "a") as f:
        f.write(json.dumps({"nodes": nodes, "env": {k: os.environ.get(k) for k in keys}}) + "\\n")
    if plan.get("exit_at_start"):
        sys.exit(plan["exit_at_start"])
    layer = ("writer_off" if os.environ.get("NVFP4_TABLE_WRITER") == "0" else
             "graphs_off" if os.environ.get("NVFP4_GRAPHS") == "0" else os.environ["NVFP4_TEST_DRAW"])
    bad = False
    for node in nodes:
        sys.stdout.write(node + " ")
        sys.stdout.flush()
        act = plan["plan"].get(node, "PASSED")
        act = act.get(layer, act.get("default", "PASSED")) if isinstance(act, dict) else act
        if act == "HANG":
            time.sleep(600)
        if act in ("HANG_AFTER", "DIE_AFTER"):  # (reports PASSED, then hangs or dies: teardown, the guard's sync)
            print("PASSED   [ 50%]", flush=True)
            if act == "HANG_AFTER":
                time.sleep(600)
            faulthandler.enable()
            os.kill(os.getpid(), signal.SIGSEGV)
        if act == "DIE":  # (as under real pytest, whose faulthandler writes after the node id: exp. 189)
            faulthandler.enable()
            os.kill(os.getpid(), signal.SIGSEGV)
        if act == "EXIT1":  # (the process ends inside the test with rc 1 and no word: os._exit)
            os._exit(1)
        if act == "LOSE_LATE":  # (reports PASSED, the guard writes its line, then the process is slow to end)
            print("PASSED   [ 50%]")
            print("\\n" + os.environ["FAKE_MARK"] + node + " | CUDA error: unspecified launch failure", flush=True)
            time.sleep(600)
        if act == "SLOW":
            time.sleep(0.4)
            act = "PASSED"
        if act == "LOSE":
            print("FAILED   [ 50%]")
            print("\\n" + os.environ["FAKE_MARK"] + node + " | CUDA error: an illegal memory access was encountered",
                  flush=True)
            sys.exit(int(os.environ["FAKE_LOST_RC"]))
        bad |= act == "FAILED"
        print(act + "   [ 50%]", flush=True)
    sys.exit(1 if bad else 0)
''')


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """main() against the stand-in pytest on a machine with `gpus` fake GPUs; returns
    run(plan, *args) -> (exit code, summary, [calls]); the timing, bench and sanitizer steps are
    recorded in run.steps, not run (those named in run.fail exit 1)."""
    script = tmp_path / "fake_pytest.py"
    script.write_text(FAKE_PYTEST)
    calls_path, plan_path, out = tmp_path / "calls.jsonl", tmp_path / "plan.json", tmp_path / "out"
    monkeypatch.setattr(F, "PYTEST", [sys.executable, str(script)])
    monkeypatch.setattr(F, "POLL_S", 0.05)
    monkeypatch.setenv("FAKE_CALLS", str(calls_path))
    monkeypatch.setenv("FAKE_PLAN", str(plan_path))
    monkeypatch.setenv("FAKE_MARK", G.MARK)
    monkeypatch.setenv("FAKE_LOST_RC", str(G.CONTEXT_LOST_RC))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("NVFP4_TEST_SEED", raising=False)
    steps = []

    def fake_step(self, name, cmd, env=None, progress=None):
        steps.append((name, cmd, dict(env or {})))
        # (sanitizer shards are watched by their folder; timing and bench by their own log, the default)
        assert (progress is not None) == name.startswith("sanitize_")
        if name in run.hang:  # (as Run.step records a step its progress function saw stall)
            return {"rc": -9, "seconds": 0, "hung": "no progress in 300 s"}
        return {"rc": 1 if name in run.fail else 0, "seconds": 0}

    monkeypatch.setattr(F.Run, "step", fake_step)

    def run(plan, *args, gpus=3):
        monkeypatch.setattr(F, "device_info", lambda: {"name": "fake", "gpus": gpus})
        plan_path.write_text(json.dumps({"two": [], "plan": {}, **plan}))
        if calls_path.exists():
            calls_path.unlink()
        steps.clear()
        rc = F.main(["--out", str(out), *args])
        calls = [json.loads(ln) for ln in calls_path.read_text().splitlines()] if calls_path.exists() else []
        return rc, json.load(open(out / "summary.json")), calls

    run.steps, run.fail, run.hang, run.out = steps, set(), set(), out
    return run


def _nodes(n, prefix="tests/test_gpu_kernels.py::test_dual[(256, 4096, {}, 1)-7]"):
    return [prefix.format(i) for i in range(n)]


def test_chunks_spread_over_the_gpus_and_two_gpu_tests_see_all(fake):
    nodes = _nodes(9) + ["tests/test_gpu_kernels.py::test_tensors_on_another_device[dual]"]
    rc, summary, calls = fake({"nodes": nodes, "two": nodes[-1:]}, "--draws", "leaderboard", "--chunk", "2",
                              "--no-timing")
    assert rc == 0 and summary["complete"] and summary["gpus"] == 3
    rec = summary["gpu_tests"]
    assert set(rec["results"]) == set(nodes) and rec["failed"] == [] and rec["complete"]
    ran = [n for c in calls for n in c["nodes"]]
    assert sorted(ran) == sorted(nodes)  # each test once
    single = [c for c in calls if c["nodes"] != nodes[-1:]]
    assert len(single) == 5 and {c["env"]["CUDA_VISIBLE_DEVICES"] for c in single} <= {"0", "1", "2"}
    assert len({c["env"]["CUDA_VISIBLE_DEVICES"] for c in single}) > 1
    (two,) = [c for c in calls if c["nodes"] == nodes[-1:]]
    assert two["env"]["CUDA_VISIBLE_DEVICES"] == "0,1,2"
    assert len({c["env"]["NVFP4_TEST_SEED"] for c in calls}) == 1
    assert str(summary["test_seed"]) == calls[0]["env"]["NVFP4_TEST_SEED"]
    # one GPU: the two-GPU test runs in a chunk like any other (and would skip there)
    rc, summary, calls = fake({"nodes": nodes, "two": nodes[-1:]}, "--draws", "leaderboard", "--no-timing",
                              "--chunk", "10", gpus=1)
    assert rc == 0 and len(calls) == 1 and calls[0]["env"]["CUDA_VISIBLE_DEVICES"] == "0"


def test_a_hung_test_a_dead_process_and_a_lost_context_fail_and_their_chunks_go_on(fake, capsys):
    """A test that hangs is killed after --test-timeout, one whose process dies is counted failed,
    and so is one after which the CUDA context was lost (cuda_context_guard's line and exit code);
    the tests after each in its chunk still run (a new process); each failure is bisected under
    its draw, one layer off after another, and holds back its problem's timing."""
    nodes = _nodes(4) + _nodes(3, "tests/test_gpu_kernels.py::test_grouped[g{}-7]")
    plan = {nodes[1]: "HANG", nodes[2]: "LOSE", nodes[4]: "DIE",
            nodes[5]: {"default": "FAILED", "graphs_off": "PASSED"}}
    rc, summary, calls = fake({"nodes": nodes, "plan": plan}, "--draws", "leaderboard", "--chunk", "4",
                              "--test-timeout", "1")
    assert rc == 1 and summary["complete"]
    rec = summary["gpu_tests"]
    assert rec["failed"] == [nodes[1], nodes[2], nodes[4], nodes[5]]
    assert rec["lost"][nodes[1]].startswith("hung") and rec["lost"][nodes[4]] == "process died, rc -11"
    assert rec["lost"][nodes[2]] == "CUDA context lost after it: CUDA error: an illegal memory access was encountered"
    assert {n for n, r in rec["results"].items() if r == "PASSED"} == set(nodes) - {nodes[1], nodes[2], nodes[4],
                                                                                   nodes[5]}
    assert nodes[3] in rec["results"]  # (after the lost context, in a process of its own)
    b = summary["bisect"]
    assert b[f"leaderboard: {nodes[5]}"]["verdict"].startswith("CUDA-graph replay")
    assert b[f"leaderboard: {nodes[1]}"]["verdict"].startswith("the kernel")  # hangs with both layers off too
    assert b[f"leaderboard: {nodes[2]}"]["verdict"].startswith("the kernel")
    reruns = [c for c in calls if c["env"]["NVFP4_GRAPHS"] == "0"]
    assert len(reruns) == 2 + 2 + 2 + 1 and all(len(c["nodes"]) == 1 for c in reruns)
    assert summary["timed_problems"] == [] and fake.steps == []  # both problems failed: nothing timed
    # every process, the bisection's reruns included, had the run's one test seed
    assert {c["env"]["NVFP4_TEST_SEED"] for c in calls} == {str(summary["test_seed"])}
    # a --resume keeps all 7, the hung and dead ones too (they have no result from pytest, and run not again)
    assert len(rec["results"]) < len(nodes)
    capsys.readouterr()
    rc, summary, calls = fake({"nodes": nodes, "plan": plan}, "--draws", "leaderboard", "--resume")
    said = capsys.readouterr().out
    assert calls == [] and f"(call 2, NVFP4_TEST_SEED={summary['test_seed']}, 7 tests with a result kept)" in said


def test_a_hang_or_death_after_a_test_reported_is_that_tests(fake):
    """A test that reports PASSED and then hangs or kills its process before the next test starts
    (its teardown, or work it left running that the context check's synchronize waits on) is the
    one counted failed -- not the next test, which never started -- and its bisection, where it
    reports PASSED again and hangs or dies again, calls it "the kernel"."""
    nodes = _nodes(3) + _nodes(2, "tests/test_gpu_kernels.py::test_grouped[g{}-7]")
    plan = {nodes[0]: "HANG_AFTER", nodes[3]: "DIE_AFTER"}
    rc, summary, calls = fake({"nodes": nodes, "plan": plan}, "--draws", "leaderboard", "--chunk", "5",
                              "--test-timeout", "1", gpus=1)
    rec = summary["gpu_tests"]
    assert rc == 1 and summary["complete"] and rec["failed"] == [nodes[0], nodes[3]]
    assert rec["lost"][nodes[0]] == "hung after it was reported: nothing finished in 1 s"
    assert rec["lost"][nodes[3]] == "process died after it was reported, rc -11"
    assert all(rec["results"][n] == "PASSED" for n in nodes)  # (what pytest said; "lost" overrides it)
    assert [c["nodes"] for c in calls[:3]] == [nodes, nodes[1:], nodes[4:]]
    for n in (nodes[0], nodes[3]):
        assert summary["bisect"][f"leaderboard: {n}"]["verdict"].startswith("the kernel")


def test_budget_stops_and_resume_goes_on(fake, monkeypatch, capsys):
    """With --budget the run ends on time (exit 3, "complete": false), keeping every finished test;
    --resume keeps the seed and those results, runs only the rest, then the timing steps.  Each call
    says whether it resumed, and a --resume that found no summary says so (exp. 191)."""
    monkeypatch.setattr(F, "LAST_START_S", 0.3)
    nodes = _nodes(9) + _nodes(3, "tests/test_gpu_kernels.py::test_grouped[g{}-7]")  # (both problems: both timed)
    plan = {"nodes": nodes, "plan": {n: "SLOW" for n in nodes}}
    capsys.readouterr()
    rc, summary, calls = fake(plan, "--draws", "leaderboard", "--chunk", "3", "--budget", "1.5", "--resume", gpus=2)
    said = capsys.readouterr().out
    assert "first_gpu_run: a fresh run in " in said and "--resume found no " in said
    assert rc == 3 and not summary["complete"] and not summary["gpu_tests"]["complete"]
    done = set(summary["gpu_tests"]["results"])
    assert 0 < len(done) < len(nodes) and fake.steps == []
    seed = summary["test_seed"]
    rc, summary, calls = fake(plan, "--draws", "leaderboard", "--chunk", "3", "--resume", gpus=2)
    said = capsys.readouterr().out
    assert f"first_gpu_run: resuming {fake.out} (call 2, NVFP4_TEST_SEED={seed}, {len(done)} tests" in said
    assert rc == 0 and summary["complete"] and summary["test_seed"] == seed
    assert set(summary["gpu_tests"]["results"]) == set(nodes)
    assert not done & {n for c in calls for n in c["nodes"]}  # nothing reported before ran again
    assert [s for s, _c, _e in fake.steps] == ["timing_dual", "timing_dual_graphs_off", "timing_group",
                                               "timing_group_graphs_off", "bench"]
    assert len(summary["calls"]) == 2
    # a third call finds nothing left to do
    rc, summary, calls = fake(plan, "--draws", "leaderboard", "--resume", gpus=2)
    assert rc == 0 and calls == [] and fake.steps == []


def test_each_draw_runs_and_its_failures_rerun_under_it(fake):
    """The GPU tests run once per input draw (NVFP4_TEST_DRAW: the leaderboard's, then the wide
    one); a failure in the wide run alone is rerun under the wide draw and holds back its
    problem's timing only."""
    nodes = _nodes(2) + ["tests/test_gpu_kernels.py::test_grouped[g0-7]"]
    rc, summary, calls = fake({"nodes": nodes, "plan": {nodes[1]: {"wide": "FAILED", "graphs_off": "FAILED",
                                                                 "writer_off": "FAILED"}}}, gpus=1)
    assert rc == 1
    assert [c["env"]["NVFP4_TEST_DRAW"] for c in calls[:2]] == ["leaderboard", "wide"]
    assert len(calls) == 4 and all(c["env"]["NVFP4_TEST_DRAW"] == "wide" for c in calls[2:])
    assert list(summary["bisect"]) == [f"wide: {nodes[1]}"]
    assert summary["timed_problems"] == ["group"] and summary["gpu_tests"]["failed"] == []
    assert [s for s, _c, _e in fake.steps] == ["timing_group", "timing_group_graphs_off"]
    rc, summary, calls = fake({"nodes": nodes}, "--no-timing", "--draws", "leaderboard", gpus=1)
    assert rc == 0 and [c["env"]["NVFP4_TEST_DRAW"] for c in calls] == ["leaderboard"]
    assert summary["timed_problems"] == [] and fake.steps == []  # (--no-timing: none, though both passed)
    # a problem none of whose tests ran (here --tests-like: only grouped ones) is not timed
    rc, summary, calls = fake({"nodes": nodes[2:]}, "--draws", "leaderboard", gpus=1)
    assert rc == 0 and summary["timed_problems"] == ["group"]
    assert [s for s, _c, _e in fake.steps] == ["timing_group", "timing_group_graphs_off"]
    with pytest.raises(SystemExit):
        F.main(["--draws", "leaderboard,uniform"])


def test_incomplete_runs_and_shared_failures_hold_back_timing(fake):
    """A pytest process that dies before any test starts (nothing to blame) leaves its tests unrun:
    the tool fails and times nothing; a failure in a test of neither problem (the table writer)
    holds back both problems' timings."""
    nodes = ["tests/test_gpu_kernels.py::test_table_writer_kernel_alone"] + _nodes(2)
    rc, summary, calls = fake({"nodes": nodes, "plan": {nodes[0]: "FAILED"}}, "--draws", "leaderboard", gpus=1)
    assert rc == 1 and summary["timed_problems"] == [] and fake.steps == []
    rc, summary, calls = fake({"nodes": nodes, "exit_at_start": 4}, "--draws", "leaderboard", gpus=1)
    rec = summary["gpu_tests"]
    assert rc == 1 and not rec["complete"] and rec["not_run"] == 3 and "pytest did not complete" in rec["note"]
    assert summary["timed_problems"] == [] and fake.steps == [] and len(calls) == 1


def test_sanitize_runs_each_tool_in_shards_over_the_gpus_last(fake):
    """--sanitize: after the timings, each tool's slice in interleaved shards (at least 4, a multiple of
    the GPUs), one per GPU at a time, with the run's seed; a failing shard makes its tool and the
    sanitizer unclean; on --resume only the shards not yet run run (the shard count kept)."""
    assert [F.sanitize_shards(g) for g in (1, 2, 3, 4, 8)] == [4, 4, 6, 4, 8]
    nodes = _nodes(2) + ["tests/test_gpu_kernels.py::test_grouped[g0-7]"]
    fake.fail = {"sanitize_racecheck_2of6"}
    rc, summary, _calls = fake({"nodes": nodes}, "--draws", "leaderboard", "--sanitize", gpus=3)
    names = [s for s, _c, _e in fake.steps]
    units = [f"sanitize_{t}_{i}of6" for t in F.SANITIZER_TOOLS for i in range(6)]
    assert names[:5] == ["timing_dual", "timing_dual_graphs_off", "timing_group", "timing_group_graphs_off", "bench"]
    assert sorted(names[5:]) == sorted(units)
    for name, cmd, env in fake.steps[5:]:
        tool, shard = name.split("_")[1], name.split("_")[2].replace("of", "/")
        assert cmd[1] == "tools/sanitize_sweep.py" and cmd[cmd.index("--tools") + 1] == tool
        assert cmd[cmd.index("--shard") + 1] == shard and cmd[cmd.index("--seed") + 1] == str(summary["test_seed"])
        assert env["CUDA_VISIBLE_DEVICES"] in ("0", "1", "2")
        assert "--files" not in cmd  # (the sweep's own slice, of every GPU test file)
    san = summary["sanitize"]
    assert not san["clean"] and san["shards"] == 6 and not san["tools"]["racecheck"]["clean"]
    assert all(san["tools"][t]["clean"] for t in F.SANITIZER_TOOLS if t != "racecheck")
    assert rc == 0 and summary["complete"]  # (the tests passed; the sweep's verdict is its own)
    # a resumed call on 2 GPUs: nothing left, the 6 shards kept
    steps = summary["steps"]
    for u in units[:3]:
        del steps[u]
    json.dump(summary, open(fake.out / "summary.json", "w"))
    rc, summary, _calls = fake({"nodes": nodes}, "--draws", "leaderboard", "--sanitize", "--resume", "--gpus", "2",
                               gpus=3)
    assert sorted(s for s, _c, _e in fake.steps) == sorted(units[:3]) and summary["sanitize"]["shards"] == 6
    assert summary["gpus"] == 2 and {e["CUDA_VISIBLE_DEVICES"] for _s, _c, e in fake.steps} <= {"0", "1"}
    fake.fail = set()
    rc, summary, _calls = fake({"nodes": nodes}, "--draws", "leaderboard", "--sanitize", "--resume",
                               "--sanitize-tools", "initcheck")
    assert fake.steps == [] and summary["sanitize"]["clean"]
    # a shard that hangs under its tool is recorded (unclean, named) and not run again by a --resume
    fake.hang = {"sanitize_memcheck_1of4"}
    rc, summary, _calls = fake({"nodes": nodes}, "--draws", "leaderboard", "--sanitize", "--sanitize-tools",
                               "memcheck,synccheck", gpus=1)
    tools = summary["sanitize"]["tools"]
    assert rc == 0 and summary["complete"] and not summary["sanitize"]["clean"]
    assert tools["memcheck"]["hung"] == ["sanitize_memcheck_1of4"] and not tools["memcheck"]["clean"]
    assert tools["synccheck"]["clean"] and tools["synccheck"]["hung"] == []
    assert summary["steps"]["sanitize_memcheck_1of4"]["hung"].startswith("no progress in 300 s; running: ")
    rc, summary, _calls = fake({"nodes": nodes}, "--draws", "leaderboard", "--sanitize", "--sanitize-tools",
                               "memcheck,synccheck", "--resume", gpus=1)
    assert fake.steps == [] and summary["complete"]
    # --tests: the sweep's slice is of those files and node ids too (the planted faults' stalled shard)
    dual = "tests/test_gpu_kernels.py::test_dual[(256, 4096, 7168, 1)-0]"
    fake.hang = set()
    rc, summary, _calls = fake({"nodes": nodes}, "--draws", "leaderboard", "--sanitize", "--sanitize-tools", "memcheck",
                               "--tests", f"tests/planted_gpu_faults.py,{dual}", gpus=1)
    assert [s for s, _c, _e in fake.steps][-4:] == [f"sanitize_memcheck_{i}of4" for i in range(4)]
    for _s, cmd, _e in fake.steps[-4:]:
        assert cmd[cmd.index("--files") + 1] == f"tests/planted_gpu_faults.py,{dual}"
        assert F.split_tests(cmd[cmd.index("--files") + 1]) == ["tests/planted_gpu_faults.py", dual]
    with pytest.raises(SystemExit):
        F.main(["--sanitize-tools", "memcheck,valgrind"])
    with pytest.raises(SystemExit):
        F.main(["--gpus", "0"])
    with pytest.raises(SystemExit):  # (an empty --tests would run step 2 on nothing and the sweep on its default)
        F.main(["--tests", " , "])


def _run_real_pytest_in(folder, monkeypatch, test_timeout):
    """A Run whose pytest processes (pytest itself) start in `folder` (its tests and logs) on one "GPU"."""
    monkeypatch.setattr(F, "POLL_S", 0.1)
    monkeypatch.setattr(F, "ROOT", str(folder))
    return F.Run(str(folder), {}, ["0"], None, test_timeout, {"NVFP4_TEST_SEED": "1"})


def test_real_pytest_output_names_results_and_the_hung_test(tmp_path, monkeypatch):
    """The parsing against pytest itself (not the stand-in): ids with spaces, a failure, a test that
    hangs (killed after the timeout and named from the unbuffered log), then the rest of the chunk
    in a new process."""
    (tmp_path / "test_probe.py").write_text(textwrap.dedent('''
        import time, pytest
        @pytest.mark.parametrize("shape", [(256, 4096, 7168, 1)], ids=str)
        def test_a(shape):
            pass
        def test_b():
            assert False
        def test_c():
            time.sleep(60)
        def test_d():
            pass
    '''))
    run = _run_real_pytest_in(tmp_path, monkeypatch, test_timeout=4.0)
    nodes = ["test_probe.py::test_a[(256, 4096, 7168, 1)]", "test_probe.py::test_b", "test_probe.py::test_c",
             "test_probe.py::test_d"]
    assert F.collect(["test_probe.py"], {}) == nodes
    rec = run.tests("gpu_tests", "leaderboard", nodes, set(), 10)
    assert rec["results"] == {nodes[0]: "PASSED", nodes[1]: "FAILED", nodes[3]: "PASSED"}
    assert list(rec["lost"]) == [nodes[2]] and rec["failed"] == nodes[1:3] and rec["complete"]
    assert [c["tests"] for c in rec["chunks"]] == [4, 1]


def test_sigterm_stops_the_children_and_ends_as_the_budget_would(fake, tmp_path):
    """`timeout`'s SIGTERM: the pytest processes (sessions of their own, which the signal does not
    reach) are killed, the test that was running is left for --resume (not counted hung), exit 3;
    the handler is gone after main returns."""
    import signal
    import threading
    import time

    nodes = _nodes(3)
    calls = tmp_path / "calls.jsonl"

    def send_term():
        for _ in range(400):  # (after the stand-in pytest started: main's handler is in place)
            if calls.exists():
                time.sleep(0.3)
                os.kill(os.getpid(), signal.SIGTERM)
                return
            time.sleep(0.05)

    before = signal.getsignal(signal.SIGTERM)
    t = threading.Thread(target=send_term)
    t.start()
    t0 = time.time()
    rc, summary, _calls = fake({"nodes": nodes, "plan": {nodes[1]: "HANG"}}, "--draws", "leaderboard",
                               "--test-timeout", "100", gpus=1)
    t.join()
    assert rc == 3 and time.time() - t0 < 30 and not summary["complete"]
    rec = summary["gpu_tests"]
    assert rec["results"] == {nodes[0]: "PASSED"} and rec["lost"] == {} and rec["not_run"] == 2
    assert signal.getsignal(signal.SIGTERM) == before
    # had the tool been killed outright (SIGKILL: its chunk's log written, no record of it), a resumed
    # call writes the chunk under a new name, leaving that log as it was
    stored = json.load(open(tmp_path / "out" / "summary.json"))
    stored["gpu_tests"]["chunks"] = []
    json.dump(stored, open(tmp_path / "out" / "summary.json", "w"))
    killed_log = (tmp_path / "out" / "gpu_tests.c0.log").read_text()
    rc, summary, _calls = fake({"nodes": nodes}, "--draws", "leaderboard", "--resume", "--no-timing", gpus=1)
    assert rc == 0 and [c["log"] for c in summary["gpu_tests"]["chunks"]] == ["gpu_tests.c1.log"]
    assert (tmp_path / "out" / "gpu_tests.c0.log").read_text() == killed_log


def test_a_lost_cuda_context_ends_the_session_at_its_test(tmp_path, monkeypatch):
    """cuda_context_guard's hook under pytest itself (its probe a stand-in that reports the context
    lost once test_b has run): the session ends after test_b with the guard's exit code and line, its
    failure report printed; first_gpu_run counts test_b failed ("CUDA context lost after it") and runs
    test_c and test_d in a new process."""
    (tmp_path / "conftest.py").write_text(textwrap.dedent(f'''
        import sys
        sys.path.insert(0, {os.path.join(ROOT, "tools")!r})
        from cuda_context_guard import pytest_runtest_protocol, pytest_sessionfinish
    '''))
    (tmp_path / "test_probe.py").write_text(textwrap.dedent('''
        import cuda_context_guard
        def test_a():
            pass
        def test_b():
            cuda_context_guard.probe = lambda: "CUDA error: an illegal memory access was encountered"
            assert False, "the planted fault"
        def test_c():
            pass
        def test_d():
            pass
    '''))
    run = _run_real_pytest_in(tmp_path, monkeypatch, test_timeout=60.0)
    nodes = [f"test_probe.py::test_{x}" for x in "abcd"]
    rec = run.tests("gpu_tests", "leaderboard", nodes, set(), 10)
    assert rec["results"] == {nodes[0]: "PASSED", nodes[1]: "FAILED", nodes[2]: "PASSED", nodes[3]: "PASSED"}
    assert rec["lost"] == {nodes[1]: "CUDA context lost after it: CUDA error: an illegal memory access was encountered"}
    assert rec["failed"] == [nodes[1]] and rec["complete"]
    assert [(c["tests"], c["rc"]) for c in rec["chunks"]] == [(4, G.CONTEXT_LOST_RC), (2, 0)]
    first = (tmp_path / "gpu_tests.c0.log").read_text()
    assert "the planted fault" in first and "test_c" not in first.split("\n", 1)[1]  # (line 1: the command)
    assert G.lost_in_log(first) == (nodes[1], "CUDA error: an illegal memory access was encountered")


def test_context_probe_reports_the_first_line_of_the_error(monkeypatch, pytestconfig):
    """context_error: None in a process that never used CUDA (this CPU one); else the first line of what
    synchronize raised; and tests/conftest.py registers the guard's hook for the whole suite."""
    assert G.context_error() is None

    class Cuda:
        synced = []

        @staticmethod
        def is_initialized():
            return True

        @staticmethod
        def device_count():
            return 2

        @staticmethod
        def current_device():
            return 0

        @staticmethod
        def memory_reserved(d):
            return 1 << 20 if d == 1 else 0

        @staticmethod
        def synchronize(d):
            Cuda.synced.append(d)
            if d == 1:
                raise RuntimeError("CUDA error: an illegal memory access was encountered\nCUDA kernel errors might be "
                                   "asynchronously reported")

    class Torch:
        cuda = Cuda

    monkeypatch.setitem(sys.modules, "torch", Torch)
    assert G.context_error() == "CUDA error: an illegal memory access was encountered" and Cuda.synced == [0, 1]
    monkeypatch.setitem(sys.modules, "torch", torch)
    for hook in (pytestconfig.hook.pytest_runtest_protocol, pytestconfig.hook.pytest_sessionfinish):
        assert any(i.function.__module__ == "tools.cuda_context_guard" for i in hook.get_hookimpls())


def test_planted_faults_are_collected_only_when_named():
    """tests/planted_gpu_faults.py (first_gpu_run's check on a GPU, nine tests failing by design) is no
    part of `pytest tests`, and collects when named."""
    def ids(*args):
        r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", *args], cwd=ROOT,
                           capture_output=True, text=True)
        return [ln for ln in r.stdout.splitlines() if "::" in ln]

    assert [n.split("::")[1] for n in ids("tests/planted_gpu_faults.py")] == [
        "test_before_the_faults", "test_planted_illegal_address", "test_after_the_illegal_address",
        "test_planted_mbarrier_hang", "test_after_the_hang", "test_planted_process_death",
        "test_after_the_death", "test_planted_illegal_address_after_it_returns",
        "test_after_the_late_illegal_address", "test_planted_hang_after_it_returns", "test_after_the_late_hang",
        "test_planted_death_in_teardown", "test_after_the_teardown_death", "test_planted_exit_1",
        "test_after_the_exit_1", "test_planted_illegal_address_in_a_graphs_test", "test_after_the_graphs_fault",
        "test_planted_illegal_address_on_the_second_gpu", "test_two_gpus_after_the_fault"]
    # (exp. 191: the marks that route first_gpu_run's two-GPU run and graphs verdict)
    assert [n.split("::")[1] for n in ids("-m", "two_gpus", "tests/planted_gpu_faults.py")] == [
        "test_planted_illegal_address_on_the_second_gpu", "test_two_gpus_after_the_fault"]
    assert [n.split("::")[1] for n in ids("-m", "graphs", "tests/planted_gpu_faults.py")] == [
        "test_planted_illegal_address_in_a_graphs_test"]
    assert not [n for n in ids("tests") if n.startswith("tests/planted_gpu_faults.py")]


def test_a_step_without_progress_is_killed_as_hung(tmp_path, monkeypatch):
    """Run.step with a progress function, or by default its log's size: a process whose progress stalls
    for test_timeout is killed and recorded "hung" (a budget stop would record nothing); one that keeps
    making progress runs to its end.  Real processes."""
    monkeypatch.setattr(F, "POLL_S", 0.05)
    run = F.Run(str(tmp_path), {}, ["0"], None, 1.0, {})
    r = run.step("stuck", [sys.executable, "-c", "import time; time.sleep(30)"], progress=lambda: 0)
    assert r["hung"] == "no progress in 1 s" and r["rc"] == -9 and r["seconds"] < 10
    grow = tmp_path / "grow"
    grow.mkdir()
    writer = ("import time\nfor i in range(12):\n"
              f"    open({str(grow / 'f')!r}, 'a').write('x')\n    time.sleep(0.2)\n")
    r = run.step("busy", [sys.executable, "-c", writer], progress=lambda: F.folder_bytes(str(grow)))
    assert r == {"rc": 0, "seconds": r["seconds"]} and F.folder_bytes(str(grow)) == 12
    # by default a step is watched by its own log: silent, it hangs; printing (unbuffered), it runs on
    r = run.step("silent", [sys.executable, "-c", "import time; time.sleep(30)"])
    assert r["hung"] == "no progress in 1 s" and r["seconds"] < 10
    printer = "import time\nfor i in range(12):\n    print(i)\n    time.sleep(0.2)\n"
    r = run.step("printing", [sys.executable, "-c", printer])
    assert r == {"rc": 0, "seconds": r["seconds"]} and r["seconds"] >= 2  # (ran its 2.4 s to the end)


def test_the_test_a_hung_sanitizer_run_was_in(tmp_path):
    (tmp_path / "memcheck.1.out").write_text(LOG)
    assert F.started_not_finished(str(tmp_path)) == NODES[4]
    (tmp_path / "memcheck.1.out").write_text(LOG + "PASSED  [100%]\n")
    assert F.started_not_finished(str(tmp_path)) is None
    assert F.folder_bytes(str(tmp_path / "none")) == 0


def test_a_test_failing_under_both_draws_is_bisected_into_two_logs(fake):
    """A test that fails under both draws is bisected under each, on two GPUs at once: each rerun
    writes and reads its own log (a name cut from the key's end once gave both the same log)."""
    long_id = "tests/test_gpu_kernels.py::test_grouped[" + "x" * 90 + "-7]"
    rc, summary, calls = fake({"nodes": [long_id], "plan": {long_id: "FAILED"}}, "--no-timing", gpus=2)
    assert rc == 1 and set(summary["bisect"]) == {f"leaderboard: {long_id}", f"wide: {long_id}"}
    logs = sorted(p.name for p in fake.out.glob("bisect_*.log"))
    assert len(logs) == 4  # two layers off, under each of two draws
    for name in logs:
        draw = "wide" if "_wide_" in name else "leaderboard"
        assert f"'NVFP4_TEST_DRAW': '{draw}'" in (fake.out / name).read_text().splitlines()[0]


def test_tests_option_keeps_commas_inside_a_node_ids_brackets():
    dual = "tests/test_gpu_kernels.py::test_dual[(256, 4096, 7168, 1)-1111]"
    grouped = "tests/test_gpu_kernels.py::test_grouped[96x128x256-128x256x512-1111]"
    assert F.split_tests(f"{dual},{grouped}") == [dual, grouped]
    assert F.split_tests(f"tests/planted_gpu_faults.py,{dual},") == ["tests/planted_gpu_faults.py", dual]


def test_a_budget_stop_after_a_report_leaves_that_test_for_the_resume(fake, monkeypatch):
    """A budget stop between a test's PASSED and the next test's start (its teardown, the context
    check: where the late planted hang of exp. 190 waits) keeps no result for it, so a --resume
    runs it again and finds the hang; a context-lost line written before the stop still counts."""
    monkeypatch.setattr(F, "LAST_START_S", 0.3)
    late_hang, late_lose, other = _nodes(3)
    plan = {"nodes": [late_hang, late_lose, other], "plan": {late_hang: "HANG_AFTER", late_lose: "LOSE_LATE"}}
    rc, summary, _calls = fake(plan, "--draws", "leaderboard", "--no-timing", "--chunk", "1", "--budget", "1.5",
                               "--test-timeout", "100", gpus=3)
    rec = summary["gpu_tests"]
    assert rc == 3 and not summary["complete"]
    assert late_hang not in rec["results"] and late_hang not in rec["lost"]  # (was: PASSED, for good)
    assert rec["lost"][late_lose] == "CUDA context lost after it: CUDA error: unspecified launch failure"
    assert rec["results"][other] == "PASSED"
    rc, summary, calls = fake(plan, "--draws", "leaderboard", "--no-timing", "--resume", "--test-timeout", "1",
                              "--max-bisect", "0", gpus=3)
    rec = summary["gpu_tests"]
    assert rc == 1 and summary["complete"] and [c["nodes"] for c in calls] == [[late_hang]]
    assert rec["lost"][late_hang] == "hung after it was reported: nothing finished in 1 s"


def test_a_process_that_exits_1_inside_a_test_does_not_loop(fake):
    """rc 1 with a test started and never reported (os._exit inside it) is that test's death; its
    chunk goes on after it, once (it once started the same chunk again without end)."""
    nodes = _nodes(3)
    rc, summary, calls = fake({"nodes": nodes, "plan": {nodes[1]: "EXIT1"}}, "--draws", "leaderboard",
                              "--no-timing", "--max-bisect", "0", gpus=1)
    rec = summary["gpu_tests"]
    assert rc == 1 and summary["complete"] and rec["lost"] == {nodes[1]: "process died, rc 1"}
    assert [c["nodes"] for c in calls] == [nodes, nodes[2:]]


def test_bisection_of_two_gpu_skipped_and_graph_capturing_tests(fake):
    """A failing two-GPU test is rerun with every GPU visible (alone it would skip); a rerun that
    skips gets no verdict; a test marked `graphs` (it captures graphs or forces a layer itself) that
    fails with both switches off is not simply blamed on the kernel."""
    two, skips, captures = _nodes(3)
    plan = {"nodes": [two, skips, captures], "two": [two], "graphs": [captures],
            "plan": {two: "FAILED", captures: "FAILED", skips: {"leaderboard": "FAILED", "graphs_off": "SKIPPED"}}}
    rc, summary, calls = fake(plan, "--draws", "leaderboard", "--no-timing", gpus=2)
    b = summary["bisect"]
    assert rc == 1 and summary["complete"]
    reruns = [c for c in calls if c["env"]["NVFP4_GRAPHS"] == "0"]
    assert {c["env"]["CUDA_VISIBLE_DEVICES"] for c in reruns if c["nodes"] == [two]} == {"0,1"}
    assert b[f"leaderboard: {two}"]["verdict"] == "the kernel (fails with both layers off)"
    assert b[f"leaderboard: {skips}"]["verdict"].startswith("no verdict: it skipped")
    assert len([c for c in reruns if c["nodes"] == [skips]]) == 1
    assert "a layer the test sets itself" in b[f"leaderboard: {captures}"]["verdict"]
