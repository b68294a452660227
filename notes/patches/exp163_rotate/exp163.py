"""Exp. 163: do the skinny loads lose to DRAM conflicts of rows K/2 bytes apart?  Every CTA's
warp w reads chunk `first + i` of its rows at the same time, so the concurrent accesses sit at
one column offset of rows K/2 bytes apart.  Here (trace-time patch of `Sm90SkinnyCore.mainloop`,
not kept code) each CTA walks its warp's chunks rotated by ROT(bx) (chunk order first + (i + rot)
mod n_mine; the fp32 sums change order only), in the full kernel and in exp. 161's loads-only
ablation.  `python3 exp163.py` (writes $OUT/exp163.json)."""
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
ROT = 0  # 0: none; else rot = (bx * ROT) mod n_mine; -1: a multiplicative hash of bx


@cute.jit
def chunk_of(i, clamp, rot, n_mine, first):
    r = cutlass.min(i, clamp) + rot
    return first + cutlass.select_(r >= n_mine, r - n_mine, r)


@cute.jit
def mainloop_rot(self, ring, data, scales, k, warp, lane):
    acc = cute.make_rmem_tensor(cute.make_layout(self.acc_count), Float32)
    acc.fill(0.0)
    buf = cute.make_rmem_tensor(cute.make_layout(self.buf_words), Int32)
    chunks = k // (2 * S.CHUNK_BYTES)
    first = (warp * chunks) // self.k_warps
    n_mine = ((warp + 1) * chunks) // self.k_warps - first
    clamp = cutlass.max(n_mine - 1, 0)
    bx, _, _ = cute.arch.block_idx()
    rot = Int32(0)
    if cutlass.const_expr(ROT > 0):
        rot = (bx * ROT) % cutlass.max(n_mine, 1)
    if cutlass.const_expr(ROT < 0):
        rot = ((bx * Int32(40503)) & Int32(0xFFFF)) % cutlass.max(n_mine, 1)

    for j in cutlass.range_constexpr(self.ring_stages - 1):
        self.issue_chunk(ring, data, scales, chunk_of(Int32(j), clamp, rot, n_mine, first), j, lane)
    for i in cutlass.range(0, n_mine, 1, unroll=1):
        cute.arch.cp_async_wait_group(self.ring_stages - 2)
        self.issue_chunk(ring, data, scales, chunk_of(i + self.ring_stages - 1, clamp, rot, n_mine, first),
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


SHIPPED = S.Sm90SkinnyCore.mainloop

SHAPES = [(1, 2048, 7168), (16, 2048, 7168), (8, 1024, 4096), (16, 7168, 2048), (1, 4096, 7168),
          (16, 4096, 7168), (1, 14336, 4096), (16, 14336, 4096), (16, 12288, 3072), (1, 28672, 8192),
          (16, 28672, 8192)]
VARIANTS = [("shipped", 0), ("full", 0), ("full", 1), ("full", 5), ("full", -1), ("loads", 0), ("loads", 1), ("loads", -1)]


def compile_variant(v, cfg, shape):
    global MODE, ROT
    MODE, ROT = v
    S.Sm90SkinnyCore.mainloop = SHIPPED if MODE == "shipped" else mainloop_rot
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
        data = R.generate_input(*shape, 1563, device="cuda")
        mod, _ = harness.kernel_module("dual", "sm_90a", cfg)
        args = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        kern = {str(v): compile_variant(v, cfg, shape) for v in VARIANTS}
        oks = {}
        for name, ck in kern.items():
            if "loads" in name:
                continue
            data[-1].fill_(float("nan"))
            ck.fn(*args)
            torch.cuda.synchronize()
            oks[name] = R.check_implementation(data, data[-1])[0]
        times = {name: [] for name in kern}
        names = list(kern)
        for rnd in range(3):
            for name in (names if rnd % 2 == 0 else names[::-1]):
                times[name].append(timer(lambda: kern[name].fn(*args)))
        _f, byts = T.flops_bytes("dual", shape)
        floor = byts / (ceil["copy_tbps"] * 1e12) * 1e6
        base = min(times[str(("shipped", 0))])
        out["rows"].append({"shape": list(shape), "config": cfg.short(), "ok": oks, "floor_us": floor,
                            "us": {nm: min(t) for nm, t in times.items()}, "all": times})
        print(json.dumps({"s": shape, "cfg": cfg.short(), "floor": round(floor, 2), "base": round(base, 2),
                          "ok": all(oks.values()), **{nm: round(min(t) / base, 3) for nm, t in times.items()},
                          "t": round(time.time() - t0)}), flush=True)
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp163.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
