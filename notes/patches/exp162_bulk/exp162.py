"""Exp. 162: the dual skinny kernel with bulk-copied B rows (bulk.py) against the shipped rule,
per shape; `python3 exp162.py` (writes $OUT/exp162.json).  Variants (k_warps, CPS chunks per
stage, stages[, "loads"]); each compiled once per A-row tile, checked on every shape (C poisoned
with NaN), timed in alternating rounds (L2 flushed, median of 30)."""
import glob, json, os, sys, tempfile, time
sys.path.insert(0, "benchmarks")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import cutlass.cute as cute
import timing as T
import configs
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.sm90 import dual_skinny as D
import bulk as B

SHAPES = [(1, 2048, 7168), (16, 2048, 7168), (8, 1024, 4096), (16, 7168, 2048), (1, 4096, 7168),
          (16, 4096, 7168), (1, 14336, 4096), (16, 14336, 4096), (16, 12288, 3072), (1, 28672, 8192),
          (16, 28672, 8192)]
VARIANTS = [(4, 2, 2), (4, 2, 3), (4, 4, 2), (4, 4, 3), (2, 2, 3), (2, 4, 3), (2, 8, 2), (1, 4, 3), (1, 8, 3),
            (4, 2, 3, "loads"), (4, 4, 2, "loads")]


def compile_variant(v, tn):
    kw, cps, S = v[:3]
    B.CPS, B.MODE = cps, (v[3] if len(v) > 3 else "full")
    cfg = configs.KernelConfig("dual", "sm_90a", (16, tn), skinny=True, k_warps=kw, ab_stages=S)
    kern = B.Sm90DualSkinnyBulk(cfg)
    if kern.smem_total > 227 * 1024:
        return None
    d = tempfile.mkdtemp()
    fn = cute.compile(kern, *D.compile_args(cfg, tn, 4096, 7168, 1), options=f"--keep-ptx --dump-dir {d}")
    ck = harness.CompiledKernel("dual", "sm_90a", cfg, fn, True, 0, kern.smem_total)
    ck.ptx_path = sorted(glob.glob(d + "/*.ptx"))[-1]
    harness._ptxas_stats(ck)
    return cfg, ck, kern.smem_total


if __name__ == "__main__":
    timer = T.Timer(30)
    ceil = T.measure_ceilings(timer)
    out = {"device": torch.cuda.get_device_name(), "ceilings": ceil, "rows": []}
    print(json.dumps(out), flush=True)
    compiled = {}
    for tn in (8, 16):
        for v in VARIANTS:
            compiled[(tn, v)] = compile_variant(v, tn)
            c = compiled[(tn, v)]
            print(tn, v, None if c is None else (c[1].registers, c[1].spill_bytes, c[2]), flush=True)
    t0 = time.time()
    for m, n, k in SHAPES:
        shape = (m, n, k, 1)
        rule = configs.sm90_dual_skinny(shape)
        tn = rule.mma_tile_mn[1]
        data = R.generate_input(*shape, 1562, device="cuda")
        fns = {}
        rck = harness.compile_kernel("dual", "sm_90a", rule, shape)
        fns["rule"] = (rck, D.runtime_args(data, rule, torch.cuda.current_stream()))
        oks = {}
        for v in VARIANTS:
            c = compiled[(tn, v)]
            if c is None:
                continue
            fns[str(v)] = (c[1], D.runtime_args(data, c[0], torch.cuda.current_stream()))
        for name, (ck, args) in fns.items():
            if "loads" in name:
                continue
            data[-1].fill_(float("nan"))
            ck.fn(*args)
            torch.cuda.synchronize()
            oks[name] = R.check_implementation(data, data[-1])[0]
        times = {name: [] for name in fns}
        names = list(fns)
        for rnd in range(3):
            for name in (names if rnd % 2 == 0 else names[::-1]):
                ck, args = fns[name]
                times[name].append(timer(lambda: ck.fn(*args)))
        _f, byts = T.flops_bytes("dual", shape)
        floor = byts / (ceil["copy_tbps"] * 1e12) * 1e6
        base = min(times["rule"])
        row = {"shape": list(shape), "rule": rule.short(), "floor_us": floor, "ok": oks,
               "us": {nm: min(t) for nm, t in times.items()}, "all": times}
        out["rows"].append(row)
        print(json.dumps({"s": shape, "rule": rule.short(), "floor": round(floor, 2), "base": round(base, 2),
                          "ok": all(oks.values()), "bad": [k_ for k_, o in oks.items() if not o],
                          **{nm: round(min(t) / base, 3) for nm, t in times.items() if nm != "rule"},
                          "t": round(time.time() - t0)}), flush=True)
        torch.cuda.empty_cache()
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp162.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
