"""CPU checks of tools/fuzz_gpu.py (exp. 182): its shapes are legal for the arch, under the FLOP cap,
the same for a seed, and cover both problems' rule space; without a GPU it says so."""

import os
import random
import sys

import pytest
import torch

import configs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import fuzz_gpu  # noqa: E402


@pytest.mark.parametrize("problem", ["dual", "group"])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_100a"])
def test_shapes_legal_capped_and_seeded(problem, arch):
    got = fuzz_gpu.shapes(problem, random.Random(7), 60, 500.0, arch)
    assert len(got) == 60 and got == fuzz_gpu.shapes(problem, random.Random(7), 60, 500.0, arch)
    for s in got:
        errs = configs.check_shape("dual", s, arch) if problem == "dual" else configs.check_shape("group", s)
        assert not errs and fuzz_gpu.gflop(problem, s) <= 500.0, (s, errs)
    if arch == "sm_90a":  # several kernels, not one config over and over
        assert len({configs.select_config(problem, arch, s) for s in got}) >= 5


def test_gflop():
    assert fuzz_gpu.gflop("dual", (2, 3, 5, 7)) == 4 * 2 * 3 * 5 * 7 / 1e9
    assert fuzz_gpu.gflop("group", ((2, 3, 5), (1, 1, 4))) == 2 * (30 + 4) / 1e9


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU path")
def test_no_gpu_exit_code(capsys):
    assert fuzz_gpu.main(["--count", "1"]) == 2
    assert "no CUDA GPU" in capsys.readouterr().err


@pytest.mark.parametrize("problem", ["dual", "group"])
def test_truth_error_measures_against_fp64(problem):
    """The fp64 check behind the "TOL" verdict: the fp32 reference's own output sits well inside the
    tolerance of the fp64 truth, and one element moved by 2 x tolerance is reported at ~2."""
    import reference as R

    if problem == "dual":
        data = R.generate_input(128, 256, 512, 2, 3, device="cpu")
    else:
        data = R.generate_input([40, 128], [256, 128], [512, 256], 2, 3, device="cpu")
    ref = R.ref_kernel(data)
    assert fuzz_gpu.truth_error(data, ref) < 0.6
    outs = [ref.clone()] if problem == "dual" else [o.clone() for o in ref]
    t = outs[-1][1, 2, 0].item()
    outs[-1][1, 2, 0] = t + 2 * (R.ATOL + R.RTOL * abs(t))
    got = fuzz_gpu.truth_error(data, outs[0] if problem == "dual" else outs)
    assert 1.5 < got < 2.6, got
