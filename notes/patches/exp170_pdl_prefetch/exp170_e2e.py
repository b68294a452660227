"""Exp. 170, end to end: chains of CH custom_kernel calls (distinct inputs, as a decode step's
layers) captured in one CUDA graph each, with configs.STATIC_B off and on (NVFP4_STATIC_B), replayed
behind an L2 flush; per call = chain / CH, median of REPS replays, the two alternating.  Every
output checked after a poisoned replay.  `python3 notes/patches/exp170_pdl_prefetch/exp170_e2e.py`
from the repo root (writes $OUT/exp170_e2e.json)."""
import json, os, statistics, sys
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import dispatch

SHAPES = [tuple(int(x) for x in a.split("x")) for a in sys.argv[1].split(",")] if len(sys.argv) > 1 else \
    [(16, 1024, 4096), (8, 1024, 4096), (16, 512, 7168), (1, 896, 14336), (16, 640, 8192), (4, 256, 7168)]
CH, REPS = 16, 20

if __name__ == "__main__":
    timer = T.Timer(5)
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    for m, n, k in SHAPES:
        inputs = [R.generate_input(m, n, k, 1, 2700 + i, device="cuda") for i in range(CH)]
        graphs, cfgs, ok = {}, {}, {}
        for sb in (False, True):
            configs.STATIC_B = sb
            dispatch.clear_caches()
            cfgs[sb] = configs.select_config("dual", "sm_90a", (m, n, k, 1)).short()
            for d in inputs:
                dispatch.custom_kernel(d)
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for d in inputs:
                    dispatch.custom_kernel(d)
            graphs[sb] = g
        for sb in (False, True):
            for d in inputs:
                d[-1].fill_(float("nan"))
            graphs[sb].replay()
            torch.cuda.synchronize()
            ok[sb] = all(R.check_implementation(d, d[-1])[0] for d in inputs)
        per = {False: [], True: []}
        for rep in range(REPS):
            for sb in ((False, True) if rep % 2 == 0 else (True, False)):
                timer.flush()
                st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                st.record()
                graphs[sb].replay()
                en.record()
                torch.cuda.synchronize()
                per[sb].append(st.elapsed_time(en) * 1e3 / CH)
        med = {sb: statistics.median(v) for sb, v in per.items()}
        row = {"shape": [m, n, k, 1], "configs": {str(s): c for s, c in cfgs.items()}, "ok": {str(s): v for s, v in ok.items()},
               "us": {str(s): v for s, v in med.items()}, "ratio": med[True] / med[False], "all": {str(s): v for s, v in per.items()}}
        out["rows"].append(row)
        print(json.dumps({k2: row[k2] for k2 in ("shape", "configs", "ok")} | {"us": {s: round(v, 2) for s, v in row["us"].items()},
                                                                               "ratio": round(row["ratio"], 3)}), flush=True)
        del graphs
    configs.STATIC_B = False
    dispatch.clear_caches()
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp170_e2e.json"), "w") as f:
        json.dump(out, f, indent=1)
