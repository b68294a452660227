"""Device-only micro-benchmark: how fast can the CTAs of a cluster exchange shared memory?

Why (notes/sm90.md experiments 51 and 59): on sm_90a the decoded-B stores are most of the
wgmma kernels' decode cost, and B is decoded once per M tile.  A cluster of the CTAs of one
N column could decode B once -- each CTA a slice, then copy its slice into the peers' shared
memory -- if the copy is cheap against a sub-block (~0.9 us for 32 KB of decoded B on an
H200).  Register stores to distributed shared memory (`st.shared::cluster`) were far too
slow (experiment 51); this measures the bulk copy engine's `cp.async.bulk.shared::cluster`
against them, with every SM busy.

Per iteration every CTA of a cluster of `cs` sends `nbytes` to each of the other cs - 1
CTAs and waits until it has received (cs - 1) * nbytes:
  * mode `bulk`: thread 0 arms the CTA's mbarrier with the incoming byte count, cluster
    barrier (every peer armed), then lanes of warp 0 issue `pieces` bulk copies per peer
    (`mapa` of the peer's buffer and mbarrier), all threads wait on the mbarrier phase;
  * mode `st`: all 128 threads store 16 bytes at a time with `st.shared::cluster.v4`, then
    a cluster barrier (release / acquire) is the completion;
  * mode `sync`: the same barriers and mbarrier phases with nothing sent (the overhead to
    subtract).
Printed: us per iteration and GB/s received per SM (after subtracting `sync`).

    python3 benchmarks/dsmem_copy.py [--cluster 2 4] [--kb 8 16 32] [--iters 2000]
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nvfp4gemm  # noqa: F401,E402  (sets CUTE_DSL_ARCH before cutlass on CPU machines)
import cuda.bindings.driver as cuda  # noqa: E402
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
import cutlass.utils as utils  # noqa: E402
from cutlass import Int32  # noqa: E402
from cutlass.cutlass_dsl import dsl_user_op  # noqa: E402

from nvfp4gemm.sm90.decode import _asm  # noqa: E402

THREADS = 128


@dsl_user_op
def _mapa(addr: Int32, rank: Int32, *, loc=None, ip=None) -> Int32:
    """Shared::cluster address of this CTA's shared address `addr` in cluster CTA `rank`."""
    from cutlass.cutlass_dsl import T
    return Int32(_asm(T.i32(), [Int32(addr).ir_value(loc=loc, ip=ip), Int32(rank).ir_value(loc=loc, ip=ip)],
                      "mapa.shared::cluster.u32 $0, $1, $2;", "=r,r,r", False, loc=loc, ip=ip))


@dsl_user_op
def _bulk_to_peer(dst_cluster: Int32, src: Int32, nbytes: Int32, mbar_cluster: Int32, *, loc=None, ip=None) -> None:
    """cp.async.bulk shared::cta -> shared::cluster, completing `nbytes` of transactions on the
    (peer's) mbarrier at `mbar_cluster`."""
    _asm(None, [Int32(x).ir_value(loc=loc, ip=ip) for x in (dst_cluster, src, nbytes, mbar_cluster)],
         "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];",
         "r,r,r,r", True, loc=loc, ip=ip)


@dsl_user_op
def _st_cluster_v4(addr_cluster: Int32, v: Int32, *, loc=None, ip=None) -> None:
    _asm(None, [Int32(addr_cluster).ir_value(loc=loc, ip=ip), Int32(v).ir_value(loc=loc, ip=ip)],
         "st.shared::cluster.v4.b32 [$0], {$1, $1, $1, $1};", "r,r", True, loc=loc, ip=ip)


class DsmemCopy:
    def __init__(self, mode: str, cs: int, nbytes: int, pieces: int):
        assert mode in ("bulk", "st", "sync") and nbytes % (16 * pieces) == 0
        assert (cs - 1) * pieces <= 32, "one lane of warp 0 per (peer, piece)"
        self.mode, self.cs, self.nbytes, self.pieces = mode, cs, nbytes, pieces

    @cute.jit
    def __call__(self, iters: Int32, ctas: Int32, stream: cuda.CUstream):
        n = self.nbytes
        fields = {"mbar": cute.struct.MemRange[cutlass.Int64, 1],
                  "src": cute.struct.Align[cute.struct.MemRange[cutlass.Uint8, n], 128],
                  # one receive slot per sending rank
                  "dst": cute.struct.Align[cute.struct.MemRange[cutlass.Uint8, n * self.cs], 128]}
        self.storage = cute.struct(type("Storage", (), {"__annotations__": fields}))
        self.kernel(iters).launch(grid=[ctas, 1, 1], block=[THREADS, 1, 1], cluster=[self.cs, 1, 1],
                                  stream=stream)

    @cute.kernel
    def kernel(self, iters: Int32):
        tidx, _, _ = cute.arch.thread_idx()
        rank = cute.arch.block_idx()[0] % self.cs
        st = utils.SmemAllocator().allocate(self.storage)
        bar = st.mbar.data_ptr()
        bar_a = bar.toint()
        src = st.src.data_ptr().toint()
        dst = st.dst.data_ptr().toint()
        if tidx == 0:
            cute.arch.mbarrier_init(bar, 1)
        cute.arch.mbarrier_init_fence()
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()
        n = self.nbytes
        incoming = (self.cs - 1) * n if self.mode == "bulk" else 0
        piece = n // self.pieces
        phase = Int32(0)
        if tidx == 0:
            cute.arch.mbarrier_arrive_and_expect_tx(bar, incoming)
        for _ in cutlass.range(iters, unroll=1):
            # every peer has armed its mbarrier for this iteration's bytes
            cute.arch.cluster_arrive()
            cute.arch.cluster_wait()
            if cutlass.const_expr(self.mode == "bulk"):
                if tidx < (self.cs - 1) * self.pieces:
                    peer = (rank + 1 + tidx // self.pieces) % self.cs
                    off = (tidx % self.pieces) * piece
                    # my slot in the peer's receive buffer is slot `rank`
                    _bulk_to_peer(_mapa(dst + rank * n + off, peer), src + off, Int32(piece), _mapa(bar_a, peer))
            if cutlass.const_expr(self.mode == "st"):
                for p in cutlass.range_constexpr(1, self.cs):
                    peer = (rank + p) % self.cs
                    base = _mapa(dst + rank * n, peer)
                    for i in cutlass.range_constexpr(n // (16 * THREADS)):
                        _st_cluster_v4(base + (i * THREADS + tidx) * 16, tidx)
                cute.arch.cluster_arrive()
                cute.arch.cluster_wait()
            cute.arch.mbarrier_wait(bar, phase)
            # all threads past this phase before the next one is armed (a phase with nothing
            # to receive completes at the arm; a late waiter would then miss its parity)
            cute.arch.sync_threads()
            phase = phase ^ 1
            if tidx == 0:
                cute.arch.mbarrier_arrive_and_expect_tx(bar, incoming)
        # no CTA exits while a peer's copy may still read its shared memory
        cute.arch.cluster_arrive()
        cute.arch.cluster_wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cluster", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--kb", type=int, nargs="+", default=[8, 16, 32])
    ap.add_argument("--pieces", type=int, default=4)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--compile-only", action="store_true", help="compile every variant for sm_90a (CPU machine)")
    args = ap.parse_args()
    if args.compile_only:
        from cutlass.cute.runtime import make_fake_stream
        for cs in args.cluster:
            for mode in ("sync", "bulk", "st"):
                obj = DsmemCopy(mode, cs, args.kb[0] * 1024, args.pieces)
                cute.compile(obj, Int32(1), Int32(cs), make_fake_stream(), options="--gpu-arch sm_90a")
                print("compiled", cs, mode)
        return
    import torch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    print(f"{torch.cuda.get_device_name(0)}, {sms} SMs, {args.iters} iterations per launch")
    print(f"{'cluster':>7} {'KB/peer':>7} {'mode':>5} {'us/iter':>8} {'net us':>7} {'GB/s in per SM':>14}")
    for cs in args.cluster:
        ctas = sms // cs * cs
        for kb in args.kb:
            times = {}
            for mode in ("sync", "bulk", "st"):
                obj = DsmemCopy(mode, cs, kb * 1024, args.pieces)
                fn = cute.compile(obj, Int32(args.iters), Int32(ctas), stream)
                fn(Int32(args.iters), Int32(ctas), stream)  # warm-up
                torch.cuda.synchronize()
                best = None
                for _ in range(3):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn(Int32(args.iters), Int32(ctas), stream)
                    e1.record()
                    torch.cuda.synchronize()
                    t = e0.elapsed_time(e1) * 1e3 / args.iters
                    best = t if best is None else min(best, t)
                times[mode] = best
                net = best - times["sync"]
                gbs = (cs - 1) * kb * 1024 / (net * 1e3) if mode != "sync" and net > 0 else float("nan")
                print(f"{cs:>7} {kb:>7} {mode:>5} {best:>8.3f} {net:>7.3f} {gbs:>14.1f}", flush=True)


if __name__ == "__main__":
    main()
