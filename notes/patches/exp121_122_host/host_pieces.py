"""Device: each piece of a fresh-tensor custom_kernel call, timed separately (no profiler)."""
import os, sys, time, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import numpy as np
from configs import GROUP_BENCHMARKS, DUAL_BENCHMARKS
from benchmarks.timing import make_input, clone_input
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel

def med(xs): return statistics.median(xs)
for problem, shape in (("group", GROUP_BENCHMARKS[3]), ("group", GROUP_BENCHMARKS[0]), ("dual", DUAL_BENCHMARKS[2])):
    base = make_input(problem, shape, 1)
    custom_kernel(clone_input(base)); torch.cuda.synchronize()
    ins = [clone_input(base) for _ in range(40)]
    torch.cuda.synchronize()
    parts = {k: [] for k in ("entry_of", "stream", "tpl_lookup", "patch", "launch", "total")}
    for d in ins:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        entry, flat = dispatch._entry_of(d)
        t1 = time.perf_counter()
        h = dispatch._stream_handle(entry.device)
        t2 = time.perf_counter()
        tpl = entry.templates[h]
        t3 = time.perf_counter()
        if tpl.slots is not None:
            for ptr, di in tpl.slots:
                ptr._desc.value = flat[di].data_ptr()
        else:
            for ai, addr in entry.mod.pointer_args(d, entry.cfg):
                tpl.args[ai]._desc.value = addr
        tpl.last = flat
        t4 = time.perf_counter()
        tpl.launch()
        t5 = time.perf_counter()
        for k, v in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4, t5 - t0)):
            parts[k].append(v * 1e6)
    torch.cuda.synchronize()
    print(problem, shape if problem == "dual" else f"g{len(shape)} N{shape[0][1]} K{shape[0][2]}", " ".join(f"{k} {med(v):.1f}" for k, v in parts.items()), flush=True)

dev = torch.device("cuda", 0)
vals = tuple(range(1, 129))
def t(f, n=100, busy=False):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        if busy:
            torch.cuda._sleep(2000000)
        t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return med(ts)
f_pin = lambda: torch.tensor(vals, dtype=torch.int64, pin_memory=True).to(dev, non_blocking=True)
f_page = lambda: torch.tensor(vals, dtype=torch.int64).to(dev, non_blocking=True)
ring = torch.empty((64, 128), dtype=torch.int64, pin_memory=True)
rnp = ring.numpy()
state = [0]
def f_ring():
    i = state[0] = (state[0] + 1) % 64
    rnp[i] = vals
    out = torch.empty(128, dtype=torch.int64, device=dev)
    out.copy_(ring[i], non_blocking=True)
    ev = torch.cuda.Event(); ev.record()
    return out
for name, f in (("tensor(pin)+to", f_pin), ("tensor(pageable)+to", f_page), ("ring+empty+copy+event", f_ring)):
    print(f"{name}: idle {t(f):.1f} us, GPU busy {t(f, busy=True):.1f} us", flush=True)
print("tensor only", t(lambda: torch.tensor(vals, dtype=torch.int64)), "tensor pin only", t(lambda: torch.tensor(vals, dtype=torch.int64, pin_memory=True)))
print("is_current_stream_capturing", t(lambda: torch.cuda.is_current_stream_capturing()), "is_available", t(lambda: torch.cuda.is_available()))
