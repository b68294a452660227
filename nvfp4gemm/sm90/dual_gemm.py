"""Hopper (sm_90a) fused NVFP4 dual GEMM: C = silu(A B1^T) * (A B2^T), fp16 out.

Warp roles (one CTA per SM, persistent over output tiles; tile = 128 rows of A x tile_n
columns of each of B1 and B2):
  WG0  producer: warp 0 issues the TMA loads of one k-block (K_BLOCK = 256 codes) of packed
       e2m1 A, B1, B2 (128-byte rows, 128B-swizzled) and of their permuted e4m3 scales
       (2 KB per 128 rows) into a ring of `ab_stages` buffers (PipelineTmaAsync).
  WG1, WG2  consumers (64 rows of A each): per 64-code sub-block, all 256 consumer threads
       decode B1/B2 rows into one fp16 (2*tile_n, 64) tile in shared memory (scale folded
       in, exact; decode.py), `fence.proxy.async`, named barrier; each warpgroup decodes its
       own 64 rows of A straight into wgmma A-fragment registers (rs_a) and issues m64 x (2*tile_n) x k16 wgmmas (fp16 -> fp32) that
       cover B1 and B2 at once.  Decode of sub-block i+1 overlaps the wgmmas of sub-block i
       (with 3 decoded buffers also those of i - 1, so the tensor cores do not drain).
       Epilogue: silu(x1) * x2 in fp32 (shared `epilogue.silu_mul`), fp16, stmatrix to
       shared memory, TMA store.

Split-K (scheduler.split_plan): with at most half a wave of tiles every tile is split over K
(one unit per CTA), otherwise only a partial last wave; work item -> (tile, split) by
`Sm90Common.unit_of`.  Units reduce through an fp32 global workspace (`split_reduce`: last
arriver sums in split order) or, with cluster_mn (2, 1), as 2-CTA cluster pairs through
distributed shared memory (`pair_reduce_scatter`: each rank reduces and stores half of the
tile's epilogue subtiles).

Layouts: A (M, K/2, L) bytes, B1/B2 (N, K/2, L) bytes, K-major; scales in the permuted
(32,4,rm,4,rk,L) form, read as 512-byte atoms of 128 rows x 4 scale columns (one int32 per
row: the 4 scales of a 64-code sub-block); C (M, N, L) fp16 row-major.

Tile N 48 and 96 (N = 3072 shapes: 128 tiles instead of 96 on 132 SMs): a B tile can then
straddle two 128-row scale atoms, so each stage holds two per B (`sfb_atoms`); tile N 96
decodes B in 16-code quarter tasks (3 per consumer thread, balanced over both warpgroups);
tile N 48 uses a 128x16 epilogue subtile.

Decode-sized M (<= 64) usually goes to the swap_ab kernel instead (dual_swap.py; rule in
configs.default_config).

Ragged M: any M >= 1.  The TMA loads zero-fill A rows past M and the TMA stores clip C
rows past M; the last row of tiles decodes those zero rows with whatever the scale padding
holds (NaN in the poisoned tests), which reaches only accumulator rows past M (no
operation mixes rows) and is never stored.

Constraints (can_implement): configs.check_shape (N % 64 == 0, K % 256 == 0), N % tile_n
== 0; tile_m == 128 with 2 consumer warpgroups, tile_n in {48, 64, 96, 128}.
"""

from __future__ import annotations

from collections import OrderedDict

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
from cutlass import Int32

from configs import K_BLOCK, KernelConfig, dual_tiles
from nvfp4gemm import scheduler
from nvfp4gemm.cache import lru_lookup
from nvfp4gemm.epilogue import silu_mul
from nvfp4gemm.formats import DUAL_DATA_SLOTS
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90.common import SUB_K, Sm90Common, sm_count


class Sm90DualGemmKernel(Sm90Common):
    num_gemms = 2

    def __init__(self, config: KernelConfig):
        self._reject_swap(config)
        super().__init__(config)
        # cluster (2, 1): every tile split 2 ways over K, the two units of a tile are one
        # cluster and reduce through distributed shared memory (`pair_reduce_scatter`)
        self.cluster_pairs = config.cluster_mn == (2, 1)
        # epilogue subtiles of one GEMM's tile_n columns
        self.epi_subtiles = self.tile_n // self.epi_tile[1]

    @staticmethod
    def _reject_swap(config: KernelConfig) -> None:
        if config.swap_ab:
            raise ValueError("Sm90DualGemmKernel does not implement swap_ab: a dual swap_ab config runs "
                             "Sm90DualSwapKernel (nvfp4gemm/sm90/dual_swap.py)")

    @staticmethod
    def can_implement(config: KernelConfig, m: int, n: int, k: int, l: int) -> None:
        Sm90DualGemmKernel._reject_swap(config)
        Sm90Common.check_problem(config, "dual", (m, n, k, l))

    @cute.jit
    def __call__(
        self,
        a_ptr: cute.Pointer,
        b1_ptr: cute.Pointer,
        b2_ptr: cute.Pointer,
        sfa_ptr: cute.Pointer,
        sfb1_ptr: cute.Pointer,
        sfb2_ptr: cute.Pointer,
        c_ptr: cute.Pointer,
        ws_ptr: cute.Pointer,
        cnt_ptr: cute.Pointer,
        m: Int32,
        n: Int32,
        k: Int32,
        l: Int32,
        total_items: Int32,
        full_tiles: Int32,
        splits: Int32,
        num_ctas: Int32,
        stream: cuda.CUstream,
    ):
        kh = k // 2
        # (M, K/2, L) packed e2m1 bytes
        mA = cute.make_tensor(a_ptr, cute.make_layout((m, kh, l), stride=(kh, 1, m * kh)))
        # (N, K/2, L)
        mB1 = cute.make_tensor(b1_ptr, cute.make_layout((n, kh, l), stride=(kh, 1, n * kh)))
        mB2 = cute.make_tensor(b2_ptr, cute.make_layout((n, kh, l), stride=(kh, 1, n * kh)))
        k64 = k // SUB_K
        rm_a = (m + 127) // 128
        rm_b = (n + 127) // 128
        # (128 rows' words, atoms) int32: atom (l, mn//128, k//64) at ((l*rm + r)*k64 + kk)
        mSFA = cute.make_tensor(sfa_ptr, cute.make_layout((128, l * rm_a * k64), stride=(1, 128)))
        mSFB1 = cute.make_tensor(sfb1_ptr, cute.make_layout((128, l * rm_b * k64), stride=(1, 128)))
        mSFB2 = cute.make_tensor(sfb2_ptr, cute.make_layout((128, l * rm_b * k64), stride=(1, 128)))
        # (M, N, L) fp16
        mC = cute.make_tensor(c_ptr, cute.make_layout((m, n, l), stride=(n, 1, m * n)))

        self._setup()
        tma_a, tA = self.make_tma_load(mA, self.a_packed_layout, self.tile_m)
        tma_b1, tB1 = self.make_tma_load(mB1, self.b_packed_layout, self.tile_n)
        tma_b2, tB2 = self.make_tma_load(mB2, self.b_packed_layout, self.tile_n)
        tma_sfa, tSFA = self.make_tma_load_sf(mSFA, self.sf_layout)
        tma_sfb1, tSFB1 = self.make_tma_load_sf(mSFB1, self.sfb_layout)
        tma_sfb2, tSFB2 = self.make_tma_load_sf(mSFB2, self.sfb_layout)
        tma_c, tC = self.make_tma_store(mC)

        self.kernel(
            tma_a, tA, tma_b1, tB1, tma_b2, tB2,
            tma_sfa, tSFA, tma_sfb1, tSFB1, tma_sfb2, tSFB2,
            tma_c, tC,
            self.tiled_mma,
            ws_ptr, cnt_ptr,
            m, n, k, l, total_items, full_tiles, splits,
        ).launch(
            grid=[num_ctas, 1, 1],
            block=[self.threads_per_cta, 1, 1],
            cluster=[2 if self.cluster_pairs else 1, 1, 1],
            min_blocks_per_mp=1,
            stream=stream,
        )

    @cute.kernel
    def kernel(
        self,
        tma_a: cute.CopyAtom, mA: cute.Tensor,
        tma_b1: cute.CopyAtom, mB1: cute.Tensor,
        tma_b2: cute.CopyAtom, mB2: cute.Tensor,
        tma_sfa: cute.CopyAtom, mSFA: cute.Tensor,
        tma_sfb1: cute.CopyAtom, mSFB1: cute.Tensor,
        tma_sfb2: cute.CopyAtom, mSFB2: cute.Tensor,
        tma_c: cute.CopyAtom, mC: cute.Tensor,
        tiled_mma: cute.TiledMma,
        ws_ptr: cute.Pointer, cnt_ptr: cute.Pointer,
        m: Int32, n: Int32, k: Int32, l: Int32,
        total_items: Int32, full_tiles: Int32, splits: Int32,
    ):
        self._make_layouts()
        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b1)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_b2)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_sfa)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_sfb1)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_sfb2)
            cute.nvgpu.cpasync.prefetch_descriptor(tma_c)

        smem = utils.SmemAllocator()
        st = smem.allocate(self.shared_storage)
        ab_pipe = self.make_ab_pipeline(st.mbar.data_ptr())

        tiles_m = (m + self.tile_m - 1) // self.tile_m  # ragged M: TMA zero-fills / clips
        tiles_n = n // self.tile_n
        k_blocks = k // K_BLOCK
        rm_a = (m + 127) // 128
        rm_b = (n + 127) // 128

        cute.arch.sync_threads()

        wg = cute.arch.make_warp_uniform(tidx // 128)
        if wg == 0:
            cute.arch.warpgroup_reg_dealloc(self.load_regs)
            if warp_idx == 0:
                self.producer(st, ab_pipe, tma_a, mA, tma_b1, mB1, tma_b2, mB2,
                              tma_sfa, mSFA, tma_sfb1, mSFB1, tma_sfb2, mSFB2,
                              tiles_m, tiles_n, total_items, full_tiles, splits, k_blocks, rm_a, rm_b)
        elif wg <= self.num_mma_wg:
            cute.arch.warpgroup_reg_alloc(self.mma_regs)
            self.consumer(st, ab_pipe, tiled_mma, tma_c, mC, ws_ptr, cnt_ptr, tiles_m, tiles_n,
                          total_items, full_tiles, splits, k_blocks, tidx)

    @cute.jit
    def producer(self, st, ab_pipe, tma_a, mA, tma_b1, mB1, tma_b2, mB2,
                 tma_sfa, mSFA, tma_sfb1, mSFB1, tma_sfb2, mSFB2,
                 tiles_m, tiles_n, total_items, full_tiles, splits, k_blocks, rm_a, rm_b):
        """TMA of packed operands and scales, one k-block per pipeline stage, for the k-blocks
        of each work item (a whole tile or one split of it)."""
        # (tile_m, 128, RestM, RestK, RestL) packed tiles of A
        gA = cute.local_tile(mA, (self.tile_m, K_BLOCK // 2), (None, None, None))
        # (tile_n, 128, RestN, RestK, RestL) packed tiles of B1, B2
        gB1 = cute.local_tile(mB1, (self.tile_n, K_BLOCK // 2), (None, None, None))
        gB2 = cute.local_tile(mB2, (self.tile_n, K_BLOCK // 2), (None, None, None))
        # (128, 4, 1, atoms/4): one k-block of scale words of 128 rows
        gSFA = cute.local_tile(mSFA, (128, 4), (None, None))
        gSFB1 = cute.local_tile(mSFB1, (128, 4), (None, None))
        gSFB2 = cute.local_tile(mSFB2, (128, 4), (None, None))
        sAp = self.packed_tensor(st.sAp, self.a_packed_layout)
        sB1p = self.packed_tensor(st.sB1p, self.b_packed_layout)
        sB2p = self.packed_tensor(st.sB2p, self.b_packed_layout)
        sSFA = st.sSFA.get_tensor(self.sf_layout)
        sSFB1 = st.sSFB1.get_tensor(self.sfb_layout)
        sSFB2 = st.sSFB2.get_tensor(self.sfb_layout)
        tAs, tAg = self.tma_part(tma_a, sAp, gA)
        tB1s, tB1g = self.tma_part(tma_b1, sB1p, gB1)
        tB2s, tB2g = self.tma_part(tma_b2, sB2p, gB2)
        tSFAs, tSFAg = self.tma_part(tma_sfa, sSFA, gSFA)
        tSFB1s, tSFB1g = self.tma_part(tma_sfb1, sSFB1, gSFB1)
        tSFB2s, tSFB2g = self.tma_part(tma_sfb2, sSFB2, gSFB2)

        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.ab_stages)
        item = cute.arch.block_idx()[0]
        while item < total_items:
            tile, s, ns = self.unit_of(item, full_tiles, splits)
            mb, nb, lb = scheduler.linear_to_mnl(tile, tiles_m, tiles_n, self.raster_m)
            nb128 = (nb * self.tile_n) // 128
            sfa_atom = (lb * rm_a + mb * (self.tile_m // 128)) * k_blocks
            sfb_atom = (lb * rm_b + nb128) * k_blocks
            # second atom (tile N 96 may straddle two): the next one, or the same at the end
            sfb_atom_hi = sfb_atom + Int32(nb128 + 1 < rm_b) * k_blocks
            for kb in cutlass.range(s * k_blocks // ns, (s + 1) * k_blocks // ns, unroll=1):
                ab_pipe.producer_acquire(state)
                bar = ab_pipe.producer_get_barrier(state)
                si = state.index
                cute.copy(tma_a, tAg[(None, mb, kb, lb)], tAs[(None, si)], tma_bar_ptr=bar)
                cute.copy(tma_b1, tB1g[(None, nb, kb, lb)], tB1s[(None, si)], tma_bar_ptr=bar)
                cute.copy(tma_b2, tB2g[(None, nb, kb, lb)], tB2s[(None, si)], tma_bar_ptr=bar)
                cute.copy(tma_sfa, tSFAg[(None, 0, sfa_atom + kb)], tSFAs[(None, si)], tma_bar_ptr=bar)
                sb = self.sfb_atoms * si
                cute.copy(tma_sfb1, tSFB1g[(None, 0, sfb_atom + kb)], tSFB1s[(None, sb)], tma_bar_ptr=bar)
                cute.copy(tma_sfb2, tSFB2g[(None, 0, sfb_atom + kb)], tSFB2s[(None, sb)], tma_bar_ptr=bar)
                if cutlass.const_expr(self.sfb_atoms == 2):
                    cute.copy(tma_sfb1, tSFB1g[(None, 0, sfb_atom_hi + kb)], tSFB1s[(None, sb + 1)], tma_bar_ptr=bar)
                    cute.copy(tma_sfb2, tSFB2g[(None, 0, sfb_atom_hi + kb)], tSFB2s[(None, sb + 1)], tma_bar_ptr=bar)
                ab_pipe.producer_commit(state)
                state.advance()
            item += cute.arch.grid_dim()[0]
        ab_pipe.producer_tail(state)

    @cute.jit
    def consumer(self, st, ab_pipe, tiled_mma, tma_c, mC, ws_ptr, cnt_ptr, tiles_m, tiles_n,
                 total_items, full_tiles, splits, k_blocks, tidx):
        ct = tidx - 128  # consumer thread 0..255
        # (mma_n, 64, dec_stages): B1 rows, then B2 rows below them
        sBd = st.sB1d.get_tensor(self.b_dec_layout.outer, swizzle=self.b_dec_layout.inner)
        thr_mma = tiled_mma.get_slice(ct)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sBd))
        # (tile_m, tile_n, RestM, RestN, RestL) output tiles
        gC = cute.local_tile(mC, (self.tile_m, self.tile_n), (None, None, None))
        # accumulator: one (tile_m, 2*tile_n) fragment (x1 columns, then x2)
        acc_shape = thr_mma.partition_C(cute.make_identity_tensor((self.tile_m, self.mma_n))).shape
        acc = cute.make_rmem_tensor(acc_shape, cutlass.Float32)
        self.assert_acc_regs(acc)

        a_p = st.sAp.data_ptr().toint()
        b1_p = st.sB1p.data_ptr().toint()
        b2_p = st.sB2p.data_ptr().toint()
        sfa_p = st.sSFA.data_ptr().toint()
        sfb1_p = st.sSFB1.data_ptr().toint()
        sfb2_p = st.sSFB2.data_ptr().toint()
        b1_d = st.sB1d.data_ptr().toint()
        ra = self.make_a_operand(thr_mma, ct)
        b2_d = b1_d + self.tile_n * 128  # B2 rows follow B1's in the same tile

        epi = self.make_epilogue(tiled_mma, st, ct)
        # fp32 split-K partials: (split tile, split, accumulator element, consumer thread)
        ws = cute.make_tensor(ws_ptr, cute.make_layout(1 << 30))
        ws_addr = ws_ptr.toint()
        cnt_base = cnt_ptr.toint()
        flag = st.flag.get_tensor(cute.make_layout(4))

        def decode_sub(si, j, buf, nb_row0):
            # B1 and B2 of stage si, sub-block j, into decoded buffer buf
            self.decode_b(ct, b1_p + si * self.b_stage_bytes, b2_p + si * self.b_stage_bytes,
                          sfb1_p + si * self.sfb_stage_bytes, sfb2_p + si * self.sfb_stage_bytes,
                          b1_d + buf * self.b_buf_bytes, b2_d + buf * self.b_buf_bytes, j, nb_row0)

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.ab_stages)
        it = Int32(0)  # decoded sub-blocks so far (buffer = it % dec_stages)
        tiles_done = Int32(0)
        item = cute.arch.block_idx()[0]
        while item < total_items:
            tile, s, ns = self.unit_of(item, full_tiles, splits)
            mb, nb, lb = scheduler.linear_to_mnl(tile, tiles_m, tiles_n, self.raster_m)
            nb_row0 = (nb * self.tile_n) % 128  # B tile's first row inside its 128-row atom
            acc.fill(0.0)
            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
            read, it = self.mainloop(ab_pipe, read, it, s * k_blocks // ns, (s + 1) * k_blocks // ns, tiled_mma,
                                     acc, ra, tCrB, a_p, sfa_p, decode_sub, (nb_row0,), False)
            cute.nvgpu.warpgroup.wait_group(0)
            gC_tile = gC[(None, None, mb, nb, lb)]
            if cutlass.const_expr(self.cluster_pairs):
                # every work item is split s of a 2-CTA pair: reduce-scatter, then each rank
                # runs the epilogue of its own subtiles
                self.pair_reduce_scatter(epi, acc, tma_c, gC_tile, a_p, s, tiles_done, ct)
                tiles_done += 1
            else:
                store = Int32(1)
                if ns > 1:
                    store = self.split_reduce(acc, ws, ws_addr, cnt_base, flag, a_p, tile - full_tiles, s, ns, ct)
                if store != 0:
                    self.epilogue_dual(epi, acc, tma_c, gC_tile, tiles_done, ct, 0, self.epi_subtiles)
                    tiles_done += 1
            item += cute.arch.grid_dim()[0]
        epi.store_pipe.producer_tail()

    def b_task_codes(self) -> int:
        return 16 if self.tile_n == 96 else 32  # `decode_b`: tile N 96 decodes quarter tasks

    @cute.jit
    def decode_b(self, ct, b1_src, b2_src, sfb1, sfb2, b1_dst, b2_dst, j: cutlass.Constexpr, nb_row0):
        """B1 and B2 rows of the tile: 2 operands x tile_n rows x 2 segments over the 256
        consumer threads (`ct` = 0..255)."""
        tn = self.tile_n
        nd = self.num_mma_threads
        if cutlass.const_expr(tn == 96):
            # 384 row segments would leave one warpgroup with two and the other with one:
            # 768 quarter tasks (one 16-code scale group each) are 3 per thread.  Each warp
            # gets one (q, operand) and 32 rows (192 = 6 x 32, 96 = 3 x 32), spread over the
            # 96 by `spread_rows`.
            for i in cutlass.range_constexpr(3):
                h = ct + nd * i
                q = h // (2 * tn)
                rem = h % (2 * tn)
                which = rem // tn
                row = self.spread_rows(rem % tn, tn)
                self.decode_quarter(b1_src + which * (b2_src - b1_src), sfb1 + which * (sfb2 - sfb1),
                                    b1_dst + which * (b2_dst - b1_dst), row, nb_row0 + row, q, j)
        else:
            self._decode_b_rows(ct, b1_src, b2_src, sfb1, sfb2, b1_dst, b2_dst, j, nb_row0)

    @cute.jit
    def _decode_b_rows(self, ct, b1_src, b2_src, sfb1, sfb2, b1_dst, b2_dst, j: cutlass.Constexpr, nb_row0):
        tn = self.tile_n
        nd = self.num_mma_threads
        for i in cutlass.range_constexpr((4 * tn + nd - 1) // nd):
            t = ct + nd * i
            if cutlass.const_expr(nd * (i + 1) <= 4 * tn):
                self._decode_b_task(t, b1_src, b2_src, sfb1, sfb2, b1_dst, b2_dst, j, nb_row0)
            else:  # tile N 48: 192 tasks on warps 0..5 (warp-uniform)
                if t < 4 * tn:
                    self._decode_b_task(t, b1_src, b2_src, sfb1, sfb2, b1_dst, b2_dst, j, nb_row0)

    @cute.jit
    def _decode_b_task(self, t, b1_src, b2_src, sfb1, sfb2, b1_dst, b2_dst, j: cutlass.Constexpr, nb_row0):
        tn = self.tile_n
        which = t // (2 * tn)
        rem = t % (2 * tn)
        seg = rem // tn
        row = self.spread_rows(rem % tn, tn)
        # B1 or B2 by arithmetic (no divergent branch)
        src = b1_src + which * (b2_src - b1_src)
        sf = sfb1 + which * (sfb2 - sfb1)
        dst = b1_dst + which * (b2_dst - b1_dst)
        self.decode_one(src, sf, dst, row, nb_row0 + row, seg, j)

    @cute.jit
    def pair_reduce_scatter(self, epi, acc, tma_c, gC_tile, stage, s, tiles_done, ct):
        """Split-K pair in a 2-CTA cluster (cluster_mn (2, 1): rank s runs split s of the
        tile, its only work item).  Rank 0 owns epilogue subtiles [0, h), rank 1 [h, n)
        (h = ceil(n / 2)): after both mainloops (cluster barrier) each rank writes the fp32
        accumulators of the other rank's subtiles (x1 and x2) straight into the other's
        free pipeline shared memory (distributed shared memory, 16-byte stores), and after
        a second cluster barrier adds what it received to its own and stores its subtiles.
        Sums are own + other = p0 + p1 on both ranks (deterministic, and the same as when
        rank 0 reduced everything).  Each rank sends and stores half: the one-way version
        (rank 1 sent all 128 KB, rank 0 stored the whole tile) spent ~2.5 us on the transfer
        (H200, 2026-11-21, notes/sm90.md experiment 33)."""
        t = epi.tiled_copy_r2s.retile(acc)
        n = self.epi_subtiles
        h = (n + 1) // 2
        # the wgmma reads of this CTA's buffers are done (wait_group 0); order them before
        # the peer's generic stores into the same shared memory
        cute.arch.fence_proxy(cute.arch.ProxyKind.async_shared, space=cute.arch.SharedSpace.shared_cta)
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        self._pair_send(t, n, h, s, stage, ct)
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        if s == 0:
            self._pair_add(t, 0, h, stage, ct)
            self.epilogue_dual(epi, acc, tma_c, gC_tile, tiles_done, ct, 0, h)
        else:
            self._pair_add(t, h, n, stage, ct)
            self.epilogue_dual(epi, acc, tma_c, gC_tile, tiles_done, ct, h, n)

    def _pair_values(self, t, e0, e1):
        """Static indices into the retiled accumulator `t` of subtiles [e0, e1): their x1
        values, then their x2 values (x2 of subtile e sits epi_subtiles subtiles further)."""
        n_rd = cute.size(t) // (2 * self.epi_subtiles)
        x1 = [e * n_rd + v for e in range(e0, e1) for v in range(n_rd)]
        idx = x1 + [self.epi_subtiles * n_rd + i for i in x1]
        assert len(idx) % 4 == 0
        return idx

    @cute.jit
    def _pair_send(self, t, n: cutlass.Constexpr, h: cutlass.Constexpr, s, stage, ct):
        """Write the other rank's subtiles into its shared memory: rank 0 sends [h, n), rank
        1 sends [0, h).  Branch-free (a select per value; rank 0's shorter list, odd n, is
        padded with repeats): with a branch around the two send loops ptxas serialized the
        mainloop's wgmmas (advisory C7514) in the 128x128 kernel."""
        to0 = self._pair_values(t, 0, h)  # what rank 1 sends
        to1 = self._pair_values(t, h, n)  # what rank 0 sends
        to1 = to1 + to1[: len(to0) - len(to1)]
        nt = self.num_mma_threads
        first = s == 0
        peer = 1 - s
        for q in cutlass.range_constexpr(len(to0) // 4):
            vals = [cutlass.select_(first, t[to1[4 * q + e]], t[to0[4 * q + e]]) for e in range(4)]
            decode.st_cluster_f32(stage + (q * nt + ct) * 16, peer, *vals)

    @cute.jit
    def _pair_add(self, t, e0: cutlass.Constexpr, e1: cutlass.Constexpr, stage, ct):
        idx = self._pair_values(t, e0, e1)
        nt = self.num_mma_threads
        for q in cutlass.range_constexpr(len(idx) // 4):
            v = decode.ld_shared_v4_f32(stage + (q * nt + ct) * 16)
            for e in cutlass.range_constexpr(4):
                t[idx[4 * q + e]] = t[idx[4 * q + e]] + v[e]

    @cute.jit
    def epilogue_dual(self, epi, acc, tma_c, gC_tile, tiles_done, ct, e0: cutlass.Constexpr, e1: cutlass.Constexpr):
        """silu(x1) * x2 of subtiles [e0, e1) of the tile (stmatrix -> shared -> TMA store)."""
        tRS_rAcc = epi.tiled_copy_r2s.retile(acc)
        gC_epi = cute.zipped_divide(gC_tile, self.epi_tile)
        bSG_sD, bSG_gD = cute.nvgpu.cpasync.tma_partition(
            tma_c, 0, cute.make_layout(1), cute.group_modes(epi.sC, 0, 2), gC_epi)
        epi_num = cute.size(gC_epi, mode=[1])
        assert epi_num == self.epi_subtiles
        epi_shape = gC_epi.shape[1]
        epi_layout = cute.make_layout(epi_shape, stride=(epi_shape[1], 1))
        n_rd = cute.size(epi.tRS_rD)
        scale = cutlass.Float32(decode.ACC_RESCALE)
        store_pipe = epi.store_pipe
        # the x2 value of subtile e sits tile_n/32 subtiles further along N
        x2_ofs = epi_num * n_rd
        for e in cutlass.range_constexpr(e0, e1):
            for v in cutlass.range_constexpr(n_rd):
                x1 = tRS_rAcc[e * n_rd + v] * scale
                x2 = tRS_rAcc[x2_ofs + e * n_rd + v] * scale
                epi.tRS_rD[v] = silu_mul(x1, x2)
            epi.tRS_rD_out.store(epi.tRS_rD.load().to(cutlass.Float16))
            buf = (tiles_done * epi_num + e) % self.epi_stages
            cute.copy(epi.tiled_copy_r2s, epi.tRS_rD_out, epi.tRS_sD[(None, None, None, buf)])
            cute.arch.fence_proxy(cute.arch.ProxyKind.async_shared, space=cute.arch.SharedSpace.shared_cta)
            self.epi_barrier.arrive_and_wait()
            if ct // 32 == 0:
                cute.copy(tma_c, bSG_sD[(None, buf)], bSG_gD[(None, epi_layout.get_hier_coord(e))])
                store_pipe.producer_commit()
                store_pipe.producer_acquire()
            self.epi_barrier.arrive_and_wait()


# ---------------------------------------------------------------------- host helpers


def shared_storage_bytes(config: KernelConfig) -> int:
    return Sm90Common.smem_bytes_of(config, 2)


def compile_args(config: KernelConfig, m: int, n: int, k: int, l: int) -> tuple:
    """Fake arguments for cute.compile (no GPU needed)."""
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    def p(dt, addr):
        return make_ptr(dt, addr, cute.AddressSpace.gmem, assumed_align=16)

    return (
        p(cutlass.Uint8, 1 << 20), p(cutlass.Uint8, 2 << 20), p(cutlass.Uint8, 3 << 20),
        p(cutlass.Int32, 4 << 20), p(cutlass.Int32, 5 << 20), p(cutlass.Int32, 6 << 20),
        p(cutlass.Float16, 7 << 20), p(cutlass.Float32, 8 << 20), p(cutlass.Int32, 9 << 20),
        Int32(m), Int32(n), Int32(k), Int32(l), Int32(1), Int32(1), Int32(1), Int32(132),
        make_fake_stream(),
    )


_SPLIT_CACHE: OrderedDict = OrderedDict()  # least recently used first out (nvfp4gemm/cache.py)


def split_args(config: KernelConfig, m: int, n: int, k: int, l: int, c):
    """(workspace, counters, items, full_tiles, splits, ctas) of the split-K plan
    (scheduler.split_plan) for this shape on C's GPU.  The fp32 workspace and the
    per-split-tile counters (zeroed once; the kernel leaves them at 0) are cached per output
    tensor address.  The dispatcher asks once per (signature, stream) and its launch template then
    runs every output of that signature with them: calls on one stream are ordered."""
    import torch

    key = (c.device, c.data_ptr(), config.mma_tile_mn, config.cluster_mn, config.split_k, m, n, k, l)

    def build():
        tiles = dual_tiles(config, (m, n, k, l))
        if config.cluster_mn == (2, 1):  # split pairs, one cluster per tile, whatever the SMs
            ctas, full, splits = 2 * tiles, 0, 2
        elif not config.split_k:
            ctas, full, splits = min(tiles, sm_count(c.device)), tiles, 1
        else:
            ctas, full, splits = scheduler.split_plan(tiles, sm_count(c.device), k // K_BLOCK)
        n_split = tiles - full
        floats = n_split * splits * config.mma_tile_mn[0] * 2 * config.mma_tile_mn[1]
        ws = torch.empty(max(1, floats), dtype=torch.float32, device=c.device)
        cnt = torch.zeros(max(1, n_split), dtype=torch.int32, device=c.device)
        return ws, cnt, scheduler.split_units(tiles, full, splits), full, splits, ctas

    return lru_lookup(_SPLIT_CACHE, key, build, 64)[0]


DATA_SLOTS = DUAL_DATA_SLOTS  # (what the dispatcher's launch template rewrites per call)


def runtime_args(data, config: KernelConfig, stream, keep=None) -> tuple:
    """The compile_args tuple from the leaderboard's 10-tuple of GPU tensors (`keep`, a list: gets
    the workspace the arguments point into)."""
    from cutlass.cute.runtime import make_ptr

    a, b1, b2, _sfa, _sfb1, _sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    m, kh, l = a.shape
    n = b1.shape[0]
    k = 2 * kh

    def p(dt, t):
        return make_ptr(dt, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)

    ws, cnt, items, full, splits, ctas = split_args(config, m, n, k, l, c)
    if keep is not None:
        keep += [ws, cnt]
    if not isinstance(stream, cuda.CUstream):
        stream = cuda.CUstream(stream.cuda_stream)
    return (
        p(cutlass.Uint8, a), p(cutlass.Uint8, b1), p(cutlass.Uint8, b2),
        p(cutlass.Int32, sfa_p), p(cutlass.Int32, sfb1_p), p(cutlass.Int32, sfb2_p),
        p(cutlass.Float16, c), p(cutlass.Float32, ws), p(cutlass.Int32, cnt),
        Int32(m), Int32(n), Int32(k), Int32(l), Int32(items), Int32(full), Int32(splits), Int32(ctas),
        stream,
    )
