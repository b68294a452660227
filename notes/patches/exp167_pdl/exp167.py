"""Exp. 167: programmatic dependent launch for the dual skinny kernel in chains of decode calls
(`Sm90DualSkinnyKernel.pdl`: the switch is in exp167_pdl_switch.patch,
against 191fb26; not in the tree).  Per shape: CH inputs of fresh random data (distinct
weights, as consecutive layers have), the rule's config compiled with and without PDL; a chain
= the CH launches back to back in one CUDA graph (the first run launched them from Python and was
host-bound: `docs/exp167_h100_eager_hostbound.json`), replayed behind one L2 flush and timed with
CUDA events, per call = chain / CH (median of REPS chains, variants alternating); every output
of a PDL chain checked, eager and replayed (C poisoned first).  `python3 exp167.py` (writes $OUT/exp167.json)."""
import json, os, statistics, sys, tempfile, time
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.sm90 import dual_skinny as D

SHAPES = [(16, 512, 7168), (1, 896, 14336), (16, 1024, 4096), (8, 1024, 4096), (16, 2048, 7168),
          (1, 4096, 7168), (16, 4096, 7168), (16, 14336, 4096)]
CH, REPS = 16, 20


def compile_variant(pdl, cfg, shape):
    D.Sm90DualSkinnyKernel.pdl = pdl
    harness._CACHE.clear()
    return harness.compile_kernel("dual", "sm_90a", cfg, shape, dump_dir=tempfile.mkdtemp())


if __name__ == "__main__":
    timer = T.Timer(30)
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    t0 = time.time()
    for m, n, k in SHAPES:
        shape = (m, n, k, 1)
        cfg = configs.sm90_dual_skinny(shape)
        inputs = [R.generate_input(*shape, 1670 + i, device="cuda") for i in range(CH)]
        args = [D.runtime_args(d, cfg, torch.cuda.current_stream()) for d in inputs]
        kern = {pdl: compile_variant(pdl, cfg, shape) for pdl in (False, True)}
        ptx_wait = "griddepcontrol.wait" in harness.read_ptx(kern[True].ptx_path)
        for d in inputs:
            d[-1].fill_(float("nan"))
        for a in args:
            kern[True].fn(*a)
        torch.cuda.synchronize()
        ok = all(R.check_implementation(d, d[-1])[0] for d in inputs)
        chain = {False: [], True: []}
        single = {False: [], True: []}
        # (a CUDA graph of the chain: launched from Python the chain is host-bound, ~20-60 us a call)
        graphs = {}
        for pdl in (False, True):
            g = torch.cuda.CUDAGraph()
            side = torch.cuda.Stream()
            with torch.cuda.stream(side):
                gargs = [D.runtime_args(d, cfg, side) for d in inputs]
                with torch.cuda.graph(g, stream=side):
                    for a in gargs:
                        kern[pdl].fn(*a)
            graphs[pdl] = g
        for d in inputs:
            d[-1].fill_(float("nan"))
        graphs[True].replay()
        torch.cuda.synchronize()
        ok = ok and all(R.check_implementation(d, d[-1])[0] for d in inputs)
        for rep in range(REPS):
            for pdl in ((False, True) if rep % 2 == 0 else (True, False)):
                timer.flush()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                graphs[pdl].replay()
                e.record()
                torch.cuda.synchronize()
                chain[pdl].append(s.elapsed_time(e) * 1e3 / CH)
        for pdl in (False, True):
            single[pdl] = timer(lambda: kern[pdl].fn(*args[0]))
        row = {"shape": list(shape), "config": cfg.short(), "ok": ok, "ptx_wait": ptx_wait,
               "chain_us": {str(p): statistics.median(v) for p, v in chain.items()},
               "single_us": {str(p): v for p, v in single.items()}, "all": {str(p): v for p, v in chain.items()}}
        out["rows"].append(row)
        c0, c1 = row["chain_us"]["False"], row["chain_us"]["True"]
        print(json.dumps({"s": shape, "cfg": cfg.short(), "ok": ok, "wait": ptx_wait, "chain": round(c0, 2),
                          "chain_pdl": round(c1, 2), "ratio": round(c1 / c0, 3), "single": round(single[False], 2),
                          "single_pdl": round(single[True], 2), "t": round(time.time() - t0)}), flush=True)
        del inputs, args
        torch.cuda.empty_cache()
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp167.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
