"""Device: where a custom_kernel call with new M_g spends its host time under the device schedule."""
import os, sys, time, random, statistics, cProfile, pstats, io
os.environ["NVFP4_DYNAMIC_M"] = "1"
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import reference as R
from nvfp4gemm import harness, dispatch
from nvfp4gemm.dispatch import custom_kernel
n, k, g = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(5)
def mk(seed):
    return R.generate_input([rnd.randint(1, 256) for _ in range(g)], [n] * g, [k] * g, g, seed, device="cuda")
made = [0]
orig = dispatch._Template.__init__
def counted(self, *a, **kw):
    made[0] += 1
    orig(self, *a, **kw)
dispatch._Template.__init__ = counted
warm = [mk(100 + i) for i in range(12)]
for d in warm:
    custom_kernel(d)
torch.cuda.synchronize()
print("templates made in warm-up:", made[0])
ins = [mk(500 + i) for i in range(40)]
torch.cuda.synchronize()
made[0] = 0
host = []
for d in ins[:20]:
    torch.cuda.synchronize()
    t = time.perf_counter()
    custom_kernel(d)
    host.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
host.sort()
print(f"N{n} K{k} g{g}: host us median {host[10]:.0f} min {host[0]:.0f} max {host[-1]:.0f}; templates made {made[0]}")
pr = cProfile.Profile()
pr.enable()
for d in ins[20:]:
    custom_kernel(d)
    torch.cuda.synchronize()
pr.disable()
for key in ("cumulative", "tottime"):
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats(key).print_stats(35)
    print(s.getvalue()[:9000])
