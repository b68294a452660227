"""Planted GPU faults: tools/first_gpu_run.py's own check on a GPU (exp. 188).  Not part of the test
suite: the file's name does not match test_*.py, so pytest collects it only when named:

    python3 tools/first_gpu_run.py --tests tests/planted_gpu_faults.py --draws leaderboard --no-timing \\
        --test-timeout 60 --out planted

Six tests fail by design, three while they run and three after they reported PASSED.  Two are the
ways a never-run kernel most often fails (tools/sanitize_controls.py, FAULTS): a store to an unmapped
address, which loses the process's CUDA context (the guard in tests/conftest.py then ends the session,
naming the test), and an mbarrier wait that never ends (first_gpu_run kills the process after
--test-timeout).  The third is the process itself dying under a test (a segfault, as a crash in the
driver or in a library's C++ would give: SIGSEGV raised in the test's own process after a GPU op).
The tool must count those three failed -- "CUDA context lost after it", "hung" and "process died" --
each test after a fault in a new process on the same GPU.  The other three fail after their test
body returned (exp. 189): the same illegal address and mbarrier hang launched without a synchronize
(the context guard's synchronize after the test meets them: "CUDA context lost after it", "hung after
it was reported"), and a fixture whose teardown kills the process ("process died after it was
reported").  The seven other tests must pass, and the bisection must call all six "the kernel" (each
fails the same way again with graphs and the table writer off, though pytest reports the last three
PASSED).

Three more (exp. 191) reach the tool's paths that had run only against its CPU stand-in: a process
that ends with rc 1 inside a test (`os._exit(1)`: "process died, rc 1"), an illegal address in a test
marked `graphs` (its "the kernel" verdict must add that it may be a layer the test sets itself), and
an illegal address on the second GPU in a test marked `two_gpus` (run, and bisected, with every GPU
visible; it skips with one).  Each has a test after it that must pass.  With --sanitize the sweep
takes these files too (--tests), so a shard holding a planted hang stalls under its tool: the tool
must kill that shard and name the test it was in.
"""

import os
import signal

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


def test_planted_process_death():
    """Fails by design: its process dies (SIGSEGV) after a GPU op, as in a crash below Python."""
    _gpu_works()
    os.kill(os.getpid(), signal.SIGSEGV)


def test_after_the_death():
    _gpu_works()


def test_planted_illegal_address_after_it_returns():
    """Fails by design after returning: its faulting kernel is only launched; the context guard's
    synchronize after the test finds the context lost."""
    sanitize_controls.run("illegal_address", sync=False)


def test_after_the_late_illegal_address():
    _gpu_works()


def test_planted_hang_after_it_returns():
    """Fails by design after returning: its hanging kernel is only launched; the context guard's
    synchronize after the test waits forever."""
    sanitize_controls.run("mbarrier_hang", sync=False)


def test_after_the_late_hang():
    _gpu_works()


@pytest.fixture
def dies_in_teardown():
    yield
    os.kill(os.getpid(), signal.SIGSEGV)


def test_planted_death_in_teardown(dies_in_teardown):
    """Fails by design after passing: its fixture's teardown kills the process."""
    _gpu_works()


def test_after_the_teardown_death():
    _gpu_works()


def test_planted_exit_1():
    """Fails by design: its process ends with status 1 inside the test (no signal, no report)."""
    _gpu_works()
    os._exit(1)


def test_after_the_exit_1():
    _gpu_works()


@pytest.mark.graphs
def test_planted_illegal_address_in_a_graphs_test():
    """Fails by design: after replaying a captured CUDA graph, its kernel stores to an unmapped
    address."""
    x = torch.zeros(1000, device="cuda", dtype=torch.int64)
    graph = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    with torch.cuda.graph(graph):
        x.add_(1)
    graph.replay()
    torch.cuda.synchronize()
    assert int(x.sum()) == 1000
    sanitize_controls.run("illegal_address")


def test_after_the_graphs_fault():
    _gpu_works()


def _second_gpu() -> int:
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    return 1


@pytest.mark.two_gpus
def test_planted_illegal_address_on_the_second_gpu():
    """Fails by design, on two GPUs: its kernel on the second one stores to an unmapped address."""
    with torch.cuda.device(_second_gpu()):
        sanitize_controls.run("illegal_address")


@pytest.mark.two_gpus
def test_two_gpus_after_the_fault():
    second = _second_gpu()
    _gpu_works()
    with torch.cuda.device(second):
        _gpu_works()
