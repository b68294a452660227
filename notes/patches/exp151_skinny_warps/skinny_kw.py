"""Skinny masked: the rule's config against the same with k_warps 2, over K (capacity = max M)."""
import json, random, sys
import torch
import configs
import reference as R
from dataclasses import replace
import nvfp4gemm.masked as M

SHAPES = [(8, 7168, 2048, 16), (8, 7168, 2048, 8), (8, 4096, 2048, 16), (8, 4096, 1024, 16), (16, 2048, 2048, 16),
          (8, 14336, 2048, 16), (8, 4096, 3072, 16), (8, 7168, 4096, 16), (4, 2048, 2048, 16), (8, 2048, 7168, 8)]
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
res = {}
for (g, n, k, mm) in SHAPES:
    data = R.generate_input([mm] * g, [n] * g, [k] * g, g, 5200, device="cuda")
    ref = R.ref_group(data)
    rule = configs.sm90_group_masked_picks(((mm, n, k),) * g)[0]
    objs = {}
    for cfg in (rule, replace(rule, k_warps=2), replace(rule, k_warps=2, ab_stages=3)):
        if configs.check_config(cfg):
            continue
        orig = configs.sm90_group_masked_picks
        configs.sm90_group_masked_picks = lambda *a, c=cfg, **kw_: (c,)
        try:
            objs[cfg.short()] = M.MaskedGroupedGemm(data)
        finally:
            configs.sm90_group_masked_picks = orig
    rnd = random.Random(5201)
    sets = [[rnd.randint(1, mm) for _ in range(g)] for _ in range(20)]
    counts = [torch.tensor(x, dtype=torch.int32, device="cuda") for x in sets]
    acc = {nm: [] for nm in objs}
    for r in range(6):
        order = list(objs.items()); order = order[r % len(order):] + order[:r % len(order)]
        for nm, o in order:
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
    key = f"g{g} N{n} K{k} M<={mm}"
    res[key] = med
    base = med[rule.short()]
    print("R", key, "  ".join(f"{nm}: {v:.1f} ({v / base:.3f})" for nm, v in med.items()), flush=True)
json.dump(res, open(sys.argv[1], "w"), indent=1)
