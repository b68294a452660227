"""Planted GPU faults: tools/first_gpu_run.py's own check on a GPU (exp. 188).  Not part of the test
suite: the file's name does not match test_*.py, so pytest collects it only when named:

    python3 tools/first_gpu_run.py --tests tests/planted_gpu_faults.py --draws leaderboard --no-timing \\
        --test-timeout 60 --out planted

Two tests fail by design, the two ways a never-run kernel most often fails (tools/sanitize_controls.py,
FAULTS): a store to an unmapped address, which loses the process's CUDA context (the guard in
tests/conftest.py then ends the session, naming the test), and an mbarrier wait that never ends
(first_gpu_run kills the process after --test-timeout).  The tool must count exactly those two
failed -- "CUDA context lost after it" and "hung" -- and the three others passed, each test after a
fault in a new process on the same GPU; its bisection must call both "the kernel".
"""

import pytest
import torch

from tools import sanitize_controls  # (tests/conftest.py puts the repository root on sys.path)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _gpu_works():
    x = torch.arange(1000, device="cuda", dtype=torch.int64)
    assert int(x.sum()) == 499500


def test_before_the_faults():
    _gpu_works()


def test_planted_illegal_address():
    """Fails by design: its kernel stores to an unmapped address."""
    sanitize_controls.run("illegal_address")


def test_after_the_illegal_address():
    _gpu_works()


def test_planted_mbarrier_hang():
    """Fails by design: its kernel waits forever on an mbarrier."""
    sanitize_controls.run("mbarrier_hang")


def test_after_the_hang():
    _gpu_works()
