"""Exps. 168-169: the grouped skinny kernel's small launches -- K split over a cluster of k_split
CTAs (exp. 165's mechanism, now in skinny.Sm90SkinnyCore for both kernels), then warps, rows and
stages per CTA (sets 168, 168b-f, 169; the sets were added between the session's calls, the
sweep loop is the one every set ran with; "old" (168d) was added before its set ran).
`python3 exp168.py [set] [rounds]` (from the repo root; writes $OUT/exp<set>.json).  Each config
compiled once (the grouped kernels take shapes at run time), each structure timed in alternating
rounds (L2 flushed, median of 30 per round), every variant checked once per structure (C
poisoned).  Variant = (B rows, k_warps, ab_stages, k_split), None = the rule; B rows None = the
rule's."""
import json, os, sys, tempfile, time
from dataclasses import replace
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import harness

SETS = {
    # (G, N, K) structures x M_g in (1, 16): launches of 16-512 CTAs under the rule
    "168": ([(g, n, k) for g, n, k in ((1, 512, 7168), (1, 1024, 7168), (1, 2048, 7168), (2, 1024, 4096),
                                       (2, 2048, 7168), (4, 1024, 2048), (4, 2048, 2048), (8, 2048, 2048),
                                       (16, 2048, 768), (16, 2048, 2048), (4, 1024, 7168), (8, 1024, 4096))],
             (1, 16),
             [None, (None, None, None, 2), (16, 4, 3, 2), (16, 2, 3, 2), (32, 2, 2, 2), (32, 1, 2, 2)]),
    # the two regions where 168 gained: tiny launches at long K (<= 66 16-row CTAs) and the rule's 1-warp
    # 32-row CTAs at K <= 2048 with few CTAs; against non-split configs with more warps
    "168b": ([(1, 256, 7168), (1, 512, 5120), (1, 768, 7168), (1, 1024, 8192), (1, 1024, 4096), (2, 512, 7168),
              (1, 512, 16384), (3, 256, 7168), (4, 2048, 2048), (2, 4096, 2048), (4, 2048, 1024), (8, 1024, 2048),
              (6, 2048, 2048), (3, 4096, 1536), (4, 4096, 2048), (12, 1024, 2048)],
             (1, 16),
             [None, (None, None, None, 2), (32, 2, 2, 1), (16, 2, 3, 1), (16, 4, 3, 1), (16, 2, 3, 2), (32, 2, 2, 2)]),
    # 168b's side finding: the rule's 1-warp 32-row CTAs (K <= 2048, exp. 154) lose to 2-warp 16-row CTAs at
    # 256-512 CTAs; where is the crossover (32-row CTA counts 512-2048; 64-row picks at 16 A rows)?
    "168c": ([(8, 2048, 1024), (16, 1024, 1024), (12, 2048, 2048), (6, 4096, 1536), (16, 2048, 2048), (8, 4096, 1024),
              (8, 4096, 2048), (10, 4096, 2048), (16, 2560, 1536), (8, 7168, 2048), (16, 3584, 1024), (16, 4096, 2048)],
             (1, 16),
             [None, (16, 2, 3, 1), (16, 2, 2, 1), (32, 2, 2, 1), (16, 4, 3, 1)]),
    # check of the rule on new shapes: "old" = the rule before exp. 168 (1 warp at any CTA count, no K split)
    "168d": ([(2, 3072, 2048), (5, 2048, 1536), (3, 7168, 1024), (7, 4096, 2048), (14, 2048, 2048), (6, 5120, 2048),
              (1, 14336, 2048), (4, 1536, 768), (9, 3072, 512), (1, 384, 6144), (2, 256, 10240), (1, 960, 7168),
              (4, 128, 8192), (1, 640, 12288), (2, 448, 5120)],
             (4, 16),
             [None, "old"]),
    # check of the short-K bound (4 CTAs per SM at every K_g <= 1024): 2 and 1 warps at 448-800 32-row CTAs
    "168e": ([(2, 7168, 1024), (7, 2048, 1024), (3, 5120, 768), (10, 1536, 1024), (5, 4096, 1024), (12, 2048, 512),
              (11, 2304, 1024), (4, 6144, 512)],
             (4, 16),
             [None, (32, 2, 2, 1), (32, 1, 2, 1)]),
    # 168b's leftover: 16-row CTAs where the rule takes 32 rows with fewer than 2 per SM (132-263
    # 32-row CTAs), any K; the first 8 structures to fit a rule, the last 8 to check it
    "168f": ([(2, 3072, 2048), (4, 1536, 1024), (3, 2048, 4096), (1, 7168, 2048), (2, 4096, 7168), (4, 2048, 768),
              (8, 1024, 4096), (6, 768, 2048),
              (1, 4352, 2048), (3, 2560, 1536), (2, 2560, 7168), (5, 1536, 2048), (1, 6144, 4096), (7, 1024, 1024),
              (2, 3584, 3072), (4, 1792, 5120)],
             (1, 16),
             [None, (16, 2, 3, 1), (16, 2, 2, 1), (16, 4, 3, 1), (16, 4, 2, 1)]),
    # exp. 169: the 16-row region below 132 32-row CTAs (kw4 ab3 since exp. 43; K split aside): other warp
    # counts and depths; the first 8 structures to fit, the last 8 to check
    "169": ([(1, 2048, 2048), (2, 1024, 4096), (4, 1024, 2048), (1, 4096, 7168), (3, 1024, 1024), (2, 2048, 7168),
             (1, 1024, 4096), (8, 512, 2048),
             (1, 3072, 2048), (3, 1280, 4096), (2, 1536, 1536), (1, 4096, 3072), (6, 512, 4096), (1, 2560, 7168),
             (4, 768, 1024), (2, 896, 8192)],
            (1, 16),
            [None, (16, 4, 2, 1), (16, 2, 3, 1), (16, 2, 2, 1), (16, 8, 2, 1), (16, 8, 3, 1)]),
}


def old_rule(shape):
    """configs.sm90_group_skinny as it was before exp. 168 (no K split; 1 warp for 32-row tiles at
    K <= 2048 at any CTA count)."""
    tn = 8 if max(m for m, _, _ in shape) <= 8 else 16
    tm = 32 if sum(n // 32 for _, n, _ in shape) >= 132 else 16
    if tm == 32 and max(k for _, _, k in shape) <= 2048:
        if tn == 16 and sum(n // 64 for _, n, _ in shape) >= 3 * 132:
            tm = 64
        return configs.KernelConfig("group", "sm_90a", (tm, tn), skinny=True, k_warps=1, ab_stages=2)
    return configs.KernelConfig("group", "sm_90a", (tm, tn), skinny=True, k_warps=2 if tm == 32 else 4,
                                ab_stages=2 if (tm, tn) == (32, 16) else 3)


def make_config(rule, v):
    if v is None:
        return rule
    if v == "old":
        return old_rule(SHAPE[0])
    rows, kw, ab, ks = v
    return configs.KernelConfig("group", "sm_90a", (rows or rule.mma_tile_mn[0], rule.mma_tile_mn[1]), skinny=True,
                                k_warps=kw or rule.k_warps, ab_stages=ab or rule.ab_stages, k_split=ks)


SHAPE = [None]  # (the structure being swept, for the "old" variant)


def sweep(structs, ms, variants, rounds=3):
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    timer = T.Timer(30)
    t0 = time.time()
    for g, n, k in structs:
        for m in ms:
            shape = ((m, n, k),) * g
            rule = configs.sm90_group_skinny(shape)
            SHAPE[0] = shape
            if "old" in variants and old_rule(shape) == rule:
                continue  # (exp. 168 changed nothing here)
            data = R.generate_input([m] * g, [n] * g, [k] * g, g, 1680, device="cuda", poison_padding=True)
            outs = [c for _, _, c in data[0]]
            cfgs, seen = [], set()
            for v in variants:
                c = make_config(rule, v)
                if c in seen or configs.check_config(c) or not configs.fits(c, shape):
                    continue
                seen.add(c)
                ck = harness.compile_kernel("group", "sm_90a", c, shape, dump_dir=tempfile.mkdtemp())
                mod, _ = harness.kernel_module("group", "sm_90a", c)
                args = mod.runtime_args(data, c, torch.cuda.current_stream())
                for o in outs:
                    o.fill_(float("nan"))
                ck.fn(*args)
                torch.cuda.synchronize()
                ok = not any(torch.isnan(o).any() for o in outs) and R.check_implementation(data, outs)[0]
                cfgs.append((v, c, ck, args, ok))
            times = {str(v): [] for v, *_ in cfgs}
            for rnd in range(rounds):
                for v, c, ck, args, ok in (cfgs if rnd % 2 == 0 else cfgs[::-1]):
                    times[str(v)].append(timer(lambda: ck.fn(*args)))
            base = min(times["None"])
            for v, c, ck, args, ok in cfgs:
                t = min(times[str(v)])
                ctas = sum(nn // c.mma_tile_mn[0] for _, nn, _ in shape) * c.k_split
                row = {"shape": [g, m, n, k], "variant": v, "config": c.short(), "regs": ck.registers, "ok": ok,
                       "ctas": ctas, "us": times[str(v)], "ratio": t / base}
                out["rows"].append(row)
                print(json.dumps({"s": [g, m, n, k], "cfg": c.short(), "ctas": ctas, "regs": ck.registers, "ok": ok,
                                  "us": round(t, 2), "ratio": round(t / base, 3), "t": round(time.time() - t0)}),
                      flush=True)
            torch.cuda.empty_cache()
    return out


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "168"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    res = sweep(*SETS[which], rounds=rounds)
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), f"exp{which}.json"), "w") as f:
        json.dump(res, f, indent=1)
