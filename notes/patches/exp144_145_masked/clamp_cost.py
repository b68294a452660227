"""Exp. 145 probe: what the clamp kernel costs a MaskedGroupedGemm call (GPU and host)."""
import json, os, random, statistics, sys, time
import torch
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
from nvfp4gemm.dispatch import _stream_handle

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
out = []
for (g, n, k, cap, lo, hi) in [(8, 7168, 2048, 256, 1, 256), (8, 4096, 7168, 64, 1, 16), (8, 7168, 2048, 64, 1, 64), (8, 4096, 7168, 16, 1, 16)]:
    data = R.generate_input([cap] * g, [n] * g, [k] * g, g, 7, device="cuda")
    gemm = MaskedGroupedGemm(data, expected_m=[(lo + hi) // 2] * g)
    rnd = random.Random(1)
    counts = [torch.tensor([rnd.randint(lo, hi) for _ in range(g)], dtype=torch.int32, device="cuda") for _ in range(20)]
    gemm(counts[0]); torch.cuda.synchronize()
    launch = gemm._launch_on(_stream_handle(gemm.device))
    def run(kind):
        res, hosts = [], []
        for _ in range(5):
            flush.zero_(); torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); t0 = time.perf_counter()
            for c in counts:
                if kind == "full":
                    gemm(c)
                elif kind == "launch":
                    launch()
                else:
                    torch.clamp(c, gemm._zero, gemm.capacity, out=gemm._m_column)
            hosts.append((time.perf_counter() - t0) * 1e6 / len(counts))
            e.record(); torch.cuda.synchronize()
            res.append(s.elapsed_time(e) * 1e3 / len(counts))
        return statistics.median(res), statistics.median(hosts)
    row = {"case": f"g{g} N{n} K{k} cap {cap} counts {lo}-{hi}", "config": gemm.cfg.short()}
    for kind in ("full", "launch", "clamp", "full", "launch"):
        row.setdefault(kind, []).append(run(kind))
    print(row, flush=True)
    out.append(row)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "clamp_cost.json"), "w"), indent=1)
