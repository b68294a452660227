"""Epilogue math shared by the dual-GEMM kernels of both architectures.

silu(x1) * x2 = x1 * x2 / (1 + 2^(-x1 * log2(e)))

computed in fp32 with the two fast SFU instructions `ex2.approx.ftz.f32` and
`rcp.approx.ftz.f32`.  `silu_mul_emulated` reproduces the same formula on the CPU with each
approximate instruction's worst-case relative error applied in a chosen direction, so a CPU
test can bound the error the kernels make (tests/test_epilogue.py; bound in MEMORY.md).
"""

import cutlass
import cutlass.cute as cute

LOG2_E = 1.4426950408889634
# PTX ISA: ex2.approx.ftz.f32 max relative error 2^-22 (we bound with 2^-21 for margin);
# rcp.approx.ftz.f32 max relative error 2^-23 (bounded with 2^-22).
EX2_REL_ERR = 2.0**-21
RCP_REL_ERR = 2.0**-22


def silu_mul(x1: cutlass.Float32, x2: cutlass.Float32) -> cutlass.Float32:
    """silu(x1) * x2 in fp32.  For x1 -> -inf, 2^(..) -> inf and the reciprocal -> 0, so the
    result goes to 0 (the right limit) without a branch."""
    e = cute.math.exp2(x1 * cutlass.Float32(-LOG2_E), fastmath=True)
    r = cute.arch.rcp_approx(cutlass.Float32(1.0) + e)
    return (x1 * r) * x2


def silu_mul_emulated(x1, x2, ex2_err: float = 0.0, rcp_err: float = 0.0):
    """CPU emulation (torch fp32 tensors) of `silu_mul`, with the approximate instructions'
    relative errors set to `ex2_err` and `rcp_err` (e.g. +-EX2_REL_ERR)."""
    import torch

    f32 = torch.float32
    x1 = x1.to(f32)
    x2 = x2.to(f32)
    t = x1 * torch.tensor(-LOG2_E, dtype=f32)
    e = (torch.exp2(t.double()) * (1.0 + ex2_err)).to(f32)
    d = torch.tensor(1.0, dtype=f32) + e
    r = ((1.0 / d.double()) * (1.0 + rcp_err)).to(f32)
    return (x1 * r) * x2
