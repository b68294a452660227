"""Pytest plugin (exp. 181): append every (problem, arch, config) that `harness.compile_kernel` is
asked for to the file named by NVFP4_CONFIG_LOG, one JSON line each.  Load it with
`python3 -m pytest -p config_log_plugin ...` and this folder on PYTHONPATH; `compare.py` then
lists the configs CI compiles that no GPU test compiled (so never ran on the GPU)."""

import json
import os

from nvfp4gemm import harness

_compile = harness.compile_kernel


def _logged(problem, arch, config, shape, *args, **kwargs):
    with open(os.environ["NVFP4_CONFIG_LOG"], "a") as f:
        f.write(json.dumps([problem, arch, repr(config)]) + "\n")
    return _compile(problem, arch, config, shape, *args, **kwargs)


harness.compile_kernel = _logged
