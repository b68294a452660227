"""Exp. 146 A/B: MaskedGroupedGemm's skinny path, base (clamp kernel + launch) vs new (counts read
in the kernel, zero-count CTAs return).  python3 s44/ab_skinny.py ROOT TAG OUT.json"""
import json, random, sys, time
root, tag, out = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, root)
import torch
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
import nvfp4gemm
print(tag, nvfp4gemm.__file__, flush=True)

CALLS, ROUNDS = 20, 7
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
res = {}
for (g, n, k) in ((8, 4096, 7168), (8, 7168, 2048), (16, 2048, 7168)):
    cap = 16
    data = R.generate_input([cap] * g, [n] * g, [k] * g, g, 4400, device="cuda")
    ref = R.ref_group(data)
    gemm = MaskedGroupedGemm(data)
    rnd = random.Random(4401)
    for kind in ("dense", "sparse"):
        def draw():
            if kind == "dense":
                return [rnd.randint(1, cap) for _ in range(g)]
            return [0 if rnd.random() < 0.375 else rnd.randint(1, cap) for _ in range(g)]
        gpu, wall, host = [], [], []
        bad = 0
        for r in range(ROUNDS):
            sets = [draw() for _ in range(CALLS)]
            counts = [torch.tensor(s, dtype=torch.int32, device="cuda") for s in sets]
            for sleep in (True, False):
                for c in gemm.outputs:
                    c.fill_(float("nan"))
                flush_buf.zero_()
                torch.cuda.synchronize()
                if sleep:
                    torch.cuda._sleep(20_000_000)
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                t0 = time.perf_counter()
                for t in counts:
                    gemm(t)
                h = (time.perf_counter() - t0) * 1e6 / CALLS
                e.record()
                torch.cuda.synchronize()
                us = s.elapsed_time(e) * 1e3 / CALLS
                (gpu if sleep else wall).append(us)
                if not sleep:
                    host.append(h)
            for gi, (c, m) in enumerate(zip(gemm.outputs, sets[-1])):
                if R.compare(c[:m], ref[gi][:m]) or bool(torch.isnan(c[:m]).any()):
                    bad += 1
        med = lambda v: sorted(v)[len(v) // 2]
        key = f"g{g} N{n} K{k} {kind}"
        res[key] = {"gpu_us": med(gpu), "us": med(wall), "host_us": med(host), "bad": bad, "cfg": gemm.cfg.short()}
        print(tag, key, res[key], flush=True)
json.dump(res, open(out, "w"), indent=1)
