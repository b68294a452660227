"""Hopper (sm_90a) check + timing in one device call.

    python3 benchmarks/hopper_perf.py [--problems dual,group] [--iters 50] [--check-only]
                                      [--json OUT.json]

1. Measures the two ceilings (fp16 matmul rate, device copy bandwidth).
2. Correctness: every leaderboard test and benchmark shape of each problem, two seeds,
   outputs poisoned with NaN before the call, checked fully written and against
   reference.check_implementation.
3. Timing of the benchmark cases: our kernel, cuBLAS fp16 on operands decoded beforehand,
   and plain torch decode+matmul; L2 flushed before every timed call, CUDA events, median.
Prints a table: µs, floor = max(FLOPs / fp16 rate, bytes / copy BW), ratio to floor,
speedups.  (Timing machinery shared with benchmarks/timing.py.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# A benchmark times each shape's own plan: cases of one (N_g, K_g) with three or more M_g sets
# must not switch that structure to the device schedule (exp. 139).  A user's setting wins.
os.environ.setdefault("NVFP4_DYNAMIC_M", "0")
import nvfp4gemm  # noqa: E402,F401  (must precede cutlass)
import torch  # noqa: E402

import reference as R  # noqa: E402
from benchmarks.timing import Timer, baselines, flops_bytes, make_input, measure_ceilings  # noqa: E402
from configs import DUAL_BENCHMARKS, DUAL_TESTS, GROUP_BENCHMARKS, GROUP_TESTS, dual_tiles, select_config  # noqa: E402
from nvfp4gemm.dispatch import custom_kernel  # noqa: E402


def outputs(problem, out):
    return [out] if problem == "dual" else list(out)


def poison(problem, data):
    cs = [data[-1]] if problem == "dual" else [c for _, _, c in data[0]]
    for c in cs:
        c.fill_(float("nan"))


def check_case(problem, shape, seed) -> tuple[bool, str]:
    data = make_input(problem, shape, seed)
    poison(problem, data)
    out = custom_kernel(data)
    torch.cuda.synchronize()
    unwritten = sum(int(torch.isnan(c).sum()) for c in outputs(problem, out))
    ok, msg = R.check_implementation(data, out)
    if unwritten:
        ok, msg = False, f"{unwritten} outputs left NaN (unwritten or NaN); " + msg
    if not ok and problem == "dual":
        ref = R.ref_kernel(data).float()
        got = out.float()
        bad = ~torch.isfinite(got) | ((got - ref).abs() > 1e-3 + 1e-3 * ref.abs())
        rows = bad.any(dim=1).squeeze(-1).nonzero().flatten()
        cols = bad.any(dim=0).squeeze(-1).nonzero().flatten()
        rel = ((got - ref).norm() / ref.norm()).item()
        msg += f" | rel_err={rel:.3e} bad_rows={rows[:8].tolist()}..({len(rows)}) bad_cols={cols[:8].tolist()}..({len(cols)})"
    return ok, msg


def candidate_configs(problem, shape, cfg):
    """Other sm_90a configs to time beside the selected one (experiments)."""
    from dataclasses import replace

    import configs as C

    out = []
    spec = os.environ.get("HOPPER_VARIANTS", "")
    for item in filter(None, spec.split(";")):
        # "tm,tn,stages[,swap_ab[,cluster_m]]" e.g. "128,64,3" or "128,128,4,0" (epilogue
        # subtile 32 wide, 16 where 32 does not divide tn; swap_ab 0/1 with raster "m"/"n",
        # default: that of the selected config; cluster_m 2: dual split-K pairs); a token
        # "dN" anywhere sets dec_stages N (decoded B buffers)
        toks = item.split(",")
        dec = [int(t[1:]) for t in toks if t.startswith("d")]
        f = [int(x) for x in toks if not x.startswith("d")]
        swap = bool(f[3]) if len(f) > 3 else cfg.swap_ab
        c = replace(cfg, mma_tile_mn=(f[0], f[1]), ab_stages=f[2],
                    cluster_mn=(f[4], 1) if len(f) > 4 else cfg.cluster_mn,
                    split_k=cfg.split_k or (len(f) > 4 and f[4] == 2),
                    epi_tile_mn=(128, 32 if f[1] % 32 == 0 else 16), swap_ab=swap,
                    raster=("n" if swap else "m") if len(f) > 3 else cfg.raster,
                    dec_stages=dec[0] if dec else cfg.dec_stages)
        if c != cfg and not C.check_config(c) and C.fits(c, C.shape_key(problem, shape)):
            out.append(c)
    return out


def time_config(problem, cfg, shape, data, timer, unsplit=False):
    """unsplit: every tile whole, no split-K (same kernel, work items = tiles)."""
    from cutlass import Int32

    from nvfp4gemm import harness, scheduler

    ck = harness.compile_kernel(problem, "sm_90a", cfg, shape)
    mod, _ = harness.kernel_module(problem, "sm_90a", cfg)
    args = mod.runtime_args(data, cfg, torch.cuda.current_stream())
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if unsplit and (problem == "group" or cfg.swap_ab):  # (meta, offs, ws, cnt, items, full, splits, ctas, stream)
        total = dual_tiles(cfg, shape) if problem == "dual" else scheduler.grouped_tile_offsets(cfg, shape)[-1]
        args = args[:4] + (Int32(total), Int32(total), Int32(1), Int32(min(total, sms))) + args[8:]
    elif unsplit:  # dual: (..., c, ws, cnt, m, n, k, l, items, full_tiles, splits, ctas, stream)
        total = dual_tiles(cfg, shape)
        args = args[:13] + (Int32(total), Int32(total), Int32(1), Int32(min(total, sms))) + args[17:]
    poison(problem, data)
    ck.fn(*args)
    torch.cuda.synchronize()
    ok, msg = R.check_implementation(data, data[-1] if problem == "dual" else [c for _, _, c in data[0]])
    if not ok:
        return f"WRONG {msg[:100]}"
    return timer(lambda: ck.fn(*args))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problems", default="dual,group")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--check-only", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--no-check", action="store_true", help="skip the correctness pass")
    ap.add_argument("--no-baselines", action="store_true", help="time only our kernel")
    ap.add_argument("--cases", default=None, help="comma-separated benchmark indices to time")
    args = ap.parse_args()
    problems = args.problems.split(",")
    dev = torch.cuda.get_device_name(0)
    print(f"device: {dev}, capability {torch.cuda.get_device_capability(0)}", flush=True)
    result = {"device": dev, "checks": [], "timings": []}

    # ---------------------------------------------------------------- correctness
    n_ok = n_all = 0
    for problem in ([] if args.no_check else problems):
        cases = (DUAL_TESTS + DUAL_BENCHMARKS) if problem == "dual" else (GROUP_TESTS + GROUP_BENCHMARKS)
        for shape in cases:
            for seed in (1234, 97 + n_all):
                t0 = time.time()
                try:
                    ok, msg = check_case(problem, shape, seed)
                except Exception as e:  # report and go on
                    ok, msg = False, f"EXC {type(e).__name__}: {e}"[:600]
                    traceback.print_exc()
                n_all += 1
                n_ok += ok
                label = shape if problem == "dual" else [s[0] for s in shape]
                print(f"CHECK {problem} {label} seed={seed} {'OK' if ok else 'FAIL'} "
                      f"({time.time() - t0:.1f}s) {msg[:300]}", flush=True)
                result["checks"].append({"problem": problem, "shape": shape, "seed": seed, "ok": ok, "msg": msg[:500]})
    print(f"correct: {n_ok}/{n_all}", flush=True)
    if args.check_only:
        return _dump(result, args)

    # ---------------------------------------------------------------- timing
    timer = Timer(args.iters)
    ceil = measure_ceilings(timer)
    result["ceilings"] = ceil
    print(f"ceilings: fp16 {ceil['fp16_tflops']:.0f} TFLOP/s, copy {ceil['copy_tbps'] * 1e3:.0f} GB/s", flush=True)
    rows = []
    for problem in problems:
        bench = DUAL_BENCHMARKS if problem == "dual" else GROUP_BENCHMARKS
        if args.cases:
            bench = [bench[int(i)] for i in args.cases.split(",")]
        for shape in bench:
            data = make_input(problem, shape, 4321)
            flops, byts = flops_bytes(problem, shape)
            t_fl = flops / (ceil["fp16_tflops"] * 1e12) * 1e6
            t_by = byts / (ceil["copy_tbps"] * 1e12) * 1e6
            floor = max(t_fl, t_by)
            try:
                custom_kernel(data)
                torch.cuda.synchronize()
                t_ours = timer(lambda: custom_kernel(data))
            except Exception as e:
                print(f"TIMING FAIL {problem} {shape}: {e}", flush=True)
                t_ours = float("nan")
            base = {}
            for name, fn in ({} if args.no_baselines else baselines(problem, data, "sm_90a")).items():
                base[name] = timer(fn)
            cfg = select_config(problem, "sm_90a", shape)
            # the same launch with arguments built once (no per-call host work) and, for
            # experiments, other configs of the same kernel
            variants = {}
            for vcfg in [cfg] + candidate_configs(problem, shape, cfg):
                try:
                    variants[vcfg.short()] = time_config(problem, vcfg, shape, data, timer)
                    variants[vcfg.short() + " unsplit"] = time_config(problem, vcfg, shape, data, timer, True)
                except Exception as e:
                    print(f"VARIANT FAIL {vcfg.short()}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            label = "x".join(map(str, shape[:3])) if problem == "dual" else \
                f"g{len(shape)} N={shape[0][1]} K={shape[0][2]}"
            row = {"problem": problem, "case": label, "config": cfg.short(), "us": t_ours,
                   "flops_us": t_fl, "bytes_us": t_by, "floor_us": floor, "x_floor": t_ours / floor,
                   "cublas_us": base.get("cuBLAS fp16 pre-decoded", float("nan")),
                   "torch_us": base.get("torch decode+matmul", float("nan")),
                   "variants_us": variants}
            rows.append(row)
            print(f"TIME {row}", flush=True)
    result["timings"] = rows
    print()
    hdr = f"{'problem':6} {'case':24} {'ours us':>9} {'flops us':>9} {'bytes us':>9} {'x floor':>8} {'cuBLAS':>9} {'vs cuBLAS':>9} {'torch':>9} {'vs torch':>9}"
    print(hdr)
    for r in rows:
        print(f"{r['problem']:6} {r['case']:24} {r['us']:9.1f} {r['flops_us']:9.1f} {r['bytes_us']:9.1f} "
              f"{r['x_floor']:8.2f} {r['cublas_us']:9.1f} {r['cublas_us'] / r['us']:9.2f} {r['torch_us']:9.1f} "
              f"{r['torch_us'] / r['us']:9.2f}")
    print(f"correct: {n_ok}/{n_all}")
    for r in rows:
        print(f"variants {r['problem']} {r['case']}: " + ", ".join(
            f"{k}: {v:.1f}" if isinstance(v, float) else f"{k}: {v}" for k, v in r["variants_us"].items()))
    _dump(result, args)


def _dump(result, args):
    path = args.json or (os.path.join(os.environ["OUT"], "hopper_perf.json") if os.environ.get("OUT") else None)
    if path:
        with open(path, "w") as f:
            json.dump(result, f, indent=1, default=str)


if __name__ == "__main__":
    main()
