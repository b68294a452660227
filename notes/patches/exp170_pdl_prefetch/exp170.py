"""Exp. 170: programmatic dependent launch for the dual skinny kernel with B's first ring stages
loaded before griddepcontrol.wait.  Modes: 0 plain; 3 the tree's `KernelConfig.pdl` "loop" (PDL, B's
prologue stages before the wait, launch_dependents after the main loop); 4 its "sums" (after the
partial sums, exp170e.py's "epilogue").  Modes 1 (launch_dependents
and the wait at entry) and 2 (as 1 with B's prologue stages before the wait) and the first runs of
mode 3 came from a class switch, `Sm90SkinnyCore.pdl_mode`: exp170_switch.patch against adddbc8
(apply it to run them; the script then sets the switch instead of the config).

Per shape: CH inputs of fresh random data; the rule's config compiled in each mode; two chains
of CH launches, each captured in one CUDA graph and replayed behind one L2 flush (CUDA events,
per call = chain / CH, median of REPS replays, modes alternating):
  - `indep`: CH independent inputs (distinct weights, as consecutive layers have);
  - `dep` (shapes with K = 4 N only): call i + 1's A is call i's C (the same bytes, C fp16 read
    as packed e2m1), so every call reads what the previous kernel wrote -- the PDL protocol's
    test: C is NaN-poisoned before each checked replay, and a call that read its A before the
    previous one finished would disagree with the reference built from the final bytes.
Every output of every mode checked, eager and replayed.  Also the isolated call (L2 flushed).
`EXP170_MODES=0,3 python3 notes/patches/exp170_pdl_prefetch/exp170.py [MxNxK,...]` from the repo
root (writes $OUT/exp170.json)."""
import json, os, statistics, sys, tempfile, time
from dataclasses import replace
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.sm90 import dual_skinny as D

SHAPES = [tuple(int(x) for x in s.split("x")) for s in sys.argv[1].split(",")] if len(sys.argv) > 1 else [(16, 512, 7168), (1, 896, 14336), (16, 1024, 4096), (8, 1024, 4096), (16, 2048, 7168),
          (1, 512, 16384), (1, 4096, 7168), (16, 4096, 7168), (16, 14336, 4096), (16, 2048, 8192)]
MODES = tuple(int(x) for x in os.environ.get("EXP170_MODES", "0,3").split(","))
CH, REPS = 16, 20


def mode_config(mode, cfg):
    if hasattr(D.Sm90DualSkinnyKernel, "pdl_mode"):  # (exp170_switch.patch applied)
        D.Sm90DualSkinnyKernel.pdl_mode = mode
        return cfg
    assert mode in (0, 3, 4), "modes 1 and 2 need exp170_switch.patch"
    return replace(cfg, pdl={0: "", 3: "loop", 4: "sums"}[mode])


def compile_mode(mode, cfg, shape):
    harness._CACHE.clear()
    return harness.compile_kernel("dual", "sm_90a", mode_config(mode, cfg), shape, dump_dir=tempfile.mkdtemp())


def dep_chain(m, n, k, seed):
    """CH inputs where input i + 1's A is input i's C (K = 4 N: M x N fp16 = M x K/2 bytes)."""
    assert k == 4 * n
    bufs = [torch.empty(m * k // 2, dtype=torch.uint8, device="cuda") for _ in range(CH + 1)]
    out = []
    for i in range(CH):
        d = list(R.generate_input(m, n, k, 1, seed + i, device="cuda"))
        a = bufs[i].view(torch.float4_e2m1fn_x2).view(m, k // 2, 1)
        if i == 0:
            a.view(torch.uint8).copy_(d[0].view(torch.uint8))
        d[0] = a
        d[-1] = bufs[i + 1].view(torch.float16).view(m, n, 1)
        out.append(tuple(d))
    return out


def graph_of(kern, inputs, cfg):  # (cfg: the mode's config)
    """The chain's launches captured on a side stream (their arguments name that stream)."""
    g = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        args = [D.runtime_args(d, cfg, side) for d in inputs]
        with torch.cuda.graph(g, stream=side):
            for a in args:
                kern.fn(*a)
    return g


def all_ok(inputs):
    res = [R.check_implementation(d, d[-1]) for d in inputs]
    bad = [(i, msg[:120]) for i, (ok, msg) in enumerate(res) if not ok]
    if bad:
        print("  check failed:", len(bad), bad[:2], flush=True)
    return not bad


def poison(inputs):
    for d in inputs:
        d[-1].fill_(float("nan"))


if __name__ == "__main__":
    timer = T.Timer(30)
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    t0 = time.time()
    for m, n, k in SHAPES:
        shape = (m, n, k, 1)
        cfg = configs.sm90_dual_skinny(shape)
        kern = {md: compile_mode(md, cfg, shape) for md in MODES}
        chains = {"indep": [R.generate_input(*shape, 1700 + i, device="cuda") for i in range(CH)]}
        if k == 4 * n:
            chains["dep"] = dep_chain(m, n, k, 1800)
        row = {"shape": list(shape), "config": cfg.short(), "regs": {md: kern[md].registers for md in MODES}}
        for name, inputs in chains.items():
            s = torch.cuda.current_stream()
            args = [D.runtime_args(d, cfg, s) for d in inputs]  # (the same arguments in every mode)
            ok = {}
            for md in MODES:
                poison(inputs)
                rcs = [kern[md].fn(*a) for a in args]
                torch.cuda.synchronize()
                assert all(not r for r in rcs), rcs
                ok[md] = all_ok(inputs)
            graphs = {md: graph_of(kern[md], inputs, mode_config(md, cfg)) for md in MODES}
            for md in MODES:
                for _ in range(2):
                    poison(inputs)
                    graphs[md].replay()
                    torch.cuda.synchronize()
                    ok[md] = ok[md] and all_ok(inputs)
            per = {md: [] for md in MODES}
            for rep in range(REPS):
                order = MODES if rep % 2 == 0 else tuple(reversed(MODES))
                for md in order:
                    timer.flush()
                    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    st.record()
                    graphs[md].replay()
                    en.record()
                    torch.cuda.synchronize()
                    per[md].append(st.elapsed_time(en) * 1e3 / CH)
            med = {md: statistics.median(v) for md, v in per.items()}
            row[name] = {"ok": ok, "chain_us": med, "all": per}
            if name == "indep":
                row["single_us"] = {md: timer(lambda: kern[md].fn(*args[0])) for md in MODES}
            print(json.dumps({"s": shape, "cfg": cfg.short(), "chain": name, "ok": ok,
                              "us": {md: round(v, 2) for md, v in med.items()},
                              **{f"r{md}": round(med[md] / med[0], 3) for md in MODES if md},
                              "single": {md: round(v, 2) for md, v in row.get("single_us", {}).items()} if name == "indep" else None,
                              "t": round(time.time() - t0)}), flush=True)
            del graphs
        out["rows"].append(row)
        del chains
        torch.cuda.empty_cache()
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp170.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
