"""Device, exp. 140: the device-scheduled form's tile choice.  Random grouped shapes; each run with
every device-schedule tile that divides its N_g ((256, 128), (128, 128), (256, 64)), checked first
(NaN-poisoned C), then 3 rounds x 20 timed calls each (L2 flushed, CUDA events), medians."""
import json, os, random, statistics, sys
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs, torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import poisoned_check
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch

TILES = [(256, 128), (128, 128), (256, 64)]


def old_rule(shape):  # exp. 136's device_schedule_tile (waves x area, 1.1 on 128-row tiles)
    sms = 132

    def cost(tm, tn):
        waves = -(-sum(-(-m // tn) * (n // tm) for m, n, _k in shape) // sms)
        return waves * tm * tn * (1.1 if tm == 128 else 1)

    if all(n % 256 == 0 for _m, n, _k in shape):
        tn = 64 if max(m for m, _n, _k in shape) <= 64 else 128
        if cost(256, tn) <= cost(128, 128):
            return (256, tn)
    return (128, 128)
NS = [2048, 3072, 4096, 7168, 14336]
KS = [2048, 4096, 7168]
rnd = random.Random(int(os.environ.get("SEED", "1400")))
timer = Timer(20)
rows = []
nshapes = int(os.environ.get("NSHAPES", "36"))
i = 0
while len(rows) < nshapes:
    i += 1
    g = rnd.choice([2, 4, 8, 8, 16])
    n, k = rnd.choice(NS), rnd.choice(KS)
    if g * n * k > 16 * 7168 * 4096:
        continue
    hi = rnd.choice([48, 64, 128, 256, 256, 512])
    shape = tuple((rnd.randint(1, hi), n, k) for _ in range(g))
    if max(m for m, _n, _k in shape) <= 16:
        continue
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, g, 3000 + i, device="cuda", poison_padding=True)
    outs = [c for _, _, c in data[0]]
    runs = {}
    for tile in TILES:
        if n % tile[0]:
            continue
        cfg = configs.sm90_group_mixed_dynamic(tile)
        mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
        ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
        fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
        wrong = poisoned_check(lambda: ck.fn(*fargs), data, outs, "group")
        if wrong:
            print("WRONG", tile, shape, wrong, flush=True)
            continue
        runs[tile] = (PackedLaunch(ck.fn, fargs), [])
    for _ in range(3):
        for tile, (fn, ts) in runs.items():
            ts.append(timer(fn))
    meds = {t: statistics.median(ts) for t, (_f, ts) in runs.items()}
    rule, old = configs.device_schedule_tile(shape), old_rule(shape)
    best = min(meds, key=meds.get)
    print(f"g{g} N{n} K{k} M<={hi} " + " ".join(f"{t[0]}x{t[1]} {v:.1f}" for t, v in meds.items())
          + f"  rule {rule[0]}x{rule[1]} x{meds[rule] / meds[best]:.3f}, old {old[0]}x{old[1]} x{meds[old] / meds[best]:.3f} of best", flush=True)
    rows.append({"shape": shape, "us": {f"{t[0]}x{t[1]}": v for t, v in meds.items()}, "rule": f"{rule[0]}x{rule[1]}",
                 "old": f"{old[0]}x{old[1]}"})
    del data, outs, runs
    torch.cuda.empty_cache()
for key in ("rule", "old"):
    rs = [r["us"][r[key]] / min(r["us"].values()) for r in rows]
    print(f"{key} / best: geomean {statistics.geometric_mean(rs):.4f}, max {max(rs):.3f}, best picked {sum(x == 1 for x in rs)}/{len(rs)}")
rs = [r["us"][r["rule"]] / r["us"][r["old"]] for r in rows]
print(f"rule / old: geomean {statistics.geometric_mean(rs):.4f}, min {min(rs):.3f}, max {max(rs):.3f}, changed {sum(r['rule'] != r['old'] for r in rows)}")
if os.environ.get("OUT"):
    json.dump({"device": torch.cuda.get_device_name(), "rows": rows},
              open(os.environ["OUT"] + f"/exp140_seed{os.environ.get('SEED', '1400')}.json", "w"), indent=1)
