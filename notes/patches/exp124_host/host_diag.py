"""exp 124 diag: CPU speed factor and pieces of the fast path on the device host."""
import os, sys, time, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from configs import GROUP_BENCHMARKS
from benchmarks.timing import make_input, clone_input, Timer
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
base = make_input("group", GROUP_BENCHMARKS[0], 1)
custom_kernel(clone_input(base)); torch.cuda.synchronize()
d = clone_input(base)
e = dispatch._RECENT.get("group")
print("recent entry", e is not None, "guard", None if e is None else e.guard)
_, flat, sizes = dispatch._flatten(d)
if e is not None and e.guard is not None:
    print("guard check on clone:", e.guard.check(*flat), "n_flat", e.n_flat, len(flat), "sizes eq", e.sizes == tuple(map(tuple, sizes)))
def T(name, f, n=2000):
    f()
    t0 = time.perf_counter()
    for _ in range(n): f()
    print(f"{name:14} {(time.perf_counter()-t0)/n*1e6:7.2f} us", flush=True)
T("empty lambda", lambda: None)
T("flatten", lambda: dispatch._flatten(d))
T("sizes", lambda: tuple(map(tuple, sizes)))
if e is not None and e.guard is not None:
    T("guard", lambda: e.guard.check(*flat))
T("py sig", lambda: dispatch._signature("group", flat, tuple(map(tuple, sizes))))
T("align", lambda: dispatch._check_alignment(e, d, flat))
T("entry_of", lambda: (dispatch._LAST.clear(), dispatch._entry_of(d)))
T("table_entries", lambda: e.mod.table_entries(d))
tpl = next(iter(e.templates.values()))
T("writer launch", lambda: tpl.writer(), 500)
T("main launch", lambda: tpl.launch(), 200)
torch.cuda.synchronize()
T("custom_kernel same", lambda: custom_kernel(d), 200)
torch.cuda.synchronize()
