"""Exp. 149 A/B: the device schedule's pre-pass capped at DEVICE_PREPASS_CTAS CTAs striding over
the call's halves (new) against one thread per half of the buffer's capacity (base).
python3 s44/ab149.py ROOT TAG OUT.json"""
import json, random, sys
root, tag, out = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, root)
import torch
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
import nvfp4gemm
print(tag, nvfp4gemm.__file__, flush=True)
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
DISTS = {"1-16": lambda r, c: r.randint(1, 16), "1-64": lambda r, c: r.randint(1, 64),
         "1-256": lambda r, c: r.randint(1, c), "128-256": lambda r, c: r.randint(128, c)}
res = {}
for (g, n, k) in ((8, 4096, 7168), (8, 7168, 2048), (16, 2048, 7168)):
    data = R.generate_input([256] * g, [n] * g, [k] * g, g, 4900, device="cuda")
    ref = R.ref_group(data)
    objs = {"alone": MaskedGroupedGemm(data, small=False), "split": MaskedGroupedGemm(data, small=True)}
    for dname, draw in DISTS.items():
        rnd = random.Random(4901)
        sets = [[draw(rnd, 256) for _ in range(g)] for _ in range(20)]
        counts = [torch.tensor(x, dtype=torch.int32, device="cuda") for x in sets]
        for nm, o in objs.items():
            vals, bad = [], 0
            for r in range(5):
                for c in o.outputs:
                    c.fill_(float("nan"))
                flush_buf.zero_(); torch.cuda.synchronize(); torch.cuda._sleep(20_000_000)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                for t in counts:
                    o(t)
                e.record(); torch.cuda.synchronize()
                vals.append(s.elapsed_time(e) * 1e3 / len(counts))
                for gi, (c, m) in enumerate(zip(o.outputs, sets[-1])):
                    if R.compare(c[:m], ref[gi][:m]) or bool(torch.isnan(c[:m]).any()):
                        bad += 1
            key = f"g{g} N{n} K{k} {dname} {nm}"
            res[key] = {"gpu_us": sorted(vals)[2], "bad": bad}
            print(tag, key, round(sorted(vals)[2], 1), "bad", bad, flush=True)
    del objs, data, ref
    torch.cuda.empty_cache()
json.dump(res, open(out, "w"), indent=1)
