"""Exp. 148 follow-up: where the split's time goes when every count <= 16 (capacity 256)."""
import random, time, torch
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
from nvfp4gemm.dispatch import _stream_handle
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
for (g, n, k) in ((8, 4096, 7168), (8, 7168, 2048)):
    data = R.generate_input([256] * g, [n] * g, [k] * g, g, 4800, device="cuda")
    split = MaskedGroupedGemm(data, small=True)
    rnd = random.Random(4801)
    counts = [torch.tensor([rnd.randint(1, 16) for _ in range(g)], dtype=torch.int32, device="cuda") for _ in range(20)]
    split(counts[0]); torch.cuda.synchronize()
    L = split._launch_on(_stream_handle(split.device))
    def set_counts(t):
        for a in split._counts_args:
            a._desc.value = t.data_ptr()
        split._counts_at = t.data_ptr()
    def run(fn):
        vals = []
        for r in range(5):
            flush_buf.zero_(); torch.cuda.synchronize(); torch.cuda._sleep(20_000_000)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for t in counts:
                fn(t)
            e.record(); torch.cuda.synchronize()
            vals.append(s.elapsed_time(e) * 1e3 / len(counts))
        return sorted(vals)[2]
    def skinny_only(t):
        set_counts(t); L[0]()
    def mixed_only(t):
        set_counts(t); L[1]()
    def serial(t):
        set_counts(t); L[0](); L[1]()
    print("R", g, n, k, {nm: round(run(f), 1) for nm, f in (("skinny", skinny_only), ("mixed_empty", mixed_only),
                                                            ("serial", serial), ("overlap", split))}, flush=True)
