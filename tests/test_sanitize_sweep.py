"""tools/sanitize_sweep.py (the GPU tests under compute-sanitizer): its log parsing, test slice and
command on CPU (that without a GPU it runs nothing: tests/test_first_gpu_run.py)."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import sanitize_sweep as S  # noqa: E402

# (the summary lines as compute-sanitizer 2025.3 printed them on an H100, session 51)
RACE_LOG = "========= COMPUTE-SANITIZER\n========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n"
SYNC_LOG = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
MEM_LOG_BAD = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 16 bytes
=========     at kernel_cutlass_x+0x1f0
========= ERROR SUMMARY: 3 errors
========= ERROR SUMMARY: 1 error
"""


def test_parse_sanitizer_summaries():
    assert S.parse_sanitizer(SYNC_LOG) == {"errors": 0}
    assert S.parse_sanitizer(RACE_LOG) == {"errors": 0, "hazards": 0, "warnings": 0}
    # one summary per process with --target-processes all: added up
    assert S.parse_sanitizer(MEM_LOG_BAD) == {"errors": 4}
    assert S.parse_sanitizer("========= RACECHECK SUMMARY: 5 hazards displayed (2 errors, 3 warnings)\n") == \
        {"errors": 2, "hazards": 5, "warnings": 3}
    # no summary: the tool or the process died before it -- not clean
    assert S.parse_sanitizer("========= COMPUTE-SANITIZER\nSegmentation fault\n") == {"errors": None}
    assert not S.clean({"rc": 0, "sanitizer": {"errors": None}, "pytest": {"passed": 3}})


def test_reported_kernels():
    text = MEM_LOG_BAD + "=========     at void at::native::unrolled_elementwise_kernel<x>(int)+0x1d0\n" \
        "=========         Host Frame: cudaLaunchKernel [0x745b7] in libcudart.so.13\n"
    assert S.reported_kernels(text) == {"ours": 1, "other": 1}
    assert S.reported_kernels(SYNC_LOG) == {"ours": 0, "other": 0}


# racecheck's report of its control, as compute-sanitizer 2025.3.1 printed it on an H200 (session 61)
RACE_CONTROL_LOG = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at kernel_cutlass_kernel___main___kernel_PlantedBug_0+0xb0
=========     and Read access at kernel_cutlass_kernel___main___kernel_PlantedBug_0+0x110 [4 hazards]
========= 
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_racecheck_report_names_its_kernel():
    """racecheck's report line names the kernel (no "at" frame line): a caught control counts as
    caught, once per report; the same race in torch's kernel is not ours."""
    assert S.reported_kernels(RACE_CONTROL_LOG) == {"ours": 1, "other": 0}
    parsed = {**S.parse_sanitizer(RACE_CONTROL_LOG), "printed": S.reported_kernels(RACE_CONTROL_LOG)}
    assert parsed["hazards"] == 1 and S.control_caught(parsed)
    theirs = RACE_CONTROL_LOG.replace("Write access at kernel_cutlass", "Write access at void at_native_k")
    assert S.reported_kernels(theirs) == {"ours": 0, "other": 1}
    assert not S.control_caught({**S.parse_sanitizer(theirs), "printed": S.reported_kernels(theirs)})
    warn = RACE_CONTROL_LOG.replace("Error: Race", "Warning: Race")
    assert S.reported_kernels(warn) == {"ours": 1, "other": 0}


def test_parse_pytest_and_clean():
    out = "....\n=== warnings summary ===\n60 passed, 2 skipped, 2 warnings in 19.45s\n"
    assert S.parse_pytest(out) == {"passed": 60, "skipped": 2}
    assert S.parse_pytest("1 failed, 59 passed in 3.0s") == {"failed": 1, "passed": 59}
    assert S.parse_pytest("no tests ran") == {}
    ok = {"rc": 0, "sanitizer": {"errors": 0}, "pytest": {"passed": 60}}
    assert S.clean(ok)
    assert not S.clean({**ok, "pytest": {"passed": 59, "failed": 1}})
    assert not S.clean({**ok, "rc": 1})
    assert not S.clean({**ok, "sanitizer": {"errors": 2}})


def test_select_nodes_first_of_each_function():
    f = "tests/test_gpu_kernels.py"
    nodes = [f"{f}::test_dual[(256, 512, 256, 1)-1111]", f"{f}::test_dual[(256, 512, 256, 1)-77]",
             f"{f}::test_table_writer_kernel_alone", f"{f}::test_ranked_loop_cycles_inputs[graphs-dual]",
             "tests/test_gpu_masked.py::test_dual[x]", f"{f}::test_dual_skinny[(1, 4096, 7168, 1)]"]
    assert S.select_nodes(nodes, 1) == [nodes[0], nodes[2], nodes[4], nodes[5]]
    assert S.select_nodes(nodes, 2) == [nodes[0], nodes[1], nodes[2], nodes[4], nodes[5]]


def test_pick_nodes_range_marker_and_shards():
    nodes = [f"t::n{i}" for i in range(10)]
    assert S.pick_nodes(nodes) == nodes
    assert S.pick_nodes(nodes, 2, 3) == ["t::n2", "t::n3", "t::n4"]
    assert S.pick_nodes(nodes, only={"t::n1", "t::n7", "t::other"}) == ["t::n1", "t::n7"]
    shards = [S.pick_nodes(nodes, shard=f"{i}/3") for i in range(3)]
    assert shards[0] == ["t::n0", "t::n3", "t::n6", "t::n9"]
    assert sorted(sum(shards, [])) == sorted(nodes)  # every test in exactly one shard
    assert S.pick_nodes(nodes, 4, 4, "1/2", {"t::n5", "t::n6", "t::n7"}) == ["t::n6"]
    for bad in ("3/3", "1", "a/2", "-1/2"):
        try:
            S.pick_nodes(nodes, shard=bad)
        except SystemExit as e:
            assert "--shard" in str(e)
        else:
            raise AssertionError(bad)
    # a bad --shard is refused before the GPU check (here, on CPU, the sweep would otherwise exit 2)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "sanitize_sweep.py"), "--shard", "2/2"],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "--shard wants I/N" in r.stderr


def test_gpus_spread_the_slice_one_shard_per_gpu(tmp_path, monkeypatch):
    """--gpus N: the sweep again per GPU as shard I of N, seeing only that GPU (the listed
    CUDA_VISIBLE_DEVICES entries when set), with the parent's seed and its own log folder; a
    shard that fails, or writes no summary, makes the whole unclean; a bad --gpus is refused."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6,7")
    assert S.visible_gpus(3) == ["5", "6", "7"] and S.visible_gpus(2) == ["5", "6"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert S.visible_gpus(3) == ["0", "1", "2"]
    argv = ["--tools", "racecheck", "--gpus", "3", "--seed", "9"]
    runs = S.shard_runs(argv, ["5", "6", "7"], "/o", 9)
    for i, (cmd, env) in enumerate(runs):
        assert env == {"CUDA_VISIBLE_DEVICES": str(5 + i)}
        assert cmd[1] == os.path.join(ROOT, "tools", "sanitize_sweep.py") and cmd[2:2 + len(argv)] == argv
        ns = {}
        for key in ("--gpus", "--shard", "--seed", "--out", "--tools"):  # argparse keeps an option's last value
            ns[key] = cmd[len(cmd) - 1 - cmd[::-1].index(key) + 1]
        assert ns == {"--gpus": "1", "--shard": f"{i}/3", "--seed": "9", "--out": os.path.join("/o", f"shard{i}"),
                      "--tools": "racecheck"}
    for i, rc in enumerate((0, 1)):
        os.makedirs(tmp_path / f"shard{i}")
        (tmp_path / f"shard{i}" / "summary.json").write_text('{"seed": 9}')
    merged = S.merge_shards(str(tmp_path), [0, 1])
    assert merged["gpus"] == 2 and [sh["rc"] for sh in merged["shards"]] == [0, 1] and not merged["clean"]
    assert merged["shards"][0]["summary"] == {"seed": 9}
    assert S.merge_shards(str(tmp_path), [0, 0])["clean"]
    no_summary = S.merge_shards(str(tmp_path), [0, 0, 0])  # shard2 wrote none
    assert no_summary["shards"][2]["summary"] is None and not no_summary["clean"]
    for bad in (["--gpus", "0"], ["--gpus", "2", "--shard", "0/2"]):
        r = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "sanitize_sweep.py"), *bad],
                           capture_output=True, text=True)
        assert r.returncode == 1 and "--gpus wants" in r.stderr


def test_files_make_the_slice(tmp_path, monkeypatch):
    """--files: the slice (and its graph-marked part) is collected from those files and node ids, a
    comma inside a node id's [...] kept; by default from TEST_FILES."""
    import torch

    seen = []

    def fake_collect(env, marker=None, paths=S.TEST_FILES, pytest=None, cwd=ROOT):
        seen.append((marker, list(paths)))
        return []

    monkeypatch.setattr(S, "sanitizer_binary", lambda: "/cs")
    monkeypatch.setattr(S, "collect", fake_collect)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    dual = "tests/test_gpu_kernels.py::test_dual[(256, 4096, 7168, 1)-0]"
    for argv, paths in ((["--files", f"tests/planted_gpu_faults.py,{dual}"], ["tests/planted_gpu_faults.py", dual]),
                        ([], list(S.TEST_FILES))):
        seen.clear()
        with pytest.raises(SystemExit, match="no test left to run"):  # (the stand-in collects nothing)
            S.main(["--out", str(tmp_path), "--seed", "1", "--tools", "memcheck", *argv])
        # (the graph-marked part of all; the slice of the files, then the parametrization named whole)
        assert seen == [("graphs", paths), (None, [p for p in paths if "[" not in p])] + \
            ([(None, [dual])] if dual in paths else [])
    # an empty --files is refused before any GPU work; --gpus hands --files to every shard
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="--files names no test file"):
        S.main(["--out", str(tmp_path), "--files", " , "])
    for cmd, _env in S.shard_runs(["--files", f"x.py,{dual}", "--gpus", "2"], ["0", "1"], "/o", 1):
        assert cmd[cmd.index("--files") + 1] == f"x.py,{dual}"


def test_slice_thins_files_and_functions_not_named_parametrizations(monkeypatch):
    """Of files and test functions, the first --per-test parametrizations of each function (less the
    host-side tests); a parametrization named whole is kept, even a second one of a function."""
    by_paths = {("t.py",): ["t.py::f[a]", "t.py::f[b]", "t.py::g", "t.py::test_two_streams_at_once[x]"],
                ("t.py::f[b]", "u.py::h[2]"): ["t.py::f[b]", "u.py::h[2]"]}
    monkeypatch.setattr(S, "collect", lambda env, marker=None, paths=(), **_k: list(by_paths[tuple(paths)]))
    assert S.slice_nodes({}, ["t.py"], 1) == ["t.py::f[a]", "t.py::g"]
    assert S.slice_nodes({}, ["t.py", "t.py::f[b]", "u.py::h[2]"], 1) == ["t.py::f[a]", "t.py::g", "t.py::f[b]",
                                                                         "u.py::h[2]"]
    assert S.slice_nodes({}, ["t.py::f[b]", "u.py::h[2]"], 1) == ["t.py::f[b]", "u.py::h[2]"]


def test_sanitizer_command():
    cmd = S.sanitizer_command("/cs", "racecheck", "/o/racecheck.log", ["t.py::a[1, 2]", "t.py::b"])
    assert cmd[:3] == ["/cs", "--tool", "racecheck"]
    assert cmd[cmd.index("--log-file") + 1] == "/o/racecheck.log"
    assert cmd[-2:] == ["t.py::a[1, 2]", "t.py::b"]  # node ids with spaces stay single arguments
    assert "--target-processes" in cmd and cmd[cmd.index("--report-api-errors") + 1] == "no"
    assert cmd[cmd.index("--kernel-name") + 1] == S.OUR_KERNELS  # only our kernels by default
    assert "--kernel-name" not in S.sanitizer_command("/cs", "memcheck", "/l", ["t"], kernels=None)
    # initcheck sees writes only in the kernels it instruments: never filtered
    assert S.kernel_filter("initcheck", False) is None and S.kernel_filter("racecheck", True) is None
    assert S.kernel_filter("memcheck", False) == S.kernel_filter("racecheck", False) == S.OUR_KERNELS


def test_fixed_test_seed_names_the_node_ids():
    """NVFP4_TEST_SEED fixes test_dual's fresh seed, so the sweep's (and first_gpu_run's) node ids
    exist in every process."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "tests/test_gpu_kernels.py::test_dual"], cwd=ROOT, capture_output=True, text=True,
                       env={**os.environ, "NVFP4_TEST_SEED": "424242"})
    ids = [ln for ln in r.stdout.splitlines() if "::test_dual[" in ln]
    assert ids and sum("-424242]" in i for i in ids) == sum("-1111]" in i for i in ids) == len(ids) // 2



# (the control's report as compute-sanitizer 2025.3.1 printed it on an H100, session 60)
MEM_CONTROL_LOG = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at kernel_cutlass_kernel___main___kernel_classlocalsPlantedBug_object_at__ptri32_gmem_align16+0x90
=========     by thread (0,0,0) in block (0,0,0)
=========     Access to 0x7ff24e801fa4 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7ff24e801000 of size 4,004 bytes
========= ERROR SUMMARY: 1 error
"""
RACE_CONTROL_LOG = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at kernel_cutlass_kernel_PlantedBug+0xb0
=========     and Read access at kernel_cutlass_kernel_PlantedBug+0xd0 [4 hazards]
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_control_caught_needs_a_report_in_our_kernel():
    def parsed(text):
        return {**S.parse_sanitizer(text), "printed": S.reported_kernels(text)}

    assert S.control_caught(parsed(MEM_CONTROL_LOG))
    assert not S.control_caught(parsed(SYNC_LOG))  # 0 errors: the tool saw nothing
    assert not S.control_caught(parsed("========= COMPUTE-SANITIZER\nSegmentation fault\n"))  # no summary
    # an error that no report places in a kernel of ours (e.g. torch's) is not the control
    assert not S.control_caught({"errors": 1, "printed": {"ours": 0, "other": 1}})
    # racecheck's hazards count, whatever the "at" lines say
    assert S.control_caught({**S.parse_sanitizer(RACE_CONTROL_LOG), "printed": {"ours": 1, "other": 0}})
    assert not S.control_caught({**S.parse_sanitizer(RACE_LOG), "printed": {"ours": 0, "other": 0}})


def test_control_command_runs_the_tools_control_with_the_sweeps_filter():
    import sanitize_controls as C

    assert sorted(C.CONTROLS.values()) == sorted(S.TOOLS)  # one control per tool
    for tool in S.TOOLS:
        cmd = S.control_command("/cs", tool, f"/o/{tool}.control.log", S.kernel_filter(tool, False))
        assert cmd[:3] == ["/cs", "--tool", tool] and cmd[-1] == C.control_for(tool)
        assert cmd[-2].endswith("tools/sanitize_controls.py") and "pytest" not in cmd
        assert ("--kernel-name" in cmd) == (tool != "initcheck")
        assert cmd[cmd.index("--log-file") + 1] == f"/o/{tool}.control.log"


def test_runs_split_graph_tests_from_exact_allocations():
    nodes = ["t::a", "t::g[1]", "t::b", "t::g[2]"]
    graphs = {"t::g[1]", "t::g[2]"}
    for tool in ("memcheck", "initcheck"):
        assert S.runs_of(tool, nodes, graphs) == [(".1", ["t::a", "t::b"], S.EXACT_ALLOCATIONS),
                                                   (".graphs", ["t::g[1]", "t::g[2]"], {})]
        assert S.runs_of(tool, ["t::a"], graphs) == [(".1", ["t::a"], S.EXACT_ALLOCATIONS)]
        many = [f"t::m[{i}]" for i in range(S.EXACT_CHUNK + 1)]
        assert [(r[0], len(r[1])) for r in S.runs_of(tool, many, graphs)] == [(".1", S.EXACT_CHUNK), (".2", 1)]
    for tool in ("racecheck", "synccheck"):  # shared memory and barriers: the allocator is not seen
        assert S.runs_of(tool, nodes, graphs) == [("", nodes, {})]
    assert S.EXACT_ALLOCATIONS == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}


def test_graph_tests_are_marked():
    """Every GPU test that captures a CUDA graph (directly, or through NVFP4_GRAPHS / the graphs
    parameter) carries the `graphs` mark, so the sweep runs it with the caching allocator: capture
    fails without it (exp. 184: 'CUDA error: out of memory', and every later test in the process)."""
    import ast

    for name in S.TEST_FILES:
        src = open(os.path.join(ROOT, name)).read()
        for node in ast.parse(src).body:
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
                body = ast.get_source_segment(src, node)
                captures = any(k in body for k in ("torch.cuda.graph(", "NVFP4_GRAPHS", "graphs", "capture"))
                marked = any(ast.unparse(d) == "pytest.mark.graphs" for d in node.decorator_list)
                assert captures == marked, f"{name}::{node.name}: captures a graph {captures}, marked {marked}"


def test_controls_compile_with_their_planted_bug(tmp_path):
    """Each control compiles for sm_90a on CPU and its PTX holds the instruction its tool must
    report (so a DSL change that drops the bug shows here, not as a sweep that cannot fail)."""
    import sanitize_controls as C

    want = {"oob_store": "st.global", "smem_race": "ld.shared", "uninit_read": "ld.global",
            "warp_sync_mask": "bar.warp.sync \t65535;"}
    assert set(want) == set(C.CONTROLS)
    for name, instr in want.items():
        ptx = C.compile_only(name, str(tmp_path / name))
        body = ptx[ptx.index(".entry"):]
        assert instr in body, (name, instr)


def test_planted_faults_compile_with_their_fault(tmp_path):
    """first_gpu_run's planted faults (tests/planted_gpu_faults.py) compile on CPU: the store the unmapped
    pointer takes, and an mbarrier wait with no arrive anywhere in the kernel."""
    import sanitize_controls as C

    assert set(C.FAULTS) == {"illegal_address", "mbarrier_hang"} and not set(C.FAULTS) & set(C.CONTROLS)
    store = C.compile_only("illegal_address", str(tmp_path / "a"))
    assert "st.global" in store[store.index(".entry"):]
    hang = C.compile_only("mbarrier_hang", str(tmp_path / "h"))
    body = hang[hang.index(".entry"):]
    assert "mbarrier.init" in body and "mbarrier.try_wait" in body and "mbarrier.arrive" not in body


def test_known_reports_are_counted_and_pass():
    """initcheck's reports of the setup kernel's tensormap.cp_fenceproxy destination (exp. 184) are
    known; the same report in another kernel, or another report in the setup kernel, is not."""
    setup = ("========= Uninitialized __global__ memory read of size 4 bytes\n"
             "=========     at kernel_cutlass_setup_kernel_nvfp4gemmsm100grouped_gemm_x+0x1960\n"
             "=========     by thread (0,0,0) in block (0,0,0)\n")
    other = setup.replace("setup_kernel_nvfp4gemmsm100grouped_gemm_x", "kernel_nvfp4gemmsm90_y")
    wider = setup.replace("size 4 bytes", "size 16 bytes")
    for body, known, errors in ((setup * 3, 3, 3), (setup * 2 + other, 2, 3), (wider, 0, 1)):
        text = "========= COMPUTE-SANITIZER\n" + body + f"========= ERROR SUMMARY: {errors} errors\n"
        parsed = S.parse_sanitizer(text, "initcheck")
        assert parsed == {"errors": errors, "known": known}
        result = {"rc": 1, "sanitizer": parsed, "pytest": {"passed": 7}}
        assert S.clean(result) == (known == errors)
    assert "known" not in S.parse_sanitizer(MEM_LOG_BAD, "memcheck")  # no known reports for memcheck
    assert not S.clean({"rc": 0, "sanitizer": {"errors": 0}, "pytest": {}})  # pytest did not finish
    assert S.clean({"rc": 0, "sanitizer": {"errors": 0}, "pytest": {"skipped": 16}})  # (a chunk of skips)
    cmd = S.sanitizer_command("/cs", "initcheck", "/l", ["t"], kernels=None)
    assert cmd[cmd.index("--print-limit") + 1] == "100000"  # every report printed
