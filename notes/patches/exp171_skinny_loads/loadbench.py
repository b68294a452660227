"""Exp. 171d: which global read pattern reaches the copy rate (measurement, not kept code).
A load-only kernel over an (N, RB) byte matrix (RB = K / 2, a B operand's packed rows): CTA b owns
rows [32 b, 32 b + 32) (the dual skinny 16-row tile's B1 + B2 rows), its W warps split the row
bytes into contiguous ranges (as Sm90SkinnyCore.mainloop), each warp streams its range through a
private cp.async ring of S stages.  Per stage a warp copies L * 16 bytes of each of its 32 rows
with L warp-wide 16-byte cp.async.cg (lane l: row 32 / L * i + l // L, bytes 16 (l % L) of the
stage's columns), so one instruction reads L * 16 contiguous bytes of each of 32 / L rows:
L = 4 is the skinny kernel's pattern (64 bytes of 8 rows), L = 32 one row's 512 bytes.
`linear`: the whole matrix as one array, warp-stride 512-byte pieces (a read-only copy).
Each stage is read back (one 16-byte shared load per lane) and XOR-folded into a per-thread
word stored at the end, so no load is dead.
`python3 loadbench.py` (writes $OUT/exp171d.json)."""
import json, os, sys, statistics
sys.path.insert(0, "benchmarks")
import torch
import nvfp4gemm  # noqa: F401  (before cutlass)
import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
from cutlass import Int32, Int64
from cutlass.cute.runtime import make_ptr
import timing as T
from nvfp4gemm.sm90 import decode


class LoadBench:
    def __init__(self, lanes_per_row: int, stages: int, warps: int, linear: bool = False, pair: int = 1,
                 pair_outer: bool = False, interleave: bool = False):
        self.L, self.S, self.W, self.linear = lanes_per_row, stages, warps, linear
        self.P, self.pair_outer = pair, pair_outer  # chunks per stage, their copies back to back (171e)
        self.interleave = interleave
        self.stage_bytes = 32 * 16 * lanes_per_row * pair  # 32 rows x P x L x 16 bytes

    @cute.jit
    def __call__(self, b_ptr: cute.Pointer, out_ptr: cute.Pointer, rows: Int32, rb: Int32, stream: cuda.CUstream):
        out = cute.make_tensor(out_ptr, cute.make_layout(rows * 32 * self.W // 32))
        ctas = rows // 32
        self.kernel(b_ptr, out, rb).launch(grid=[ctas, 1, 1], block=[32 * self.W, 1, 1], stream=stream)

    @cute.kernel
    def kernel(self, b_ptr: cute.Pointer, out: cute.Tensor, rb: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bx, _, _ = cute.arch.block_idx()
        nbx, _, _ = cute.arch.grid_dim()
        warp = cute.arch.make_warp_uniform(tidx // 32)
        lane = tidx % 32
        smem = utils.SmemAllocator()
        rings = smem.allocate_tensor(cutlass.Uint8, cute.make_layout(self.W * self.S * self.stage_bytes), 16)
        ring = rings.iterator.toint() + warp * (self.S * self.stage_bytes)
        base = b_ptr.toint()
        acc = Int32(0)
        # per-lane source address of instruction i at stage-column 0, and the per-stage step
        addrs = []
        if cutlass.const_expr(self.linear):
            # warp g of the grid reads 512-byte pieces g, g + G, ... of the whole matrix
            gw = Int64(bx * self.W + warp)
            step = Int64(nbx * self.W) * 512 * self.L
            n_st = (Int64(nbx) * 32 * Int64(rb)) // (Int64(nbx * self.W) * 512 * self.L)
            for i in cutlass.range_constexpr(self.L):
                addrs.append(base + (gw * self.L + i) * 512 + Int64(lane * 16))
            n_iter = Int32(n_st)
            first = Int64(0)
        else:
            per = 32 // self.L
            chunk = 16 * self.L * self.P  # bytes of a row per stage
            n_chunks = rb // chunk
            first_c = (warp * n_chunks) // self.W
            n_iter = ((warp + 1) * n_chunks) // self.W - first_c
            if cutlass.const_expr(self.interleave):  # 171g: warp w takes stages w, w + W, ...
                first_c = warp
                n_iter = (n_chunks - warp + self.W - 1) // self.W
            for i in cutlass.range_constexpr(self.L):
                r = bx * 32 + per * i + lane // self.L
                addrs.append(base + Int64(r) * Int64(rb) + Int64(first_c * chunk) + Int64(16 * (lane % self.L)))
            step = Int64(chunk * self.W) if self.interleave else Int64(chunk)
            first = Int64(0)
        clamp = cutlass.max(n_iter - 1, 0)
        for j in cutlass.range_constexpr(self.S - 1):
            off = Int64(cutlass.min(j, clamp)) * step
            self.issue(ring + j * self.stage_bytes, addrs, off, lane)
        for it in cutlass.range(0, n_iter, 1, unroll=1):
            cute.arch.cp_async_wait_group(self.S - 2)
            nxt = cutlass.min(it + self.S - 1, clamp)
            st = (it + self.S - 1) % self.S
            off = Int64(nxt) * step
            self.issue(ring + st * self.stage_bytes, addrs, off, lane)
            cur = it % self.S
            for i in cutlass.range_constexpr(self.L * self.P):
                w = decode.ld_shared_v4_u32(ring + cur * self.stage_bytes + i * 512 + lane * 16)
                acc = acc ^ w[0] ^ w[1] ^ w[2] ^ w[3]
        cute.arch.cp_async_wait_group(0)
        out[bx * 32 * self.W + tidx] = acc


    @cute.jit
    def issue(self, dst, addrs, off, lane):
        """One stage's copies: per instruction i (L of them) and chunk p (P), 16 bytes per lane."""
        if cutlass.const_expr(self.pair_outer):
            for p in cutlass.range_constexpr(self.P):
                for i in cutlass.range_constexpr(self.L):
                    decode.cp_async_16(dst + (p * self.L + i) * 512 + lane * 16, addrs[i] + off + p * 16 * self.L,
                                       Int32(16))
        else:
            for i in cutlass.range_constexpr(self.L):
                for p in cutlass.range_constexpr(self.P):
                    decode.cp_async_16(dst + (p * self.L + i) * 512 + lane * 16, addrs[i] + off + p * 16 * self.L,
                                       Int32(16))
        cute.arch.cp_async_commit_group()


VARIANTS = [  # (name, L, S, W, linear[, pair, pair_outer])
    ("rows8x64B_S3", 4, 3, 4, False),   # the skinny kernel's pattern, 2 chunks in flight per warp
    ("rows8x64B_S5", 4, 5, 4, False),
    ("rows4x128B_S3", 8, 3, 4, False),
    ("rows2x256B_S2", 16, 2, 4, False),
    ("row512B_S2", 32, 2, 4, False),
    ("linear_S3", 4, 3, 4, True),
    # 171e: the skinny pattern (64 bytes of 8 rows per instruction), P chunks per stage
    ("rows8x64B_P2_S2", 4, 2, 4, False, 2, False),  # chunk pairs, a row group's 2 copies adjacent
    ("rows8x64B_P2_S3", 4, 3, 4, False, 2, False),
    ("rows8x64B_P2o_S2", 4, 2, 4, False, 2, True),  # chunk pairs, chunk-major order
    ("rows8x64B_P2o_S3", 4, 3, 4, False, 2, True),
    ("rows8x64B_P4_S2", 4, 2, 4, False, 4, False),
    # 171g: the skinny pattern, warps interleaved over the row's chunks
    ("rows8x64B_S3_il", 4, 3, 4, False, 1, False, True),
    ("rows8x64B_S2_il", 4, 2, 4, False, 1, False, True),
    ("rows8x64B_S3_il_W2", 4, 3, 2, False, 1, False, True),
]
SHAPES = [(28672 * 2, 4096), (7168 * 2, 16384), (4096 * 2, 3584), (14336 * 2, 2048), (2048 * 2, 3584)]  # (rows, RB)

if __name__ == "__main__":
    timer = T.Timer(30)
    ceil = T.measure_ceilings(timer)
    out = {"device": torch.cuda.get_device_name(), "ceilings": ceil, "rows": []}
    print(json.dumps(out), flush=True)
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    fns = {}
    for rows, rb in SHAPES:
        b = torch.randint(0, 255, (rows, rb), dtype=torch.uint8, device="cuda")
        res = {}
        for name, L, S, W, lin, *pp in VARIANTS:
            P, po, il = (pp + [1, False, False][len(pp):])[:3]
            if (rb // (16 * L * P)) < W:
                continue
            o = torch.zeros(rows * W, dtype=torch.int32, device="cuda")
            bp = make_ptr(cutlass.Uint8, b.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
            op = make_ptr(cutlass.Int32, o.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
            key = (L, S, W, lin, P, po, il)
            try:
                if key not in fns:
                    fns[key] = cute.compile(LoadBench(L, S, W, lin, P, po, il), bp, op, Int32(rows), Int32(rb), stream)
                f = fns[key]
                ts = [timer(lambda: f(bp, op, Int32(rows), Int32(rb), stream)) for _ in range(3)]
            except Exception as e:  # noqa: BLE001
                print(json.dumps({"rows": rows, "rb": rb, "variant": name, "error": str(e)[:160]}), flush=True)
                torch.cuda.synchronize()
                continue
            us = min(ts)
            res[name] = round(us, 2)
            out["rows"].append({"rows": rows, "rb": rb, "variant": name, "us": ts,
                                "tbps": rows * rb / (us * 1e-6) / 1e12})
        mb = rows * rb / 1e6
        print(json.dumps({"rows": rows, "rb": rb, "MB": round(mb, 1),
                          **{k: f"{v} ({rows * rb / (v * 1e-6) / 1e12:.2f})" for k, v in res.items()}}), flush=True)
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp171d.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
