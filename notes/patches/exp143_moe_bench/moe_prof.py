"""Device: where an MoE call's host time goes (auto mode, new M_g every call, shared weights)."""
import os, sys, time, cProfile, pstats, io, statistics
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
ins, _ = moe_inputs(g, n, k, 256, 60, seed=3000, weights=w)
torch.cuda.synchronize()
hs = []
for x in ins[:30]:
    torch.cuda.synchronize()
    t = time.perf_counter()
    custom_kernel(x)
    hs.append((time.perf_counter() - t) * 1e6)
torch.cuda.synchronize()
print(f"g{g} N{n} K{k}: host per call (synchronized before each) median {statistics.median(hs):.1f} us")
t = time.perf_counter()
for x in ins[30:45]:
    custom_kernel(x)
print(f"back to back host per call {(time.perf_counter() - t) / 15 * 1e6:.1f} us")
torch.cuda.synchronize()
pr = cProfile.Profile()
pr.enable()
for x in ins[45:]:
    custom_kernel(x)
pr.disable()
torch.cuda.synchronize()
for key in ("cumulative", "tottime"):
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats(key).print_stats(28)
    print("\n".join(l[:150] for l in s.getvalue().splitlines()[:45]))
