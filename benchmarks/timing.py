"""GPU half of benchmarks/bench.py: the leaderboard's timing method, baselines in the same
run, speed-of-light ratios, a table, JSON and a PNG chart.

Method per case (as the leaderboard): inputs generated once; before every timed call the L2
is flushed by writing a buffer several times its size; CUDA events around `custom_kernel`;
`iters` timed calls after warm-up; their median is one round.  The kernel and its baselines
are timed in TIMING_ROUNDS alternating rounds, each reported as the median of its rounds.  A
second mode captures the call in a CUDA graph and times graph replays (one round).  A third
("fresh") is gpu-mode eval.py's leaderboard mode: every timed call gets new tensors of the
same shape, with the GPU synchronized before it and only the L2 flush queued ahead, so the host
work of a call on new tensors counts.  A fourth ("ranked") is the loop that ranks these problems
on the leaderboard (eval_better_bench: RANKED_INPUTS inputs made once, a correctness pass on
clones, then per repeat an L2 flush and all inputs back to back between two events; the mean
per call), for the kernel and for the cuBLAS pre-decoded baseline, each over its own inputs, so
its ratios compare like with like.  The floor is the leaderboard's
speed-of-light table on B200; elsewhere max(FLOPs / fp16 matmul rate, bytes / copy
bandwidth) with both rates measured at the start of this run.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time

import torch

import reference as R
from configs import DUAL_BENCHMARKS, GROUP_BENCHMARKS, select_config
from nvfp4gemm.formats import decode_e2m1

# Leaderboard speed of light on B200 (1.5 GHz), µs, by case.
B200_SOL = {
    **dict(zip(DUAL_BENCHMARKS, (4.708, 8.714, 2.125, 6.535))),
    **dict(zip(GROUP_BENCHMARKS, (18.833, 10.667, 2.406, 1.525))),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


TIMING_ROUNDS = 3  # bench_case: alternating rounds of the kernel and its baselines


class Timer:
    """Median time of `fn` over `iters` calls, each preceded by an L2 flush."""

    def __init__(self, iters: int):
        self.iters = iters
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush_buf = torch.empty(max(4 * l2, 256 << 20), dtype=torch.uint8, device="cuda")

    def __call__(self, fn, warmup: int = 5) -> float:
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(self.iters)]
        for s, e in zip(starts, ends):
            self.flush_buf.zero_()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends)) * 1e3  # µs

    def flush(self) -> None:
        self.flush_buf.zero_()

    def fresh(self, fn, make, calls: int) -> tuple[float, float]:
        """(median µs, median host µs) of `fn(make())` over `calls` calls, each on a new input
        made (untimed) just before it and dropped after it, on an idle GPU behind only the L2
        flush: eval.py's leaderboard mode (module doc), where the allocator hands a dropped
        input's memory to the next one."""
        rows = []
        for _ in range(calls):
            x = make()
            rows.append(timed_call(fn, x, self.flush))
            del x
        return statistics.median(t for t, _ in rows), statistics.median(h for _, h in rows)


def timed_call(fn, x, flush=None) -> tuple[float, float]:
    """(event µs, host µs) of one `fn(x)` after a synchronize (the GPU idle), behind `flush()`
    if given: one call as gpu-mode's evaluators time it."""
    torch.cuda.synchronize()
    if flush is not None:
        flush()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    t0 = time.perf_counter()
    fn(x)
    host = (time.perf_counter() - t0) * 1e6
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3, host


FRESH_CALLS = 20  # timed calls with new tensors per case (each a clone of the case's input)
RANKED_INPUTS = {"dual": 50, "group": 15}  # eval_better_bench's NUM_ITERATIONS_PER_BENCHMARK
RANKED_REPEATS = 10
RANKED_SEED_STEP = 42  # (eval_better_bench adds 42 to the seed for each input)


def ranked_inputs(problem: str, shape, seed: int) -> list:
    """The ranked loop's inputs: RANKED_INPUTS[problem] of them, seeds RANKED_SEED_STEP apart."""
    return [make_input(problem, shape, seed + RANKED_SEED_STEP * (i + 1)) for i in range(RANKED_INPUTS[problem])]


def ranked_time(fn, inputs, flush, repeats: int = RANKED_REPEATS) -> tuple[float, float]:
    """(median µs per call, median host µs per call) over `repeats` of eval_better_bench's timed
    loop: synchronize, `flush()`, start event, `fn(x)` for every input back to back (no
    synchronize between: a call's host time counts only where it exceeds the GPU's), end event;
    the mean per call of each repeat.  Warm `fn` on these inputs (or clones) first."""
    rows = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        t0 = time.perf_counter()
        for x in inputs:
            fn(x)
        host = (time.perf_counter() - t0) * 1e6
        e.record()
        torch.cuda.synchronize()
        rows.append((s.elapsed_time(e) * 1e3 / len(inputs), host / len(inputs)))
    return statistics.median(t for t, _ in rows), statistics.median(h for _, h in rows)


def clone_input(data):
    """New tensors with the same values, shapes and strides (eval_better_bench's _clone_data)."""
    if isinstance(data, tuple):
        return tuple(clone_input(x) for x in data)
    if isinstance(data, list):
        return [clone_input(x) for x in data]
    return data.clone() if isinstance(data, torch.Tensor) else data


def measure_ceilings(timer: Timer) -> dict:
    """fp16 tensor-core rate (8192^3 matmul, random data) and copy bandwidth (bytes read +
    written of a 2 GiB device-to-device copy)."""
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.float16)
    t = timer(lambda: a @ b)
    flops = 2 * 8192**3 / (t * 1e-6)
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    t2 = timer(lambda: dst.copy_(src))
    bw = 2 * src.numel() / (t2 * 1e-6)
    del a, b, src, dst
    return {"fp16_tflops": flops / 1e12, "copy_tbps": bw / 1e12}


def dequant_f16(x: torch.Tensor, sf: torch.Tensor) -> torch.Tensor:
    """(mn, k/2, l) fp4 + (mn, k/16, l) e4m3 -> (l, mn, k) fp16 (exact: 6 significant bits)."""
    v = decode_e2m1(x.permute(2, 0, 1)).to(torch.float16)
    s = sf.to(x.device).permute(2, 0, 1).to(torch.float16).repeat_interleave(16, dim=-1)
    return v * s


def flops_bytes(problem: str, shape) -> tuple[float, float]:
    if problem == "dual":
        m, n, k, l = shape
        flops = 2 * 2 * m * n * k * l
        byts = l * ((m + 2 * n) * k // 2 + (m + 2 * n) * k // 16 + m * n * 2)
        return flops, byts
    flops = sum(2 * m * n * k for m, n, k in shape)
    byts = sum((m + n) * k // 2 + (m + n) * k // 16 + m * n * 2 for m, n, k in shape)
    return flops, byts


# bench.py --draw (reference.DRAWS): the cases' inputs as the leaderboard draws them, or reference.py's
# wide test draw (every e2m1 code and finite e4m3 scale, closer to real checkpoints; exp. 174: within 3%)
INPUT_DRAW = "leaderboard"


def make_input(problem: str, shape, seed: int):
    wide = INPUT_DRAW == "wide"
    if problem == "dual":
        return R.generate_input(*shape, seed, device="cuda", wide=wide)
    ms, ns, ks = zip(*shape)
    return R.generate_input(list(ms), list(ns), list(ks), len(shape), seed, device="cuda", wide=wide)


def baselines(problem: str, data, gpu: str) -> dict:
    """Callables for the baselines on the same inputs."""
    out = {}
    if problem == "dual":
        a, b1, b2, sfa, sfb1, sfb2 = data[:6]

        def torch_decode_matmul():
            fa = dequant_f16(a, sfa)
            x1 = torch.bmm(fa, dequant_f16(b1, sfb1).transpose(1, 2))
            x2 = torch.bmm(fa, dequant_f16(b2, sfb2).transpose(1, 2))
            return torch.nn.functional.silu(x1.float()) * x2.float()

        fa, f1, f2 = dequant_f16(a, sfa), dequant_f16(b1, sfb1), dequant_f16(b2, sfb2)

        def cublas_predecoded():
            x1 = torch.bmm(fa, f1.transpose(1, 2))
            x2 = torch.bmm(fa, f2.transpose(1, 2))
            return x1, x2

        out["torch decode+matmul"] = torch_decode_matmul
        out["cuBLAS fp16 pre-decoded"] = cublas_predecoded
    else:
        abc, sfs = data[0], data[1]

        def torch_decode_matmul():
            return [torch.bmm(dequant_f16(a, sa), dequant_f16(b, sb).transpose(1, 2)) for (a, b, _), (sa, sb) in zip(abc, sfs)]

        dec = [(dequant_f16(a, sa), dequant_f16(b, sb)) for (a, b, _), (sa, sb) in zip(abc, sfs)]

        def cublas_predecoded():
            return [torch.bmm(x, y.transpose(1, 2)) for x, y in dec]

        out["torch decode+matmul"] = torch_decode_matmul
        out["cuBLAS fp16 pre-decoded"] = cublas_predecoded
    if gpu == "sm_100a" and hasattr(torch, "_scaled_mm"):
        out["torch._scaled_mm nvfp4"] = scaled_mm_baseline(problem, data)
    return out


def blocked(sfp: torch.Tensor) -> torch.Tensor:
    """Batch 0 of a permuted scale tensor as the flat (rm, rk, 32, 4, 4) byte order that
    torch._scaled_mm's blocked NVFP4 scales use (its memory order)."""
    return sfp[..., 0].permute(2, 4, 0, 1, 3).flatten()


def scaled_mm_baseline(problem: str, data):
    """What a user gets from PyTorch directly on Blackwell: torch._scaled_mm with NVFP4 block
    scales (the leaderboard's own reference path)."""
    if problem == "dual":
        a, b1, b2, _, _, _, sa, s1, s2, _ = data

        def run():
            x1 = torch._scaled_mm(a[:, :, 0], b1[:, :, 0].transpose(0, 1), blocked(sa), blocked(s1), out_dtype=torch.float32)
            x2 = torch._scaled_mm(a[:, :, 0], b2[:, :, 0].transpose(0, 1), blocked(sa), blocked(s2), out_dtype=torch.float32)
            return (torch.nn.functional.silu(x1) * x2).half()
        return run

    def run_g():
        return [torch._scaled_mm(a[:, :, 0], b[:, :, 0].transpose(0, 1), blocked(sa), blocked(sb), out_dtype=torch.float16)
                for (a, b, _), (sa, sb) in zip(data[0], data[2])]
    return run_g


def poison_outputs(problem: str, data) -> None:
    cs = [data[-1]] if problem == "dual" else [c for _, _, c in data[0]]
    for c in cs:
        c.fill_(float("nan"))


def floor_us(problem: str, shape, gpu: str, ceilings: dict) -> float:
    """The case's floor in us: on a B200 the leaderboard's speed of light where it lists the
    case, else max(FLOPs / the fp16 matmul rate, bytes / the copy bandwidth) measured in this run."""
    if gpu == "sm_100a" and shape in B200_SOL:
        return B200_SOL[shape]
    flops, byts = flops_bytes(problem, shape)
    return max(flops / (ceilings["fp16_tflops"] * 1e12), byts / (ceilings["copy_tbps"] * 1e12)) * 1e6


def all_correct(*row_lists) -> bool:
    """Every row's check passed: its per-call check and, where it ran, its ranked loop's."""
    return all(r["correct"] and r.get("ranked_correct", True) for rows in row_lists for r in rows)


def bench_case(problem: str, shape, gpu: str, timer: Timer, ceilings: dict, graph: bool) -> dict:
    from submission import custom_kernel

    data = make_input(problem, shape, seed=1111)
    cfg = select_config(problem, gpu, shape)
    log(f"  compiling {cfg.short()} ...")
    t0 = time.time()
    poison_outputs(problem, data)
    out = custom_kernel(data)
    torch.cuda.synchronize()
    compile_s = time.time() - t0
    ok, msg = R.check_implementation(data, out)
    flops, byts = flops_bytes(problem, shape)
    floor = floor_us(problem, shape, gpu, ceilings)
    # the kernel and every baseline timed in alternating rounds, each reported as the median of
    # its round medians: a transient slowdown of the GPU (seen once as a 7.7x slower cuBLAS
    # round, session 29) then spoils one round of one side, not the ratio
    fns = {"kernel": lambda: custom_kernel(data), **baselines(problem, data, gpu)}
    rounds = {name: [] for name in fns}
    errors = {}
    for _ in range(TIMING_ROUNDS):
        for name, fn in fns.items():
            if name in errors:
                continue
            log(f"  timing {name} ...")
            try:
                rounds[name].append(timer(fn))
            except Exception as e:  # a baseline that cannot run here is reported, not fatal
                if name == "kernel":
                    raise
                errors[name] = f"{type(e).__name__}: {e}"[:200]
    t = statistics.median(rounds["kernel"])
    row = {"problem": problem, "case": list(shape), "config": cfg.short(), "correct": ok, "check": msg[:200],
           "us": t, "rounds_us": rounds["kernel"], "tflops": flops / t / 1e6, "gbps": byts / t / 1e3,
           "floor_us": floor, "x_floor": t / floor, "compile_s": compile_s, "baselines": {}}
    if graph:
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            custom_kernel(data)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            custom_kernel(data)
        row["graph_us"] = timer(g.replay)
    custom_kernel(clone_input(data))  # (not timed: any per-shape first-call work)
    row["fresh_us"] = timer.fresh(custom_kernel, lambda: clone_input(data), FRESH_CALLS)[0]
    for name in fns:
        if name in errors:
            row["baselines"][name] = {"error": errors[name]}
        elif name != "kernel":
            bt = statistics.median(rounds[name])
            row["baselines"][name] = {"us": bt, "speedup": bt / t, "rounds_us": rounds[name]}
    row.update(ranked_case(problem, shape, gpu, timer, floor, row["baselines"]))
    return row


def ranked_case(problem: str, shape, gpu: str, timer: Timer, floor: float, baseline_rows: dict) -> dict:
    """The leaderboard's ranked loop (`ranked_time`) for the kernel, on RANKED_INPUTS new
    inputs after eval_better_bench's correctness pass on poisoned clones of them (every one
    checked), and for the cuBLAS pre-decoded baseline, on its own operands decoded from the
    same inputs beforehand.  Adds `ranked_us` / `ranked_speedup` to that baseline's row."""
    from submission import custom_kernel

    log("  ranked loop ...")
    inputs = ranked_inputs(problem, shape, seed=1111)
    bad = []
    for i, x in enumerate(inputs):
        c = clone_input(x)
        poison_outputs(problem, c)
        ok, msg = R.check_implementation(x, custom_kernel(c))
        if not ok:
            bad.append(f"input {i}: {msg[:120]}")
    tk, host = ranked_time(custom_kernel, inputs, timer.flush)
    out = {"ranked_correct": not bad, "ranked_check": "; ".join(bad)[:400], "ranked_inputs": len(inputs),
           "ranked_us": tk, "ranked_host_us": host, "ranked_x_floor": tk / floor}
    name = "cuBLAS fp16 pre-decoded"
    if "us" in baseline_rows.get(name, {}):
        calls = [baselines(problem, x, gpu)[name] for x in inputs]
        del inputs
        tb = ranked_time(lambda f: f(), calls, timer.flush)[0]
        baseline_rows[name].update(ranked_us=tb, ranked_speedup=tb / tk)
        del calls
    torch.cuda.empty_cache()
    return out


# The MoE mode (bench.py --moe): one structure's calls, each with new M_g and new activations over
# the same expert weights (B_g), as an MoE layer makes them.
MOE_CALLS = 20  # timed calls per round, back to back, each a new M_g set
MOE_ROUNDS = 3
MOE_WARM = 12  # untimed new-M_g calls first (compiles, NVFP4_DYNAMIC_M's auto switch)
MOE_SLEEP_CYCLES = 60_000_000  # ~30 ms at H100 / H200 clocks: longer than issuing MOE_CALLS calls


def moe_inputs(g: int, n: int, k: int, max_m: int, count: int, seed: int, weights=None) -> tuple[list, tuple]:
    """(`count` grouped inputs of g groups of N_g = n, K_g = k whose M_g are drawn uniformly from
    1..max_m anew for each input, the input whose B_g and scales they all share): new A_g, scales
    and C_g per input over one set of expert weights (`weights`, else the first input's)."""
    import random

    rnd = random.Random(seed)
    out = []
    for i in range(count):
        ms = [rnd.randint(1, max_m) for _ in range(g)]
        abc, sfs, sfp, sizes = R.generate_input(ms, [n] * g, [k] * g, g, seed + i, device="cuda")
        if weights is None:
            weights = (abc, sfs, sfp, sizes)
        out.append(([(a, w[1], c) for (a, _b, c), w in zip(abc, weights[0])],
                    [(sa, w[1]) for (sa, _sb), w in zip(sfs, weights[1])],
                    [(sa, w[1]) for (sa, _sb), w in zip(sfp, weights[2])], sizes))
    return out, weights


def moe_case(structure, max_m: int, gpu: str, timer: Timer, auto: bool = True) -> dict:
    """An MoE layer's calls (`moe_inputs`): after MOE_WARM untimed ones, per round MOE_CALLS new
    inputs with NaN-poisoned outputs, one L2 flush, then all of them back to back between two
    events (the mean per call; the host's own time per call beside it), every output checked
    afterwards; and the cuBLAS fp16 loop on operands decoded beforehand from the same inputs,
    timed the same way.  Reports medians over MOE_ROUNDS rounds and the configs the calls ran.
    `auto`: NVFP4_DYNAMIC_M's auto switch on (bench.py: unless the caller set the variable)."""
    import configs

    keep = configs.DYNAMIC_M_AUTO
    configs.DYNAMIC_M_AUTO = auto
    try:
        return _moe_case(structure, max_m, gpu, timer)
    finally:
        configs.DYNAMIC_M_AUTO = keep


def _moe_case(structure, max_m: int, gpu: str, timer: Timer) -> dict:
    from nvfp4gemm import dispatch, harness
    from submission import custom_kernel

    g, n, k = structure
    log(f"[moe g{g} N{n} K{k}, M_g 1-{max_m}] warm-up ...")
    warm, weights = moe_inputs(g, n, k, max_m, MOE_WARM, seed=2000)
    for x in warm:
        custom_kernel(x)
    torch.cuda.synchronize()
    del warm
    compiles = len(harness._CACHE)
    times, gpu_us, hosts, base, flops, bad, cfgs = [], [], [], [], [], [], set()
    for r in range(MOE_ROUNDS):
        # the GPU's own time per call: other new inputs, their calls all queued behind a GPU sleep
        # longer than the host takes to issue them (from the sleep's end to the last call's)
        queued, _ = moe_inputs(g, n, k, max_m, MOE_CALLS, seed=3050 + 100 * r, weights=weights)
        torch.cuda.synchronize()
        timer.flush()
        torch.cuda._sleep(MOE_SLEEP_CYCLES)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for x in queued:
            custom_kernel(x)
        e.record()
        torch.cuda.synchronize()
        gpu_us.append(s.elapsed_time(e) * 1e3 / len(queued))
        del queued
        inputs, _ = moe_inputs(g, n, k, max_m, MOE_CALLS, seed=3000 + 100 * r, weights=weights)
        for x in inputs:
            poison_outputs("group", x)
        torch.cuda.synchronize()
        timer.flush()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        t0 = time.perf_counter()
        outs = [custom_kernel(x) for x in inputs]
        hosts.append((time.perf_counter() - t0) * 1e6 / len(inputs))
        e.record()
        torch.cuda.synchronize()
        times.append(s.elapsed_time(e) * 1e3 / len(inputs))
        for i, (x, o) in enumerate(zip(inputs, outs)):
            ok, msg = R.check_implementation(x, o)
            if not ok or any(bool(torch.isnan(c).any()) for c in o):
                bad.append(f"round {r} call {i}: {msg[:100]}")
            cfgs.update(c.short() for c in dispatch.configs_of(x))
        flops.append(sum(2 * int(sz[0]) * n * k for x in inputs for sz in x[3]) / len(inputs))
        calls = [baselines("group", x, gpu)["cuBLAS fp16 pre-decoded"] for x in inputs]
        base.append(ranked_time(lambda f: f(), calls, timer.flush, repeats=1)[0])
        del inputs, outs, calls
        torch.cuda.empty_cache()
    t, tb = statistics.median(times), statistics.median(base)
    return {"structure": list(structure), "max_m": max_m, "calls": MOE_CALLS, "rounds": MOE_ROUNDS, "us": t,
            "gpu_us": statistics.median(gpu_us), "host_us": statistics.median(hosts), "tflops": statistics.mean(flops) / t / 1e6, "cublas_loop_us": tb,
            "speedup": tb / t, "correct": not bad, "check": "; ".join(bad)[:400],
            "compiles_timed": len(harness._CACHE) - compiles, "configs": sorted(cfgs)}


def masked_serves(structure, capacity: int) -> bool:
    """Whether MaskedGroupedGemm takes buffers of this (g, N, K) structure and capacity."""
    from configs import sm90_group_masked_picks

    g, n, k = structure
    return bool(sm90_group_masked_picks(((capacity, n, k),) * g))


def moe_masked_case(structure, max_m: int, timer: Timer, capacity: int | None = None) -> dict:
    """The same MoE layer through `MaskedGroupedGemm` (exp. 144): expert buffers of `capacity`
    rows (default max_m), the counts (uniform 1..max_m, one int32 tensor per call, made on the GPU
    beforehand as a router would) read on the device; expected counts (max_m + 1) // 2, so counts
    of at most 16 in larger buffers run the skinny kernel beside the mixed form (exps. 147-148).
    Per round MOE_CALLS calls back to back after one L2 flush (mean per call, and the host's own
    time), the same behind a GPU sleep (the GPU's own time), and a CUDA graph of one call
    replayed after a device copy of each call's counts.  Each round's last output (rows below
    its counts) is checked against the reference at capacity."""
    import random

    from nvfp4gemm.masked import MaskedGroupedGemm

    g, n, k = structure
    capacity = capacity or max_m
    log(f"[moe masked g{g} N{n} K{k}, capacity {capacity}, counts 1-{max_m}] ...")
    data = R.generate_input([capacity] * g, [n] * g, [k] * g, g, 2100, device="cuda")
    ref = R.ref_group(data)
    gemm = MaskedGroupedGemm(data, expected_m=[(max_m + 1) // 2] * g)
    rnd = random.Random(2101)
    dev_counts = torch.zeros(g, dtype=torch.int32, device="cuda")
    gemm(dev_counts)  # (warm-up: the launch's first call)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemm(dev_counts)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm(dev_counts)
    res = {"us": [], "host_us": [], "gpu_us": [], "graph_us": [], "graph_host_us": []}
    bad = []

    def timed(calls, key, host_key=None, sleep=False):
        for c in gemm.outputs:
            c.fill_(float("nan"))
        torch.cuda.synchronize()
        timer.flush()
        if sleep:
            torch.cuda._sleep(MOE_SLEEP_CYCLES)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        t0 = time.perf_counter()
        for call in calls:
            call()
        host = (time.perf_counter() - t0) * 1e6 / len(calls)
        e.record()
        torch.cuda.synchronize()
        res[key].append(s.elapsed_time(e) * 1e3 / len(calls))
        if host_key:
            res[host_key].append(host)

    def check(counts, what):
        for gi, (c, m) in enumerate(zip(gemm.outputs, counts)):
            errs = R.compare(c[:m], ref[gi][:m])
            if errs or bool(torch.isnan(c[:m]).any()):
                bad.append(f"{what} group {gi}: {'; '.join(errs)[:80] or 'NaN left'}")

    for r in range(MOE_ROUNDS):
        sets = [[rnd.randint(1, max_m) for _ in range(g)] for _ in range(MOE_CALLS)]
        counts = [torch.tensor(s, dtype=torch.int32, device="cuda") for s in sets]
        timed([lambda t=t: gemm(t) for t in counts], "gpu_us", sleep=True)
        timed([lambda t=t: gemm(t) for t in counts], "us", "host_us")
        check(sets[-1], f"round {r} eager")

        def replay(t):
            dev_counts.copy_(t)
            graph.replay()
        timed([lambda t=t: replay(t) for t in counts], "graph_us", "graph_host_us")
        check(sets[-1], f"round {r} graph")
    out = {key: statistics.median(v) for key, v in res.items()}
    out.update({"structure": list(structure), "capacity": capacity, "max_m": max_m, "calls": MOE_CALLS, "rounds": MOE_ROUNDS,
                "correct": not bad, "check": "; ".join(bad)[:400], "config": " + ".join(c.short() for c in gemm.configs)})
    return out


def _print_moe_rows(title: str, head: str, rows, line) -> None:
    """A MoE table: title, header, one `line(case name "gG NN KK", row)` per row."""
    print(title)
    print(head)
    print("-" * len(head))
    for r in rows:
        g, n, k = r["structure"]
        print(line(f"g{g} N{n} K{k}", r))


def print_moe_masked(rows) -> None:
    _print_moe_rows(
        "\nMoE, counts on the GPU (MaskedGroupedGemm: expert buffers of the capacity, M_g read on the device), "
        "mean per call, median of rounds",
        f"{'case':34} {'ok':3} {'us':>8} {'GPU us':>8} {'host us':>8} {'graph us':>9} {'graph host':>10}  config", rows,
        lambda name, r: f"{name + ' cap ' + str(r['capacity']) + ' M_g 1-' + str(r.get('max_m', r['capacity'])):34} "
                        f"{'yes' if r['correct'] else 'NO':3} {r['us']:8.1f} "
                        f"{r['gpu_us']:8.1f} {r['host_us']:8.1f} {r['graph_us']:9.1f} {r['graph_host_us']:10.1f}  {r['config']}")


def print_moe(rows) -> None:
    _print_moe_rows(
        "\nMoE: calls with new M_g every call over the same expert weights, back to back (mean per call, "
        "median of rounds); host = the host's own time per call; GPU = the calls' own time, all queued ahead",
        f"{'case':28} {'ok':3} {'us':>8} {'GPU us':>8} {'host us':>8} {'TFLOP/s':>8} {'cuBLAS loop':>11} {'speedup':>8}  "
        "compiles  configs", rows,
        lambda name, r: f"{name + ' M_g 1-' + str(r['max_m']):28} {'yes' if r['correct'] else 'NO':3} {r['us']:8.1f} "
                        f"{r.get('gpu_us', float('nan')):8.1f} {r['host_us']:8.1f} {r['tflops']:8.1f} "
                        f"{r['cublas_loop_us']:11.1f} {r['speedup']:7.2f}x  {r['compiles_timed']:8}  {', '.join(r['configs'])}")


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def short_case(r) -> str:
    from benchmarks.bench import case_name

    return case_name(r["problem"], r["case"], with_ms=False)


def print_table(rows, ceilings, device_name: str) -> None:
    nan = float("nan")
    print(f"\nDevice: {device_name}; fp16 matmul {ceilings['fp16_tflops']:.0f} TFLOP/s, copy {ceilings['copy_tbps']:.2f} TB/s")
    names = sorted({n for r in rows for n in r["baselines"]})
    head = f"{'problem':7} {'case':40} {'ok':3} {'us':>8} {'graph':>8} {'fresh':>8} {'TFLOP/s':>8} {'GB/s':>7} {'floor':>7} {'xfloor':>6}  " + \
        "  ".join(f"{'vs ' + n[:22]:>25}" for n in names) + f"  {'ranked':>7} {'xfloor':>6} {'vs cuBLAS':>9}  config"
    print(head)
    print("-" * len(head))
    for r in rows:
        sp = []
        for n in names:
            b = r["baselines"].get(n, {})
            sp.append(f"{b['speedup']:>24.2f}x" if "speedup" in b else f"{'n/a':>25}")
        case = short_case(r)
        print(f"{r['problem']:7} {case[:40]:40} {'yes' if r['correct'] else 'NO':3} {r['us']:8.1f} {r.get('graph_us', float('nan')):8.1f} {r.get('fresh_us', float('nan')):8.1f} "
              f"{r['tflops']:8.1f} {r['gbps']:7.0f} {r['floor_us']:7.1f} {r['x_floor']:6.2f}  " + "  ".join(sp) +
              f"  {r.get('ranked_us', nan):7.1f}{'' if r.get('ranked_correct', True) else '!'} {r.get('ranked_x_floor', nan):6.2f} "
              f"{r['baselines'].get('cuBLAS fp16 pre-decoded', {}).get('ranked_speedup', nan):8.2f}x  {r['config']}")
    for p in sorted({r["problem"] for r in rows}):
        pr = [r for r in rows if r["problem"] == p]
        print(f"geomean {p}: {geomean([r['us'] for r in pr]):.1f} us, x floor {geomean([r['x_floor'] for r in pr]):.2f}"
              f"; fresh tensors each call (eval.py's method) {geomean([r.get('fresh_us') for r in pr]):.1f} us"
              f"; ranked loop (the leaderboard's) {geomean([r.get('ranked_us') for r in pr]):.1f} us")
    print("ranked: eval_better_bench's loop (inputs back to back after one L2 flush, mean per call; '!' = an "
          "input failed its check); its xfloor and cuBLAS speedup come from the same loop")


def write_png(rows, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({n for r in rows for n in r["baselines"] if "us" in r["baselines"][n]})
    labels = [f"{r['problem']}\n{short_case(r)}" for r in rows]
    series = [("floor", [r["floor_us"] for r in rows]), ("ours", [r["us"] for r in rows])]
    series += [(n, [r["baselines"].get(n, {}).get("us", float("nan")) for r in rows]) for n in names]
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(rows)), 5))
    w = 0.8 / len(series)
    for i, (name, vals) in enumerate(series):
        ax.bar([x + i * w for x in range(len(rows))], vals, w, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("µs (log scale; lower is better)")
    ax.set_xticks([x + 0.4 - w / 2 for x in range(len(rows))])
    ax.set_xticklabels(labels)
    ax.set_title(f"NVFP4 GEMM vs floor and baselines ({torch.cuda.get_device_name()})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def run_benchmark(problems, args, gpu: str) -> int:
    from benchmarks.bench import cases_for

    global INPUT_DRAW
    INPUT_DRAW = args.draw
    timer = Timer(max(50, args.iters))
    log(f"inputs: the {INPUT_DRAW} draw; measuring fp16 matmul rate and copy bandwidth ...")
    ceilings = measure_ceilings(timer)
    rows = []
    for problem in problems:
        for i, shape in enumerate(cases_for(problem, args.cases)):
            log(f"[{problem} {i + 1}] {shape}")
            rows.append(bench_case(problem, shape, gpu, timer, ceilings, graph=True))
    moe = [moe_case(st, args.moe_max_m, gpu, timer, args.moe_auto) for st in (args.moe_structures or [])]
    # (the same layers with the counts on the GPU: sm_90a only, nvfp4gemm/masked.py)
    masked = [moe_masked_case(st, args.moe_max_m, timer, args.moe_capacity) for st in (args.moe_structures or [])
              if gpu == "sm_90a" and masked_serves(st, args.moe_capacity)]
    name = torch.cuda.get_device_name()
    print_table(rows, ceilings, name)
    if moe:
        print_moe(moe)
    if masked:
        print_moe_masked(masked)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "arch": gpu, "draw": INPUT_DRAW, "ceilings": ceilings, "rows": rows, "moe": moe,
                       "moe_masked": masked}, f, indent=1)
    if args.png:
        write_png(rows, args.png)
    return 0 if all_correct(rows, moe, masked) else 1
