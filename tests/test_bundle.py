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
# every kernel module the dispatcher may pick for this problem imports from the bundle, and the
# leaderboard case's sm_100a kernel compiles from it (compile-only: no GPU here)
import importlib
from nvfp4gemm import harness
problem = %(problem)r
mods = {m for (p, _a), (m, _c) in harness.KERNELS.items() if p == problem}
mods |= {m for (p, _a, _f), (m, _c) in harness.VARIANT_KERNELS.items() if p == problem}
assert mods, "no kernel modules listed"
for m in sorted(mods):
    importlib.import_module(m)
shape = configs.DUAL_BENCHMARKS[0] if problem == "dual" else configs.GROUP_BENCHMARKS[0]
cfg = configs.select_config(problem, "sm_100a", shape)
harness.compile_kernel(problem, "sm_100a", cfg, shape)
print("IMPORTED", len(mods), "COMPILED", cfg.short())
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
    r = subprocess.run([sys.executable, "-c", PROBE % {"root": ROOT, "problem": problem}], cwd=tmp_path, env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "IMPORTED" in r.stdout and "COMPILED" in r.stdout, r.stdout
    assert "REJECTED: a must be a 3-D tensor" in r.stdout or "REJECTED:" in r.stdout, r.stdout
