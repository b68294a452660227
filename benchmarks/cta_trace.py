"""Device-only diagnostic: per-CTA timelines of the sm_90a grouped mixed-input kernels.

    python3 benchmarks/cta_trace.py [--forms rule,two,f256x128+128x256@60] [--shapes leaderboard|SPEC]
                                    [--runs 3] [--json F]

Compiles the kernels with NVFP4_CTA_TRACE=1 (nvfp4gemm/sm90/grouped_mixed.py: consumer thread 0
of each CTA writes %globaltimer at its start and, per segment, after its k-blocks, after its
stream-K hand-off and after its store), checks each (shape, form) once with NaN-poisoned C, then
runs it `runs` times after an L2 flush and prints, per form of the launch: its CTAs, the plan's
modelled busiest CTA (k-blocks with stream-K charges, configs.plan_cta_loads, and that times
configs.FORM_KB_US), and measured from the earliest CTA start: the latest and median CTA end, the
median k-block time of whole-tile and of split segments (a segment's k-blocks run from the
previous segment's store, so a CTA's first includes its start-up), and the finishers' hand-off
waits; and the launch: the pre-pass's first start and last end, the main kernel's first and last
CTA start, its consumers' first start and last store (with 16 groups the pre-pass stamps nothing).  Forms and SPEC as in benchmarks/forms.py (grouped only; a form must
be a grouped mixed-input config).  The stamps cost one store per event of one thread; timings
are for comparing forms within a run, not for the bench tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

os.environ["NVFP4_CTA_TRACE"] = "1"  # before the kernel modules are imported

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import nvfp4gemm  # noqa: E402,F401  (must precede cutlass)

import configs  # noqa: E402
from benchmarks.forms import form_config, parse_shapes, poisoned_check  # noqa: E402


def cta_rows(trace, plan, cta_form):
    """Per CTA: form, start, and per segment (kbs, s, ns, t_kblocks, t_handoff, t_store), in ns
    from the CTA's start (-1 where no stamp was written)."""
    segs, offs = plan["segs"], plan["seg_offs"]
    out = []
    for c in range(plan["ctas"]):
        t = trace[c]
        mine = segs[offs[c]:offs[c + 1]]
        rows = []
        for j, (_g, _nb, _m0, kb0, kb1, s, ns) in enumerate(mine):
            stamps = [int(t[1 + 3 * j + q]) - int(t[0]) if j < 5 else -1 for q in range(3)]
            rows.append((kb1 - kb0, s, ns, *stamps))
        out.append({"cta": c, "form": cta_form[c], "start": int(t[0]), "segs": rows})
    return out


def summarize(ctas, tiles, plan, t0):
    """Per form: dict of the modelled and measured figures (us)."""
    loads = configs.plan_cta_loads(plan)
    res = []
    for f, tile in enumerate(tiles):
        mine = [c for c in ctas if c["form"] == f]
        ends = [(c["start"] - t0 + c["segs"][-1][5]) / 1e3 for c in mine if c["segs"] and c["segs"][-1][5] >= 0]
        whole_kb, split_kb, waits = [], [], []
        for c in mine:
            prev = 0  # the segment's k-blocks run from the previous segment's store (or the CTA's start)
            for s in c["segs"]:
                if s[3] < 0:
                    break
                (whole_kb if s[2] == 1 else split_kb).append((s[3] - prev) / 1e3 / s[0])
                if s[2] > 1 and s[1] == 0:  # a finisher: hand-off = waiting for + adding partials
                    waits.append((s[4] - s[3]) / 1e3)
                prev = s[5]
        busiest = max(loads[c["cta"]] for c in mine) if mine else 0
        res.append({"tile": tile, "ctas": len(mine), "model_kb": busiest,
                    "model_us": busiest * configs.FORM_KB_US.get(tuple(tile), float("nan")),
                    "end_max_us": max(ends) if ends else None, "end_median_us": statistics.median(ends) if ends else None,
                    "whole_kb_us": statistics.median(whole_kb) if whole_kb else None,
                    "split_kb_us": statistics.median(split_kb) if split_kb else None,
                    "finisher_wait_us": statistics.median(waits) if waits else None,
                    "finisher_wait_max_us": max(waits) if waits else None})
    return res


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--forms", default="rule")
    ap.add_argument("--shapes", default="leaderboard")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch

    import reference as R
    from benchmarks.timing import Timer
    from nvfp4gemm import harness
    from nvfp4gemm.dispatch import PackedLaunch
    from nvfp4gemm.sm90 import grouped_mixed as GM
    from nvfp4gemm.sm90.grouped_gemm import group_table_rows

    assert GM.CTA_TRACE, "NVFP4_CTA_TRACE was not set before the kernel modules were imported"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    flush = Timer(1).flush_buf
    report = []
    ok_all = True
    # calibration: the same method around a one-element kernel (launch + event overhead)
    tiny = torch.zeros(1, device="cuda")
    cal = []
    for _ in range(10):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        tiny.add_(1)
        e.record()
        torch.cuda.synchronize()
        cal.append(s.elapsed_time(e) * 1e3)
    print(f"one-element kernel under the same method: median {statistics.median(cal):.1f} us", flush=True)
    for shape in parse_shapes("group", args.shapes):
        ms, ns, ks = (list(x) for x in zip(*shape))
        data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda", poison_padding=True)
        outs = [c for _, _, c in data[0]]
        for name in args.forms.split(","):
            base, _, variant = name.partition("@")
            cfg = configs.select_config("group", "sm_90a", shape) if base == "rule" else form_config("group", base, shape)
            if cfg is None or not cfg.a_prepass or cfg.cluster_mn != (1, 1):
                print(f"{name}: not a grouped mixed-input stream-K config ({cfg and cfg.short()})", flush=True)
                continue
            mod, cls = harness.kernel_module("group", "sm_90a", cfg)
            try:
                cls.can_implement(cfg, shape)
            except ValueError as e:
                print(f"{name}: {e}", flush=True)
                continue
            ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
            split = tuple(int(v) for v in variant.split(":")) if (cfg.forms and variant) else None
            fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream(), split)
            rows, _ = group_table_rows(data)
            tabs = mod.cached_launch_tables(mod.launch_table_key(cfg, rows, split), None)
            ws, ctas = tabs[6], tabs[11]
            tiles = cfg.forms or (tuple(cfg.mma_tile_mn),)
            if cfg.forms:
                plan = configs.mixed_group_forms_plan(shape, sms, cfg.forms, split)
                bounds = [0] + plan["splits"] + [plan["ctas"]]
            else:
                plan = configs.mixed_group_plan(shape, sms, cfg.mma_tile_mn)
                bounds = [0, plan["ctas"]]
            assert plan["ctas"] == ctas
            cta_form = [f for f in range(len(tiles)) for _ in range(bounds[f], bounds[f + 1])]
            region = ws[ctas * GM.Sm90GroupedMixedKernel.PARTIAL_BYTES // 4:].view(torch.int64).view(ctas + 1, -1)
            launch = PackedLaunch(ck.fn, fargs)
            wrong = poisoned_check(launch, data, outs, "group")
            if wrong:
                print(f"{name} {cfg.short()}: WRONG ({wrong})", flush=True)
                ok_all = False
                continue
            for _ in range(3):
                launch()
            runs = []
            for r in range(args.runs):
                region.fill_(-1)
                region[ctas, 1] = region[ctas, 3] = 0  # (red.max slots)
                flush.zero_()
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                launch()
                e.record()
                torch.cuda.synchronize()
                trace = region.cpu().tolist()
                per_cta = cta_rows(trace, plan, cta_form)
                t0 = min(c["start"] for c in per_cta)
                forms = summarize(per_cta, tiles, plan, t0)
                pre0, pre1, main0, main1 = trace[ctas][:4]
                span = max(f["end_max_us"] or 0 for f in forms)
                at = {"prepass_us": (pre1 - pre0) / 1e3, "main_entry_first_us": (main0 - pre0) / 1e3,
                          "main_entry_last_us": (main1 - pre0) / 1e3, "consumer_start_us": (t0 - pre0) / 1e3,
                          "last_store_us": (t0 - pre0) / 1e3 + span}
                runs.append({"event_us": s.elapsed_time(e) * 1e3, "forms": forms, "launch": at, "ctas": per_cta})
                label = "/".join(str(m) for m in ms) + f" N{ns[0]} K{ks[0]}"
                print(f"{label} {name} {cfg.short()} run {r}: event {runs[-1]['event_us']:.1f} us, "
                      f"CTA span {span:.1f} us; from the pre-pass's start (us): its end {at['prepass_us']:.1f}, "
                      f"main CTAs enter {at['main_entry_first_us']:.1f}-{at['main_entry_last_us']:.1f}, "
                      f"consumers start {at['consumer_start_us']:.1f}, last store {at['last_store_us']:.1f}",
                      flush=True)
                for f in forms:
                    print(f"   {f['tile'][0]}x{f['tile'][1]}: {f['ctas']:3d} CTAs  model {f['model_kb']:5.1f} kb "
                          f"= {f['model_us']:6.1f} us | end max {f['end_max_us']:6.1f} med {f['end_median_us']:6.1f}"
                          f" | kb: whole tiles {f['whole_kb_us'] or float('nan'):5.3f}"
                          f" split {f['split_kb_us'] or float('nan'):5.3f} us"
                          f" | finisher wait med {f['finisher_wait_us'] or float('nan'):5.2f}"
                          f" max {f['finisher_wait_max_us'] or float('nan'):5.2f} us", flush=True)
            report.append({"shape": shape, "form": name, "config": cfg.short(), "runs": runs})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": report}, f)
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
