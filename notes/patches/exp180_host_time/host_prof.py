"""Host µs per hot call of custom_kernel (ranked-loop style: 15/50 inputs cycled, no sync between
calls) for one tree; then cProfile of the same loop ($OUT/prof_LABEL_*.txt).  Exp. 180: run on
one GPU machine for an old tree and the current one, e.g.
    git archive d1c1228 nvfp4gemm configs.py reference.py | tar -x -C s55/old   (an ignored folder)
    python3 host_prof.py s55/old old; python3 host_prof.py . cur
with PYTHONPATH holding the DSL only (not the repository), so each tree imports its own code."""
import cProfile, io, os, pstats, statistics, sys, time
root = os.path.abspath(sys.argv[1]); label = sys.argv[2]
sys.path.insert(0, root)
import torch
import nvfp4gemm  # noqa
import reference as R
from nvfp4gemm.dispatch import custom_kernel
assert os.path.dirname(os.path.dirname(os.path.abspath(nvfp4gemm.__file__))) == root, nvfp4gemm.__file__
CASES = [("dual", (256, 3072, 4096, 1), 50), ("dual", (512, 4096, 7168, 1), 50),
         ("group", [(128, 4096, 1536), (384, 4096, 1536)], 15),
         ("group", [(40, 7168, 2048), (76, 7168, 2048), (168, 7168, 2048), (72, 7168, 2048),
                    (164, 7168, 2048), (148, 7168, 2048), (196, 7168, 2048), (160, 7168, 2048)], 15)]
def make(problem, shape, seed):
    if problem == "dual":
        return R.generate_input(*shape, seed, device="cuda")
    ms, ns, ks = zip(*shape)
    return R.generate_input(list(ms), list(ns), list(ks), len(shape), seed, device="cuda")
for problem, shape, n in CASES:
    inputs = [make(problem, shape, 1000 + 42 * i) for i in range(n)]
    for _ in range(3):
        for x in inputs:
            custom_kernel(x)
    torch.cuda.synchronize()
    per = []
    for _ in range(10):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for x in inputs:
            custom_kernel(x)
        per.append((time.perf_counter() - t0) * 1e6 / n)
        torch.cuda.synchronize()
    name = problem + " " + (str(shape[:3]) if problem == "dual" else f"g{len(shape)} N{shape[0][1]} K{shape[0][2]}")
    print(f"[{label}] {name}: host us/call median {statistics.median(per):.1f} min {min(per):.1f}", flush=True)
    pr = cProfile.Profile()
    torch.cuda.synchronize()
    pr.enable()
    for _ in range(10):
        for x in inputs:
            custom_kernel(x)
    pr.disable()
    torch.cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(18)
    out = os.environ.get("OUT", "/tmp")
    with open(os.path.join(out, f"prof_{label}_" + "".join(c if c.isalnum() else "_" for c in name) + ".txt"), "w") as f:
        f.write(s.getvalue())
