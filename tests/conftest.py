import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import nvfp4gemm  # noqa: E402,F401  must precede any `import cutlass` (compile-only setup)
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_auto_dynamic_m(monkeypatch):
    """Tests name the rule a shape takes (`configs.select_config`) and check it through
    custom_kernel; NVFP4_DYNAMIC_M's auto mode (exp. 139) would switch a structure called with
    three M_g sets in one process to another kernel.  Its own tests turn it back on."""
    import configs

    monkeypatch.setattr(configs, "DYNAMIC_M_AUTO", False)
