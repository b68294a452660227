"""Hopper (sm_90a) fused NVFP4 dual GEMM for decode-sized M: C = silu(A B1^T) * (A B2^T)
with `mma.sync.m16n8k16` on register operands (no wgmma, no decoded tiles in shared memory).

The loads, decode and mma.sync main loop are `skinny.Sm90SkinnyCore` (shared with the
grouped skinny kernel; its docstring has the work split, the cp.async rings and the K
order).  Here the CTA (bx, l) owns rows [bx R, bx R + R) of B1 and of B2 (R = tile M: 16 or
32) of batch l, so every B1 / B2 row is read and decoded exactly once, and A is the few
token rows.

Epilogue: the warps' partial sums meet in shared memory (W x 2 x tile N x R fp32); thread t
sums a (token, row pair) task over the warps, applies silu(x1) * x2 (`epilogue.silu_mul`,
shared with the other kernels) and stores one fp16 pair of C; rows of C >= M are skipped.

With k_split > 1 (exp. 165) the grid's z holds a cluster of k_split CTAs per (bx, l), which
split K among all their warps; each pushes its partial sums into rank 0's shared memory
(distributed shared memory, between two cluster barriers) and rank 0 alone runs the epilogue.

Constraints (can_implement): config.skinny, M <= tile N (8 or 16), N % tile M == 0,
K % 256 == 0, any L.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32

from configs import KernelConfig, sm90_smem_bytes
from nvfp4gemm.epilogue import silu_mul
from nvfp4gemm.formats import DUAL_DATA_SLOTS
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90.skinny import Sm90SkinnyCore


class Sm90DualSkinnyKernel(Sm90SkinnyCore):
    num_b = 2  # B1 and B2

    def __init__(self, config: KernelConfig):
        if config.problem != "dual" or config.arch != "sm_90a" or not config.skinny:
            raise ValueError("Sm90DualSkinnyKernel needs an sm_90a dual config with skinny=True")
        super().__init__(config)

    @staticmethod
    def can_implement(config: KernelConfig, m: int, n: int, k: int, l: int) -> None:
        Sm90SkinnyCore.check_problem(config, "dual", (m, n, k, l))

    @cute.jit
    def __call__(
        self,
        a_ptr: cute.Pointer,  # (M, K/2, L) packed e2m1, K-major
        b1_ptr: cute.Pointer,  # (N, K/2, L)
        b2_ptr: cute.Pointer,  # (N, K/2, L)
        sfa_ptr: cute.Pointer,  # (32, 4, ceil(M/128), 4, K/64, L) permuted e4m3 scales
        sfb1_ptr: cute.Pointer,  # (32, 4, ceil(N/128), 4, K/64, L)
        sfb2_ptr: cute.Pointer,
        c_ptr: cute.Pointer,  # (M, N/2, L) fp16 pairs of C as int32
        m: Int32,
        n: Int32,
        k: Int32,
        l: Int32,
        stream: cuda.CUstream,
    ):
        self.launch(self.kernel(a_ptr, b1_ptr, b2_ptr, sfa_ptr, sfb1_ptr, sfb2_ptr, c_ptr, m, n, k),
                    (n // self.rows, l), stream)

    @cute.kernel
    def kernel(self, a_ptr: cute.Pointer, b1_ptr: cute.Pointer, b2_ptr: cute.Pointer, sfa_ptr: cute.Pointer,
               sfb1_ptr: cute.Pointer, sfb2_ptr: cute.Pointer, c_ptr: cute.Pointer, m: Int32, n: Int32, k: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bx, bl, rank = cute.arch.block_idx()  # (rank: the CTA's place in its K-split cluster)
        warp = cute.arch.make_warp_uniform(tidx // 32)
        lane = tidx % 32
        self.cluster_start()
        red, ring = self.shared_buffers(warp)
        data, scales = self.lane_addresses(((b1_ptr.toint(), sfb1_ptr.toint()), (b2_ptr.toint(), sfb2_ptr.toint())),
                                           a_ptr.toint(), sfa_ptr.toint(), m, n, k, bx, bl, lane)
        self.partial_sums(red, ring, data, scales, k, warp, lane, rank)
        if cutlass.const_expr(self.k_split == 1):
            self.epilogue(red, c_ptr, m, n, bx, bl, tidx)
        else:
            if rank == 0:  # (rank 0's red holds the cluster's sums)
                self.epilogue(red, c_ptr, m, n, bx, bl, tidx)

    # ------------------------------------------------------------------ epilogue

    @cute.jit
    def epilogue(self, red, c_ptr, m, n, bx, bl, tidx):
        """Per (token, row pair): sum the warps' partial sums (shared memory, after
        `stash_partials`), silu(x1) * x2, one fp16 pair of C (consecutive threads:
        consecutive columns)."""
        # (M, N / 2) fp16 pairs of C, batch bl
        mC2 = cute.make_tensor(c_ptr + bl * m * (n // 2), cute.make_layout((m, n // 2), stride=(n // 2, 1)))
        self.store_pairs(red, mC2, m, bx * (self.rows // 2), tidx)

    @cute.jit
    def pair_value(self, red, tok, rp):
        """silu(x1) * x2 of outputs (tok, rows 2 rp, 2 rp + 1), packed fp16."""
        scale = Float32(decode.ACC_RESCALE)
        x = [self.warp_sum(red, mat, tok, 2 * rp + j) for mat in range(2) for j in range(2)]  # (B1, B2) x rows
        return decode.pack_f16x2(silu_mul(x[0] * scale, x[2] * scale), silu_mul(x[1] * scale, x[3] * scale))


# ---------------------------------------------------------------------- host helpers


def shared_storage_bytes(config: KernelConfig) -> int:
    return sm90_smem_bytes(config)


def compile_args(config: KernelConfig, m: int, n: int, k: int, l: int) -> tuple:
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    ptrs = [make_ptr(cutlass.Uint8, (i + 1) << 20, cute.AddressSpace.gmem, assumed_align=16) for i in range(6)]
    return (*ptrs, make_ptr(Int32, 7 << 20, cute.AddressSpace.gmem, assumed_align=16),
            Int32(m), Int32(n), Int32(k), Int32(l), make_fake_stream())


DATA_SLOTS = DUAL_DATA_SLOTS  # (what the dispatcher's launch template rewrites per call)


def runtime_args(data, config: KernelConfig, stream, keep=None) -> tuple:
    from cutlass.cute.runtime import make_ptr

    a, b1, b2, _sfa, _sfb1, _sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    m, kh, l = a.shape
    n = b1.shape[0]
    if not isinstance(stream, cuda.CUstream):
        stream = cuda.CUstream(stream.cuda_stream)
    ptrs = [make_ptr(cutlass.Uint8, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
            for t in (a, b1, b2, sfa_p, sfb1_p, sfb2_p)]
    return (*ptrs, make_ptr(Int32, c.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
            Int32(m), Int32(n), Int32(2 * kh), Int32(l), stream)
