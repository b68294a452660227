"""exp 130c: is the writer's graph-node cost per pointer-typed parameter?  Pointer vs Int64 params."""
import os, sys, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import cutlass
import cutlass.cute as cute
from cuda.bindings.driver import CUstream
from nvfp4gemm import table_writer
from nvfp4gemm.dispatch import PackedLaunch
med = statistics.median


class IntWriter:
    def __init__(self, n):
        self.n = n

    @cute.jit
    def __call__(self, dst: cute.Pointer, entries: tuple, stream: CUstream):
        self.kernel(dst, entries).launch(grid=(1, 1, 1), block=(32, 1, 1), stream=stream)

    @cute.kernel
    def kernel(self, dst: cute.Pointer, entries: tuple):
        lane, _, _ = cute.arch.thread_idx()
        table = cute.make_tensor(dst, cute.make_layout((self.n,)))
        for i in cutlass.range_constexpr(self.n):
            if lane == i % 32:
                table[i] = entries[i]


def flushed(fn, flush, n=30):
    out = []
    for _ in range(n):
        torch.cuda.synchronize()
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); torch.cuda.synchronize(); out.append(a.elapsed_time(b) * 1e3)
    return med(out)


flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
x = torch.zeros(16, device="cuda")
for n in (32, 64, 128):
    for kind in ("ptr", "int"):
        dst = torch.zeros(n, dtype=torch.int64, device="cuda")
        d = table_writer.entry_ptr(dst.data_ptr(), align=16)
        s = torch.cuda.Stream()
        if kind == "ptr":
            fn = table_writer.compiled("sm_90a", True, n)
            params, vals = table_writer.entry_params(n)
            vals[:] = list(range(1, n + 1))
        else:
            params = tuple(cutlass.Int64(i + 1) for i in range(n))
            fn = cute.compile(IntWriter(n), d, params, CUstream(s.cuda_stream))
        lw = PackedLaunch(fn, (d, params, CUstream(s.cuda_stream)))
        with torch.cuda.stream(s):
            lw(); lw()
        torch.cuda.synchronize()
        assert dst.tolist() == list(range(1, n + 1)), kind
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            x.add_(1)
            lw()
        g0 = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g0):
            x.add_(1)
        print(f"n={n} {kind}: graph(add+writer) {flushed(g.replay, flush):.1f}  graph(add) {flushed(g0.replay, flush):.1f}", flush=True)
