"""After each test, whether this pytest process's CUDA context still works (exp. 188).

Why: a kernel fault -- an illegal address, an illegal instruction, a trap -- leaves the process's
CUDA context broken for good, so every later test of that process fails with the same error,
whatever its own kernel does.  On a GPU whose kernels have never run (a B200) that would bury the
one faulting test under a cascade of false failures, and tools/first_gpu_run.py would rerun the
first of them alone with one layer off, where they pass, and blame CUDA graphs.

So after each test (tests/conftest.py registers both hooks below) a process that has used CUDA
checks its context.  If it is lost, the session ends there: a line starting MARK names the test
after which it was found lost and the error, and pytest exits with CONTEXT_LOST_RC after its usual
report (the failing test's traceback included).  first_gpu_run counts that test failed and runs the
rest of its chunk in a new process.
"""

from __future__ import annotations

import sys

import pytest

CONTEXT_LOST_RC = 86
MARK = "cuda_context_guard: CUDA context lost after "
SEP = " | "  # between the node id and the error on MARK's line


def context_error() -> str | None:
    """None if this process never used CUDA or its context works; else the error's first line."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return None
    try:
        # every device this process has allocated on (a two-GPU test), and the current one
        for d in range(torch.cuda.device_count()):
            if d == torch.cuda.current_device() or torch.cuda.memory_reserved(d):
                torch.cuda.synchronize(d)
        # (a fresh launch and a read back: synchronize alone reports only errors already raised)
        if int(torch.arange(4, device="cuda", dtype=torch.int32).sum()) != 6:
            return "a 4-element sum on the GPU read back wrong"
    except Exception as e:  # noqa: BLE001  (torch raises RuntimeError or its AcceleratorError)
        return (str(e).strip().splitlines() or [type(e).__name__])[0]
    return None


probe = context_error  # (CPU tests put a stand-in here)
_lost: list[str] = []  # MARK's line, once the context is found lost


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    result = yield  # the test ran and was reported
    err = probe()
    if err:
        line = f"{MARK}{item.nodeid}{SEP}{err}"
        print("\n" + line, flush=True)
        _lost.append(line)
        # (stop before the next test, with pytest's usual report: the failures' tracebacks)
        item.session.shouldstop = line + " -- the rest of this session's tests would fail for it"
    return result


def pytest_sessionfinish(session, exitstatus):
    if _lost:
        session.exitstatus = CONTEXT_LOST_RC


def lost_in_log(text: str) -> tuple[str, str] | None:
    """(node id, error) from MARK's line in a pytest log, or None."""
    for line in text.splitlines():
        if line.startswith(MARK) and SEP in line:
            node, err = line[len(MARK):].split(SEP, 1)
            return node, err
    return None
