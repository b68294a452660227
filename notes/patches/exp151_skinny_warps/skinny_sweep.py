"""Skinny masked configs on this GPU (capacity 16, counts 1-16), one process, alternating rounds."""
import json, random, sys
import torch
import configs
import reference as R
from configs import KernelConfig
from dataclasses import replace
import nvfp4gemm.masked as M

VARIANTS = [((32, 16), 4, 2), ((32, 16), 4, 3), ((32, 16), 2, 4), ((32, 16), 8, 2), ((32, 16), 2, 2),
            ((16, 16), 4, 3), ((16, 16), 2, 4), ((16, 16), 8, 3)]
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
res = {}
for (g, n, k) in ((8, 4096, 7168), (8, 7168, 2048), (16, 2048, 7168)):
    data = R.generate_input([16] * g, [n] * g, [k] * g, g, 5100, device="cuda")
    ref = R.ref_group(data)
    objs = {}
    for tile, kw, ab in VARIANTS:
        cfg = KernelConfig("group", "sm_90a", tile, skinny=True, k_warps=kw, ab_stages=ab, masked=True)
        if configs.check_config(cfg) or not configs.fits(cfg, ((16, n, k),) * g):
            print("skip", cfg.short(), configs.check_config(cfg)); continue
        orig = configs.sm90_group_masked_picks
        configs.sm90_group_masked_picks = lambda *a, c=cfg, **kw_: (c,)
        try:
            objs[cfg.short()] = M.MaskedGroupedGemm(data)
        finally:
            configs.sm90_group_masked_picks = orig
    rnd = random.Random(5101)
    sets = [[rnd.randint(1, 16) for _ in range(g)] for _ in range(20)]
    counts = [torch.tensor(x, dtype=torch.int32, device="cuda") for x in sets]
    acc = {nm: [] for nm in objs}
    for r in range(6):
        order = list(objs.items()); order = order[r % len(order):] + order[:r % len(order)]
        for nm, o in order:
            for c in o.outputs:
                c.fill_(float("nan"))
            flush_buf.zero_(); torch.cuda.synchronize(); torch.cuda._sleep(20_000_000)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for t in counts:
                o(t)
            e.record(); torch.cuda.synchronize()
            acc[nm].append(s.elapsed_time(e) * 1e3 / len(counts))
            for gi, (c, m) in enumerate(zip(o.outputs, sets[-1])):
                assert not R.compare(c[:m], ref[gi][:m]), (nm, gi)
    med = {nm: sorted(v)[len(v) // 2] for nm, v in acc.items()}
    key = f"g{g} N{n} K{k}"
    res[key] = med
    base = med[next(iter(med))]
    print("R", key, "  ".join(f"{nm}: {v:.1f} ({v / base:.3f})" for nm, v in med.items()), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
