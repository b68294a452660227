"""The compile harness: compile-only for a named arch with no GPU, cache by key, PTX and
cubin dumps; the compile report's exit status says when a compile failed."""

import os

import pytest

import configs as C
from benchmarks import bench
from nvfp4gemm import harness


def test_compile_cached_and_dumped(tmp_path):
    shape = C.DUAL_TESTS[1]
    cfg = C.select_config("dual", "sm_100a", shape)
    ck = harness.compile_kernel("dual", "sm_100a", cfg, shape, dump_dir=str(tmp_path))
    assert not ck.runnable and ck.seconds > 0
    assert ck.ptx_path and ck.ptx_path.endswith(".sm_100a.ptx") and os.path.getsize(ck.ptx_path) > 0
    assert ck.cubin_path and ck.cubin_path.endswith(".sm_100a.cubin") and os.path.getsize(ck.cubin_path) > 0
    assert ".target sm_100a" in harness.read_ptx(ck.ptx_path)
    assert harness.compile_kernel("dual", "sm_100a", cfg, shape, dump_dir=str(tmp_path)) is ck
    # another shape with the same config: shapes are runtime values, same compiled kernel
    assert harness.compile_kernel("dual", "sm_100a", cfg, (512, 1024, 512, 1), dump_dir=str(tmp_path)) is ck


def test_compile_rejects_mismatched_config():
    cfg = C.select_config("dual", "sm_90a", C.DUAL_TESTS[0])
    with pytest.raises(ValueError, match="config is for dual/sm_90a"):
        harness.compile_kernel("dual", "sm_100a", cfg, C.DUAL_TESTS[0])


def test_report_exit_status_on_failure(monkeypatch, capsys):
    def broken(*a, **k):
        raise RuntimeError("ptxas fatal: synthetic failure")

    monkeypatch.setattr(harness, "compile_kernel", broken)
    rc = bench.main(["--compile-only", "--problem", "dual", "--arch", "sm_90a", "--cases", "256x512x256"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "FAIL RuntimeError: ptxas fatal: synthetic failure" in out and "0 compiled, 1 failed" in out
