"""The sm_90a skinny-M core shared by the dual (dual_skinny.py) and grouped (grouped_skinny.py)
kernels for decode-sized M: `mma.sync.m16n8k16` on register operands, no wgmma and no
decoded tiles in shared memory.

Why: with M <= 16 a GEMM is a few matrix-vector products, bound by reading B (N K / 2 bytes).
The wgmma kernels run 8 consumer warps per SM, too few to keep enough loads in flight and to
hide the decode's dependency chains, and they pad M to 16..128 MMA rows.  Here every warp
decodes its own operands straight into m16n8k16 fragments (B rows on the MMA's M side, the
few A rows on its N side), holds only 4-32 fp32 accumulators, and so as many warps fit per
SM as the decode registers allow; every B row is read and decoded exactly once.

Work split: a CTA owns R = tile M (16, 32 or, grouped only, 64: one, two or four m16 row
groups; exp. 155) consecutive rows of
each of its `num_b` B matrices (dual: B1 and B2; grouped: B_g) and all M (<= tile N, 8 or
16) rows of A; its W = k_warps warps split K into 128-code chunks, warp w taking the
contiguous chunks [w C / W, (w + 1) C / W), C = K / 128 (with k_split > 1: the W = k_warps x
k_split warps of a cluster of CTAs split K, and their partial sums meet in rank 0; exps. 165, 168).  Per chunk lane (g = lane / 4,
tq = lane % 4) copies 16 bytes (32 codes) of rows g and g + 8 of each row group of each B
and of A rows g (and g + 8 when the tile N is 16; rows past M are clamped to M - 1 and their
outputs dropped), plus one 32-bit word of each row's permuted scales, into its own slots of
the warp's cp.async ring (ab_stages deep: S - 1 chunks in flight while one is decoded;
lane-private slots, so only `cp.async.wait_group`, no barrier).  B goes through L2 only
(.cg); A through L1 (.ca), because every CTA reads the same few A rows (at M = 1, L2-only A
loads cost 1x14336x4096 48 instead of 36 us on an H200, notes/sm90.md exp. 42).

Scales: lane tq's two groups (2 tq, 2 tq + 1) are bytes 2 (tq % 2) and 2 (tq % 2) + 1 of the row's
scale word in the ring; one 16-bit shared load and one conversion give both
(`decode.skinny_scales`; the loop is issue-bound, notes/sm90.md exp. 47-48).

K order: at step s (0..7) of a chunk, lane tq supplies the k positions 2 tq + {0, 1, 8, 9}
of the A and B fragments from codes 32 tq + 4 s .. + 3 of its 32 (the map of
`decode.decode_a_frag`, the same on both operands, so the dot products are unchanged); their
e4m3 scale is group 2 tq + s // 4 of the chunk, byte (tq % 2) * 2 + s // 4 of scale word
(row, atom 2 c + tq // 2).  Each row's 32-bit word is decoded once for its two steps
(`decode.decode_word`: no halfword select, and the single 8-row A group is decoded once,
not as both rows of a fragment).

After the main loop each warp writes its partial sums to shared memory ((W, num_b, tile N,
tile M) fp32, `stash_partials`); the kernel's epilogue sums them over the warps.

With `pdl` (dual only, NVFP4_STATIC_B: the caller promises no earlier kernel of the stream
writes B; exp. 170) the launch uses programmatic dependent launch: each warp copies B's part of
its first S - 1 ring stages, then waits (griddepcontrol.wait) for the stream's previous kernel,
then copies A's part and commits the stages; the next kernel is let in after the main loop or
after the partial sums (`release_dependents`).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
from cutlass import Float32, Int32, Int64

from configs import KernelConfig, check_config, check_shape, sm90_smem_bytes
from nvfp4gemm.sm90 import decode

CHUNK_BYTES = 64  # 128 codes of one row per chunk, 16 bytes per lane
SF_ATOM = 512  # bytes of one permuted scale atom (128 rows x 4 scale columns)
SF_ATOM_K = 64  # codes covered by one atom column


class Sm90SkinnyCore:
    """Loads, decode and mma.sync main loop of the skinny kernels; a subclass sets `num_b`
    (B matrices per CTA) and writes `kernel`, the addresses' sources and the epilogue."""

    num_b = 1

    def __init__(self, config: KernelConfig):
        self.config = config
        self.rows, self.tokens = config.mma_tile_mn  # B rows per CTA (of each B), A rows held
        self.row_groups = self.rows // 16
        self.n8 = self.tokens // 8
        self.k_warps = config.k_warps
        self.threads = 32 * self.k_warps
        # CTAs of a cluster splitting K (exps. 165, 168); warps of the whole cluster
        self.k_split = config.k_split
        # programmatic dependent launch with B's first stages before griddepcontrol.wait, the next
        # kernel let in after the main loop ("loop") or after the partial sums ("sums"); exp. 170
        self.pdl = config.pdl
        self.total_warps = self.k_warps * self.k_split
        # operand rows a lane loads per chunk: (B, row group, +0 / +8) of each B, then A
        self.b_rows = self.num_b * self.row_groups * 2
        self.a_rows = self.n8
        self.lane_rows = self.b_rows + self.a_rows
        self.acc_count = self.num_b * self.row_groups * self.n8 * 4
        # register buffer of one chunk: 4 data words per row, then one scale word per row
        self.buf_words = 5 * self.lane_rows
        # per-warp cp.async ring: per stage, 16 bytes per lane per row, then 4 per lane per row
        self.ring_stages = config.ab_stages
        self.stage_bytes = self.lane_rows * 32 * (16 + 4)
        # rings + the warps' (num_b, tile N, tile M) fp32 partial sums: the model in configs
        assert self.k_warps * (self.ring_stages * self.stage_bytes + self.k_split * self.num_b * self.tokens * self.rows * 4) \
            == sm90_smem_bytes(config), "configs.sm90_smem_bytes disagrees with the skinny kernel"

    @staticmethod
    def check_problem(config: KernelConfig, problem: str, shape) -> None:
        """can_implement of both skinny kernels: the config, the shared shape rules, and each
        M (dual) / M_g within the A rows held and N / N_g a multiple of the B rows per CTA."""
        errs = check_config(config) + check_shape(problem, shape, "sm_90a", max_groups=config.table_groups)
        if not config.skinny:
            errs.append("not a skinny config")
        else:
            tm, tn = config.mma_tile_mn
            mns = [("", shape[0], shape[1])] if problem == "dual" else \
                [(f"group {g}: ", m, n) for g, (m, n, _k) in enumerate(shape)]
            for pre, m, n in mns:
                if m > tn and not config.masked:  # (the masked form skips counts above tn: exp. 147)
                    errs.append(f"{pre}M={m} exceeds the skinny tile's {tn} A rows")
                if n % tm:
                    errs.append(f"{pre}N={n} must be a multiple of the skinny tile's {tm} rows")
        if errs:
            raise ValueError("; ".join(errs))

    @cute.jit
    def shared_buffers(self, warp):
        """(partial sums (W, num_b, tile N, tile M) fp32 -- W: the warps of the cluster's k_split
        CTAs, only rank 0's is read --, this warp's ring base address)."""
        smem = utils.SmemAllocator()
        red = smem.allocate_tensor(Float32, cute.make_layout((self.total_warps, self.num_b, self.tokens, self.rows)), 16)
        # (W, S, stage bytes) per-warp cp.async rings
        rings = smem.allocate_tensor(cutlass.Uint8, cute.make_layout(self.k_warps * self.ring_stages * self.stage_bytes), 16)
        return red, rings.iterator.toint() + warp * (self.ring_stages * self.stage_bytes)

    # ------------------------------------------------------------------ addresses

    @cute.jit
    def lane_addresses(self, b_srcs, a_addr, sfa_addr, m, n, k, blk, bl, lane):
        """Global addresses of this lane's 16 data bytes and its scale word in chunk 0, one
        per operand row it loads (order: each B's row groups, rows +0 / +8; then A rows);
        chunk c adds c * 64 / c * 1024 (two atom columns).  b_srcs: one (data, permuted
        scales) Int64 address pair per B matrix, (N, K/2, L) and (32, 4, ceil(N/128), 4,
        K/64, L); A: (M, K/2, L) and its scales; rows [blk R, blk R + R) of each B; batch bl."""
        g = lane // 4
        tq = lane % 4
        kh = Int64(k // 2)
        atoms_k = Int64(k // SF_ATOM_K)
        lane_byte = Int64(16 * tq)
        lane_sf = Int64(tq // 2) * SF_ATOM

        def sf_row(base, r, rows_total):
            # (r // 128, atom column, r % 32, (r // 32) % 4) of the permuted layout, batch bl
            atoms_mn = Int64((rows_total + 127) // 128)
            return (base + (Int64(bl) * atoms_mn + Int64(r // 128)) * atoms_k * SF_ATOM
                    + Int64((r % 32) * 16 + ((r // 32) % 4) * 4) + lane_sf)

        data = []
        scales = []
        for b_addr, sfb_addr in b_srcs:
            for rg in cutlass.range_constexpr(self.row_groups):
                for h in cutlass.range_constexpr(2):
                    r = blk * self.rows + rg * 16 + h * 8 + g
                    data.append(b_addr + (Int64(bl) * Int64(n) + Int64(r)) * kh + lane_byte)
                    scales.append(sf_row(sfb_addr, r, n))
        for h in cutlass.range_constexpr(self.n8):
            t = g + h * 8
            # rows past M: any valid row, outputs dropped (row 0 where M is 0: MaskedGroupedGemm's
            # zero counts, exp. 145; row -1 faulted there)
            t = cutlass.select_(t < m, t, cutlass.max(m - 1, 0))
            data.append(a_addr + (Int64(bl) * Int64(m) + Int64(t)) * kh + lane_byte)
            scales.append(sf_row(sfa_addr, t, m))
        return data, scales

    # ------------------------------------------------------------------ main loop

    @cute.jit
    def issue_chunk(self, ring, data, scales, c, stage, lane):
        """cp.async chunk c's 16 data bytes and scale word of every row this lane loads into
        its slots of ring stage `stage` (lane-private: no barrier, only its own waits)."""
        self.issue_rows(ring, data, scales, c, stage, lane, 0, self.lane_rows, True)

    @cute.jit
    def issue_rows(self, ring, data, scales, c, stage, lane, lo: cutlass.Constexpr, hi: cutlass.Constexpr,
                   commit: cutlass.Constexpr):
        """`issue_chunk` for this lane's operand rows [lo, hi) only (B rows, then A rows: the order
        of `lane_addresses`); commit: close the stage's cp.async group."""
        base = ring + stage * self.stage_bytes + lane * 16
        sbase = ring + stage * self.stage_bytes + self.lane_rows * 512 + lane * 4
        off = Int64(c) * CHUNK_BYTES
        soff = Int64(c) * (2 * SF_ATOM)
        for i in cutlass.range_constexpr(lo, min(hi, self.b_rows)):  # B: streamed once, L2 only
            decode.cp_async_16(base + i * 512, data[i] + off, Int32(16))
        for i in cutlass.range_constexpr(max(lo, self.b_rows), hi):
            # A: every CTA reads the same few rows; through L1 (.ca), CTAs on one SM share
            decode.cp_async_16_ca(base + i * 512, data[i] + off)
        for i in cutlass.range_constexpr(lo, hi):
            decode.cp_async_4(sbase + i * 128, scales[i] + soff)
        if cutlass.const_expr(commit):
            cute.arch.cp_async_commit_group()

    @cute.jit
    def read_chunk(self, buf, ring, stage, lane):
        """Ring stage `stage` -> the register buffer (4 data words per row, then the scales)."""
        base = ring + stage * self.stage_bytes + lane * 16
        sbase = ring + stage * self.stage_bytes + self.lane_rows * 512 + lane * 4
        for i in cutlass.range_constexpr(self.lane_rows):
            w = decode.ld_shared_v4_u32(base + i * 512)
            for j in cutlass.range_constexpr(4):
                buf[4 * i + j] = w[j]
        # the lane's two scale bytes (its groups 2 tq, 2 tq + 1) are bytes 2 (tq % 2) .. + 1 of
        # the row's scale word: one 16-bit load, no shift
        sbase += 2 * (lane % 2)
        for i in cutlass.range_constexpr(self.lane_rows):
            buf[4 * self.lane_rows + i] = decode.ld_shared_u16(sbase + i * 128)

    @cute.jit
    def mma_chunk(self, buf, acc, lane):
        """Decode one chunk from the register buffer and accumulate its 8 k16 steps."""
        s_lo = []
        s_hi = []
        for i in cutlass.range_constexpr(self.lane_rows):
            lo, hi = decode.skinny_scales(buf[4 * self.lane_rows + i])
            s_lo.append(lo)
            s_hi.append(hi)
        # one decode per row word: its 8 codes feed steps 2 wi (halfword 0) and 2 wi + 1;
        # B rows decoded one (B, row group) at a time to keep few decoded words live (each
        # accumulator still takes its steps in order: the same sums as step-major order)
        for wi in cutlass.range_constexpr(4):
            sc = s_lo if wi < 2 else s_hi  # steps 0-3: scale groups 2 tq; 4-7: 2 tq + 1
            # A rows g (and g + 8): the MMA's B fragments of n-tiles 0 (and 1)
            a_dec = [decode.decode_word(buf[4 * (self.b_rows + nt) + wi], sc[self.b_rows + nt])
                     for nt in range(self.n8)]
            for bi in cutlass.range_constexpr(self.num_b * self.row_groups):  # (B, row group)
                r0 = decode.decode_word(buf[4 * (2 * bi) + wi], sc[2 * bi])  # row g
                r1 = decode.decode_word(buf[4 * (2 * bi + 1) + wi], sc[2 * bi + 1])  # row g + 8
                for half in cutlass.range_constexpr(2):
                    af = (r0[2 * half], r1[2 * half], r0[2 * half + 1], r1[2 * half + 1])
                    for nt in cutlass.range_constexpr(self.n8):
                        bfrag = (a_dec[nt][2 * half], a_dec[nt][2 * half + 1])
                        base = (bi * self.n8 + nt) * 4
                        d = decode.mma_m16n8k16_f16(af, bfrag, [acc[base + v] for v in range(4)])
                        for v in cutlass.range_constexpr(4):
                            acc[base + v] = d[v]

    @cute.jit
    def mainloop(self, ring, data, scales, k, warp, lane):
        """This warp's share of K, chunks [w C / W, (w + 1) C / W) (w, W: the warp's index among,
        and the number of, the warps of the cluster's k_split CTAs), through its own ring of
        `ring_stages` cp.async stages (S - 1 chunks in flight while one is decoded; past the
        warp's last chunk the copies repeat it, so every iteration commits one group).  A
        warp with no chunks runs no MMA; its sums stay 0."""
        acc = cute.make_rmem_tensor(cute.make_layout(self.acc_count), Float32)
        acc.fill(0.0)
        buf = cute.make_rmem_tensor(cute.make_layout(self.buf_words), Int32)
        chunks = k // (2 * CHUNK_BYTES)
        # contiguous K ranges (warp-interleaved chunks measured 5-40% slower, H200)
        first = (warp * chunks) // self.total_warps
        n_mine = ((warp + 1) * chunks) // self.total_warps - first
        clamp = cutlass.max(n_mine - 1, 0)
        if cutlass.const_expr(self.pdl != ""):
            # B (the caller's promise: no earlier kernel of the stream writes it) before the
            # wait for the stream's previous kernel; A, and every load and store after these,
            # once that kernel has completed and its writes are visible
            for j in cutlass.range_constexpr(self.ring_stages - 1):
                self.issue_rows(ring, data, scales, first + cutlass.min(j, clamp), j, lane, 0, self.b_rows, False)
            cute.arch.griddepcontrol_wait()
            for j in cutlass.range_constexpr(self.ring_stages - 1):
                self.issue_rows(ring, data, scales, first + cutlass.min(j, clamp), j, lane,
                                self.b_rows, self.lane_rows, True)
        else:
            for j in cutlass.range_constexpr(self.ring_stages - 1):
                self.issue_chunk(ring, data, scales, first + cutlass.min(j, clamp), j, lane)
        for i in cutlass.range(0, n_mine, 1, unroll=1):
            cute.arch.cp_async_wait_group(self.ring_stages - 2)
            self.issue_chunk(ring, data, scales, first + cutlass.min(i + self.ring_stages - 1, clamp),
                             (i + self.ring_stages - 1) % self.ring_stages, lane)
            self.read_chunk(buf, ring, i % self.ring_stages, lane)
            self.mma_chunk(buf, acc, lane)
        return acc

    # ------------------------------------------------------------------ launch, K split

    def launch(self, launcher, grid_xy, stream):
        """Launch `launcher` (the kernel's launch object) on grid (x, y) of CTAs; with k_split > 1
        each grid point is a cluster of k_split CTAs along z (exp. 165; grouped: exp. 168)."""
        # cluster=None (the DSL's default) keeps the unsplit launch a plain, non-cluster one.
        cluster = [1, 1, self.k_split] if self.k_split > 1 else None
        launcher.launch(grid=[*grid_xy, self.k_split], block=[self.threads, 1, 1], cluster=cluster,
                        stream=stream, use_pdl=self.pdl != "")

    @cute.jit
    def release_dependents(self, point: cutlass.Constexpr):
        """Where the config's pdl says (`point`: "loop", after this CTA's main loop; "sums", after
        the partial sums are in shared memory, before the epilogue): the stream's next kernel may
        start once every CTA got here (its griddepcontrol.wait still orders its reads after this
        kernel's end).  Not at entry: the next grid's CTAs then landed beside this one's and ran
        up to 1.6x slower; "loop" lost 4-20% at 80-256 CTAs of 4 warps, where "sums" won above 132
        CTAs (exp. 170; configs.sm90_dual_skinny picks the place)."""
        if cutlass.const_expr(self.pdl == point):
            cute.arch.griddepcontrol_launch_dependents()

    @cute.jit
    def cluster_start(self):
        """With k_split > 1, at kernel entry (before any CTA of the cluster can store into
        another's shared memory): arrive on the cluster barrier whose wait `partial_sums` makes
        before its remote stores, so every CTA's shared memory is live by then."""
        if cutlass.const_expr(self.k_split > 1):
            cute.arch.cluster_arrive_relaxed()

    @cute.jit
    def partial_sums(self, red, ring, data, scales, k, warp, lane, rank):
        """This warp's share of K (`mainloop`; with k_split > 1 its share among the cluster's
        warps, `rank` the CTA's place in the cluster), then its sums into red (`stash_partials`:
        rank 0's red with k_split > 1).  After it the CTA (with k_split > 1: rank 0 only) runs
        the epilogue."""
        if cutlass.const_expr(self.k_split == 1):
            acc = self.mainloop(ring, data, scales, k, warp, lane)
            self.release_dependents("loop")
            self.stash_partials(acc, red, warp, lane)
        else:
            kw = rank * self.k_warps + warp  # (the warp's index among the cluster's warps)
            acc = self.mainloop(ring, data, scales, k, kw, lane)
            self.release_dependents("loop")
            cute.arch.cluster_wait()
            self.stash_partials(acc, red, kw, lane)
        self.release_dependents("sums")

    # ------------------------------------------------------------------ partial sums

    @cute.jit
    def warp_sum(self, red, mat, tok, row):
        """sum over the warps of red[(w, mat, tok, row)], in warp order (the epilogues' value of
        output (token, row) of B matrix `mat`, before the rescale)."""
        x = Float32(0.0)
        for w in cutlass.range_constexpr(self.total_warps):
            x = x + red[(w, mat, tok, row)]
        return x

    @cute.jit
    def store_pairs(self, red, mC2, m, col0, tidx):
        """The epilogue's task loop, shared by both skinny kernels: per (token, row pair) with
        token < m, one fp16 pair of C (`pair_value`, the kernel's own) at mC2[(token, col0 +
        pair)] ((M, N / 2) int32 view; consecutive threads: consecutive columns)."""
        half = self.rows // 2
        tasks = self.tokens * half
        for it in cutlass.range_constexpr((tasks + self.threads - 1) // self.threads):
            t = tidx + it * self.threads
            tok = t // half
            rp = t % half
            if t < tasks:
                if tok < m:
                    mC2[(tok, col0 + rp)] = self.pair_value(red, tok, rp)

    @cute.jit
    def stash_partials(self, acc, red, warp, lane):
        """This warp's sums -> red[(warp, B, token, row)], then a CTA barrier; the epilogue
        sums red over the warps.  With k_split CTAs per cluster `warp` is the warp's index in the
        cluster, the sums go to rank 0's red (distributed shared memory; the kernel's cluster
        barrier at its start made every CTA's shared memory live), and a cluster barrier
        (release / acquire) orders them before rank 0's epilogue."""
        g = lane // 4
        tq = lane % 4
        red_base = red.iterator.toint()
        for bi in cutlass.range_constexpr(self.num_b * self.row_groups):
            mat = bi // self.row_groups
            rg = bi % self.row_groups
            for nt in cutlass.range_constexpr(self.n8):
                for v in cutlass.range_constexpr(4):
                    # m16n8 accumulator: c0, c1 row g, columns 2 tq, 2 tq + 1; c2, c3 row g + 8
                    row = rg * 16 + g + (v // 2) * 8
                    tok = nt * 8 + 2 * tq + v % 2
                    val = acc[(bi * self.n8 + nt) * 4 + v]
                    if cutlass.const_expr(self.k_split == 1):
                        red[(warp, mat, tok, row)] = val
                    else:
                        decode.st_cluster_f32(red_base + 4 * red.layout((warp, mat, tok, row)), 0, val)
        if cutlass.const_expr(self.k_split == 1):
            cute.arch.sync_threads()
        else:
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()
