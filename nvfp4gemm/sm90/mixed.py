"""What the two mixed-input kernels (sm_90a) share: the dual GEMM (dual_mixed.py) and the
grouped GEMM (grouped_mixed.py).

Both run C^T = B A^T with A decoded once to fp16 (A16) by a pre-pass launch and TMA-loaded
as the wgmma shared-memory operand, and B decoded per 64-code sub-block straight into the
consumers' wgmma registers (`Sm90Common.decode_a`); nothing decoded is stored by a thread in
the main kernel.  Shared here:
  * `prepass_half`: one 32-code half row of A -> 4 16-byte fp16 chunks in the pair-major K
    order of its sub-block (what `decode.decode_task(..., pair_major=True)` writes for a
    stored operand), times 2^-6 like every decode, written to shared memory so that each
    kernel's pre-pass can store a warp's 2 KB with contiguous instructions (exp. 70);
  * the consumer k-loop `mainloop_mixed` (wgmmas one sub-block deep against the A16 ring);
  * the split-K pairs' reduce-scatter through distributed shared memory (`pair_exchange`,
    cluster (2, 1): each rank ends with its 64 rows of C in the pass-0 accumulator positions);
  * the stream-K partial exchange (`write_partial` / `add_partials`) through an fp32
    workspace: a tile cut into segments s = 0 .. ns - 1 has segment s on CTA c + s; every
    segment but s = 0 is its CTA's *first* work and is written with a release flag; s = 0 is
    its CTA's *last* work, and that CTA (the finisher) adds the others' partials in order.
    Writers never wait, so the schedule cannot deadlock while all CTAs are resident.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
from cutlass import Int32, Int64

from configs import K_BLOCK, mixed_a16_stages
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90.common import SF_STAGE_BYTES, SUB_K, Sm90Common

PREPASS_THREADS = 256
# Pre-pass routing of one 32-code half row (4 words, `decode.decode_word` each): 16-byte
# chunk c of the half holds fp16 pair PREPASS_CHUNKS[c][i] = (word, output) for i = 0..3,
# and word v takes scale PREPASS_WORD_SCALE[v] of the half's two groups -- the pair-major
# order of `decode._decode_b_ptx` (tests/test_sm90_compile.py checks the two agree)
PREPASS_CHUNKS = tuple(tuple((v, c) for v in range(4)) for c in range(4))
PREPASS_WORD_SCALE = (0, 0, 1, 1)


class Sm90MixedCommon(Sm90Common):
    """Base of the mixed-input kernels (register operand: tile_m rows of B; shared-memory
    operand: tile_n rows of A16 per 64-code sub-block)."""

    interleaved = False  # the dual kernel's narrow form sets it (B1 / B2 rows interleaved)

    def __init__(self, config):
        super().__init__(config)
        # the A16 ring: sub-blocks of tile_n rows x 64 fp16, two k-blocks of them (8), or 5 of
        # 32 KB with 256-row A tiles (configs.mixed_a16_stages)
        self.a16_stages = mixed_a16_stages(config)
        self.a16_stage_bytes = self.tile_n * SUB_K * 2
        # a stream-K finisher stages each partial (tile_m x tile_n fp32) in the ring
        assert self.a16_stages * self.a16_stage_bytes >= 4 * self.tile_m * self.tile_n, "partial > A16 ring"

    def sf_stage_bytes(self) -> int:
        """Scale bytes of one packed-B stage: two 128-row atoms (dual: B1's and B2's; grouped:
        a 256-row tile's two)."""
        return 2 * SF_STAGE_BYTES

    def b_task_codes(self) -> int:
        return 32  # pair-major K order (no quarter tasks here)

    def _make_pipe(self, mbar_ptr, stages, tx, consumers):
        return pipeline.PipelineTmaAsync.create(
            barrier_storage=mbar_ptr, num_stages=stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, consumers),
            tx_count=tx)

    @staticmethod
    def release_a16(a_pipe, state):
        """Every consumer thread arrives on the A16 stage's empty barrier (the pipeline
        counts 256 arrivals).  PipelineTmaAsync.consumer_release lets one lane per warp
        arrive under a branch; that divergence between a wgmma and its wait made ptxas
        serialize every wgmma (advisory C7513)."""
        a_pipe.sync_object_empty.arrive(state.index, None)


    @cute.jit
    def consumer_setup(self, st, tiled_mma, ct):
        """Consumer thread ct's views and states: (tCrB, ra, tCcC, acc, b_p, sf_p, a16_p, bread,
        aread, afree) -- the wgmma fragments of the A16 ring, the register operand, the
        (tile_m, tile_n) coordinates of its accumulator values (row r: B row n0 + r; column c:
        A row m0 + c), the accumulators, the packed-B, scale and A16 ring addresses (A16 also
        stages partials and the pairs' exchange), and the pipeline states."""
        sA16 = st.sA16.get_tensor(self.a16_layout.outer, swizzle=self.a16_layout.inner)
        thr_mma = tiled_mma.get_slice(ct)
        tCrB = tiled_mma.make_fragment_B(thr_mma.partition_B(sA16))
        ra = self.make_a_operand(thr_mma, ct)
        tCcC = thr_mma.partition_C(cute.make_identity_tensor((self.tile_m, self.tile_n)))
        acc = cute.make_rmem_tensor(tCcC.shape, cutlass.Float32)
        b_p = st.sBp.data_ptr().toint()
        sf_p = st.sSF.data_ptr().toint()
        a16_p = st.sA16.data_ptr().toint()
        bread = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.ab_stages)
        aread = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.a16_stages)
        afree = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.a16_stages)
        return tCrB, ra, tCcC, acc, b_p, sf_p, a16_p, bread, aread, afree

    # ------------------------------------------------------------------ A pre-pass
    @cute.jit
    def prepass_begin(self):
        """A pre-pass thread's start: trigger the dependent main kernel (PDL), then (t, lane,
        base): its global half index, its lane, and its warp's 2 KB of shared memory, where
        `prepass_half` puts the warp's 32 x 64 bytes before the coalesced stores (exp. 70)."""
        cute.arch.griddepcontrol_launch_dependents()
        tidx, _, _ = cute.arch.thread_idx()
        bidx, _, _ = cute.arch.block_idx()
        smem = utils.SmemAllocator()
        st = smem.allocate(cute.struct(type("PrepassStage", (), {"__annotations__": {
            "buf": cute.struct.Align[cute.struct.MemRange[cutlass.Uint8, PREPASS_THREADS * 64], 128]}})))
        return bidx * PREPASS_THREADS + tidx, tidx % 32, st.buf.data_ptr().toint() + (tidx // 32) * 2048

    @cute.jit
    def prepass_half(self, a_row, sfa, row, seg, k, dst):
        """32-code half `seg` of A row `row` (its packed bytes at 64-bit address `a_row`, the
        permuted scales at `sfa`, K = k) -> 4 16-byte fp16 chunks at shared address `dst`:
        chunk c = fp16 pair c of each of the half's 4 words (`decode.decode_word`), i.e. the
        pair-major order of sub-block seg // 2, bytes 64 (seg % 2) .. + 63 of its A16 row."""
        j = seg // 2
        h = seg % 2
        w = decode.ld_global_nc_v4_u32(a_row + seg * 16)
        # permuted scale atom (row // 128, sub-block j): row's word at 4 (row % 32) + (row % 128) // 32
        atom = (row // 128) * (k // SUB_K) + j
        sw = decode.ld_global_nc_u32(sfa + (Int64(atom) * 128 + 4 * (row % 32) + (row % 128) // 32) * 4)
        s = decode.scale_pair(sw, 2 * h + (2 * h + 1) * 16)  # groups 2h, 2h + 1
        d = [decode.decode_word(w[v], s[PREPASS_WORD_SCALE[v]]) for v in range(4)]
        for c in cutlass.range_constexpr(4):
            decode.st_shared_v4_u32(dst + 16 * c, *[d[v][r] for v, r in PREPASS_CHUNKS[c]])

    # ------------------------------------------------------------------ split-K pairs
    def _pass_index(self, acc, i: int, p: int) -> int:
        """Accumulator index of value i (0 .. size / 2 - 1) of store pass p, i.e. of C rows
        [64 p, 64 p + 64) of the tile (`store_c_t_staged`): the accumulator is ((2, 2, 16),
        m_reps, 1) (2 reps: DualSiluPairs.c_t_pairs asserts it; 1 in the interleaved dual
        forms), column group j = 8 p .. 8 p + 7 of each rep is flat indices 32 p .. 32 p + 31
        of that rep's 64."""
        rep = cute.size(acc) // self.m_reps
        half = rep // 2
        return (i // half) * rep + p * half + i % half

    @cute.jit
    def pair_exchange(self, acc, s, stage):
        """Reduce-scatter of a split-K pair (cluster (2, 1), rank s): after both ranks'
        mainloops (cluster barrier) each thread stores the 64 fp32 of the other rank's rows
        of C straight into the peer's A16 ring (free now: every A16 load was consumed and
        the wgmmas reading it are done) through distributed shared memory, 16 bytes each
        at (q * 256 + ct) * 16 -- the peer's thread ct holds the same accumulator positions;
        after a second cluster barrier it adds what it received to its own rows.  Rank 1
        moves its rows (pass 1) into the pass-0 positions, so both ranks store pass 0 only.
        Branch-free (selects on s): a branch around the sends serialized the mainloop's
        wgmmas in the 128 x 128 kernel (C7514).  Sums are own + peer on both ranks."""
        ct = cute.arch.thread_idx()[0] - 128
        nt = self.num_mma_threads
        n_half = cute.size(acc) // 2
        lo = [self._pass_index(acc, i, 0) for i in range(n_half)]
        hi = [self._pass_index(acc, i, 1) for i in range(n_half)]
        first = s == 0
        peer = 1 - s
        # order this CTA's wgmma (async-proxy) reads of the ring before the peer's stores
        cute.arch.fence_proxy(cute.arch.ProxyKind.async_shared, space=cute.arch.SharedSpace.shared_cta)
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        for q in cutlass.range_constexpr(n_half // 4):
            vals = [cutlass.select_(first, acc[hi[4 * q + e]], acc[lo[4 * q + e]]) for e in range(4)]
            decode.st_cluster_f32(stage + (q * nt + ct) * 16, peer, *vals)
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        for q in cutlass.range_constexpr(n_half // 4):
            v = decode.ld_shared_v4_f32(stage + (q * nt + ct) * 16)
            for e in cutlass.range_constexpr(4):
                i = 4 * q + e
                acc[lo[i]] = cutlass.select_(first, acc[lo[i]], acc[hi[i]]) + v[e]

    # ------------------------------------------------------------------ stream-K partials
    # A partial is the consumers' accumulators, 256 threads x 128 fp32 (128 KB; the narrow and
    # three-warpgroup dual forms fill 64 / 96 KB of the slot, the grouped 128 x 128 and
    # 256 x 64 tiles 64 KB): 16-byte chunk j of consumer
    # thread ct at (j * threads + ct) * 16, so each warp store / load covers 512 contiguous
    # bytes and each thread later reads back only the chunks it copied itself.
    PARTIAL_BYTES = 256 * 128 * 4

    @cute.jit
    def stream_k_handoff(self, acc, ws, flags, cta, s, ns, stage, ct):
        """Segment s of a tile split into ns > 1: the CTA's first segment (s > 0) hands its
        partial to the tile's finisher, its last (s == 0) adds the others' partials to acc.
        Returns 1 where the caller then stores the tile, else 0."""
        finish = Int32(1)
        if s > 0:
            self.write_partial(acc, ws, flags, cta, ct)
            finish = Int32(0)
        else:
            self.add_partials(acc, ws, flags, cta, ns, stage, ct)
        return finish

    # Flag release of a written partial (exp. 82): the consumers' stores, a CTA barrier, then
    # one gpu-scope release-add by a single thread -- the release is cumulative over the
    # stores the barrier ordered before it (PTX memory model; CUTLASS's stream-K fixup does
    # the same), so no thread fences its own stores.  Where the producer warpgroup has an
    # idle warp (`flag_warp`, the dual kernel), that warp waits at FLAG_BARRIER and releases,
    # and the consumers only arrive and go on to their next segment.
    FLAG_BARRIER_ID = 3
    flag_warp = False

    def make_flag_barrier(self):
        return pipeline.NamedBarrier(barrier_id=self.FLAG_BARRIER_ID, num_threads=self.num_mma_threads + 32)

    @cute.jit
    def write_partial(self, acc, ws, flags, cta, ct):
        """Partial of this CTA's split segment to workspace block `cta`, then its flag."""
        nt = self.num_mma_threads
        base = ws + Int64(cta) * self.PARTIAL_BYTES
        for j in cutlass.range_constexpr(cute.size(acc) // 4):
            decode.st_global_v4_f32(base + Int64((j * nt + ct) * 16),
                                    acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3])
        if cutlass.const_expr(self.flag_warp):
            self.make_flag_barrier().arrive()
        else:
            self.epi_barrier.arrive_and_wait()
            if ct == 0:
                decode.atom_add_acq_rel_gpu(flags + Int64(cta) * 4, Int32(1))

    @cute.jit
    def release_partial_flag(self, flags, cta):
        """The flag warp's part of `write_partial` (called once, by one whole warp, iff this
        CTA writes a partial): wait for the consumers' stores, then release the flag."""
        self.make_flag_barrier().arrive_and_wait()
        if cute.arch.lane_idx() == 0:
            decode.atom_add_acq_rel_gpu(flags + Int64(cta) * 4, Int32(1))

    @cute.jit
    def add_partials(self, acc, ws, flags, cta, ns, stage, ct):
        """Finisher (segment 0 of ns, the CTA's last work): acc += the partials of CTAs
        cta + 1 .. cta + ns - 1, in that order (deterministic).  Each is staged by 16-byte
        cp.async into the A16 ring (free: nothing more is loaded, and the barrier below
        waits for both warpgroups' last wgmmas) -- every copy in flight at once, no
        registers held -- and read back by the thread that copied it.  The flag is reset
        for the next launch once seen.  Thread 0's acquire load and the barrier order every
        thread's reads after the writer's release (no per-thread fence; exp. 82)."""
        nt = self.num_mma_threads
        self.epi_barrier.arrive_and_wait()
        for s2 in cutlass.range(1, ns, unroll=1):
            flag = flags + Int64(cta + s2) * 4
            if ct == 0:
                seen = decode.ld_acquire_gpu_u32(flag)
                while seen == 0:
                    seen = decode.ld_acquire_gpu_u32(flag)
                decode.atom_add_acq_rel_gpu(flag, Int32(-1))
            self.epi_barrier.arrive_and_wait()
            src = ws + Int64(cta + s2) * self.PARTIAL_BYTES
            for j in cutlass.range_constexpr(cute.size(acc) // 4):
                ofs = (j * nt + ct) * 16
                decode.cp_async_16(stage + ofs, src + Int64(ofs), Int32(16))
            decode.cp_async_wait_all()
            for j in cutlass.range_constexpr(cute.size(acc) // 4):
                v = decode.ld_shared_v4_f32(stage + (j * nt + ct) * 16)
                for i in cutlass.range_constexpr(4):
                    acc[4 * j + i] = acc[4 * j + i] + v[i]

    @cute.jit
    def mainloop_mixed(self, b_pipe, a_pipe, bread, aread, afree, kb0, kb1, tiled_mma, acc, ra, tCrB, b_p, sf_p,
                       sf_r0):
        """One segment's k-loop (k-blocks kb0 .. kb1 - 1 of a tile).  Sub-block `it`: wait until wgmma(it - 2) is done (it read
        this A-register parity and A16 stage it - 2, which is then released), decode B1/B2
        rows into the registers, wait for A16 sub-block it, issue the wgmmas (async).  The
        packed-B stage is released after its last decode (only generic loads read it).
        Every stage still held is released after the final drain."""
        subs = K_BLOCK // SUB_K
        # A16 sub-blocks waited for at once: the k-block's 4 where the ring holds two k-blocks
        # (an mbarrier wait loop between a wgmma and its wait_group serializes the wgmmas,
        # C7513, so the waits come before the sub-block's wait_group); two at a time in the
        # wide form's 5-stage ring, which 4 + 4 would deadlock (stage it - 2 is released only
        # at sub-block it)
        waits = subs if self.a16_stages >= 2 * subs else 2
        for kb in cutlass.range(kb0, kb1, unroll=1):
            b_pipe.consumer_wait(bread)
            si = bread.index
            for j in cutlass.range_constexpr(subs):
                if cutlass.const_expr(j % waits == 0):
                    a4 = aread.clone()
                    for _ in cutlass.range_constexpr(waits):
                        a_pipe.consumer_wait(a4)
                        a4.advance()
                cute.nvgpu.warpgroup.wait_group(1)
                if cutlass.const_expr(j >= 2):
                    self.release_a16(a_pipe, afree)
                    afree.advance()
                else:
                    if kb > kb0:
                        self.release_a16(a_pipe, afree)
                        afree.advance()
                if cutlass.const_expr(self.interleaved):
                    self.decode_b_interleaved(ra, b_p + si * self.a_stage_bytes, sf_p + si * self.sf_stage_bytes(),
                                              j, sf_r0)
                else:
                    self.decode_a(ra, b_p + si * self.a_stage_bytes, sf_p + si * self.sf_stage_bytes(), j, sf_r0)
                if cutlass.const_expr(j == K_BLOCK // SUB_K - 1):
                    b_pipe.consumer_release(bread)
                cute.nvgpu.warpgroup.fence()
                for kk in cutlass.range_constexpr(SUB_K // 16):
                    cute.gemm(tiled_mma, acc, self.a_operand_k(ra, kk, j), tCrB[(None, None, kk, aread.index)], acc)
                cute.nvgpu.warpgroup.commit_group()
                aread.advance()
            bread.advance()
        cute.nvgpu.warpgroup.wait_group(0)
        for _ in cutlass.range_constexpr(2):  # the last two sub-blocks' A16 stages
            self.release_a16(a_pipe, afree)
            afree.advance()
        return bread, aread, afree
