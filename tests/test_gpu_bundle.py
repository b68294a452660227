"""The single-file leaderboard submission, run on a GPU the way the leaderboard runs it:
imported alone from an empty folder, then fed leaderboard inputs (checked against the
reference).  Skipped without an sm_90 / sm_100 GPU."""

import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _gpu_ok() -> bool:
    if not torch.cuda.is_available():
        return False
    cap = torch.cuda.get_device_capability()
    return cap == (9, 0) or cap[0] == 10


PROBE = r"""
import sys
import submission                       # the bundle alone: it installs its own package copy
sys.path.append(%(root)r)                # only now the repo, for the reference checker
import nvfp4gemm, reference as R
assert "nvfp4gemm_bundle_" in nvfp4gemm.__file__, nvfp4gemm.__file__
if %(problem)r == "dual":  # the wgmma kernel, then M = 3 (the skinny mma.sync kernel on sm_90a)
    inputs = [R.generate_input(256, 512, 7168, 1, 4242), R.generate_input(3, 512, 1024, 1, 4243)]
else:
    inputs = [R.generate_input([40, 200], [512, 256], [1536, 768], 2, 4242),
              R.generate_input([2, 9], [512, 256], [1024, 768], 2, 4243)]
oks = []
for data in inputs:
    for _ in range(2):
        out = submission.custom_kernel(data)
    ok, msg = R.check_implementation(data, out)
    print("case", ok, msg)
    oks.append(ok)
print("BUNDLE", %(problem)r, all(oks))
sys.exit(0 if all(oks) else 1)
"""


@pytest.mark.skipif(not _gpu_ok(), reason="needs a CUDA GPU of capability (9, 0) or (10, x)")
@pytest.mark.parametrize("problem", ["dual", "group"])
def test_bundle_runs_on_gpu(tmp_path, problem):
    sub = tmp_path / "submission.py"
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "bundle.py"), "--problem", problem, "-o", str(sub)],
                   check=True, cwd=ROOT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # the DSL itself is installed where the environment says; keep only non-repo entries
    env["PYTHONPATH"] = os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                        if p and os.path.realpath(p) != os.path.realpath(ROOT))
    r = subprocess.run([sys.executable, "-c", PROBE % {"root": ROOT, "problem": problem}],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"BUNDLE {problem} True" in r.stdout
