"""Exp. 171: what inside the skinny kernel's loads costs (measurement, not kept code).
Exp. 161 found the loads alone take 92-97% of the dual skinny kernel's time, at 51-60% of DRAM
peak; exps. 157/158/162/163 ruled out ring depth, warps per CTA, line-wide and bulk row reads
and the K order.  Left untested (exp. 158's candidates): the copies that are not B data -- per
chunk and lane one 4-byte cp.async.ca per operand row for the scales (as many instructions as
the data copies) and the A rows' 16-byte copies through L1.
Trace-time variants of `Sm90SkinnyCore.mainloop` / `issue_rows` (the rule's config per shape):
  full       -- the shipped loop (checked against the reference);
  loads      -- exp. 161's loads-only loop (ring and shared reads, buffer XOR-folded);
  loads_nosf -- loads without any scale copy (B and A);
  loads_noa  -- loads without A's data and scale copies;
  loads_b    -- B data copies only;
  full_nosf  -- the full kernel without scale copies (results wrong: stale scale slots);
  empty      -- no main loop (launch, addresses, partial sums, epilogue).
171g: "<mode>_il", warp-interleaved chunks (warp w: chunks w, w + W, ...).
171c: "<mode>_l2_<64|128|256>", the B copies with that L2 prefetch-size hint.
171b (EXP171_CFG, EXP171_MODES, argv shapes): the same B bytes over fewer, longer-lived CTAs.
`python3 exp171.py` (writes $OUT/exp171.json)."""
import dataclasses, json, os, sys, tempfile, time
sys.path.insert(0, "benchmarks")
import torch
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32, Int64
from cutlass.cutlass_dsl import dsl_user_op
import timing as T
import configs
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90 import skinny as S

MODE = "full"


def flags():
    base = MODE.split("_l2_")[0].removesuffix("_il")  # "<mode>_l2_<bytes>": B copies with an L2 prefetch-size hint (171c)
    return dict(loads=base.startswith("loads"), sf=base not in ("loads_nosf", "loads_b", "full_nosf"),
                a=base not in ("loads_noa", "loads_b"), l2=int(MODE.split("_l2_")[1]) if "_l2_" in MODE else 0)


@dsl_user_op
def cp_async_16_l2(dst_smem, src_gmem, hint: int, *, loc=None, ip=None):
    """cp.async.cg 16 bytes with the .L2::<hint>B prefetch-size qualifier."""
    decode._asm(None, [Int32(dst_smem).ir_value(loc=loc, ip=ip), Int64(src_gmem).ir_value(loc=loc, ip=ip)],
                f"cp.async.cg.shared.global.L2::{hint}B [$0], [$1], 16;", "r,l", True, loc=loc, ip=ip)


@cute.jit
def issue_rows_ablated(self, ring, data, scales, c, stage, lane, lo: cutlass.Constexpr, hi: cutlass.Constexpr,
                       commit: cutlass.Constexpr):
    f = flags()
    base = ring + stage * self.stage_bytes + lane * 16
    sbase = ring + stage * self.stage_bytes + self.lane_rows * 512 + lane * 4
    off = Int64(c) * S.CHUNK_BYTES
    soff = Int64(c) * (2 * S.SF_ATOM)
    for i in cutlass.range_constexpr(lo, min(hi, self.b_rows)):
        if cutlass.const_expr(f["l2"]):
            cp_async_16_l2(base + i * 512, data[i] + off, f["l2"])
        else:
            decode.cp_async_16(base + i * 512, data[i] + off, Int32(16))
    if cutlass.const_expr(f["a"]):
        for i in cutlass.range_constexpr(max(lo, self.b_rows), hi):
            decode.cp_async_16_ca(base + i * 512, data[i] + off)
    if cutlass.const_expr(f["sf"]):
        for i in cutlass.range_constexpr(lo, hi if f["a"] else min(hi, self.b_rows)):
            decode.cp_async_4(sbase + i * 128, scales[i] + soff)
    if cutlass.const_expr(commit):
        cute.arch.cp_async_commit_group()


@cute.jit
def mainloop_ablated(self, ring, data, scales, k, warp, lane):
    f = flags()
    acc = cute.make_rmem_tensor(cute.make_layout(self.acc_count), Float32)
    acc.fill(0.0)
    buf = cute.make_rmem_tensor(cute.make_layout(self.buf_words), Int32)
    chunks = k // (2 * S.CHUNK_BYTES)
    first = (warp * chunks) // self.total_warps
    n_mine = ((warp + 1) * chunks) // self.total_warps - first
    if cutlass.const_expr(MODE.endswith("_il")):
        # 171g: warp-interleaved chunks (warp w: chunks w, w + W, ...), so at one iteration the
        # CTA's warps ask for consecutive chunks -- both halves of each 128-byte line -- together
        first = warp
        n_mine = (chunks - warp + self.total_warps - 1) // self.total_warps
    if cutlass.const_expr(MODE == "empty"):
        n_mine = 0
    clamp = cutlass.max(n_mine - 1, 0)
    stride = self.total_warps if MODE.endswith("_il") else 1
    if cutlass.const_expr(MODE != "empty"):
        for j in cutlass.range_constexpr(self.ring_stages - 1):
            self.issue_chunk(ring, data, scales, first + cutlass.min(j, clamp) * stride, j, lane)
    for i in cutlass.range(0, n_mine, 1, unroll=1):
        cute.arch.cp_async_wait_group(self.ring_stages - 2)
        self.issue_chunk(ring, data, scales, first + cutlass.min(i + self.ring_stages - 1, clamp) * stride,
                         (i + self.ring_stages - 1) % self.ring_stages, lane)
        self.read_chunk(buf, ring, i % self.ring_stages, lane)
        if cutlass.const_expr(f["loads"]):
            x = buf[0]
            for w in cutlass.range_constexpr(1, self.buf_words):
                x = x ^ buf[w]
            acc[0] = acc[0] + x.to(Float32)
        else:
            self.mma_chunk(buf, acc, lane)
    cute.arch.cp_async_wait_group(0)
    return acc


S.Sm90SkinnyCore.mainloop = mainloop_ablated
S.Sm90SkinnyCore.issue_rows = issue_rows_ablated

SHAPES = [(1, 2048, 7168), (16, 2048, 7168), (16, 7168, 2048), (1, 4096, 7168), (16, 4096, 7168),
          (16, 14336, 4096), (16, 28672, 8192)]
MODES = os.environ.get("EXP171_MODES", "full,loads,loads_nosf,loads_noa,loads_b,full_nosf").split(",")
# EXP171_CFG="kw,stages": every shape on 16x16 tiles with that many warps and stages (171b: the same
# bytes of B over fewer, longer-lived CTAs)
FORCE = os.environ.get("EXP171_CFG")


def compile_mode(mode, cfg, shape):
    global MODE
    MODE = mode
    harness._CACHE.clear()
    return harness.compile_kernel("dual", "sm_90a", cfg, shape, dump_dir=tempfile.mkdtemp())


if __name__ == "__main__":
    shapes = SHAPES if len(sys.argv) < 2 else [tuple(int(v) for v in s.split("x")) for s in sys.argv[1].split(",")]
    timer = T.Timer(30)
    ceil = T.measure_ceilings(timer)
    out = {"device": torch.cuda.get_device_name(), "ceilings": ceil, "rows": []}
    print(json.dumps(out), flush=True)
    t0 = time.time()
    for m, n, k in shapes:
        shape = (m, n, k, 1)
        cfg = configs.sm90_dual_skinny(shape, static_b=False)
        if FORCE:
            kw, st = (int(v) for v in FORCE.split(","))
            cfg = dataclasses.replace(cfg, mma_tile_mn=(16, 16), k_warps=kw, ab_stages=st, k_split=1)
        data = R.generate_input(*shape, 1711, device="cuda")
        mod, _ = harness.kernel_module("dual", "sm_90a", cfg)
        args = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        kern = {mode: compile_mode(mode, cfg, shape) for mode in MODES}
        data[-1].fill_(float("nan"))
        kern["full"].fn(*args)
        torch.cuda.synchronize()
        ok, msg = R.check_implementation(data, data[-1])
        times = {mode: [] for mode in MODES}
        for rnd in range(3):
            for mode in (MODES if rnd % 2 == 0 else MODES[::-1]):
                times[mode].append(timer(lambda: kern[mode].fn(*args)))
        _f, byts = T.flops_bytes("dual", shape)
        b_bytes = 2 * n * k // 2
        row = {"shape": list(shape), "config": cfg.short(), "ok": ok,
               "floor_us": byts / (ceil["copy_tbps"] * 1e12) * 1e6,
               "b_floor_us": b_bytes / (ceil["copy_tbps"] * 1e12) * 1e6,
               "regs": {mo: kern[mo].registers for mo in MODES},
               "us": {mo: min(v) for mo, v in times.items()}, "all": times}
        out["rows"].append(row)
        print(json.dumps({"s": shape, "cfg": cfg.short(), "ok": ok, "floor": round(row["floor_us"], 2),
                          **{mo: round(min(v), 2) for mo, v in times.items()},
                          "regs": row["regs"], "t": round(time.time() - t0)}), flush=True)
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), os.environ.get("EXP171_NAME", "exp171") + ".json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
