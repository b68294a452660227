"""The single-file bundle imports and works alone in an empty folder."""

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROBE = r"""
import os, sys, torch
import submission
import nvfp4gemm, configs
here = os.path.realpath(os.getcwd())
for mod in (nvfp4gemm, configs):
    assert not os.path.realpath(mod.__file__).startswith(%(root)r), mod.__file__
assert callable(submission.custom_kernel)
# the bundled validation runs: a wrong dtype is rejected by name
import torch
from nvfp4gemm.validate import InputError
data = [torch.zeros(1)] * 10
try:
    submission.custom_kernel(tuple(data))
except InputError as e:
    print("REJECTED:", e)
else:
    raise SystemExit("bad input was accepted")
"""


@pytest.mark.parametrize("problem,board", [("dual", "nvfp4_dual_gemm"), ("group", "nvfp4_group_gemm")])
def test_bundle_is_self_contained(tmp_path, problem, board):
    out = tmp_path / "submission.py"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bundle.py"), "--problem", problem, "-o", str(out)],
                   check=True, cwd=ROOT)
    text = out.read_text()
    assert text.splitlines()[0] == f"#!POPCORN leaderboard {board}"
    assert "class KernelConfig" in text and "def custom_kernel" in text
    (tmp_path / "task.py").write_text("input_t = output_t = object\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TMPDIR"] = str(tmp_path / "tmp")
    os.makedirs(env["TMPDIR"])
    r = subprocess.run([sys.executable, "-c", PROBE % {"root": ROOT}], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "REJECTED: a must be a 3-D tensor" in r.stdout or "REJECTED:" in r.stdout, r.stdout
