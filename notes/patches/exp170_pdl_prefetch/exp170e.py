"""Exp. 170e: where the pdl skinny dual kernel lets the next kernel in.  As run: a temporary class
switch, `Sm90SkinnyCore.pdl_trigger` (exp170e_trigger_switch.patch, against f3594c2): "loop" after
the main loop, "epilogue" after the partial sums, before the C stores, "exit" never, i.e. at the
grid's end.  The tree now has "loop" and "sums" (= "epilogue") as `KernelConfig.pdl` values; without
the patch this script runs those two ("epilogue" maps to "sums"; "exit" needs the patch).
exp170.py's chains (`indep`, and `dep` where K = 4 N), variants against the plain launch.
`python3 notes/patches/exp170_pdl_prefetch/exp170e.py [MxNxK,...]` (writes $OUT/exp170e.json)."""
import json, os, statistics, sys, tempfile, time
from dataclasses import replace
sys.path.insert(0, "benchmarks")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.sm90 import dual_skinny as D
import exp170 as X

VARIANTS = os.environ.get("EXP170E_VARIANTS", "plain,loop,epilogue,exit").split(",")
SHAPES = [tuple(int(x) for x in s.split("x")) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [
    (16, 1024, 4096), (1, 896, 14336), (16, 1280, 4096), (16, 2048, 4096), (16, 2048, 7168), (1, 4096, 7168),
    (16, 4096, 7168), (16, 14336, 4096), (16, 2048, 8192), (8, 2048, 4096)]


def compile_variant(v, cfg, shape):
    harness._CACHE.clear()
    if v != "plain":
        if hasattr(D.Sm90DualSkinnyKernel, "pdl_trigger"):  # (exp170e_trigger_switch.patch applied)
            D.Sm90DualSkinnyKernel.pdl_trigger = v
            cfg = replace(cfg, pdl=True)
        else:
            assert v in ("loop", "epilogue", "sums"), "'exit' needs exp170e_trigger_switch.patch"
            cfg = replace(cfg, pdl="sums" if v == "epilogue" else v)
    try:
        return harness.compile_kernel("dual", "sm_90a", cfg, shape, dump_dir=tempfile.mkdtemp())
    finally:
        if hasattr(D.Sm90DualSkinnyKernel, "pdl_trigger"):
            D.Sm90DualSkinnyKernel.pdl_trigger = "loop"


if __name__ == "__main__":
    timer = T.Timer(30)
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    t0 = time.time()
    for m, n, k in SHAPES:
        shape = (m, n, k, 1)
        cfg = configs.sm90_dual_skinny(shape, static_b=False)
        kern = {v: compile_variant(v, cfg, shape) for v in VARIANTS}
        chains = {"indep": [R.generate_input(*shape, 1900 + i, device="cuda") for i in range(X.CH)]}
        if k == 4 * n:
            chains["dep"] = X.dep_chain(m, n, k, 2000)
        row = {"shape": list(shape), "config": cfg.short()}
        for name, inputs in chains.items():
            ok = {}
            graphs = {v: X.graph_of(kern[v], inputs, cfg) for v in VARIANTS}
            for v in VARIANTS:
                X.poison(inputs)
                graphs[v].replay()
                torch.cuda.synchronize()
                ok[v] = X.all_ok(inputs)
            per = {v: [] for v in VARIANTS}
            for rep in range(X.REPS):
                for v in (VARIANTS if rep % 2 == 0 else VARIANTS[::-1]):
                    timer.flush()
                    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    st.record()
                    graphs[v].replay()
                    en.record()
                    torch.cuda.synchronize()
                    per[v].append(st.elapsed_time(en) * 1e3 / X.CH)
            med = {v: statistics.median(x) for v, x in per.items()}
            row[name] = {"ok": ok, "us": med, "all": per}
            print(json.dumps({"s": shape, "cfg": cfg.short(), "chain": name, "ok": all(ok.values()),
                              "plain": round(med["plain"], 2),
                              **{v: round(med[v] / med["plain"], 3) for v in VARIANTS[1:]}, "t": round(time.time() - t0)}),
                  flush=True)
            del graphs
        out["rows"].append(row)
        del chains
        torch.cuda.empty_cache()
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp170e.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
