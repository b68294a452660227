"""Leaderboard entry point for `nvfp4_dual_gemm` and `nvfp4_group_gemm`.

`custom_kernel(data)` takes either problem's input tuple (see reference.py) and runs the
sm_100a (B200) or sm_90a (H100/H200) kernel for the GPU the tensors are on.  For a
single-file leaderboard submission, see tools/bundle.py.
"""

from nvfp4gemm.dispatch import custom_kernel

__all__ = ["custom_kernel"]
