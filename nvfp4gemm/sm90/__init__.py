"""Hopper (sm_90a) NVFP4 kernels: packed e2m1 + e4m3 scales loaded by TMA, decoded to fp16
inside the kernel (decode.py) and multiplied with fp16 wgmma into fp32 accumulators.

  dual_gemm.Sm90DualGemmKernel       C = silu(A B1^T) * (A B2^T)
  grouped_gemm.Sm90GroupedGemmKernel C_g = A_g B_g^T over up to 16 groups, one launch
"""
