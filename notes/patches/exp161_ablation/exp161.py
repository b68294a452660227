"""Exp. 161: where the small dual skinny launches spend their time (measurement, not kept code).
Trace-time ablations of `Sm90SkinnyCore.mainloop` (the rule's config per shape, all else equal):
  full     -- the shipped loop (checked against the reference);
  loads    -- the same cp.async ring and shared-memory reads, no decode and no MMA (the buffer
              words XOR-folded into one accumulator so nothing is dead);
  compute  -- the prologue's copies only, then the loop decodes and multiplies the ring's stale
              stages (no global loads in the loop: results wrong);
  empty    -- no main loop (launch, addresses, partial sums, epilogue).
Plus each shape's copy floor (bytes / the copy bandwidth measured in this run).
`python3 exp161.py` (writes $OUT/exp161.json)."""
import json, os, sys, tempfile, time
sys.path.insert(0, "benchmarks")
import torch
import cutlass
import cutlass.cute as cute
from cutlass import Float32, Int32
import timing as T
import configs
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.sm90 import skinny as S

MODE = "full"


@cute.jit
def mainloop_ablated(self, ring, data, scales, k, warp, lane):
    acc = cute.make_rmem_tensor(cute.make_layout(self.acc_count), Float32)
    acc.fill(0.0)
    buf = cute.make_rmem_tensor(cute.make_layout(self.buf_words), Int32)
    chunks = k // (2 * S.CHUNK_BYTES)
    first = (warp * chunks) // self.k_warps
    n_mine = ((warp + 1) * chunks) // self.k_warps - first
    if cutlass.const_expr(MODE == "empty"):
        n_mine = 0
    clamp = cutlass.max(n_mine - 1, 0)
    if cutlass.const_expr(MODE != "empty"):
        for j in cutlass.range_constexpr(self.ring_stages - 1):
            self.issue_chunk(ring, data, scales, first + cutlass.min(j, clamp), j, lane)
    for i in cutlass.range(0, n_mine, 1, unroll=1):
        cute.arch.cp_async_wait_group(self.ring_stages - 2)
        if cutlass.const_expr(MODE == "compute"):
            cute.arch.cp_async_commit_group()
        else:
            self.issue_chunk(ring, data, scales, first + cutlass.min(i + self.ring_stages - 1, clamp),
                             (i + self.ring_stages - 1) % self.ring_stages, lane)
        self.read_chunk(buf, ring, i % self.ring_stages, lane)
        if cutlass.const_expr(MODE == "loads"):
            x = buf[0]
            for w in cutlass.range_constexpr(1, self.buf_words):
                x = x ^ buf[w]
            acc[0] = acc[0] + x.to(Float32)
        else:
            self.mma_chunk(buf, acc, lane)
    cute.arch.cp_async_wait_group(0)
    return acc


S.Sm90SkinnyCore.mainloop = mainloop_ablated

SHAPES = [(1, 2048, 7168), (16, 2048, 7168), (8, 1024, 4096), (16, 3072, 1536), (16, 7168, 2048),
          (1, 4096, 7168), (16, 4096, 7168), (1, 14336, 4096), (16, 14336, 4096), (16, 12288, 3072),
          (1, 28672, 8192), (16, 28672, 8192)]
MODES = ["full", "loads", "compute", "empty"]


def compile_mode(mode, cfg, shape):
    global MODE
    MODE = mode
    harness._CACHE.clear()
    return harness.compile_kernel("dual", "sm_90a", cfg, shape, dump_dir=tempfile.mkdtemp())


if __name__ == "__main__":
    timer = T.Timer(30)
    ceil = T.measure_ceilings(timer)
    out = {"device": torch.cuda.get_device_name(), "ceilings": ceil, "rows": []}
    print(json.dumps(out), flush=True)
    t0 = time.time()
    for m, n, k in SHAPES:
        shape = (m, n, k, 1)
        cfg = configs.sm90_dual_skinny(shape)
        data = R.generate_input(*shape, 1561, device="cuda")
        mod, _ = harness.kernel_module("dual", "sm_90a", cfg)
        args = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        kern = {}
        for mode in MODES:
            ck = compile_mode(mode, cfg, shape)
            kern[mode] = ck
        data[-1].fill_(float("nan"))
        kern["full"].fn(*args)
        torch.cuda.synchronize()
        ok, msg = R.check_implementation(data, data[-1])
        times = {mode: [] for mode in MODES}
        for rnd in range(3):
            for mode in (MODES if rnd % 2 == 0 else MODES[::-1]):
                times[mode].append(timer(lambda: kern[mode].fn(*args)))
        _f, byts = T.flops_bytes("dual", shape)
        floor = byts / (ceil["copy_tbps"] * 1e12) * 1e6
        row = {"shape": list(shape), "config": cfg.short(), "ok": ok, "floor_us": floor,
               "regs": {mo: kern[mo].registers for mo in MODES},
               "us": {mo: min(v) for mo, v in times.items()}, "all": times}
        out["rows"].append(row)
        print(json.dumps({"s": shape, "cfg": cfg.short(), "ok": ok, "floor": round(floor, 2),
                          **{mo: round(min(v), 2) for mo, v in times.items()},
                          "regs": row["regs"], "t": round(time.time() - t0)}), flush=True)
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp161.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
