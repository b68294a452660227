"""Device: does an MoE call (any-M path) wait for the GPU?  Host time of 15 calls queued behind
~50 ms of GPU sleep, against the same calls on an idle GPU; GPU time per call by events."""
import os, sys, time, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from benchmarks.timing import moe_inputs
from nvfp4gemm.dispatch import custom_kernel
g, n, k = (int(x) for x in sys.argv[1:4])
warm, w = moe_inputs(g, n, k, 256, 12, seed=2000)
for x in warm:
    custom_kernel(x)
torch.cuda.synchronize()
for label in ("idle", "behind 50 ms of sleep", "idle again", "behind sleep again"):
    ins, _ = moe_inputs(g, n, k, 256, 15, seed=5000 + len(label), weights=w)
    torch.cuda.synchronize()
    if "sleep" in label:
        torch.cuda._sleep(int(50e-3 * 1.98e9))
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    t = time.perf_counter()
    for x in ins:
        custom_kernel(x)
    host = (time.perf_counter() - t) / len(ins) * 1e6
    e.record()
    torch.cuda.synchronize()
    print(f"{label}: host per call {host:.1f} us; GPU span per call {s.elapsed_time(e) * 1e3 / len(ins):.1f} us", flush=True)
