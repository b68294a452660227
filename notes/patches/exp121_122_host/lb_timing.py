"""Device: the leaderboard's timing method (fresh cloned inputs for every timed call, as
gpu-mode eval.py's leaderboard mode and eval_better_bench) against bench.py's (the same
input object every call), plus where an uncached call's host time goes."""
import os, sys, time, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from configs import DUAL_BENCHMARKS, GROUP_BENCHMARKS
from benchmarks.timing import make_input
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
from nvfp4gemm.validate import validate_dual, validate_group, validate_device


def clone(d):
    if isinstance(d, tuple):
        return tuple(clone(x) for x in d)
    if isinstance(d, list):
        return [clone(x) for x in d]
    if isinstance(d, torch.Tensor):
        return d.clone()
    return d


def clear_l2():
    dummy = torch.empty((32, 1024, 1024), dtype=torch.int64, device="cuda")
    dummy.fill_(42)
    del dummy


def time_mode(problem, shape, mode, iters=25):
    base = make_input(problem, shape, 1)
    custom_kernel(clone(base))
    torch.cuda.synchronize()
    same = clone(base)
    pool = [clone(base) for _ in range(iters)] if mode != "same" else None
    ds, host = [], []
    for i in range(iters):
        d = same if mode == "same" else pool[i]
        torch.cuda.synchronize()
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        if mode != "idle":
            clear_l2()
        s.record()
        t0 = time.perf_counter()
        custom_kernel(d)
        host.append((time.perf_counter() - t0) * 1e6)
        e.record()
        torch.cuda.synchronize()
        ds.append(s.elapsed_time(e) * 1e3)
    return statistics.median(ds), statistics.median(host)


def better_bench(problem, shape, iters=6, batch=15):
    """eval_better_bench's loop: `batch` inputs (other seeds), re-cloned every iteration, the L2
    cleared once per iteration, each call timed alone after a sync; mean per call, median over
    iterations."""
    datas = [make_input(problem, shape, 1 + i) for i in range(batch)]
    for d in datas:
        custom_kernel(clone(d))
    torch.cuda.synchronize()
    means = []
    for _ in range(iters):
        it = clone(datas)
        torch.cuda.synchronize()
        clear_l2()
        ts = []
        for d in it:
            s = torch.cuda.Event(enable_timing=True)
            e = torch.cuda.Event(enable_timing=True)
            s.record()
            custom_kernel(d)
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e) * 1e3)
        means.append(sum(ts) / len(ts))
    return statistics.median(means)


def breakdown(problem, shape, iters=15):
    base = make_input(problem, shape, 1)
    custom_kernel(clone(base))
    torch.cuda.synchronize()
    parts = {k: [] for k in ("validate", "plan", "runtime_args", "pack", "launch")}
    for _ in range(iters):
        data = clone(base)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        shp, used = (validate_dual if problem == "dual" else validate_group)(data)
        dev = validate_device(used)
        t1 = time.perf_counter()
        _arch, cfg, ck, mod = dispatch.plan(problem, shp, dev)
        t2 = time.perf_counter()
        args = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        t3 = time.perf_counter()
        pl = dispatch.PackedLaunch(ck.fn, args)
        t4 = time.perf_counter()
        pl()
        t5 = time.perf_counter()
        torch.cuda.synchronize()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4)):
            parts[k].append(v * 1e6)
    return {k: statistics.median(v) for k, v in parts.items()}


print(torch.cuda.get_device_name())
for problem, cases in (("dual", DUAL_BENCHMARKS), ("group", GROUP_BENCHMARKS)):
    for shape in cases:
        name = shape if problem == "dual" else f"g{len(shape)} N{shape[0][1]} K{shape[0][2]}"
        r = {m: time_mode(problem, shape, m) for m in ("same", "fresh", "idle")}
        print(f"{problem} {name}: " + "  ".join(f"{m} {t:.1f} us (host {h:.0f})" for m, (t, h) in r.items())
              + f"  better_bench {better_bench(problem, shape):.1f} us", flush=True)
