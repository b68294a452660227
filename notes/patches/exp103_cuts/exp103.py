"""Exp. 103: the wave plan's tail cuts and the two-form split point, host-only variants of
configs.mixed_group_wave_plan, timed against the plan in one process (checked first)."""
import os, sys, statistics, json
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import parse_shapes
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch

timer = Timer(20)
real_wave = configs.mixed_group_wave_plan
K_BLOCK = configs.K_BLOCK
PAR = {"fin": None, "sd": 0, "drop_tail": False, "wfirst": False}


def wave_variant(shapes, sms, tile=(256, 128)):
    """mixed_group_wave_plan with the lockstep tail's cuts changed: the finisher gets `fin`
    k-blocks more than each writer (None: the plan's cuts), s changed by `sd`; drop_tail
    leaves the tail out (timing only, output incomplete)."""
    if PAR["fin"] is None and PAR["sd"] == 0 and not PAR["drop_tail"] and not PAR["wfirst"]:
        return real_wave(shapes, sms, tile)
    tiles, row0, r = configs._group_tiles(shapes, tile)
    waves, tail = divmod(len(tiles), sms)
    if len({k for _m, _n, k in shapes}) != 1 or waves == 0:
        return None
    kbs = shapes[0][2] // K_BLOCK
    per_cta = [[(*tiles[w * sms + c], 0, kbs, 0, 1) for w in range(waves)] for c in range(sms)]
    if PAR["drop_tail"]:
        pass
    elif tail and sms // tail < 2:
        for c, segs in enumerate(configs._fill_rows(tiles[waves * sms:], [kbs] * tail, sms)):
            per_cta[c] += segs
    elif tail:
        s = max(1, min(sms // tail, kbs, min(sms // tail, kbs) + PAR["sd"]))
        pen = configs.STREAM_K_SEGMENT_KB
        while True:
            if PAR["fin"] is None:
                s, cuts = configs._tail_cuts(kbs, s)
                break
            w = (kbs - PAR["fin"]) / s
            cuts = [0] + [kbs - round(w * (s - q)) for q in range(1, s)] + [kbs]
            if s == 1 or all(a < b for a, b in zip(cuts, cuts[1:])):
                break
            s -= 1
        for j in range(tail):
            g, nb, m0 = tiles[waves * sms + j]
            for q in range(s):
                seg = (g, nb, m0, cuts[q], cuts[q + 1], q, s)
                if PAR["wfirst"] and q > 0:
                    per_cta[s * j + q].insert(0, seg)
                else:
                    per_cta[s * j + q].append(seg)
    rows, offs = [], [0]
    for segs in per_cta:
        rows += segs
        offs.append(len(rows))
    return {"segs": rows, "seg_offs": offs, "row0": row0, "a16_rows": r, "ctas": sms}


configs.mixed_group_wave_plan = wave_variant
sms = torch.cuda.get_device_properties(0).multi_processor_count
out = []
spec = sys.argv[1]
variants = sys.argv[2].split(";")  # each: form[,fin=F][,sd=D][,P=+-D][,pen=X][,drop]
keep = []
for shape in parse_shapes("group", spec):
    ms, ns, ks = (list(x) for x in zip(*shape))
    label = " ".join(map(str, ms)) + f" | N{ns[0]} K{ks[0]}"
    fns = {}
    for v in variants:
        form, *opts = v.split(",")
        PAR.update(fin=None, sd=0, drop_tail=False, wfirst=False)
        configs.STREAM_K_SEGMENT_KB = 2.0
        p_base = configs.mixed_group_two_forms_plan(shape, sms)["narrow_ctas"] if form == "two" else None
        pdelta = 0 if form == "two" else None
        for o in opts:
            k, _, x = o.partition("=")
            if k == "fin": PAR["fin"] = float(x)
            elif k == "sd": PAR["sd"] = int(x)
            elif k == "drop": PAR["drop_tail"] = True
            elif k == "wfirst": PAR["wfirst"] = True
            elif k == "P": pdelta = int(x)
            elif k == "pen": configs.STREAM_K_SEGMENT_KB = float(x)
        cfg = {"mixed256": configs.sm90_group_mixed(), "wide": configs.sm90_group_mixed(tile=(128, 256)),
               "two": configs.sm90_group_mixed_two_forms(), "rule": configs.select_config("group", "sm_90a", shape)}[form]
        if not configs.fits(cfg, shape):
            print(label, v, "does not fit"); continue
        mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
        ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
        data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda", poison_padding=True)
        keep.append(data)
        split = None
        if pdelta is not None:
            split = p_base + pdelta
        plan = configs.mixed_group_two_forms_plan(shape, sms, split) if cfg.two_forms else \
            configs.mixed_group_plan(shape, sms, cfg.mma_tile_mn)
        loads = configs.plan_cta_loads(plan)
        fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream(), split) if cfg.two_forms else \
            mod.runtime_args(data, cfg, torch.cuda.current_stream())
        outs = [c for _, _, c in data[0]]
        status = "ok"
        for _ in range(2):
            for c in outs:
                c.fill_(float("nan"))
            ck.fn(*fargs)
            torch.cuda.synchronize()
            ok, msg = R.check_implementation(data, outs)
            nan = sum(int(torch.isnan(c).sum()) for c in outs)
            if not ok or nan:
                status = f"WRONG nan={nan}"
                if not PAR["drop_tail"]:
                    print(label, v, status, msg[:200], flush=True)
                break
        if status != "ok" and not PAR["drop_tail"]:
            continue
        info = f"P={plan.get('narrow_ctas')} maxload={max(loads):.1f}"
        fns[v] = (PackedLaunch(ck.fn, fargs), [], info, status)
    configs.STREAM_K_SEGMENT_KB = 2.0
    for _ in range(3):
        for v, (fn, ts, _i, _s) in fns.items():
            ts.append(timer(fn))
    base = statistics.median(next(iter(fns.values()))[1])
    for v, (fn, ts, info, st) in fns.items():
        med = statistics.median(ts)
        print(f"{label:40s} {v:28s} {info:22s} " + " ".join(f"{t:6.1f}" for t in ts)
              + f" med {med:6.1f} x{med / base:.3f} {st}", flush=True)
        out.append({"shape": shape, "variant": v, "info": info, "rounds_us": ts, "us": med, "ratio": med / base, "status": st})
if len(sys.argv) > 3:
    json.dump({"device": torch.cuda.get_device_name(), "rows": out}, open(sys.argv[3], "w"), indent=1)
