"""Hopper (sm_90a) fused NVFP4 grouped GEMM for decode-sized M (MoE decode: every M_g <= 16):
C_g = A_g B_g^T with `mma.sync.m16n8k16` on register operands (no wgmma, no decoded tiles in
shared memory).

The loads, decode and main loop are `skinny.Sm90SkinnyCore` (shared with the dual skinny
kernel; its docstring has the work split, the cp.async rings and the K order).  One CTA per
R = tile M (16, 32 or 64) consecutive rows of one group's B_g, with all M_g rows of A_g: block
b -> group g by the prefix sums of N_g / R (the group table's scan, as grouped_gemm.py), so
every B_g row is read and decoded exactly once and the launch has sum_g N_g / R CTAs (not
persistent: with ~4 resident CTAs per SM the hardware balances groups of unequal K).

Epilogue: the warps' partial sums meet in shared memory (W x tile N x R fp32); thread t sums
a (token, row pair) task over the warps and stores one fp16 pair of C_g (consecutive threads:
consecutive columns); rows of C_g >= M_g are skipped.

With k_split > 1 (exp. 168, the dual kernel's exp. 165) the grid's z holds a cluster of k_split
CTAs per block, which split K_g among all their warps; each pushes its partial sums into rank
0's shared memory (distributed shared memory, between two cluster barriers) and rank 0 alone
runs the epilogue.  Every branch before the barriers (the masked form's empty groups) depends on
the block only, so it is uniform over a cluster.

Masked form (`config.masked`, `Sm90GroupedSkinnyMaskedKernel`; exp. 146, nvfp4gemm/masked.py):
the launch takes one more argument, an int32 counts tensor (G,), and a CTA takes M_g =
min(max(counts[g], 0), the table's M_g) (the table holds the buffers' capacities); a CTA whose
group has no rows returns before its loads, so the B_g of an expert with no tokens is not read.
So does a CTA whose group has more rows than the tile's A rows: where capacities exceed them,
MaskedGroupedGemm launches the device-scheduled form beside this kernel for those groups (its
`masked_above`, exps. 147-148), and this kernel computes only the groups of 1..tile N rows.

Wide table (masked form with config.table_groups = WIDE_TABLE_GROUPS, exp. 153): up to 256
groups in one launch.  The table has that many rows (uploaded once by MaskedGroupedGemm, not
written from launch parameters), and the prefix-sum argument points instead at a per-CTA map,
(g << 16) | block, built on the host (`wide_tables`): one load per CTA, where a scan over 256
prefix sums would cost 256.

Constraints (can_implement): config.skinny, 1..16 groups (the wide table: 1..256), every M_g <=
tile N (8 or 16), N_g % tile M == 0 (N_g / tile M < 65536 with the wide table), K_g % 256 == 0,
L == 1.
"""

from __future__ import annotations

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64

from configs import KernelConfig, sm90_smem_bytes
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90.grouped_gemm import (MAX_GROUPS, group_meta_tensor, group_of, grouped_tables,  # noqa: F401
                                         pointer_args, table_entries, writer_target)
from nvfp4gemm.sm90.skinny import Sm90SkinnyCore


class Sm90GroupedSkinnyKernel(Sm90SkinnyCore):
    num_b = 1

    def __init__(self, config: KernelConfig):
        if config.problem != "group" or config.arch != "sm_90a" or not config.skinny:
            raise ValueError("Sm90GroupedSkinnyKernel needs an sm_90a grouped config with skinny=True")
        super().__init__(config)

    @staticmethod
    def can_implement(config: KernelConfig, shapes) -> None:
        Sm90SkinnyCore.check_problem(config, "group", shapes)
        if config.table_groups > MAX_GROUPS and max(n // config.mma_tile_mn[0] for _m, n, _k in shapes) >= 1 << 16:
            raise ValueError(f"N_g / {config.mma_tile_mn[0]} must be below 65536 with the wide table (its CTA map)")

    @cute.jit
    def __call__(
        self,
        meta_ptr: cute.Pointer,  # (16, 8) int64 group table: a, b, c, sfa_perm, sfb_perm, M, N, K
        offs_ptr: cute.Pointer,  # (17,) int32 prefix sums of N_g / R (unused groups: a huge value)
        ctas: Int32,  # sum_g N_g / R
        stream: cuda.CUstream,
    ):
        meta = group_meta_tensor(meta_ptr)  # (16, 8) int64 group table
        offs = cute.make_tensor(offs_ptr, cute.make_layout(MAX_GROUPS + 1))
        self.launch(self.kernel(meta, offs), (ctas, 1), stream)

    @cute.kernel
    def kernel(self, meta: cute.Tensor, offs: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bx, _, rank = cute.arch.block_idx()  # (rank: the CTA's place in its K-split cluster)
        warp = cute.arch.make_warp_uniform(tidx // 32)
        lane = tidx % 32
        g = group_of(bx, offs)
        self.run_cta(meta, g, bx - offs[g], Int32(meta[(g, 5)]), tidx, warp, lane, rank)

    @cute.jit
    def run_cta(self, meta: cute.Tensor, g: Int32, blk: Int32, mg: Int32, tidx: Int32, warp: Int32, lane: Int32,
                rank: Int32):
        """Rows [blk R, blk R + R) of B_g against the M_g = mg rows of A_g (with k_split > 1, this
        CTA's share of K; the caller's branches are uniform over the cluster: one bx)."""
        self.cluster_start()
        ng = Int32(meta[(g, 6)])
        kg = Int32(meta[(g, 7)])
        red, ring = self.shared_buffers(warp)
        data, scales = self.lane_addresses(((Int64(meta[(g, 1)]), Int64(meta[(g, 4)])),),
                                           Int64(meta[(g, 0)]), Int64(meta[(g, 3)]), mg, ng, kg, blk, 0, lane)
        self.partial_sums(red, ring, data, scales, kg, warp, lane, rank)
        if cutlass.const_expr(self.k_split == 1):
            self.epilogue(red, Int64(meta[(g, 2)]), mg, ng, blk, tidx)
        else:
            if rank == 0:  # (rank 0's red holds the cluster's sums)
                self.epilogue(red, Int64(meta[(g, 2)]), mg, ng, blk, tidx)

    @cute.jit
    def epilogue(self, red, c_g, mg, ng, blk, tidx):
        """Per (token, row pair): sum the warps' partial sums, one fp16 pair of C_g."""
        # (M_g, N_g / 2) fp16 pairs of this group's C
        mC2 = cute.make_tensor(cute.make_ptr(Int32, c_g, cute.AddressSpace.gmem, assumed_align=16),
                               cute.make_layout((mg, ng // 2), stride=(ng // 2, 1)))
        self.store_pairs(red, mC2, mg, blk * (self.rows // 2), tidx)

    @cute.jit
    def pair_value(self, red, tok, rp):
        """Outputs (tok, rows 2 rp, 2 rp + 1), packed fp16."""
        scale = Float32(decode.ACC_RESCALE)
        x = [self.warp_sum(red, 0, tok, 2 * rp + j) for j in range(2)]
        return decode.pack_f16x2(x[0] * scale, x[1] * scale)


class Sm90GroupedSkinnyMaskedKernel(Sm90GroupedSkinnyKernel):
    """The masked form (module doc; config.masked): M_g from the caller's counts, clamped to the
    table's capacity, read on the GPU (no clamp kernel before the launch)."""

    def __init__(self, config: KernelConfig):
        if not config.masked:
            raise ValueError("Sm90GroupedSkinnyMaskedKernel runs masked skinny configs (config.masked)")
        super().__init__(config)

    @cute.jit
    def __call__(
        self,
        meta_ptr: cute.Pointer,  # (16, 8) int64 group table, M_g = the capacities (wide: (256, 8))
        offs_ptr: cute.Pointer,  # (17,) int32 prefix sums of N_g / R (wide: (ctas,) int32 CTA map)
        counts_ptr: cute.Pointer,  # (G,) int32 counts (grouped_gemm.COUNTS_ARG; only entries of real groups are read)
        ctas: Int32,  # sum_g N_g / R
        stream: cuda.CUstream,
    ):
        groups = self.config.table_groups
        meta = group_meta_tensor(meta_ptr, groups)  # (groups, 8) int64 group table
        # (17,) prefix sums, or the wide table's (ctas,) map of (g << 16) | block
        offs = cute.make_tensor(offs_ptr, cute.make_layout(MAX_GROUPS + 1 if groups == MAX_GROUPS else ctas))
        counts = cute.make_tensor(counts_ptr, cute.make_layout(groups))
        self.launch(self.kernel_masked(meta, offs, counts), (ctas, 1), stream)

    @cute.kernel
    def kernel_masked(self, meta: cute.Tensor, offs: cute.Tensor, counts: cute.Tensor):
        tidx, _, _ = cute.arch.thread_idx()
        bx, _, rank = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(tidx // 32)
        lane = tidx % 32
        if cutlass.const_expr(self.config.table_groups == MAX_GROUPS):
            g = group_of(bx, offs)
            blk = bx - offs[g]
        else:  # (the wide table's CTA map: one load, exp. 153)
            gb = Int32(offs[bx])
            g = gb >> 16
            blk = gb & 0xFFFF
        mg = cutlass.min(cutlass.max(Int32(counts[g]), 0), Int32(meta[(g, 5)]))
        # (CTA-uniform: a group with no rows, or with more than the tile's A rows (the device-
        # scheduled form's, exp. 147), reads and writes nothing here)
        if mg > 0:
            if mg <= self.tokens:
                self.run_cta(meta, g, blk, mg, tidx, warp, lane, rank)


def kernel_class(config: KernelConfig):
    """The class that runs `config` (harness.kernel_module): the masked form has its own launch
    signature (the counts argument), so the plain kernel's PTX is unchanged by it."""
    return Sm90GroupedSkinnyMaskedKernel if config.masked else Sm90GroupedSkinnyKernel


# ---------------------------------------------------------------------- host helpers


def shared_storage_bytes(config: KernelConfig) -> int:
    return sm90_smem_bytes(config)


def static_shape_key(config: KernelConfig, shapes):
    return None  # one compile serves every grouped shape


def compile_args(config: KernelConfig, shapes) -> tuple:
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    counts = (make_ptr(cutlass.Int32, 3 << 20, cute.AddressSpace.gmem, assumed_align=16),) if config.masked else ()
    return (make_ptr(cutlass.Int64, 1 << 20, cute.AddressSpace.gmem, assumed_align=16),
            make_ptr(cutlass.Int32, 2 << 20, cute.AddressSpace.gmem, assumed_align=16),
            *counts, Int32(1), make_fake_stream())


def device_fits(config: KernelConfig, args, data) -> bool:
    """Whether a launch built by `runtime_args` for `config` runs the grouped input `data`: its
    tables and grid depend on N_g only (one CTA per R rows of B_g), so any M_g up to the tile's
    A rows (exp. 138: the dispatcher's launch template serves every such M_g)."""
    return max(size[0] for size in data[3]) <= config.mma_tile_mn[1]


def runtime_args(data, config: KernelConfig, stream, keep=None) -> tuple:
    """The group table and the CTA prefix sums as device tensors (grouped_gemm.grouped_tables,
    cached; `keep`, a list: gets them); one CTA per work item (no split: items = sum_g N_g / R).
    The group table is argument 0 (grouped_gemm.pointer_args).  The masked form's counts
    argument (grouped_gemm.COUNTS_ARG) points at the prefix sums until its caller (nvfp4gemm/masked.py) sets
    it."""
    from cutlass.cute.runtime import make_ptr

    tables = wide_tables(config, data) if config.table_groups > MAX_GROUPS else grouped_tables(config, data)
    if keep is not None:
        keep.append(tables)
    meta_t, offs_t, _ws, _cnt, items, _full, _splits, _ctas = tables
    if not isinstance(stream, cuda.CUstream):
        stream = cuda.CUstream(stream.cuda_stream)
    offs = make_ptr(cutlass.Int32, offs_t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    counts = (make_ptr(cutlass.Int32, offs_t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),) \
        if config.masked else ()
    return (make_ptr(cutlass.Int64, meta_t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16), offs,
            *counts, Int32(items), stream)


def wide_cta_map(config: KernelConfig, shapes) -> list:
    """The wide table's per-CTA map (exp. 153): CTA i runs block (map[i] & 0xFFFF) of group
    map[i] >> 16, blocks of R = tile M rows of B_g, groups in order (as the prefix sums would)."""
    rows = config.mma_tile_mn[0]
    return [(g << 16) | b for g, (_m, n, _k) in enumerate(shapes) for b in range(n // rows)]


def wide_tables(config: KernelConfig, data) -> tuple:
    """`grouped_tables`' tuple for the wide table (exp. 153): the group table padded to
    config.table_groups rows and the CTA map in the prefix sums' place (cached the same way)."""
    import torch

    from nvfp4gemm.sm90.grouped_gemm import META_FIELDS, cached_launch_tables, group_table_rows
    from nvfp4gemm.sm90.common import device_tables

    rows, shapes = group_table_rows(data)

    def build():
        meta = rows + [[0] * META_FIELDS] * (config.table_groups - len(rows))
        cta_map = wide_cta_map(config, shapes)
        meta_t, map_t = device_tables(data[0][0][2].device, (meta, torch.int64), (cta_map, torch.int32))
        return meta_t, map_t, None, None, len(cta_map), len(cta_map), 1, len(cta_map)

    return cached_launch_tables((config,) + tuple(tuple(r) for r in rows), build)

