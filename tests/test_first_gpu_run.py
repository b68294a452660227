"""tools/first_gpu_run.py (the first session on a GPU our kernels have never run on): its report
parsing and bisection verdicts on CPU, and that without a GPU it runs nothing and says so."""

import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import first_gpu_run as F  # noqa: E402

JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="2" tests="5">
<testcase classname="tests.test_gpu_kernels" name="test_dual[(256, 4096, 7168, 1)-1111]" time="1.0"/>
<testcase classname="tests.test_gpu_kernels" name="test_dual[(256, 3072, 4096, 1)-1111]" time="1.0"><failure message="x">boom</failure></testcase>
<testcase classname="tests.test_gpu_kernels" name="test_grouped[96x128x256-128x256x512-1111]" time="1.0"><failure message="x">boom</failure></testcase>
<testcase classname="tests.test_gpu_bundle" name="test_bundle_runs_on_gpu[group]" time="1.0"><error message="x">fixture</error></testcase>
<testcase classname="tests.test_gpu_kernels" name="test_dual_skinny[(1, 512, 256, 1)]" time="1.0"><skipped message="no GPU"/></testcase>
</testsuite></testsuites>"""


def test_failed_tests_are_node_ids(tmp_path):
    path = tmp_path / "j.xml"
    path.write_text(JUNIT)
    assert F.failed_tests(str(path)) == [
        "tests/test_gpu_kernels.py::test_dual[(256, 3072, 4096, 1)-1111]",
        "tests/test_gpu_kernels.py::test_grouped[96x128x256-128x256x512-1111]",
        "tests/test_gpu_bundle.py::test_bundle_runs_on_gpu[group]",
    ]


def test_problem_of_and_verdicts():
    assert F.problem_of("tests/test_gpu_kernels.py::test_dual[(256, 3072, 4096, 1)-1111]") == "dual"
    assert F.problem_of("tests/test_gpu_kernels.py::test_grouped[96x128x256-1111]") == "group"
    assert F.problem_of("tests/test_gpu_kernels.py::test_cuda_graph_replay[group]") == "group"
    assert F.problem_of("tests/test_gpu_kernels.py::test_table_writer_kernel_alone") == "other"
    assert F.verdict({"graphs_off": True}).startswith("CUDA-graph replay")
    assert F.verdict({"graphs_off": False, "graphs_and_writer_off": True}).startswith("table writer")
    assert F.verdict({"graphs_off": False, "graphs_and_writer_off": False}).startswith("the kernel")
    # each bisect step switches off one more layer than the one before
    (s1, e1), (s2, e2) = F.BISECT_STEPS
    assert e1.items() < e2.items()


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


def test_reruns_use_the_runs_test_seed(tmp_path, monkeypatch):
    """Failed tests are rerun in new processes by node id; test_dual's id holds the fresh seed, so
    every pytest process of one first_gpu_run gets the same NVFP4_TEST_SEED (else the rerun finds
    no such test and the verdict would blame the kernel)."""
    calls = []

    def fake_run(step, cmd, out_dir, env=None):
        calls.append((step, cmd, dict(env or {})))
        if step == "gpu_tests":
            open(os.path.join(out_dir, "gpu_tests.xml"), "w").write(JUNIT)
            return 1, 0.0
        return 1, 0.0  # every rerun fails too: both bisect steps run

    monkeypatch.setattr(F, "device_info", lambda: {"name": "fake"})
    monkeypatch.setattr(F, "run", fake_run)
    assert F.main(["--out", str(tmp_path), "--no-timing"]) == 1
    seeds = {env.get("NVFP4_TEST_SEED") for _s, cmd, env in calls if "pytest" in cmd}
    assert len(calls) == 2 + 3 * 2 and len(seeds) == 1 and None not in seeds  # two draws, 3 failures
    summary = __import__("json").load(open(tmp_path / "summary.json"))
    assert str(summary["test_seed"]) == seeds.pop()
    assert all(v["verdict"].startswith("the kernel") for v in summary["bisect"].values())


def test_sanitize_step_runs_the_sweep_last(tmp_path, monkeypatch):
    calls = []

    def fake_run(step, cmd, out_dir, env=None):
        calls.append((step, cmd))
        if step == "gpu_tests":
            open(os.path.join(out_dir, "gpu_tests.xml"), "w").write("<testsuites/>")
        return 0, 0.0

    monkeypatch.setattr(F, "device_info", lambda: {"name": "fake"})
    monkeypatch.setattr(F, "run", fake_run)
    assert F.main(["--out", str(tmp_path), "--no-timing", "--sanitize"]) == 0
    step, cmd = calls[-1]
    assert step == "sanitize" and cmd[1] == "tools/sanitize_sweep.py"
    summary = __import__("json").load(open(tmp_path / "summary.json"))
    assert cmd[cmd.index("--seed") + 1] == str(summary["test_seed"]) and summary["sanitize"]["clean"]
    calls.clear()
    assert F.main(["--out", str(tmp_path), "--no-timing"]) == 0
    assert "sanitize" not in [c[0] for c in calls]


def test_sanitize_spreads_over_the_gpus(tmp_path, monkeypatch):
    """With several GPUs the sweep is asked to spread its slice over all of them (its --gpus: one
    shard per GPU, tests/test_sanitize_sweep.py), with the run's seed; --sanitize-gpus caps the count
    at the GPUs there are; a failing sweep is unclean."""
    calls = []

    def fake_run(step, cmd, out_dir, env=None):
        calls.append((step, cmd, dict(env or {})))
        if step == "gpu_tests":
            open(os.path.join(out_dir, "gpu_tests.xml"), "w").write("<testsuites/>")
        return (1 if step == "sanitize" else 0), 0.0

    monkeypatch.setattr(F, "device_info", lambda: {"name": "fake", "gpus": 3})
    monkeypatch.setattr(F, "run", fake_run)
    for extra, want in (([], "3"), (["--sanitize-gpus", "8"], "3"), (["--sanitize-gpus", "1"], "1")):
        calls.clear()
        assert F.main(["--out", str(tmp_path), "--no-timing", "--sanitize", "--draws", "leaderboard", *extra]) == 0
        (step, cmd, _env), = [c for c in calls if c[0].startswith("sanitize")]
        summary = __import__("json").load(open(tmp_path / "summary.json"))
        assert cmd[1] == "tools/sanitize_sweep.py" and cmd[cmd.index("--gpus") + 1] == want
        assert cmd[cmd.index("--seed") + 1] == str(summary["test_seed"])
        assert summary["sanitize"]["gpus"] == int(want) and not summary["sanitize"]["clean"]
    with pytest.raises(SystemExit):
        F.main(["--out", str(tmp_path), "--sanitize", "--sanitize-gpus", "0"])


def test_each_draw_runs_and_its_failures_rerun_under_it(tmp_path, monkeypatch):
    """The GPU tests run once per input draw (NVFP4_TEST_DRAW: the leaderboard's, then the wide
    one); a failure in the wide run alone is rerun under the wide draw and holds back its
    problem's timing."""
    calls = []
    wide_junit = ('<testsuites><testsuite name="pytest" failures="1" tests="2"><testcase classname="tests.test_gpu_kernels" '
                  'name="test_dual[(256, 3072, 4096, 1)-1111]" time="1.0"><failure message="x">boom</failure></testcase>'
                  '<testcase classname="tests.test_gpu_kernels" name="test_grouped[96x128x256-1111]" time="1.0"/>'
                  '</testsuite></testsuites>')

    def fake_run(step, cmd, out_dir, env=None):
        calls.append((step, dict(env or {})))
        if step == "gpu_tests_wide":
            open(os.path.join(out_dir, "gpu_tests_wide.xml"), "w").write(wide_junit)
            return 1, 0.0
        if step == "gpu_tests":
            open(os.path.join(out_dir, "gpu_tests.xml"), "w").write("<testsuites/>")
            return 0, 0.0
        return 1, 0.0  # the reruns fail too

    monkeypatch.setattr(F, "device_info", lambda: {"name": "fake"})
    monkeypatch.setattr(F, "run", fake_run)
    assert F.main(["--out", str(tmp_path), "--no-timing"]) == 1
    assert [(s, env["NVFP4_TEST_DRAW"]) for s, env in calls[:2]] == [("gpu_tests", "leaderboard"),
                                                                     ("gpu_tests_wide", "wide")]
    assert len(calls) == 4 and all(env["NVFP4_TEST_DRAW"] == "wide" for _s, env in calls[2:])
    summary = __import__("json").load(open(tmp_path / "summary.json"))
    assert list(summary["bisect"]) == ["wide: tests/test_gpu_kernels.py::test_dual[(256, 3072, 4096, 1)-1111]"]
    assert summary["timed_problems"] == ["group"] and summary["gpu_tests"]["failed"] == []
    calls.clear()
    assert F.main(["--out", str(tmp_path), "--no-timing", "--draws", "leaderboard"]) == 0
    assert [s for s, _env in calls] == ["gpu_tests"]
    with pytest.raises(SystemExit):
        F.main(["--out", str(tmp_path), "--draws", "leaderboard,uniform"])


def test_incomplete_runs_and_shared_failures_hold_back_timing(tmp_path, monkeypatch):
    """A pytest run that did not complete (a crash: rc -11, no junit) fails the tool and times
    nothing; a failure in a test of neither problem (the table writer) holds back both problems'
    timings; a masked or MoE test counts as the grouped problem's."""
    import json

    def crashed(step, cmd, out_dir, env=None):
        return -11, 0.0

    monkeypatch.setattr(F, "device_info", lambda: {"name": "fake"})
    monkeypatch.setattr(F, "run", crashed)
    assert F.main(["--out", str(tmp_path), "--draws", "leaderboard"]) == 1
    summary = json.load(open(tmp_path / "summary.json"))
    assert summary["timed_problems"] == [] and "note" in summary["gpu_tests"]

    writer_junit = ('<testsuites><testsuite name="pytest" failures="1" tests="1"><testcase classname="tests.test_gpu_kernels" '
                    'name="test_table_writer_kernel_alone" time="1.0"><failure message="x">boom</failure></testcase>'
                    '</testsuite></testsuites>')
    steps = []

    def writer_fails(step, cmd, out_dir, env=None):
        steps.append(step)
        if step == "gpu_tests":
            open(os.path.join(out_dir, "gpu_tests.xml"), "w").write(writer_junit)
        return 1, 0.0

    monkeypatch.setattr(F, "run", writer_fails)
    assert F.main(["--out", str(tmp_path), "--draws", "leaderboard"]) == 1
    assert json.load(open(tmp_path / "summary.json"))["timed_problems"] == []
    assert not any(s.startswith(("timing_", "bench")) for s in steps)
    assert F.problem_of("tests/test_gpu_masked.py::test_masked_counts_on_the_gpu[4]") == "group"
    assert F.problem_of("tests/test_gpu_kernels.py::test_moe_calls[x]") == "group"
