"""exp 130: why a caller's CUDA graph of a grouped call replays ~30 us slower than the call."""
import os, sys, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import cuda.bindings.driver as cu
from configs import GROUP_BENCHMARKS
from benchmarks.timing import Timer, make_input
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
print(torch.cuda.get_device_name(), "writer", dispatch.TABLE_WRITER, flush=True)
timer = Timer(30)
for shape in (GROUP_BENCHMARKS[3], GROUP_BENCHMARKS[0]):
    data = make_input("group", shape, 1)
    custom_kernel(data); torch.cuda.synchronize()
    eager = timer(lambda: custom_kernel(data))
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        custom_kernel(data)
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph(keep_graph=True)
    with torch.cuda.graph(g):
        custom_kernel(data)
    raw = cu.CUgraph(g.raw_cuda_graph())
    err, nodes, n = cu.cuGraphGetNodes(raw, 16)
    desc = []
    for nd in nodes[:n]:
        e, t = cu.cuGraphNodeGetType(nd)
        d = t.name.replace("CU_GRAPH_NODE_TYPE_", "")
        if d == "KERNEL":
            e, p = cu.cuGraphKernelNodeGetParams(nd)
            e2, name = cu.cuFuncGetName(p.func) if p.func else (0, b"?")
            d += ":" + (name.decode()[:40] if isinstance(name, bytes) else str(name)[:40]) + f" grid {p.gridDimX}"
        desc.append(d)
    err, _f, _t, ed, ne = cu.cuGraphGetEdges(raw, 16)
    g.instantiate() if hasattr(g, "instantiate") else None
    rep = timer(g.replay)
    # the replay with no flush in front
    t2 = []
    for _ in range(30):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); g.replay(); b.record(); torch.cuda.synchronize(); t2.append(a.elapsed_time(b) * 1e3)
    t3 = []
    for _ in range(30):
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); custom_kernel(data); b.record(); torch.cuda.synchronize(); t3.append(a.elapsed_time(b) * 1e3)
    print(len(shape), shape[0][1:], f"eager {eager:.1f} graph {rep:.1f} | no flush: graph {statistics.median(t2):.1f} eager {statistics.median(t3):.1f}",
          "| nodes", desc, "edges", [x.type for x in ed[:ne]] if not err else err, flush=True)
