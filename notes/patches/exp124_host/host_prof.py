"""exp 124: where a new-tensor grouped call's host time goes (writer on), under eval conditions."""
import os, sys, time, statistics, cProfile, pstats, io
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
from configs import GROUP_BENCHMARKS, DUAL_BENCHMARKS
from benchmarks.timing import make_input, clone_input, Timer
from nvfp4gemm import dispatch
from nvfp4gemm.dispatch import custom_kernel
print("writer", dispatch.TABLE_WRITER, torch.cuda.get_device_name())
timer = Timer(1)
med = statistics.median
cases = [("group", s) for s in GROUP_BENCHMARKS] + [("dual", DUAL_BENCHMARKS[2])]
for problem, shape in cases:
    base = make_input(problem, shape, 1)
    custom_kernel(clone_input(base)); torch.cuda.synchronize()
    entry, _ = dispatch._entry_of(base)
    print(problem, type(entry.mod).__name__ if False else entry.mod.__name__, flush=True)
    for busy in (True,):
        parts = {k: [] for k in ("clone?", "entry_of", "stream", "tpl", "entries", "writer", "launch", "total")}
        for it in range(30):
            d = clone_input(base)
            torch.cuda.synchronize()
            if busy:
                timer.flush()
            t0 = time.perf_counter()
            entry, flat = dispatch._entry_of(d)
            t1 = time.perf_counter()
            h = dispatch._stream_handle(entry.device)
            t2 = time.perf_counter()
            tpl = entry.templates[h]
            t3 = time.perf_counter()
            te = t4 = t3
            if tpl.slots is not None:
                for ptr, di in tpl.slots:
                    ptr._desc.value = flat[di].data_ptr()
                te = t4 = time.perf_counter()
            elif tpl.writer is not None:
                vals = entry.mod.table_entries(d)
                tpl.entry_values[:len(vals)] = vals
                te = time.perf_counter()
                tpl.writer()
                t4 = time.perf_counter()
            else:
                pairs, tpl.owner = entry.mod.pointer_args(d, entry.cfg, stream_handle=tpl.handle)
                for ai, addr in pairs:
                    tpl.args[ai]._desc.value = addr
                te = t4 = time.perf_counter()
            tpl.last = flat
            tpl.launch()
            t5 = time.perf_counter()
            for k, v in zip(parts, (0, t1 - t0, t2 - t1, t3 - t2, te - t3, t4 - te, t5 - t4, t5 - t0)):
                parts[k].append(v * 1e6)
            torch.cuda.synchronize()
            del d
        print("  busy" if busy else "  idle", " ".join(f"{k} {med(v):.1f}" for k, v in parts.items() if k != "clone?"),
              "| max total %.0f" % max(parts["total"]), flush=True)
    # whole custom_kernel, eval conditions, profiled
    pr = cProfile.Profile()
    hosts = []
    for it in range(20):
        d = clone_input(base)
        torch.cuda.synchronize()
        timer.flush()
        t0 = time.perf_counter()
        pr.enable()
        custom_kernel(d)
        pr.disable()
        hosts.append((time.perf_counter() - t0) * 1e6)
        torch.cuda.synchronize()
        del d
    print("  profiled custom_kernel host µs median %.0f" % med(hosts))
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(12)
    print("\n".join(l for l in s.getvalue().splitlines()[6:26] if l.strip()), flush=True)
