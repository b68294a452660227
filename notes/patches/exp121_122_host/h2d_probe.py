"""Device: host time of small host-to-device writes with the GPU idle and busy."""
import time, statistics, torch
from cuda.bindings import driver as cu
dev = torch.device("cuda", 0)
vals = tuple(range(1, 129))
pin = torch.tensor(vals, dtype=torch.int64, pin_memory=True)
dst = torch.empty(128, dtype=torch.int64, device=dev)
def t(f, busy, n=60):
    ts = []
    for _ in range(n):
        torch.cuda.synchronize()
        if busy:
            torch.cuda._sleep(2000000)
        t0 = time.perf_counter(); f(); ts.append((time.perf_counter() - t0) * 1e6)
    torch.cuda.synchronize()
    return statistics.median(ts)
h = torch.cuda.current_stream().cuda_stream
cs = cu.CUstream(h)
def f_driver():
    cu.cuMemcpyHtoDAsync(dst.data_ptr(), pin.data_ptr(), 1024, cs)
def f_copy():
    dst.copy_(pin, non_blocking=True)
def f_write1():
    cu.cuStreamWriteValue64(cs, dst.data_ptr(), 7, 0)
def f_fill():
    dst.fill_(3)
def f_pin_to():
    torch.tensor(vals, dtype=torch.int64, pin_memory=True).to(dev, non_blocking=True)
for name, f in (("driver HtoDAsync pinned", f_driver), ("copy_ pinned prealloc", f_copy),
                ("cuStreamWriteValue64 x1", f_write1), ("fill_ kernel", f_fill), ("tensor(pin).to", f_pin_to)):
    try:
        print(f"{name}: idle {t(f, False):.1f} us, busy {t(f, True):.1f} us", flush=True)
    except Exception as e:
        print(name, "failed:", type(e).__name__, str(e)[:120], flush=True)
