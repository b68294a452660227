"""NVFP4 block-scaled GEMM kernels in CuTe DSL: sm_100a (B200) and sm_90a (H100/H200).

Layers:
  formats    e2m1/e4m3 codes, the permuted scale-factor layout, input validation (host)
  scheduler  persistent tile scheduling shared by every kernel (host params + device math)
  epilogue   silu(x1)*x2 math shared by the dual-GEMM kernels of both architectures
  harness    compile any kernel for a named arch and config, with or without a GPU
  dispatch   custom_kernel: validate, pick config, compile once, launch
  masked     MaskedGroupedGemm: grouped GEMM with M_g read on the GPU (MoE counts; sm_90a)
  sm100/     Blackwell kernels (tcgen05, TMEM)
  sm90/      Hopper kernels (wgmma, in-kernel NVFP4 decode)
"""

import ctypes as _ctypes
import os as _os


def _gpu_driver_present() -> bool:
    try:
        _ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


# CuTe DSL reads CUTE_DSL_ARCH once, when `cutlass` is first imported, and builds a JIT
# engine (which needs the CUDA driver) whenever the compile target equals it.  With no
# driver we name an arch that none of our kernels targets, so `cute.compile(...,
# options="--gpu-arch sm_100a")` compiles to PTX/cubin only.  This must run before the
# first `import cutlass`, which is why it lives in the package's __init__.
COMPILE_ONLY_HOST = not _gpu_driver_present()
if COMPILE_ONLY_HOST:
    _os.environ.setdefault("CUTE_DSL_ARCH", "sm_80")
