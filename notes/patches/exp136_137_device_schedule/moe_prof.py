"""Device: where a custom_kernel call with new M_g spends its host time (NVFP4_DYNAMIC_M=1)."""
import os, sys, time, random, statistics, cProfile, pstats, io
os.environ["NVFP4_DYNAMIC_M"] = "1"
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.dispatch import custom_kernel
random.seed(5)
n, k, g = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def mk(seed):
    ms = [random.randint(1, 256) for _ in range(g)]
    return R.generate_input(ms, [n] * g, [k] * g, g, seed, device="cuda")
warm = [mk(100 + i) for i in range(30)]
for d in warm:
    custom_kernel(d)
torch.cuda.synchronize()
ins = [mk(500 + i) for i in range(40)]
torch.cuda.synchronize()
host, ncomp = [], 0
for data in ins[:20]:
    torch.cuda.synchronize()
    before = len(harness._CACHE)
    t = time.perf_counter()
    custom_kernel(data)
    dt = (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize()
    if len(harness._CACHE) != before:
        ncomp += 1
        continue
    host.append(dt)
host.sort()
print(f"N{n} K{k} g{g}: {len(host)} new-M_g calls: host ms median {host[len(host)//2]:.3f} min {host[0]:.3f} max {host[-1]:.3f}; {ncomp} compiled")
pr = cProfile.Profile()
torch.cuda.synchronize()
pr.enable()
for data in ins[20:]:
    custom_kernel(data)
    torch.cuda.synchronize()
pr.disable()
for key in ("cumulative", "tottime"):
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats(key).print_stats(40)
    print(s.getvalue())
