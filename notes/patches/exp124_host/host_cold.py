"""exp 124b: a new-tensor call's host time by piece after the guard (eval conditions: clone,
synchronize, L2 flush queued, then the call)."""
import os, sys, time, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from functools import reduce
from operator import or_
from configs import GROUP_BENCHMARKS, DUAL_BENCHMARKS
from benchmarks.timing import make_input, clone_input, Timer
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
timer = Timer(1)
pc = time.perf_counter
names = ("flatten", "sizes", "guard", "align", "last", "stream", "entries", "writer", "launch", "ret", "total", "whole_ck")
for problem, shape in [("group", s) for s in GROUP_BENCHMARKS] + [("dual", DUAL_BENCHMARKS[2])]:
    base = make_input(problem, shape, 1)
    custom_kernel(clone_input(base)); torch.cuda.synchronize()
    parts = {k: [] for k in names}
    for it in range(40):
        d = clone_input(base)
        torch.cuda.synchronize()
        timer.flush()
        if it % 2:  # whole custom_kernel, for comparison
            t0 = pc(); custom_kernel(d); parts["whole_ck"].append((pc() - t0) * 1e6)
            torch.cuda.synchronize(); continue
        t = [pc()]
        p, flat, sizes = dispatch._flatten(d); t.append(pc())
        st = None if sizes is None else tuple(map(tuple, sizes)); t.append(pc())
        e = dispatch._RECENT[problem]
        assert e.sizes == st and e.n_flat == len(flat) and e.guard.check(*e.used(flat)); t.append(pc())
        assert not reduce(or_, map(torch.Tensor.data_ptr, e.used(flat)), 0) & 15; t.append(pc())
        dispatch._LAST[id(d)] = (d, flat, st, e)
        if len(dispatch._LAST) > 8: dispatch._LAST.popitem(last=False)
        t.append(pc())
        h = dispatch._stream_handle(e.device); tpl = e.templates[h]; t.append(pc())
        if tpl.slots is not None:
            for ptr, di in tpl.slots:
                ptr._desc.value = flat[di].data_ptr()
            t.append(pc()); t.append(pc())
        else:
            vals = e.mod.table_entries(d); tpl.entry_values[:len(vals)] = vals; t.append(pc())
            tpl.writer(); t.append(pc())
        tpl.last = flat
        tpl.launch(); t.append(pc())
        r = d[-1] if problem == "dual" else [g[2] for g in d[0]]; t.append(pc())
        for k, a, b in zip(names, t, t[1:]):
            parts[k].append((b - a) * 1e6)
        parts["total"].append((t[-1] - t[0]) * 1e6)
        torch.cuda.synchronize()
    print(problem, shape if problem == "dual" else f"g{len(shape)}", " ".join(f"{k} {statistics.median(v):.1f}" for k, v in parts.items()), flush=True)
