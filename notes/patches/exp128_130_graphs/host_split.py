"""exp 128: where a ranked-loop call's host time goes (cycled inputs, every one seen before)."""
import os, sys, time, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from configs import GROUP_BENCHMARKS, DUAL_BENCHMARKS
from benchmarks.timing import make_input, clone_input, Timer, ranked_inputs
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
med = statistics.median
print(torch.cuda.get_device_name(), flush=True)
timer = Timer(1)
def per_call(fn, xs, reps=10):
    out = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for x in xs:
            fn(x)
        out.append((time.perf_counter() - t0) * 1e6 / len(xs))
    torch.cuda.synchronize()
    return med(out)
small = torch.zeros(16, device="cuda")
print("torch small add_ host us %.1f" % per_call(lambda _: small.add_(1), range(16)))
for problem, shape in [("dual", s) for s in DUAL_BENCHMARKS] + [("group", s) for s in GROUP_BENCHMARKS]:
    xs = ranked_inputs(problem, shape, 7)[:15]
    for x in xs:
        custom_kernel(x)
    torch.cuda.synchronize()
    full = per_call(custom_kernel, xs)
    entry_of = per_call(dispatch._entry_of, xs)
    e, flat, ptrs = dispatch._entry_of(xs[0])
    tpl = e.templates[dispatch._stream_handle(e.device)]
    def tpl_call(x):
        e, flat, ptrs = dispatch._entry_of(x)
        tpl(x, flat, ptrs)
    tpl_full = per_call(tpl_call, xs)
    launch = per_call(lambda _: tpl.launch(), range(15))
    writer = per_call(lambda _: tpl.writer(), range(15)) if tpl.writer is not None else float("nan")
    # a CUDA graph of one call, replayed
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        custom_kernel(xs[0])
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        custom_kernel(xs[0])
    replay = per_call(lambda _: g.replay(), range(15))
    print(f"{problem} {shape if problem == 'dual' else (len(shape), shape[0][1], shape[0][2])}: full {full:.1f} | entry_of {entry_of:.1f} "
          f"entry_of+tpl {tpl_full:.1f} | launch alone {launch:.1f} writer alone {writer:.1f} | graph replay {replay:.1f}", flush=True)
    del g
