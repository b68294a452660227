"""exp 124c: host µs of a new-tensor call after the weak-ref change (eval conditions)."""
import os, sys, time, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from configs import GROUP_BENCHMARKS, DUAL_BENCHMARKS
from benchmarks.timing import make_input, clone_input, Timer
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
timer = Timer(1)
pc = time.perf_counter
for problem, shape in [("group", s) for s in GROUP_BENCHMARKS] + [("dual", s) for s in DUAL_BENCHMARKS]:
    base = make_input(problem, shape, 1)
    custom_kernel(clone_input(base)); torch.cuda.synchronize()
    parts = {k: [] for k in ("entry_of", "template", "total", "whole_ck", "drop")}
    for it in range(40):
        d = clone_input(base)
        torch.cuda.synchronize()
        timer.flush()
        if it % 2:
            t0 = pc(); custom_kernel(d); parts["whole_ck"].append((pc() - t0) * 1e6)
        else:
            t0 = pc()
            e, flat, ptrs = dispatch._entry_of(d); t1 = pc()
            e.templates[dispatch._stream_handle(e.device)](d, flat, ptrs); t2 = pc()
            parts["entry_of"].append((t1 - t0) * 1e6); parts["template"].append((t2 - t1) * 1e6); parts["total"].append((t2 - t0) * 1e6)
            del flat
        torch.cuda.synchronize()
        t0 = pc(); del d; parts["drop"].append((pc() - t0) * 1e6)
    print(problem, shape if problem == "dual" else f"g{len(shape)}", " ".join(f"{k} {statistics.median(v):.1f}" for k, v in parts.items()), flush=True)
