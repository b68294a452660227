"""Hopper (sm_90a) fused NVFP4 grouped GEMM: C_g = A_g B_g^T (fp16) for up to 16 groups in
one persistent launch.

Warp roles (3 warpgroups, 384 threads, one CTA per SM):
  WG0  producer: all 128 threads copy one k-block (256 codes) of packed A_g and B_g rows
       (128-byte rows, written 128B-swizzled) and the two 2 KB permuted-scale atoms with
       16-byte `cp.async` (rows of A past M_g are zero-filled: nothing is read outside A_g),
       then `cp.async.mbarrier.arrive` on the stage's full barrier (PipelineCpAsync).
       Per-group tensors have different addresses and shapes, so no TMA descriptors: the
       group table (pointers, M, N, K) lives in a small device tensor.
  WG1, WG2  consumers: decode + wgmma as the dual kernel (one GEMM: B_g tile in shared
       memory, A_g rows in wgmma registers with rs_a), then store fp16 C straight from the
       accumulators with per-row bounds (rows >= M_g are never written).

Schedule: linear tile t -> group g by the prefix sums of per-group tile counts
(scheduler.group_of_tile), then (m_blk, n_blk) inside the group (scheduler.linear_to_mnl).
Split-K (scheduler.split_plan): with at most half a wave of tiles every tile is split over
K, one unit per CTA; otherwise, when the tiles leave a partial last wave, the first
`full_tiles` (whole waves) run whole and each remaining tail tile is split into `splits` K
ranges (work items full_tiles + tail x splits, CTA c takes items c, c + grid, ...).  A split
unit writes its fp32 accumulators to a workspace and the CTA counts its arrival; the last of
a tile's units sums the partials in split order (deterministic), resets the counter for the
next launch and stores C (Sm90Common.split_reduce).

swap_ab (C_g^T = B_g A_g^T): the MMA's M side runs over N_g and its N side over the ragged
M_g, so the group's B (N_g x K, large) is decoded straight into wgmma registers and only the
group's A rows are decoded into shared memory.  Tile 256 (over N: 2 x 64 rows per consumer
warpgroup, two 128-row scale atoms per stage) x 64 (over M: ragged M pads only to 64, the
producer zero-fills A rows past M_g; decoded in 16-code quarter tasks, one per consumer
thread); the epilogue writes the transposed accumulator tile with bounds on M_g.  Per tile
and 64-code sub-block: 256 rows decoded into registers and 64 stored, where 128 x 128 tiles
decode 128 + store 128 for the same MACs.

Constraints (can_implement): 1..16 groups, N_g % tile_n == 0 (swap_ab: N_g % tile_m == 0),
K_g % 256 == 0, M_g >= 1, L == 1, 2 consumer warpgroups, tile 128 x (64, 128 or 256)
(swap_ab: 256 x (16, 32 or 64); the rule narrows the MMA N side when every M_g fits).
"""

from __future__ import annotations

from collections import OrderedDict

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
from cutlass import Int32, Int64

from configs import GROUPS_PER_LAUNCH, K_BLOCK, KernelConfig
from nvfp4gemm import scheduler
from nvfp4gemm.cache import lru_lookup_on_stream
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90.common import SF_STAGE_BYTES, SUB_K, Sm90Common, device_tables, sm_count

MAX_GROUPS = GROUPS_PER_LAUNCH  # (the group table's rows: one source, configs)
META_FIELDS = 8  # a, b, c, sfa_perm, sfb_perm, M, N, K (int64 each)


def group_meta_tensor(meta_ptr, groups: int = MAX_GROUPS):
    """(16, 8) int64 group table of the grouped sm_90a kernels: a, b, c, sfa_perm, sfb_perm,
    M, N, K per group (`grouped_tables` writes it); `groups` rows for the masked skinny
    kernel's wide table (config.table_groups, exp. 153)."""
    return cute.make_tensor(meta_ptr, cute.make_layout((groups, META_FIELDS), stride=(META_FIELDS, 1)))


@cute.jit
def group_of(item: Int32, offs: cute.Tensor) -> Int32:
    """Group of linear work item `item` given the (17,) prefix sums `offs` of per-group item
    counts (unused groups: a huge value): a branch-free scan (the rule of
    scheduler.group_of_tile, which is a plain function and cannot use range_constexpr
    outside a jit body).  Also the grouped skinny kernel's."""
    g = Int32(0)
    for i in cutlass.range_constexpr(1, MAX_GROUPS):
        g = g + Int32(item >= offs[i])
    return g


class Sm90GroupedGemmKernel(Sm90Common):
    num_gemms = 1

    def __init__(self, config: KernelConfig):
        super().__init__(config)
        # the cp.async producer keeps 64-bit addresses live: more registers than a TMA warp
        # setmaxnreg: the launch gives 384 x 168 registers, so 128 (168 - load) >= 256 (mma -
        # 168); 104 / 200 and 88 / 208 meet it exactly.  Pair-major 128x256 tiles (two B tasks
        # per thread in one asm block) spill 44 bytes at 200, none at 208; the other tiles keep
        # 200 (88 / 208 made them 3-9% slower, H200 2026-11-21, notes/sm90.md exp. 56)
        self.load_regs, self.mma_regs = (88, 208) if (self.pair_major and self.tile_n == 256) else (104, 200)
        self.swap = config.swap_ab
        # swap_ab: N columns covered by one tile (the MMA M side: 256 rows of B_g)
        self.n_per_tile = self.tile_m

    @staticmethod
    def can_implement(config: KernelConfig, shapes) -> None:
        Sm90Common.check_problem(config, "group", shapes)

    @cute.jit
    def __call__(
        self,
        meta_ptr: cute.Pointer,
        offs_ptr: cute.Pointer,
        ws_ptr: cute.Pointer,
        cnt_ptr: cute.Pointer,
        total_items: Int32,
        full_tiles: Int32,
        splits: Int32,
        num_ctas: Int32,
        stream: cuda.CUstream,
    ):
        meta = group_meta_tensor(meta_ptr)
        # (17,) int32 prefix sums of per-group tile counts (unused groups: a huge value)
        offs = cute.make_tensor(offs_ptr, cute.make_layout(MAX_GROUPS + 1))
        self._setup()
        self.kernel(meta, offs, ws_ptr, cnt_ptr, total_items, full_tiles, splits, self.tiled_mma).launch(
            grid=[num_ctas, 1, 1],
            block=[self.threads_per_cta, 1, 1],
            min_blocks_per_mp=1,
            stream=stream,
        )

    def _make_ab_pipeline_cp_async(self, mbar_ptr):
        return pipeline.PipelineCpAsync.create(
            barrier_storage=mbar_ptr,
            num_stages=self.ab_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 128),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.num_mma_threads),
        )

    @cute.kernel
    def kernel(self, meta: cute.Tensor, offs: cute.Tensor, ws_ptr: cute.Pointer, cnt_ptr: cute.Pointer,
               total_items: Int32, full_tiles: Int32, splits: Int32, tiled_mma: cute.TiledMma):
        self._make_layouts()
        tidx, _, _ = cute.arch.thread_idx()
        smem = utils.SmemAllocator()
        st = smem.allocate(self.shared_storage)
        ab_pipe = self._make_ab_pipeline_cp_async(st.mbar.data_ptr())
        cute.arch.sync_threads()
        wg = cute.arch.make_warp_uniform(tidx // 128)
        if wg == 0:
            cute.arch.warpgroup_reg_dealloc(self.load_regs)
            self.producer(st, ab_pipe, meta, offs, total_items, full_tiles, splits, tidx)
        else:
            cute.arch.warpgroup_reg_alloc(self.mma_regs)
            self.consumer(st, ab_pipe, tiled_mma, meta, offs, ws_ptr, cnt_ptr, total_items, full_tiles, splits, tidx)

    @cute.jit
    def tile_of(self, tile, meta: cute.Tensor, offs: cute.Tensor):
        """(group, m_blk, n_blk, M, N, K) of linear tile `tile`; m_blk / n_blk are MMA
        coordinates (with swap_ab m_blk runs over N_g, n_blk over M_g)."""
        g = group_of(tile, offs)
        local = tile - offs[g]
        mg = Int32(meta[(g, 5)])
        ng = Int32(meta[(g, 6)])
        kg = Int32(meta[(g, 7)])
        if cutlass.const_expr(self.swap):  # MMA M over N_g (whole tiles), MMA N over ragged M_g
            tiles_m = ng // self.n_per_tile
            tiles_n = (mg + self.tile_n - 1) // self.tile_n
        else:
            tiles_m = (mg + self.tile_m - 1) // self.tile_m
            tiles_n = ng // self.tile_n
        mb, nb, _ = scheduler.linear_to_mnl(local, tiles_m, tiles_n, self.raster_m)
        return g, mb, nb, mg, ng, kg

    @cute.jit
    def producer(self, st, ab_pipe, meta: cute.Tensor, offs: cute.Tensor, total_items, full_tiles, splits, tidx):
        """All 128 producer threads: cp.async one k-block per stage."""
        a_s = st.sAp.data_ptr().toint()
        b_s = st.sB1p.data_ptr().toint()
        sfa_s = st.sSFA.data_ptr().toint()
        sfb_s = st.sSFB1.data_ptr().toint()
        chunk = tidx % 8  # 16-byte chunk of a 128-byte row
        row0 = tidx // 8  # 0..15
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.ab_stages)
        item = cute.arch.block_idx()[0]
        while item < total_items:
            tile, s, ns = self.unit_of(item, full_tiles, splits)
            g, mb, nb, mg, ng, kg = self.tile_of(tile, meta, offs)
            # MMA operands: "A" (wgmma registers, rows over the MMA's M) and "B" (decoded
            # into shared memory); swap_ab feeds the group's B as the MMA's A
            ra_g, rb_g = meta[(g, 0)], meta[(g, 1)]
            sfa_g, sfb_g = meta[(g, 3)], meta[(g, 4)]
            if cutlass.const_expr(self.swap):
                ra_g, rb_g = rb_g, ra_g
                sfa_g, sfb_g = sfb_g, sfa_g
            kh = Int64(kg // 2)
            k64 = kg // SUB_K
            m0 = mb * self.tile_m
            n0 = nb * self.tile_n
            sfa_atom = Int64(mb * self.sfa_atoms * k64)  # the tile's rows: atoms from m0 / 128
            sfb_atom = Int64(((n0 // 128) * k64))
            if cutlass.const_expr(self.swap):
                # per 128-row half of the register operand: (source, first row), and per
                # scale atom: (source, atom index)
                halves, sf_atoms = self.reg_operand_sources(meta, g, mb, m0, ra_g, sfa_g, sfa_atom, k64)
            nk = kg // K_BLOCK
            for kb in cutlass.range(s * nk // ns, (s + 1) * nk // ns, unroll=1):
                ab_pipe.producer_acquire(state)
                si = state.index
                kofs = Int64(kb * (K_BLOCK // 2) + chunk * 16)
                for i in cutlass.range_constexpr(self.tile_m // 16):
                    row = row0 + 16 * i
                    dst = decode.swizzle128_chunk_addr(a_s + si * self.a_stage_bytes, row, chunk)
                    if cutlass.const_expr(self.swap):
                        src_h, m0_h = halves[i // 8]
                        decode.cp_async_16(dst, src_h + Int64(m0_h + row) * kh + kofs, Int32(16))
                    else:
                        ok = Int32((m0 + row) < mg)  # rows past M_g: zero-fill, read nothing
                        src_row = Int64((m0 + row) * ok)
                        decode.cp_async_16(dst, ra_g + src_row * kh + kofs, 16 * ok)
                for i in cutlass.range_constexpr(self.tile_n // 16):
                    row = row0 + 16 * i
                    dst = decode.swizzle128_chunk_addr(b_s + si * self.b_stage_bytes, row, chunk)
                    if cutlass.const_expr(self.swap):
                        ok = Int32((n0 + row) < mg)  # rows of the group's A past M_g: zero-fill
                        src_row = Int64((n0 + row) * ok)
                        decode.cp_async_16(dst, rb_g + src_row * kh + kofs, 16 * ok)
                    else:
                        decode.cp_async_16(dst, rb_g + Int64(n0 + row) * kh + kofs, Int32(16))
                # 2 KB of scales per 128-row atom: 4 consecutive 512-byte blocks (one k-block)
                sf_ofs = Int64(kb * SF_STAGE_BYTES + tidx * 16)
                for a in cutlass.range_constexpr(self.sfa_atoms):
                    if cutlass.const_expr(self.swap):
                        sf_src, atom = sf_atoms[a]
                    else:
                        sf_src, atom = sfa_g, sfa_atom + a * k64
                    decode.cp_async_16(sfa_s + (si * self.sfa_atoms + a) * SF_STAGE_BYTES + tidx * 16,
                                       sf_src + atom * 512 + sf_ofs, Int32(16))
                # tile N 256: the B tile spans two consecutive 128-row atoms
                for a in cutlass.range_constexpr(self.sfb_atoms):
                    decode.cp_async_16(sfb_s + (si * self.sfb_atoms + a) * SF_STAGE_BYTES + tidx * 16,
                                       sfb_g + (sfb_atom + a * k64) * 512 + sf_ofs, Int32(16))
                ab_pipe.producer_commit(state)
                state.advance()
            item += cute.arch.grid_dim()[0]
        ab_pipe.producer_tail(state)

    def reg_operand_sources(self, meta, g, mb, m0, ra_g, sfa_g, sfa_atom, k64):
        """swap_ab producer: where the register operand's rows and scale atoms come from.
        Grouped: 256 consecutive rows of B_g from row m0 (both 128-row halves from the same
        tensor) and the two consecutive atoms from sfa_atom.  (The dual swap kernel stacks
        128 rows of B1 on the same 128 rows of B2.)"""
        return ([(ra_g, m0)] * 2, [(sfa_g, sfa_atom + a * k64) for a in range(self.sfa_atoms)])

    @cute.jit
    def consumer(self, st, ab_pipe, tiled_mma, meta: cute.Tensor, offs: cute.Tensor, ws_ptr, cnt_ptr,
                 total_items, full_tiles, splits, tidx):
        ct = tidx - 128  # consumer thread 0..255
        # decoded fp16 smem operand tiles (B; A with swap_ab): (mma_n, 64, dec_stages)
        sBd = st.sB1d.get_tensor(self.b_dec_layout.outer, swizzle=self.b_dec_layout.inner)
        thr_mma = tiled_mma.get_slice(ct)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sBd))
        ra = self.make_a_operand(thr_mma, ct)
        # (tile_m, tile_n) coordinates of this thread's accumulator values
        cC = cute.make_identity_tensor((self.tile_m, self.tile_n))
        tCcC = thr_mma.partition_C(cC)
        acc = cute.make_rmem_tensor(tCcC.shape, cutlass.Float32)
        self.assert_acc_regs(acc)

        a_p = st.sAp.data_ptr().toint()
        b_p = st.sB1p.data_ptr().toint()
        sfa_p = st.sSFA.data_ptr().toint()
        sfb_p = st.sSFB1.data_ptr().toint()
        b_d = st.sB1d.data_ptr().toint()

        # fp32 partials: (tail tile, split, accumulator element, consumer thread)
        ws = cute.make_tensor(ws_ptr, cute.make_layout(1 << 30))
        ws_addr = ws_ptr.toint()
        cnt_base = cnt_ptr.toint()
        flag = st.flag.get_tensor(cute.make_layout(4))

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.ab_stages)
        it = Int32(0)
        item = cute.arch.block_idx()[0]
        while item < total_items:
            tile, s, ns = self.unit_of(item, full_tiles, splits)
            g, mb, nb, mg, ng, kg = self.tile_of(tile, meta, offs)
            nk = kg // K_BLOCK
            nb_row0 = (nb * self.tile_n) % 128
            acc.fill(0.0)
            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
            read, it = self.mainloop(ab_pipe, read, it, s * nk // ns, (s + 1) * nk // ns, tiled_mma, acc, ra, tCrB,
                                     a_p, sfa_p, self.decode_b_sub, (ct, b_p, sfb_p, b_d, nb_row0), True)
            cute.nvgpu.warpgroup.wait_group(0)
            m_store = mg  # rows of C this unit may write: 0 = none
            if ns > 1:
                last = self.split_reduce(acc, ws, ws_addr, cnt_base, flag, a_p, tile - full_tiles, s, ns, ct)
                m_store = mg * last
            if cutlass.const_expr(self.swap):
                self.store_c_t(acc, tCcC, meta[(g, 2)], mb * self.tile_m, nb * self.tile_n, m_store, ng, ct)
            else:
                self.store_c(acc, tCcC, meta[(g, 2)], mb * self.tile_m, nb * self.tile_n, m_store, ng, b_d, ct)
            item += cute.arch.grid_dim()[0]

    def b_task_codes(self) -> int:
        return 32 if self.tile_n >= 128 else 16  # `decode_b_sub`: narrower tiles use quarter tasks

    @cute.jit
    def decode_b_sub(self, si, j: cutlass.Constexpr, buf, ct, b_p, sfb_p, b_d, nb_row0):
        """B of stage si, sub-block j, into decoded buffer buf (`Sm90Common.mainloop`)."""
        if cutlass.const_expr(self.tile_n == 64):
            # 64 rows x 4 scale groups, one quarter task per consumer thread (warp-uniform
            # group; rows spread over the warp by `spread_rows`)
            row = self.spread_rows(ct % 64, 64)
            self.decode_quarter(b_p + si * self.b_stage_bytes, sfb_p + si * self.sfb_stage_bytes,
                                b_d + buf * self.b_buf_bytes, row, nb_row0 + row, ct // 64, j)
        elif cutlass.const_expr(self.tile_n < 64):
            # swap_ab with a narrow MMA N (16 / 32 rows of A for a decode-sized M): 4 x tile_n
            # quarter tasks on the first warps (warp-uniform branch)
            tn = self.tile_n
            if ct < 4 * tn:
                self.decode_quarter(b_p + si * self.b_stage_bytes, sfb_p + si * self.sfb_stage_bytes,
                                    b_d + buf * self.b_buf_bytes, ct % tn, nb_row0 + ct % tn, ct // tn, j)
        elif cutlass.const_expr(self.tile_n == 256):
            # 256 rows x 2 segments, both segments of row ct in one block.  Consecutive rows
            # (4-way conflicted scale loads): with `spread_rows` these consumers spill 52
            # bytes at 208 registers and ran 3-4% slower (H200, notes/sm90.md exp. 62)
            bs = b_p + si * self.b_stage_bytes
            sfs = sfb_p + si * self.sfb_stage_bytes
            bd = b_d + buf * self.b_buf_bytes
            self.decode_pair(bs, sfs, bd, ct, 0, bs, sfs, bd, ct, 1, nb_row0, j)
        else:
            # tile_n rows x 2 segments
            for i in cutlass.range_constexpr((2 * self.tile_n + 255) // 256):
                t = ct + 256 * i
                if t < 2 * self.tile_n:
                    seg_b = t // self.tile_n
                    row_b = self.spread_rows(t % self.tile_n, self.tile_n)
                    self.decode_one(b_p + si * self.b_stage_bytes, sfb_p + si * self.sfb_stage_bytes,
                                    b_d + buf * self.b_buf_bytes, row_b, nb_row0 + row_b, seg_b, j)

    @cute.jit
    def store_c(self, acc, tCcC, c_g, m0, n0, mg, ng, stage, ct):
        """fp16 C of a (tile_m, tile_n) tile, rows >= M_g skipped, staged through shared
        memory so that every warp store writes whole contiguous 128-byte lines.

        Stored straight from the wgmma fragment, one warp instruction would cover 8 rows x
        16 bytes (half sectors; 8 pieces per instruction).  Instead each thread packs its
        accumulator pairs (r, c), (r, c + 1) (`decode.pack_f16x2`) into the row-major tile
        at `stage` -- the decoded-B buffers, idle once both warpgroups' wgmmas are done --
        then thread t reads back word t (+ 256 i) and stores it, so consecutive lanes write
        consecutive 32-bit words of one C row.  Shared addresses: 16-byte chunk XOR
        (row % 8), conflict-free both ways (8 consecutive rows x one chunk on the way in,
        32 consecutive words of one row on the way out).  The global store is the DSL's
        (a hand-written `st.global.b32` hung the GPU here, H200 2026-11-21)."""
        assert self.tile_m * self.tile_n * 2 <= self.dec_stages * self.b_buf_bytes, "C tile does not fit the decoded buffers"
        scale = cutlass.Float32(decode.ACC_RESCALE)
        words = self.tile_n // 2  # 32-bit words (fp16 pairs) per tile row
        row_bytes = self.tile_n * 2
        # (M_g, N_g / 2) fp16 pairs of this group's C
        mC2 = cute.make_tensor(cute.make_ptr(cutlass.Int32, c_g, cute.AddressSpace.gmem, assumed_align=16),
                               cute.make_layout((mg, ng // 2), stride=(ng // 2, 1)))
        # both warpgroups' wgmmas (the readers of the decoded buffers) are done
        self.epi_barrier.arrive_and_wait()
        # The wgmma C fragment: value (e, h, j) of a thread is row r0 + 8 h, column
        # c0 + 8 j + e.  Its rows share r0 % 8, so the chunk swizzle of column block j is
        # (j ^ (r0 % 8)): stored in order of j % 8, one base per j % 8 plus static offsets
        # (an XOR per store made ptxas spill 248 bytes in 128x256, 8 live bases 60)
        assert str(tCcC.layout) == f"((2,2,{self.tile_n // 8}),1,1):((1@1,8@0,8@1),0,0)", tCcC.layout
        r0, c0 = tCcC[0]
        x = r0 % 8
        row_base = stage + r0 * row_bytes + 2 * c0
        for k in cutlass.range_constexpr(8):
            base = decode.chunk_swizzled(row_base, k, x)
            for jj in cutlass.range_constexpr(self.tile_n // 64):
                j = k + 8 * jj
                for h in cutlass.range_constexpr(2):
                    i = h + 2 * j
                    decode.st_shared_u32(base + 8 * h * row_bytes + 128 * jj,
                                         decode.pack_f16x2(acc[2 * i] * scale, acc[2 * i + 1] * scale))
        self.epi_barrier.arrive_and_wait()
        # word 256 i + ct of the row-major tile: column w is fixed per thread, the row
        # advances by rq = 256 / words per step, so the swizzle repeats every 8 / rq steps
        nt = self.num_mma_threads
        rq = nt // words
        assert nt % words == 0 and 8 % rq == 0
        w = ct % words
        rt = ct // words
        col = [stage + rt * row_bytes + ((4 * w) ^ (((rt + rq * p) % 8) << 4)) for p in range(8 // rq)]
        for i in cutlass.range_constexpr(self.tile_m * words // nt):
            r = rt + rq * i
            v = decode.ld_shared_u32(col[i % (8 // rq)] + rq * i * row_bytes)
            if m0 + r < mg:
                mC2[(m0 + r, n0 // 2 + w)] = v
        # the next tile's decode overwrites the staging area
        self.epi_barrier.arrive_and_wait()


# ---------------------------------------------------------------------- host helpers


def shared_storage_bytes(config: KernelConfig) -> int:
    return Sm90Common.smem_bytes_of(config, 1)


def static_shape_key(config: KernelConfig, shapes):
    return None  # one compile serves every grouped shape


def padded_tile_offsets(config: KernelConfig, shapes):
    """(tile prefix sums padded to MAX_GROUPS + 1 entries with a huge value, total tiles)."""
    offs = scheduler.grouped_tile_offsets(config, shapes)
    total = offs[-1]
    offs += [1 << 30] * (MAX_GROUPS + 1 - len(offs))
    return offs, total


def compile_args(config: KernelConfig, shapes) -> tuple:
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    return (
        make_ptr(cutlass.Int64, 1 << 20, cute.AddressSpace.gmem, assumed_align=16),
        make_ptr(cutlass.Int32, 2 << 20, cute.AddressSpace.gmem, assumed_align=16),
        make_ptr(cutlass.Float32, 3 << 20, cute.AddressSpace.gmem, assumed_align=16),
        make_ptr(cutlass.Int32, 4 << 20, cute.AddressSpace.gmem, assumed_align=16),
        Int32(1), Int32(1), Int32(1), Int32(1),
        make_fake_stream(),
    )


def launch_tables(config: KernelConfig, dev, rows, offs, total: int, k_blocks) -> tuple:
    """Device tensors of one launch: the group table (rows padded to MAX_GROUPS), the tile
    prefix sums, and the split plan's fp32 workspace and counters (zeroed once; the kernel
    leaves them at 0).  Returns (meta, offs, ws, cnt, items, full_tiles, splits, ctas).
    Built once per entry of `cached_launch_tables`."""
    import torch

    rows = rows + [[0] * META_FIELDS] * (MAX_GROUPS - len(rows))
    meta_t, offs_t = device_tables(dev, (rows, torch.int64), (offs, torch.int32))
    if config.split_k:
        ctas, full, splits = scheduler.split_plan(total, sm_count(dev), k_blocks)
    else:
        ctas, full, splits = min(total, sm_count(dev)), total, 1
    n_tail = total - full
    acc_per_thread = config.mma_tile_mn[0] * config.mma_tile_mn[1] // 256
    ws_t = torch.empty(max(1, n_tail * splits * acc_per_thread * 256), dtype=torch.float32, device=dev)
    cnt_t = torch.zeros(max(1, n_tail), dtype=torch.int32, device=dev)
    return meta_t, offs_t, ws_t, cnt_t, full + n_tail * splits, full, splits, ctas


def launch_args(tables, stream) -> tuple:
    """The kernel's argument tuple from `launch_tables`' result and a stream."""
    from cutlass.cute.runtime import make_ptr

    meta_t, offs_t, ws_t, cnt_t, items, full, splits, ctas = tables
    if not isinstance(stream, cuda.CUstream):
        stream = cuda.CUstream(stream.cuda_stream)
    return (
        make_ptr(cutlass.Int64, meta_t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        make_ptr(cutlass.Int32, offs_t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        make_ptr(cutlass.Float32, ws_t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        make_ptr(cutlass.Int32, cnt_t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
        Int32(items), Int32(full), Int32(splits), Int32(ctas),
        stream,
    )


def table_entries(data, config=None) -> tuple:
    """The group table's entries for a grouped input, flattened without the zero rows: a, b, c,
    sfa_perm, sfb_perm addresses and M, N, K per group (META_FIELDS each; what the kernels'
    `group_meta_tensor` reads, and what nvfp4gemm/table_writer.py writes)."""
    abc, _sfs, sfs_p, sizes = data
    vals = ()
    for (a, b, c), (sa, sb), (m, n, k, _l) in zip(abc, sfs_p, sizes):
        vals += (a.data_ptr(), b.data_ptr(), c.data_ptr(), sa.data_ptr(), sb.data_ptr(), m, n, k)
    return vals


def group_table_rows(data) -> tuple[list, list]:
    """(rows of the group table (`table_entries`, a list per group); the (m, n, k) shapes) of a
    grouped input (also the grouped skinny kernel's)."""
    vals = table_entries(data)
    rows = [list(vals[i:i + META_FIELDS]) for i in range(0, len(vals), META_FIELDS)]
    return rows, [(m, n, k) for m, n, k, _l in data[3]]


_TABLES: OrderedDict = OrderedDict()
# Least recently used tables go first beyond this (nvfp4gemm/cache.py); an entry of the grouped
# mixed kernels holds its A16 buffer (up to tens of MB), so M_g that change every call (MoE)
# keep at most this many.
TABLE_ENTRIES = 16


def cached_launch_tables(key, build) -> tuple:
    """`build()` (a `launch_tables` result) cached by `key`, which must hold the config and
    every tensor address and size the tables depend on, so a repeated call on the same buffers
    allocates and copies nothing.  One cache for the grouped, grouped skinny and dual swap
    kernels (`cache.lru_lookup_on_stream`; the dispatcher's launch templates hold their tables)."""
    return lru_lookup_on_stream(_TABLES, key, build, TABLE_ENTRIES)[0]


def grouped_tables(config: KernelConfig, data) -> tuple:
    """`launch_tables` for the grouped input `data` (cached: `cached_launch_tables`)."""
    rows, shapes = group_table_rows(data)

    def build():
        offs, total = padded_tile_offsets(config, shapes)
        return launch_tables(config, data[0][0][2].device, rows, offs, total,
                             [k // K_BLOCK for _m, _n, k in shapes])

    return cached_launch_tables((config,) + tuple(tuple(r) for r in rows), build)


_METAS: OrderedDict = OrderedDict()
META_ENTRIES = 64  # ~1 KB each


def pointer_table(dev, vals: tuple):
    """The group table of one set of addresses (`table_entries`, zero-padded to MAX_GROUPS rows,
    int64) as a device tensor, cached by its entries: the per-call part of a dispatcher launch
    template, whose other tables depend on the sizes only.  Same layout as `launch_tables`' meta."""
    import torch

    return lru_lookup_on_stream(_METAS, vals + (dev.index,), lambda: group_table(dev, vals), META_ENTRIES)[0]


def group_table(dev, vals: tuple, groups: int = MAX_GROUPS):
    """A new device group table of `table_entries` values, zero-padded to `groups` rows (int64;
    uncached: MaskedGroupedGemm's table is its own)."""
    import torch

    return device_tables(dev, (vals + (0,) * (groups * META_FIELDS - len(vals)), torch.int64))[0]


def own_table_target(device):
    """A group table of a dispatcher template (argument 0 of the kernels that read one), which
    nvfp4gemm/table_writer.py fills whole (`table_entries`, zeros in every other row) before the
    launches that read it."""
    import torch

    from nvfp4gemm import table_writer

    table = torch.empty(MAX_GROUPS * META_FIELDS, dtype=torch.int64, device=device)
    return table_writer.Target(table, table.data_ptr(), MAX_GROUPS * META_FIELDS, ((0, table.data_ptr()),))


# The launch argument of the masked grouped forms' int32 counts (MaskedGroupedGemm sets its address):
# the mixed kernel's row-offset pointer (exp. 145), the skinny kernel's extra argument (exp. 146)
COUNTS_ARG = 2


def writer_target(data, config: KernelConfig, stream=None, like=None):
    """A new group table for a template (`own_table_target`; also the grouped skinny and mixed
    kernels'; `like` is not needed: the table holds nothing but the writer's entries)."""
    return own_table_target(data[0][0][2].device)


def pointer_args(data, config: KernelConfig, stream_handle=None) -> tuple:
    """(((argument index, address), ...), the buffer they point into) for the arguments that
    change with the input's addresses: the group table (argument 0) of a grouped input, in
    `group_table_rows`' layout (dispatch._Template, which holds the buffer while it points
    there; also the grouped skinny kernel's)."""
    table = pointer_table(data[0][0][2].device, table_entries(data))
    return ((0, table.data_ptr()),), table


def runtime_args(data, config: KernelConfig, stream, keep=None) -> tuple:
    """Group table, tile prefix sums and the split-K workspace and counters as device
    tensors (`grouped_tables`; `keep`, a list: gets them)."""
    tables = grouped_tables(config, data)
    if keep is not None:
        keep.append(tables)
    return launch_args(tables, stream)
