"""Device, exp. 142: host time of grouped calls alternating between two shapes, each call on new
tensors (clones), with and without the sizes lookup (dispatch._sized_entry).  perf_counter around
custom_kernel after a synchronize; 40 calls per variant, medians."""
import os, sys, time, statistics, json
os.environ.setdefault("NVFP4_DYNAMIC_M", "0")
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import configs
import reference as R
from nvfp4gemm import dispatch

def mk(shape, seed):
    ms, ns, ks = (list(x) for x in zip(*shape))
    return R.generate_input(ms, ns, ks, len(shape), seed, device="cuda")

def clone(d):
    abc, sfs, sfp, sizes = d
    return ([tuple(t.clone() for t in g) for g in abc], [tuple(t.clone() for t in g) for g in sfs],
            [tuple(t.clone() for t in g) for g in sfp], [list(s) for s in sizes])

shapes = [configs.GROUP_BENCHMARKS[0], configs.GROUP_BENCHMARKS[1]]
bases = [mk(s, 7 + i) for i, s in enumerate(shapes)]
real = dispatch._sized_entry
out = {}
for label, fn in (("sizes lookup", real), ("without", lambda *a: None), ("sizes lookup again", real)):
    dispatch._sized_entry = fn
    for b in bases:
        dispatch.custom_kernel(clone(b))
    ins = [clone(bases[i % 2]) for i in range(40)]
    torch.cuda.synchronize()
    ts = []
    for d in ins:
        torch.cuda.synchronize()
        t = time.perf_counter()
        dispatch.custom_kernel(d)
        ts.append((time.perf_counter() - t) * 1e6)
    torch.cuda.synchronize()
    ok = all(R.check_implementation(d, [c for _a, _b, c in d[0]])[0] for d in ins[-2:])
    out[label] = dict(median_us=round(statistics.median(ts), 1), min_us=round(min(ts), 1), correct=ok)
    print(label, out[label], flush=True)
if os.environ.get("OUT"):
    json.dump(out, open(os.environ["OUT"] + "/exp142.json", "w"), indent=1)
