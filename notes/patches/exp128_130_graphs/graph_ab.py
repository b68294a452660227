"""exp 128: CUDA graphs per address set against plain launches, alternated in one process;
the captured graph's edges (is PDL kept?)."""
import ctypes, os, sys, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import cuda.bindings.driver as cu
from configs import GROUP_BENCHMARKS, DUAL_BENCHMARKS
from benchmarks.timing import Timer, ranked_inputs, ranked_time, timed_call
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
med = statistics.median
timer = Timer(1)
print(torch.cuda.get_device_name(), flush=True)
for problem, shape in [("dual", s) for s in DUAL_BENCHMARKS] + [("group", s) for s in GROUP_BENCHMARKS]:
    xs = ranked_inputs(problem, shape, 3)
    for _ in range(3):
        for x in xs:
            custom_kernel(x)
    torch.cuda.synchronize()
    e, flat, ptrs = dispatch._entry_of(xs[0])
    tpl = e.templates[dispatch._stream_handle(e.device)]
    # the graph's nodes and edges
    tpl._point_at(xs[0], flat, ptrs)
    slot = ctypes.c_void_p.from_address(tpl.stream_arg.getPtr()); home = slot.value
    st = tpl.cap_stream.stream
    slot.value = int(st)
    cu.cuStreamBeginCapture(st, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED)
    tpl.launch()
    err, g = cu.cuStreamEndCapture(st)
    slot.value = home
    err2, _f, _t, data, n = cu.cuGraphGetEdges(g, 8)
    err3, _nodes, nn = cu.cuGraphGetNodes(g, 0)
    kinds = [d.type for d in data[:n]] if not err2 else err2
    cu.cuGraphDestroy(g)
    modes = {True: {"ranked": [], "host": [], "same": []}, False: {"ranked": [], "host": [], "same": []}}
    for rnd in range(6):
        for on in ((True, False) if rnd % 2 == 0 else (False, True)):
            tpl.graph_ok = on
            t, h = ranked_time(custom_kernel, xs, timer.flush, repeats=5)
            modes[on]["ranked"].append(t); modes[on]["host"].append(h)
            modes[on]["same"].append(med(timed_call(custom_kernel, xs[0], timer.flush)[0] for _ in range(10)))
    tpl.graph_ok = True
    r = {on: {k: med(v) for k, v in m.items()} for on, m in modes.items()}
    print(f"{problem} {shape if problem == 'dual' else (len(shape), shape[0][1], shape[0][2])}: nodes {nn} edges {kinds} | "
          f"ranked graph/plain {r[True]['ranked']:.1f}/{r[False]['ranked']:.1f} = {r[True]['ranked']/r[False]['ranked']:.3f} "
          f"host {r[True]['host']:.1f}/{r[False]['host']:.1f} | same {r[True]['same']:.1f}/{r[False]['same']:.1f} = {r[True]['same']/r[False]['same']:.3f}", flush=True)
