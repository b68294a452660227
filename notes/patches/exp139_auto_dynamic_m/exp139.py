"""Device, exp. 139: host time of custom_kernel calls whose M_g change every call, by
NVFP4_DYNAMIC_M mode (set before import: argv[1] = 0 / auto / 1).  Per call: host ms (synchronized
before, perf_counter around the call), whether it compiled, the config; first and last outputs checked."""
import os, sys, time, random, json
os.environ["NVFP4_DYNAMIC_M"] = sys.argv[1]
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import configs
import reference as R
from nvfp4gemm import harness, dispatch
from nvfp4gemm.dispatch import custom_kernel
mode, n, k, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
g = 8
rnd = random.Random(1390 + n + k)
ins = []
for i in range(calls):
    ms = [rnd.randint(1, 256) for _ in range(g)]
    ins.append((ms, R.generate_input(ms, [n] * g, [k] * g, g, 900 + i, device="cuda")))
torch.cuda.synchronize()
rows = []
for i, (ms, data) in enumerate(ins):
    torch.cuda.synchronize()
    before = len(harness._CACHE)
    t = time.perf_counter()
    out = custom_kernel(data)
    dt = (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize()
    ok = None
    if i < 3 or i >= calls - 2:
        ok, msg = R.check_implementation(data, out)
        assert ok, (i, msg)
    cfg = dispatch._entry_of(data)[0].cfg
    rows.append(dict(i=i, ms=ms, host_ms=round(dt, 3), compiled=len(harness._CACHE) != before,
                     cfg=cfg.short(), devsched=bool(cfg.device_schedule), checked=ok))
warm = sorted(r["host_ms"] for r in rows if not r["compiled"])
tail = sorted(r["host_ms"] for r in rows[calls // 2:] if not r["compiled"])
med = lambda v: v[len(v) // 2] if v else None
summary = dict(mode=mode, n=n, k=k, calls=calls, compiles=sum(r["compiled"] for r in rows),
               compile_s=round(sum(r["host_ms"] for r in rows if r["compiled"]) / 1e3, 1),
               host_ms_median_no_compile=med(warm), host_ms_median_second_half=med(tail),
               devsched_calls=sum(r["devsched"] for r in rows), total_host_s=round(sum(r["host_ms"] for r in rows) / 1e3, 2))
print(json.dumps(summary))
for r in rows:
    print(r["i"], r["host_ms"], "COMPILE" if r["compiled"] else "", r["cfg"], r["ms"])
os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), f"exp139_{mode}_N{n}_K{k}.json"), "w") as f:
    json.dump(dict(summary=summary, rows=rows), f, indent=1)
