"""Device: the any-M path's host time by part (perf_counter wrappers), MoE calls back to back."""
import os, sys, time, statistics, gc
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import configs
from benchmarks.timing import moe_inputs
from nvfp4gemm import dispatch, validate
g, n, k = (int(x) for x in sys.argv[1:4])
acc = {}
def wrap(mod, name, label=None):
    f = getattr(mod, name)
    label = label or name
    def w(*a, **kw):
        t = time.perf_counter()
        try:
            return f(*a, **kw)
        finally:
            acc.setdefault(label, []).append(time.perf_counter() - t)
    setattr(mod, name, w)
for mod, name in ((dispatch, "_entry_of"), (dispatch, "_launch"), (dispatch, "_any_m_entry"), (dispatch, "_flatten"),
                  (dispatch, "_aligned_ptrs"), (dispatch, "group_rows_match"), (configs, "any_m_tile"),
                  (dispatch, "_sized_entry")):
    wrap(mod, name)
T = dispatch._Template
for name in ("_point_at", "_write", "__call__"):
    wrap(T, name, "Template." + name)
wrap(dispatch.PackedLaunch, "__call__", "PackedLaunch.__call__")
warm, w = moe_inputs(g, n, k, 256, 12, seed=2000)
for x in warm:
    dispatch.custom_kernel(x)
torch.cuda.synchronize()
for gc_on in (True, False):
    ins, _ = moe_inputs(g, n, k, 256, 40, seed=7000 + gc_on, weights=w)
    torch.cuda.synchronize()
    acc.clear()
    if not gc_on:
        gc.disable()
    tot = []
    for x in ins:
        t = time.perf_counter()
        dispatch.custom_kernel(x)
        tot.append(time.perf_counter() - t)
    gc.enable()
    torch.cuda.synchronize()
    print(f"gc {'on' if gc_on else 'off'}: custom_kernel median {statistics.median(tot) * 1e6:.1f} us, mean {statistics.mean(tot) * 1e6:.1f}")
    for key, v in sorted(acc.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {key:28} calls/call {len(v) / len(ins):4.1f}  us/call (mean) {sum(v) / len(ins) * 1e6:7.1f}")
