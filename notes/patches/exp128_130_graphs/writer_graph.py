"""exp 130b: the table writer as a graph node: replay time against its parameter count."""
import os, sys, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from cuda.bindings.driver import CUstream
from nvfp4gemm import table_writer
from nvfp4gemm.dispatch import PackedLaunch
med = statistics.median
def ev_time(fn, n=30):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); out.append(a.elapsed_time(b) * 1e3)
    return med(out)
x = torch.zeros(16, device="cuda")
for n in (8, 32, 80, 128):
    dst = torch.zeros(n, dtype=torch.int64, device="cuda")
    fn = table_writer.compiled("sm_90a", True, n)
    params, vals = table_writer.entry_params(n)
    vals[:] = list(range(1, n + 1))
    d = table_writer.entry_ptr(dst.data_ptr(), align=16); d.__c_pointers__()
    s = torch.cuda.Stream()
    lw = PackedLaunch(fn, (d, params, CUstream(s.cuda_stream)))
    with torch.cuda.stream(s):
        lw(); lw()
    torch.cuda.synchronize()
    assert dst.tolist() == list(range(1, n + 1))
    eager = ev_time(lambda: (s.wait_stream(torch.cuda.current_stream()), lw(), torch.cuda.current_stream().wait_stream(s)))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        lw()
    rep = ev_time(g.replay)
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        x.add_(1)
    rep2 = ev_time(g2.replay)
    print(f"writer n={n}: eager {eager:.1f} graph {rep:.1f} | torch add_ graph {rep2:.1f}", flush=True)
