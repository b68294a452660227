"""Exp. 147: MaskedGroupedGemm at capacity 256, the skinny kernel + mixed form (small=None) against
the mixed form alone (small=False), same buffers, alternating rounds of 20 calls back to back.
python3 s44/exp147.py OUT.json"""
import json, random, sys, time
import torch
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm

CALLS, ROUNDS, CAP = 20, 8, 256
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
DISTS = {
    "1-16": lambda r, c: r.randint(1, 16),
    "0|1-8": lambda r, c: 0 if r.random() < 0.375 else r.randint(1, 8),
    "half<=16": lambda r, c: r.randint(1, 16) if r.random() < 0.5 else r.randint(17, c),
    "1-256": lambda r, c: r.randint(1, c),
    "17-256": lambda r, c: r.randint(17, c),
}


def timed(gemm, counts, sleep):
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
    h = (time.perf_counter() - t0) * 1e6 / len(counts)
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / len(counts), h


res = {}
for (g, n, k) in ((8, 4096, 7168), (8, 7168, 2048), (16, 2048, 7168)):
    data = R.generate_input([CAP] * g, [n] * g, [k] * g, g, 4700, device="cuda")
    ref = R.ref_group(data)
    objs = {"split": MaskedGroupedGemm(data, small=True), "alone": MaskedGroupedGemm(data, small=False),
            "overlap": MaskedGroupedGemm(data, small=True), "mixedfirst": MaskedGroupedGemm(data, small=True)}
    objs["overlap"]._overlap = 1
    objs["mixedfirst"]._overlap = 2
    for name, o in objs.items():
        o(torch.zeros(g, dtype=torch.int32, device="cuda"))
    for dname, draw in DISTS.items():
        rnd = random.Random(4701)
        acc = {nm: {"gpu": [], "wall": [], "host": [], "bad": 0} for nm in objs}
        for r in range(ROUNDS):
            sets = [[draw(rnd, CAP) for _ in range(g)] for _ in range(CALLS)]
            counts = [torch.tensor(x, dtype=torch.int32, device="cuda") for x in sets]
            order = list(objs.items())
            order = order[r % 4:] + order[:r % 4]
            for nm, o in order:
                gpu, _ = timed(o, counts, True)
                wall, host = timed(o, counts, False)
                a = acc[nm]
                a["gpu"].append(gpu); a["wall"].append(wall); a["host"].append(host)
                for gi, (c, m) in enumerate(zip(o.outputs, sets[-1])):
                    if R.compare(c[:m], ref[gi][:m]) or bool(torch.isnan(c[:m]).any()):
                        a["bad"] += 1
        med = lambda v: sorted(v)[len(v) // 2]
        key = f"g{g} N{n} K{k} {dname}"
        res[key] = {nm: {"gpu_us": med(a["gpu"]), "us": med(a["wall"]), "host_us": med(a["host"]), "bad": a["bad"],
                         "configs": " + ".join(c.short() for c in objs[nm].configs)} for nm, a in acc.items()}
        al = res[key]["alone"]
        print(f"{key:26s} alone {al['gpu_us']:6.1f} (wall {al['us']:6.1f}, host {al['host_us']:5.1f})", "  ".join(
            f"{nm} {res[key][nm]['gpu_us'] / al['gpu_us']:.3f} (wall {res[key][nm]['us'] / al['us']:.3f}, host "
            f"{res[key][nm]['host_us']:5.1f}, bad {res[key][nm]['bad']})" for nm in ("split", "overlap", "mixedfirst")), flush=True)
    del objs, data, ref
    torch.cuda.empty_cache()
json.dump(res, open(sys.argv[1], "w"), indent=1)
