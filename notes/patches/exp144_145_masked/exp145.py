"""Exp. 145: MaskedGroupedGemm with the kernel reading the counts (masked form) against exp. 144's
clamp-into-the-table path (the same kernel without `masked`), same buffers, alternating rounds."""
import dataclasses, json, os, random, statistics, sys, time
import torch
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
orig = configs.sm90_group_masked_pick
out = []
for (g, n, k, cap, lo, hi) in [(8, 7168, 2048, 256, 1, 256), (8, 4096, 7168, 256, 1, 256), (16, 2048, 7168, 256, 1, 256),
                               (8, 4096, 7168, 64, 1, 16), (8, 7168, 2048, 64, 1, 64), (8, 7168, 2048, 128, 0, 8)]:
    data = R.generate_input([cap] * g, [n] * g, [k] * g, g, 7, device="cuda")
    ref = R.ref_group(data)
    exp_m = [max(1, (lo + hi) // 2)] * g
    configs.sm90_group_masked_pick = lambda shape, e=None: dataclasses.replace(orig(shape, e), masked=False)
    old = MaskedGroupedGemm(data, expected_m=exp_m)
    configs.sm90_group_masked_pick = orig
    new = MaskedGroupedGemm(data, expected_m=exp_m)
    assert new.cfg.masked and not old.cfg.masked and new.cfg.mma_tile_mn == old.cfg.mma_tile_mn
    rnd = random.Random(1)
    counts = [torch.tensor([rnd.randint(lo, hi) for _ in range(g)], dtype=torch.int32, device="cuda") for _ in range(20)]
    bad = []
    for name, gm in (("clamp", old), ("masked", new)):
        for c in gm.outputs:
            c.fill_(float("nan"))
        gm(counts[3]); torch.cuda.synchronize()
        for gi, (c, m) in enumerate(zip(gm.outputs, counts[3].tolist())):
            errs = R.compare(c[:m], ref[gi][:m])
            if errs or bool(torch.isnan(c[:m]).any()):
                bad.append(f"{name} group {gi}")
    res = {"clamp": [], "masked": [], "clamp_host": [], "masked_host": []}
    for r in range(6):
        for name, gm in (("clamp", old), ("masked", new)) if r % 2 == 0 else (("masked", new), ("clamp", old)):
            flush.zero_(); torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record(); t0 = time.perf_counter()
            for c in counts:
                gm(c)
            res[name + "_host"].append((time.perf_counter() - t0) * 1e6 / len(counts))
            e.record(); torch.cuda.synchronize()
            res[name].append(s.elapsed_time(e) * 1e3 / len(counts))
    row = {"case": f"g{g} N{n} K{k} cap {cap} counts {lo}-{hi}", "config": new.cfg.short(), "correct": not bad, "bad": bad}
    row.update({key: statistics.median(v) for key, v in res.items()})
    row["ratio"] = row["masked"] / row["clamp"]
    print(row, flush=True)
    out.append(row)
json.dump(out, open(os.path.join(os.environ.get("OUT", "/tmp"), "exp145.json"), "w"), indent=1)
