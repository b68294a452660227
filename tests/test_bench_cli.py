"""benchmarks/bench.py on a machine without a GPU: it says so, runs the compile report, and
the report has one row per config with compile time, shared memory, registers, spills."""

import json
import os
import re
import subprocess
import sys
import types

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench import case_name, cases_for, parse_shapes, print_compile_table  # noqa: E402


def test_parse_explicit_shapes():
    assert parse_shapes("dual", "256x4096x7168; 128x64x256x2") == [(256, 4096, 7168, 1), (128, 64, 256, 2)]
    assert parse_shapes("group", "40,76/7168/2048") == [((40, 7168, 2048), (76, 7168, 2048))]
    assert case_name("group", ((40, 7168, 2048), (76, 7168, 2048))) == "g2 M[40,76] N7168 K2048"
    assert case_name("group", ((40, 7168, 2048), (76, 7168, 2048)), with_ms=False) == "g2 N7168 K2048"
    assert case_name("dual", (256, 4096, 7168, 1)) == "256x4096x7168"
    assert case_name("dual", (200, 768, 1536, 2)) == "200x768x1536x2"


def test_prefill_cases_are_legal_on_both_archs():
    """`--cases prefill`: the model-sized shapes measured in MEMORY.md session 16, each
    accepted by both archs' shape rules (so the GPU benchmark and the compile report run)."""
    from configs import check_shape

    dual, group = cases_for("dual", "prefill"), cases_for("group", "prefill")
    assert dual == [(2048, 14336, 4096, 1), (4096, 14336, 4096, 1), (4096, 28672, 8192, 1)]
    assert [len(g) for g in group] == [8, 8] and sum(m for m, _, _ in group[0]) == 4096
    for arch in ("sm_100a", "sm_90a"):
        for shape in dual:
            assert not check_shape("dual", shape, arch), (arch, shape)
        for shape in group:
            assert not check_shape("group", shape, arch), (arch, shape)


def test_compile_table_format(capsys):
    rows = [{"problem": "dual", "arch": "sm_100a", "case": "256x4096x7168x1", "config": "cfgA", "ok": True,
             "seconds": 1.25, "smem": 201728, "registers": 80, "spills": 0},
            {"problem": "dual", "arch": "sm_90a", "case": "256x4096x7168x1", "config": "cfgB", "ok": False,
             "error": "DSLRuntimeError: boom"}]
    print_compile_table(rows)
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:4] == ["problem", "arch", "config", "case"]
    assert "201728" in out[2] and " 80 " in out[2] and out[2].rstrip().endswith("0")
    assert "FAIL DSLRuntimeError: boom" in out[3]


def test_cpu_main_job_runs_compile_report(tmp_path):
    """The README's main command on a CPU machine: no GPU, so the compile report.  (Where a
    supported GPU is present the command benchmarks instead: skipped there.)"""
    import pytest

    from nvfp4gemm.harness import device_arch

    if device_arch() is not None:
        pytest.skip("a supported GPU is present: the main command benchmarks instead of the compile report")
    js = tmp_path / "r.json"
    env = dict(os.environ)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "bench.py"), "--problem", "dual",
                        "--arch", "sm_100a", "--cases", "256x128x256", "--json", str(js)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert "No supported GPU here" in r.stdout, r.stdout + r.stderr
    assert "compiled, 0 failed" in r.stdout, r.stdout + r.stderr
    assert r.returncode == 0
    rows = json.loads(js.read_text())["rows"]
    assert len(rows) == 1 and rows[0]["ok"] and rows[0]["arch"] == "sm_100a"
    assert rows[0]["spills"] == 0 and rows[0]["smem"] <= 232448 and rows[0]["registers"] > 0


def test_gpu_report_table_and_chart(tmp_path, capsys, monkeypatch):
    """The GPU report's table and PNG, rendered from a stored run's JSON (H200, 2026-11-21)."""
    import torch

    from benchmarks import timing

    run = json.load(open(os.path.join(ROOT, "docs", "bench_h200_2026-11-21.json")))
    timing.print_table(run["rows"], run["ceilings"], run["device"])
    out = capsys.readouterr().out
    assert f"fp16 matmul {run['ceilings']['fp16_tflops']:.0f} TFLOP/s" in out
    assert "256x4096x7168" in out and "g8 N4096 K7168" in out
    assert "vs cuBLAS fp16 pre-decode" in out and "geomean dual:" in out and "geomean group:" in out
    assert "ranked loop (the leaderboard's)" in out
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: run["device"])
    png = tmp_path / "c.png"
    timing.write_png(run["rows"], str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10000


def test_ab_compare_prepare_and_missing_base(tmp_path, capsys):
    """benchmarks/ab_compare.py: --prepare exports a git ref as a plain tree (what the device
    call carries); a base tree without nvfp4gemm/ is refused with the command to make one."""
    import pytest

    from benchmarks import ab_compare

    dest = tmp_path / "base"
    assert ab_compare.main(["--prepare", "HEAD", "--base", str(dest)]) == 0
    assert (dest / "nvfp4gemm" / "sm90" / "grouped_gemm.py").is_file()
    assert (dest / "AB_BASE_REF").read_text().startswith("HEAD ")
    with pytest.raises(SystemExit):
        ab_compare.main(["--base", str(tmp_path / "missing")])
    assert "run --prepare REF" in capsys.readouterr().err


def test_dsmem_copy_benchmark_compiles_and_emits_bulk_copy(tmp_path):
    """benchmarks/dsmem_copy.py (device-only micro-benchmark, notes/sm90.md exp. 60) keeps
    compiling for sm_90a, and its bulk mode really issues the cluster bulk copy into the peer's
    mbarrier while the register mode issues st.shared::cluster."""
    import glob

    import cutlass.cute as cute
    from cutlass import Int32
    from cutlass.cute.runtime import make_fake_stream

    from benchmarks.dsmem_copy import DsmemCopy
    from nvfp4gemm.harness import read_ptx

    for mode, needle in (("bulk", "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes"),
                         ("st", "st.shared::cluster.v4.b32")):
        d = tmp_path / mode
        d.mkdir()
        cute.compile(DsmemCopy(mode, 2, 8192, 4), Int32(1), Int32(2), make_fake_stream(),
                     options=f"--gpu-arch sm_90a --keep-ptx --dump-dir {d}")
        ptx = read_ptx(sorted(glob.glob(str(d / "*.ptx")))[-1])
        assert needle in ptx and "mapa.shared::cluster" in ptx, mode


def test_cta_trace_stamps_compile_only_when_asked(tmp_path):
    """benchmarks/cta_trace.py's kernels (NVFP4_CTA_TRACE=1 before import, session 34): the grouped
    mixed-input kernel then carries %globaltimer stamps (per CTA st.global.u64, launch red.min /
    red.max) for sm_90a; without the variable its PTX has none (the bench and the tests time the
    kernels as shipped)."""
    import glob

    import configs
    from nvfp4gemm import harness
    from nvfp4gemm.harness import read_ptx

    code = (
        "import os, sys, glob; sys.path.insert(0, %r)\n"
        "import nvfp4gemm, configs\n"
        "from nvfp4gemm import harness\n"
        "from nvfp4gemm.sm90 import grouped_mixed as GM\n"
        "assert GM.CTA_TRACE\n"
        "harness.compile_kernel('group', 'sm_90a', configs.sm90_group_mixed_forms(((256, 80), (128, 176))),\n"
        "                       configs.GROUP_BENCHMARKS[1], dump_dir=%r)\n" % (ROOT, str(tmp_path / "on")))
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "NVFP4_CTA_TRACE": "1"},
                   capture_output=True, timeout=600)
    on = read_ptx(sorted(glob.glob(str(tmp_path / "on" / "*.sm_90a.ptx")))[-1])
    assert "%globaltimer" in on and "st.global.u64" in on
    assert "red.global.min.u64" in on and "red.global.max.u64" in on
    harness.compile_kernel("group", "sm_90a", configs.sm90_group_mixed_forms(((256, 80), (128, 176))),
                           configs.GROUP_BENCHMARKS[1], dump_dir=str(tmp_path / "off"))
    off = read_ptx(sorted(glob.glob(str(tmp_path / "off" / "*.sm_90a.ptx")))[-1])
    assert "%globaltimer" not in off


def test_cta_trace_summary():
    """cta_trace's per-form figures from stamps: synthetic CTAs of a two-form plan, each whole
    tile 28 k-blocks at 2 us, a split segment at 3 us, a finisher waiting 5 us."""
    from benchmarks import cta_trace

    import configs

    tiles = ((256, 128), (128, 256))
    plan = configs.mixed_group_forms_plan(configs.GROUP_BENCHMARKS[0], 132, tiles)
    bounds = [0] + plan["splits"] + [plan["ctas"]]
    cta_form = [f for f in range(2) for _ in range(bounds[f], bounds[f + 1])]
    segs, offs = plan["segs"], plan["seg_offs"]
    trace = []
    for c in range(plan["ctas"]):
        t, row = 0, [1000]
        for _g, _nb, _m0, kb0, kb1, s, ns in segs[offs[c]:offs[c + 1]]:
            t += (kb1 - kb0) * (2000 if ns == 1 else 3000)
            k_end = t
            t += 5000 if (ns > 1 and s == 0) else 0
            row += [1000 + k_end, 1000 + t, 2000 + t]
            t += 1000
        trace.append(row + [-1] * (16 - len(row)))
    rows = cta_trace.cta_rows(trace, plan, cta_form)
    res = cta_trace.summarize(rows, tiles, plan, 1000)
    assert [r["ctas"] for r in res] == [bounds[1], plan["ctas"] - bounds[1]]
    for r in res:
        assert abs(r["whole_kb_us"] - 2.0) < 1e-9 and abs(r["split_kb_us"] - 3.0) < 1e-9
        assert abs(r["finisher_wait_us"] - 5.0) < 1e-9 and r["end_max_us"] > r["end_median_us"] > 0


def test_leaderboard_timing_without_gpu(capsys):
    """benchmarks/leaderboard_timing.py (GPU only) says so and exits 2 on a machine without one."""
    import torch

    from benchmarks import leaderboard_timing

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    assert leaderboard_timing.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err


def test_moe_structures_and_table(capsys):
    """bench.py --moe: 'leaderboard' names the g8 leaderboard structures, explicit G/N/K lists
    parse, anything else is refused naming the part, as is a --moe-capacity below --moe-max-m;
    the MoE table prints each row's figures."""
    import pytest

    from benchmarks import bench, timing

    assert bench.moe_structures("leaderboard") == [(8, 4096, 7168), (8, 7168, 2048)]
    assert bench.moe_structures("16/2048/7168; 4/512/256") == [(16, 2048, 7168), (4, 512, 256)]
    for bad in ("8/4096", "8/x/7168", "0/256/256"):
        with pytest.raises(SystemExit, match="--moe"):
            bench.moe_structures(bad)
    # --moe-capacity (MaskedGroupedGemm's buffers) holds at least the largest count, refused first
    with pytest.raises(SystemExit, match=r"--moe-max-m 300 must be in 1..--moe-capacity \(256\)"):
        bench.main(["--moe", "leaderboard", "--moe-max-m", "300", "--moe-capacity", "256"])
    row = {"structure": [8, 4096, 7168], "max_m": 256, "us": 151.25, "gpu_us": 140.0, "host_us": 148.5, "tflops": 412.3,
           "cublas_loop_us": 260.0, "speedup": 1.72, "correct": True, "compiles_timed": 0,
           "configs": ["mixed 256x128 ab2 a16x8 streamK devsched"]}
    timing.print_moe([row, dict(row, correct=False, structure=[8, 7168, 2048])])
    out = capsys.readouterr().out
    assert "g8 N4096 K7168 M_g 1-256" in out and "151.2" in out and "1.72x" in out and "devsched" in out
    assert re.search(r"g8 N7168 K2048 M_g 1-256 +NO ", out)


def test_moe_masked_table(capsys):
    """bench.py --moe's MaskedGroupedGemm table prints each row's figures (and NO for a failed
    check); `masked_serves` says which structures the class takes (N_g % 128, or capacity <= 16)."""
    from benchmarks import timing

    row = {"structure": [8, 7168, 2048], "capacity": 256, "max_m": 16, "us": 86.94, "gpu_us": 85.8, "host_us": 15.6,
           "graph_us": 92.1, "graph_host_us": 18.1, "correct": True, "config": "mixed 256x128 ab2 a16x8 streamK devsched masked"}
    old = {k: v for k, v in row.items() if k != "max_m"}  # (session 43's rows: counts up to the capacity)
    timing.print_moe_masked([row, dict(old, correct=False, structure=[16, 2048, 7168])])
    out = capsys.readouterr().out
    assert re.search(r"g8 N7168 K2048 cap 256 M_g 1-16 +yes +86.9 +85.8 +15.6 +92.1 +18.1 +mixed", out)
    assert re.search(r"g16 N2048 K7168 cap 256 M_g 1-256 +NO ", out)
    assert timing.masked_serves((8, 4096, 7168), 256) and timing.masked_serves((8, 192, 2048), 16)
    assert not timing.masked_serves((8, 192, 2048), 256)


def test_draw_option_reaches_the_inputs_and_refuses_moe(monkeypatch):
    """bench.py --draw wide: the cases' inputs come from reference.py's wide draw; not with --moe
    (its inputs share one set of weights, which the wide draw cannot pair with each input's A)."""
    from benchmarks import bench, timing

    seen = []
    monkeypatch.setattr(timing.R, "generate_input", lambda *a, **kw: seen.append(kw.get("wide")))
    for draw in timing.R.DRAWS:
        monkeypatch.setattr(timing, "INPUT_DRAW", draw)
        timing.make_input("dual", (128, 256, 512, 1), 1)
        timing.make_input("group", ((64, 128, 512), (96, 128, 512)), 1)
    assert seen == [False, False, True, True]
    with pytest.raises(SystemExit, match="--draw wide: not with --moe"):
        bench.main(["--draw", "wide", "--moe", "leaderboard"])


def test_bench_arithmetic_and_verdicts(capsys):
    """What bench.py reports, on hand-computed cases: FLOPs and bytes (dual: two GEMMs over
    A, B1, B2, their e4m3 scales and C; grouped: a sum over groups), the floor (the measured
    rates, or on a B200 the leaderboard's speed of light), the geometric mean, a failed check
    printed as NO, and the exit verdict failing on any row's per-call or ranked check."""
    import configs
    from benchmarks import timing as T

    m, n, k, l = 256, 512, 1024, 2
    assert T.flops_bytes("dual", (m, n, k, l)) == (
        4 * m * n * k * l, l * ((m + 2 * n) * k // 2 + (m + 2 * n) * k // 16 + 2 * m * n))
    groups = ((40, 128, 256), (8, 64, 512))
    assert T.flops_bytes("group", groups) == (
        2 * 40 * 128 * 256 + 2 * 8 * 64 * 512,
        (168 * 128 + 168 * 16 + 40 * 128 * 2) + (72 * 256 + 72 * 32 + 8 * 64 * 2))
    ceil = {"fp16_tflops": 500.0, "copy_tbps": 2.0}
    flops, byts = T.flops_bytes("dual", (m, n, k, l))
    assert T.floor_us("dual", (m, n, k, l), "sm_90a", ceil) == pytest.approx(
        max(flops / 500e12, byts / 2e12) * 1e6)
    skinny = (16, 4096, 256, 1)  # (bytes bound at these rates)
    f2, b2 = T.flops_bytes("dual", skinny)
    assert b2 / 2e12 > f2 / 500e12 and T.floor_us("dual", skinny, "sm_90a", ceil) == pytest.approx(b2 / 2e12 * 1e6)
    lb = configs.DUAL_BENCHMARKS[0]
    assert T.floor_us("dual", lb, "sm_100a", ceil) == T.B200_SOL[lb] == 4.708
    assert T.floor_us("dual", lb, "sm_90a", ceil) != T.B200_SOL[lb]
    assert T.geomean([1, 4]) == pytest.approx(2) and T.geomean([2, None, 8]) == pytest.approx(4)
    row = {"problem": "dual", "case": [m, n, k, l], "correct": False, "us": 10.0, "tflops": 1.0, "gbps": 1.0,
           "floor_us": 5.0, "x_floor": 2.0, "baselines": {}, "config": "cfg"}
    T.print_table([row], ceil, "test")
    line = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("dual ")][0]
    assert " NO " in line
    good = dict(row, correct=True)
    assert T.all_correct([good], [good], [])
    assert not T.all_correct([good], [row], [])
    assert not T.all_correct([good], [], [dict(good, ranked_correct=False)])
    assert not T.all_correct([dict(good, ranked_correct=False)], [], [])


def test_leaderboard_timing_case_arithmetic(monkeypatch):
    """time_case (CPU, every GPU step stubbed): `same` is the median of the event times and its host
    column the median of the host times, each call behind the timer's L2 flush; the ranked loop runs
    after the evaluator's correctness pass on clones of every ranked input.  Fails on: host column
    from the event times; no correctness pass; no flush."""
    import submission
    from benchmarks import leaderboard_timing as lt

    order = []
    monkeypatch.setattr(submission, "custom_kernel", lambda x: order.append(("call", x)))
    monkeypatch.setattr(lt, "make_input", lambda p, s, seed: "base")
    monkeypatch.setattr(lt, "clone_input", lambda x: ("clone", x))
    samples = iter([(10.0, 1.0), (30.0, 7.0), (20.0, 4.0)])
    flush = object()

    def timed_call(fn, x, f=None):
        assert f is flush, "a `same` call without the L2 flush"
        return next(samples)

    monkeypatch.setattr(lt, "timed_call", timed_call)
    monkeypatch.setattr(lt, "ranked_inputs", lambda p, s, seed: ["r0", "r1"])

    def ranked_time(fn, inputs, f):
        order.append(("ranked", tuple(inputs)))
        return 5.0, 2.0

    monkeypatch.setattr(lt, "ranked_time", ranked_time)
    timer = types.SimpleNamespace(flush=flush, fresh=lambda fn, make, calls: (8.0, 3.0))
    out = lt.time_case("dual", (256, 512, 1024, 1), 3, timer)
    assert (out["same_us"], out["same_host_us"]) == (20.0, 4.0)
    assert (out["eval_us"], out["eval_host_us"], out["ranked_us"], out["ranked_host_us"]) == (8.0, 3.0, 5.0, 2.0)
    assert order[-3:] == [("call", ("clone", "r0")), ("call", ("clone", "r1")), ("ranked", ("r0", "r1"))]


def test_leaderboard_timing_main_runs_both_problems(monkeypatch, capsys):
    """main --problem both times every case of both problems (CPU, GPU stubbed).  Fails if `both` runs only one problem."""
    from benchmarks import leaderboard_timing as lt

    monkeypatch.setattr(lt.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(lt.torch.cuda, "get_device_name", lambda *a: "stub")
    monkeypatch.setattr(lt, "Timer", lambda iters: None)
    monkeypatch.setattr(lt, "cases_for", lambda problem, cases: [("shape", problem)])
    seen = []

    def time_case(problem, shape, calls, timer):
        seen.append(problem)
        return {**{f"{m}_us": 1.0 for m in ("same", "eval", "ranked")},
                **{f"{m}_host_us": 1.0 for m in ("same", "eval", "ranked")}}

    monkeypatch.setattr(lt, "time_case", time_case)
    monkeypatch.setattr(lt, "case_name", lambda problem, shape: str(shape))
    assert lt.main(["--problem", "both"]) == 0
    assert seen == ["dual", "group"]
