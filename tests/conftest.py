import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import nvfp4gemm  # noqa: E402,F401  must precede any `import cutlass` (compile-only setup)
import pytest  # noqa: E402

# after each test, whether the CUDA context survived it; if not, end the session there, naming the
# test (a kernel fault would otherwise fail every later test of the process: exp. 188)
from tools.cuda_context_guard import pytest_runtest_protocol, pytest_sessionfinish  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _no_auto_dynamic_m(monkeypatch):
    """Tests name the rule a shape takes (`configs.select_config`) and check it through
    custom_kernel; NVFP4_DYNAMIC_M's auto mode (exp. 139) would switch a structure called with
    three M_g sets in one process to another kernel.  Its own tests turn it back on."""
    import configs

    monkeypatch.setattr(configs, "DYNAMIC_M_AUTO", False)


# NVFP4_TEST_DRAW=wide: the GPU tests' inputs take reference.py's wide draw (every e2m1 code,
# every finite e4m3 scale on each operand) instead of the leaderboard's, whose data never sets a
# code's top exponent bit and whose grouped scales are only 1 and 2.  Same shapes and layouts,
# so every test runs unchanged; the CPU tests keep the leaderboard draw they check.
def selected_draw() -> str:
    from reference import DRAWS

    draw = os.environ.get("NVFP4_TEST_DRAW", "") or "leaderboard"
    if draw not in DRAWS:
        raise pytest.UsageError(f"NVFP4_TEST_DRAW={draw!r}: expected one of {DRAWS}")
    return draw


@pytest.fixture(autouse=True)
def _gpu_test_draw(request, monkeypatch):
    if selected_draw() != "wide" or not request.module.__name__.split(".")[-1].startswith("test_gpu"):
        return
    import reference

    for name in ("generate_dual_input", "generate_group_input"):
        original = getattr(reference, name)

        def wide(*args, _original=original, **kwargs):
            kwargs.setdefault("wide", True)
            return _original(*args, **kwargs)

        monkeypatch.setattr(reference, name, wide)
