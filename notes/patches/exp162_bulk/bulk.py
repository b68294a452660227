"""Exp. 162 (experiment code, not shipped): the dual skinny kernel with its B rows loaded by
per-row bulk copies (`cp.async.bulk` + one mbarrier per warp stage) instead of per-lane 16-byte
cp.async.  Why: exp. 161 -- with decode and MMA removed the loop's loads alone take 93-97% of the
shipped kernel's time, 1.2-2.6x the copy floor, so the loads, not the decode, hold the small
shapes.  A stage now covers CPS chunks (CPS x 64 bytes of each B row, one bulk copy per row,
lane L copying rows L, L + 32); A rows and every row's scale words stay per-lane cp.async
(lane-private slots, per chunk).  B rows sit row-major in the stage, row stride CPS x 64
(+ 64 when that is a multiple of 128) so that a quarter-warp's 16-byte reads of rows g, g + 1
hit disjoint banks.  MODE "loads": decode and MMA replaced by an XOR fold (as exp. 161)."""
import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
from cutlass import Float32, Int32, Int64
from cutlass.cutlass_dsl import dsl_user_op

from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90.dual_skinny import Sm90DualSkinnyKernel
from nvfp4gemm.sm90.skinny import CHUNK_BYTES, SF_ATOM, SF_ATOM_K

CPS = 4
MODE = "full"


def _a(text, ops, cons):
    return lambda *vals, loc=None, ip=None: decode._asm(None, [t(v).ir_value(loc=loc, ip=ip) for t, v in zip(ops, vals)],
                                                        text, cons, True, loc=loc, ip=ip)


@dsl_user_op
def mbar_init(addr, count, *, loc=None, ip=None):
    _a("mbarrier.init.shared::cta.b64 [$0], $1;", (Int32, Int32), "r,r")(addr, count, loc=loc, ip=ip)


@dsl_user_op
def mbar_init_fence(*, loc=None, ip=None):
    decode._asm(None, [], "fence.mbarrier_init.release.cluster;\n\tfence.proxy.async.shared::cta;", "", True, loc=loc, ip=ip)


@dsl_user_op
def mbar_expect_tx(addr, tx, *, loc=None, ip=None):
    _a("mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", (Int32, Int32), "r,r")(addr, tx, loc=loc, ip=ip)


@dsl_user_op
def mbar_wait(addr, phase, *, loc=None, ip=None):
    _a("{\n\t.reg .pred P1;\n\tLAB_WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 P1, [$0], $1;\n\t"
       "@P1 bra DONE;\n\tbra LAB_WAIT;\n\tDONE:\n\t}", (Int32, Int32), "r,r")(addr, phase, loc=loc, ip=ip)


@dsl_user_op
def bulk_g2s(dst, src, nbytes, mbar, *, loc=None, ip=None):
    _a("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];",
       (Int32, Int64, Int32, Int32), "r,l,r,r")(dst, src, nbytes, mbar, loc=loc, ip=ip)


class Sm90DualSkinnyBulk(Sm90DualSkinnyKernel):
    def __init__(self, config):
        super().__init__(config)
        self.cps = CPS
        self.b_rows_total = self.num_b * self.rows  # B rows of the CTA, all B matrices
        assert self.b_rows_total % 32 == 0
        self.rows_per_lane = self.b_rows_total // 32
        self.row_stride = CPS * CHUNK_BYTES + (CHUNK_BYTES if CPS % 2 == 0 else 0)
        b_bytes = self.b_rows_total * self.row_stride
        self.a_off = (b_bytes + 127) // 128 * 128
        self.s_off = self.a_off + CPS * self.a_rows * 512
        self.bulk_stage = (self.s_off + CPS * self.lane_rows * 128 + 127) // 128 * 128
        self.warp_bytes = self.ring_stages * self.bulk_stage + 8 * self.ring_stages
        self.warp_bytes = (self.warp_bytes + 127) // 128 * 128
        self.smem_total = self.k_warps * self.warp_bytes + self.k_warps * self.num_b * self.tokens * self.rows * 4

    @cute.jit
    def shared_buffers(self, warp):
        smem = utils.SmemAllocator()
        red = smem.allocate_tensor(Float32, cute.make_layout((self.k_warps, self.num_b, self.tokens, self.rows)), 16)
        rings = smem.allocate_tensor(cutlass.Uint8, cute.make_layout(self.k_warps * self.warp_bytes), 128)
        return red, rings.iterator.toint() + warp * self.warp_bytes

    @cute.jit
    def lane_addresses(self, b_srcs, a_addr, sfa_addr, m, n, k, blk, bl, lane):
        """(bulk rows of this lane: B row lane + 32 t's chunk-0 address; then A rows as before),
        scales as before."""
        data0, scales = Sm90DualSkinnyKernel.lane_addresses(self, b_srcs, a_addr, sfa_addr, m, n, k, blk, bl, lane)
        kh = Int64(k // 2)
        rows = []
        for t in cutlass.range_constexpr(self.rows_per_lane):
            i = lane + 32 * t
            b = i // self.rows
            r = blk * self.rows + i % self.rows
            base = cutlass.select_(b == 0, b_srcs[0][0], b_srcs[1][0])
            rows.append(base + (Int64(bl) * Int64(n) + Int64(r)) * kh)
        return rows + data0[self.b_rows:], scales

    @cute.jit
    def issue_stage(self, ring, mbar, data, scales, first, n_mine, n_st, j, slot, lane):
        base = ring + slot * self.bulk_stage
        bar = mbar + slot * 8
        if j < n_st:
            c0 = first + j * self.cps
            nch = cutlass.min(self.cps, n_mine - j * self.cps)
            if lane == 0:
                mbar_expect_tx(bar, self.b_rows_total * CHUNK_BYTES * nch)
            cute.arch.sync_warp()
            for t in cutlass.range_constexpr(self.rows_per_lane):
                bulk_g2s(base + (lane + 32 * t) * self.row_stride, data[t] + Int64(c0) * CHUNK_BYTES,
                         nch * CHUNK_BYTES, bar)
            for cc in cutlass.range_constexpr(self.cps):
                if cc < nch:
                    c = Int64(c0 + cc)
                    for i in cutlass.range_constexpr(self.a_rows):
                        decode.cp_async_16_ca(base + self.a_off + (cc * self.a_rows + i) * 512 + lane * 16,
                                              data[self.rows_per_lane + i] + c * CHUNK_BYTES)
                    for i in cutlass.range_constexpr(self.lane_rows):
                        decode.cp_async_4(base + self.s_off + (cc * self.lane_rows + i) * 128 + lane * 4,
                                          scales[i] + c * (2 * SF_ATOM))
        cute.arch.cp_async_commit_group()

    @cute.jit
    def read_bulk(self, buf, base, cc, lane):
        g = lane // 4
        tq = lane % 4
        for i in cutlass.range_constexpr(self.b_rows):
            b = i // (self.row_groups * 2)
            rg = (i // 2) % self.row_groups
            h = i % 2
            row = b * self.rows + rg * 16 + h * 8
            w = decode.ld_shared_v4_u32(base + (row + g) * self.row_stride + cc * CHUNK_BYTES + tq * 16)
            for jj in cutlass.range_constexpr(4):
                buf[4 * i + jj] = w[jj]
        for i in cutlass.range_constexpr(self.a_rows):
            w = decode.ld_shared_v4_u32(base + self.a_off + (cc * self.a_rows + i) * 512 + lane * 16)
            for jj in cutlass.range_constexpr(4):
                buf[4 * (self.b_rows + i) + jj] = w[jj]
        sbase = base + self.s_off + cc * self.lane_rows * 128 + lane * 4 + 2 * (lane % 2)
        for i in cutlass.range_constexpr(self.lane_rows):
            buf[4 * self.lane_rows + i] = decode.ld_shared_u16(sbase + i * 128)

    @cute.jit
    def mainloop(self, ring, data, scales, k, warp, lane):
        acc = cute.make_rmem_tensor(cute.make_layout(self.acc_count), Float32)
        acc.fill(0.0)
        buf = cute.make_rmem_tensor(cute.make_layout(self.buf_words), Int32)
        S = self.ring_stages
        chunks = k // (2 * CHUNK_BYTES)
        first = (warp * chunks) // self.k_warps
        n_mine = ((warp + 1) * chunks) // self.k_warps - first
        n_st = (n_mine + self.cps - 1) // self.cps
        mbar = ring + S * self.bulk_stage
        if lane == 0:
            for s in cutlass.range_constexpr(S):
                mbar_init(mbar + 8 * s, 1)
            mbar_init_fence()
        cute.arch.sync_warp()
        for j in cutlass.range_constexpr(S - 1):
            self.issue_stage(ring, mbar, data, scales, first, n_mine, n_st, Int32(j), Int32(j), lane)
        for j in cutlass.range(0, n_st, 1, unroll=1):
            slot = j % S
            cute.arch.cp_async_wait_group(S - 2)
            mbar_wait(mbar + slot * 8, (j // S) % 2)
            self.issue_stage(ring, mbar, data, scales, first, n_mine, n_st, j + S - 1, (j + S - 1) % S, lane)
            base = ring + slot * self.bulk_stage
            nch = cutlass.min(self.cps, n_mine - j * self.cps)
            for cc in cutlass.range_constexpr(self.cps):
                if cc < nch:
                    self.read_bulk(buf, base, cc, lane)
                    if cutlass.const_expr(MODE == "loads"):
                        x = buf[0]
                        for w in cutlass.range_constexpr(1, self.buf_words):
                            x = x ^ buf[w]
                        acc[0] = acc[0] + x.to(Float32)
                    else:
                        self.mma_chunk(buf, acc, lane)
        return acc
