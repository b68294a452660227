"""Exp. 95 prototype (device only): the grouped mixed kernel as two launches side by side.

Groups whose M_g has an even number of 128-row blocks run the wide (128 B x 256 A) tiles,
the others the (256, 128) tiles; each launch covers its subset of groups with its own
pre-pass, its own A16 and a CTA budget P / SMs - P; the second launch goes on a side stream
(fork / join with events).  Timed against the rule's single launch, alternating rounds.

    python3 notes/patches/exp95_split/split_proto.py [--shapes leaderboard|SPEC] [--ps 56,60,...] [--rounds 3]
"""
import argparse
import statistics
import sys
import os

# the repository root (run from it: python3 notes/patches/exp95_split/split_proto.py ...)
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa: F401

import configs
from benchmarks.forms import parse_shapes


def subset(data, idx):
    """The grouped input `data` restricted to groups `idx` (same tensors)."""
    abc, sfs, sfp, sizes = data
    return ([abc[i] for i in idx], [sfs[i] for i in idx], [sfp[i] for i in idx], [sizes[i] for i in idx])


def subset_launch(data, cfg, ck, ctas, stream, keep):
    """A packed launch of the grouped mixed kernel `ck` over `data` with a stream-K plan for
    `ctas` CTAs (the plan's SM count patched); its tables are appended to `keep`."""
    from nvfp4gemm.dispatch import PackedLaunch
    from nvfp4gemm.sm90 import grouped_gemm as GG
    from nvfp4gemm.sm90 import grouped_mixed as GM

    real = GM.sm_count
    GM.sm_count = lambda dev: ctas
    try:
        GG._TABLES.clear()
        fargs = GM.runtime_args(data, cfg, stream)
        keep.append(dict(GG._TABLES))
    finally:
        GM.sm_count = real
    return PackedLaunch(ck.fn, fargs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="leaderboard")
    ap.add_argument("--ps", default="")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--narrow", default="256x128")
    ap.add_argument("--alone", action="store_true", help="also time each subset alone")
    ap.add_argument("--wtile", default="128x256", help="the 'wide' subset's tile (diagnostic: 256x128)")
    ap.add_argument("--wfirst", action="store_true", help="launch the wide subset first, on the current stream")
    ap.add_argument("--soak", type=float, default=0.0, help="then run each form back to back for this many s, printing wall-clock phase times")
    ap.add_argument("--wctas", default="", help="time the wide subset alone at these CTA counts")
    args = ap.parse_args()
    import torch
    import reference as R
    from benchmarks.timing import Timer
    from nvfp4gemm import harness
    from nvfp4gemm.dispatch import PackedLaunch
    from nvfp4gemm.sm90 import grouped_gemm as GG

    timer = Timer(args.iters)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cur = torch.cuda.current_stream()
    side = torch.cuda.Stream()
    keep = []
    nt = tuple(int(x) for x in args.narrow.split("x"))
    cfg_n = configs.sm90_group_mixed(tile=nt)
    cfg_w = configs.sm90_group_mixed(tile=tuple(int(x) for x in args.wtile.split("x")))
    ck_n = harness.compile_kernel("group", "sm_90a", cfg_n, configs.GROUP_BENCHMARKS[0])
    ck_w = harness.compile_kernel("group", "sm_90a", cfg_w, configs.GROUP_BENCHMARKS[0])

    def launch_for(data, cfg, ck, ctas, stream):
        return subset_launch(data, cfg, ck, ctas, stream, keep)

    for shape in parse_shapes("group", args.shapes):
        ms, ns, ks = (list(x) for x in zip(*shape))
        data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda", poison_padding=True)
        outs = [c for _, _, c in data[0]]
        label = " ".join(str(m) for m in ms) + f" | N {ns[0]} K {ks[0]}"
        wide = [i for i, m in enumerate(ms) if -(-m // 128) % 2 == 0]
        narrow = [i for i in range(len(ms)) if i not in wide]
        # model: k-block time x tiles' k-blocks per subset (2.878 us narrow 256x128, 2.50 wide)
        kb = {True: 2.50, False: 2.878 if nt == (256, 128) else 1.6}
        work_w = sum((ns[i] // 128) * (-(-ms[i] // 256)) * ks[i] // 256 for i in wide) * kb[True]
        work_n = sum((ns[i] // nt[0]) * (-(-ms[i] // nt[1])) * ks[i] // 256 for i in narrow) * kb[False]
        p_model = round(sms * work_n / (work_n + work_w)) if wide and narrow else None
        print(f"{label}: wide {[ms[i] for i in wide]} narrow {[ms[i] for i in narrow]} "
              f"model SM-us n {work_n:.0f} w {work_w:.0f} -> P {p_model}, ideal {(work_n + work_w) / sms:.1f} us",
              flush=True)
        runs = {}
        cfg_r = configs.select_config("group", "sm_90a", shape)
        mod, _cls = harness.kernel_module("group", "sm_90a", cfg_r)
        ck_r = harness.compile_kernel("group", "sm_90a", cfg_r, shape)
        GG._TABLES.clear()
        base = PackedLaunch(ck_r.fn, mod.runtime_args(data, cfg_r, cur))
        keep.append(dict(GG._TABLES))
        runs["rule"] = (base, [])
        if not wide or not narrow:
            print("  no split", flush=True)
        else:
            ps = args.ps.split(",") if args.ps else [str(p_model + d) for d in (-8, -4, 0, 4, 8)]
            dn, dw = subset(data, narrow), subset(data, wide)
            for spec in ps:
                p, _, q = spec.partition(":")
                p = int(p)
                q = int(q) if q else sms - p
                ln = launch_for(dn, cfg_n, ck_n, p, cur)
                lw = launch_for(dw, cfg_w, ck_w, q, side)
                if args.wfirst:
                    ln, lw = launch_for(dw, cfg_w, ck_w, q, cur), launch_for(dn, cfg_n, ck_n, p, side)
                ev0, ev1 = torch.cuda.Event(), torch.cuda.Event()

                def split(ln=ln, lw=lw, ev0=ev0, ev1=ev1):
                    ev0.record(cur)
                    side.wait_event(ev0)
                    ln()
                    lw()
                    ev1.record(side)
                    cur.wait_event(ev1)
                runs[f"split {p}:{q}"] = (split, [])
                if args.alone:
                    runs[f"N{p} alone"] = (ln, [])
                    runs[f"W{q} alone"] = (launch_for(dw, cfg_w, ck_w, q, cur), [])
        for w in (int(x) for x in args.wctas.split(",") if x):
            runs[f"W{w} only"] = (launch_for(subset(data, wide), cfg_w, ck_w, w, cur), [])
        for name, (fn, _ts) in runs.items():
            if "alone" in name:
                continue
            for c in outs:
                c.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            bad = sum(int(torch.isnan(c).sum()) for c in outs)
            ok, msg = R.check_implementation(data, outs)
            print(f"  {name}: {'ok' if ok and not bad else 'WRONG ' + str(bad) + ' ' + msg[:150]}", flush=True)
        for _ in range(args.rounds):
            for name, (fn, ts) in runs.items():
                ts.append(timer(fn))
        if args.soak:
            import time
            for name, (fn, _ts) in runs.items():
                torch.cuda.synchronize()
                t0 = time.time()
                n = 0
                ev = torch.cuda.Event(enable_timing=True)
                ev2 = torch.cuda.Event(enable_timing=True)
                ev.record()
                while time.time() - t0 < args.soak:
                    for _ in range(50):
                        fn()
                    n += 50
                    torch.cuda.synchronize()
                ev2.record()
                torch.cuda.synchronize()
                print(f"  SOAK {name}: {t0:.3f} .. {time.time():.3f} {n} calls, {ev.elapsed_time(ev2) * 1e3 / n:.1f} us per call",
                      flush=True)
        b = statistics.median(runs["rule"][1])
        for name, (fn, ts) in runs.items():
            med = statistics.median(ts)
            print(f"  {name:12s} " + " ".join(f"{t:7.1f}" for t in ts) + f"  med {med:7.1f} x{med / b:.3f}",
                  flush=True)


if __name__ == "__main__":
    main()
