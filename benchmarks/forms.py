"""Device-only: time explicit sm_90a configs against each other, in one process.

    python3 benchmarks/forms.py [--problem group|dual] [--forms rule,mixed256,mixed64,...]
                                [--shapes leaderboard|SPEC] [--rounds 3] [--iters 20] [--json F]

Every (shape, form) is first run once with C NaN-poisoned and the scale padding poisoned, and
checked fully written and by reference.check_implementation; then the forms are timed in
alternating rounds (L2 flushed before every call, CUDA events, median of `iters`), and each
round's median and the ratio of the medians to the first form are printed.  Launches go
through each kernel module's `runtime_args` and the compiled function, packed once as the
dispatcher does (`PackedLaunch`: the public call's per-call argument conversion is timed on
short kernels), so only the kernels differ.  SPEC: shapes separated by ';'; grouped: groups
by '/', a group 'MxNxK'; dual: 'MxNxK'.  (Session 26 wrote it for grouped configs as
group_forms.py, with the public call: its timings of kernels under ~40 us carry that cost.)

Forms, grouped: rule (configs.select_config), mixed256 / mixed128 / mixed64 / mixedwide (the
grouped mixed-input kernel, stream-K, tiles of 256 B rows x 128 A rows / 128 x 128 / 256 x 64 /
128 x 256), mixed192 (192 x 128 on three consumer warpgroups, exp. 107), mixedn192 (128 x 192: m64 x n192
wgmmas, exp. 108), pairs (its split-K pairs), pre93 / pre99 / pre100 (the rule's pick without exp. 93's
wide tiles / exp. 99's two-form kernel / exp. 100's (256, 128) rule), pre29 (without either of
session 29's rules), pre102 (without exp. 102's rule changes; the schedule stays the wave plan),
pre106 (without the wide form's rule, exp. 93, i.e. what exp. 106's bound falls back to),
pre107 (without exp. 107's three-warpgroup rule), pre108 (without exp. 108's (128, 192) forms rule),
pre112 (without exp. 112's A widths rule), widths (exp. 112's forms, `configs.width_forms`, rule or not),
two (both forms side by side in one launch, exp. 99; two@P: split at CTA P, two@+D / two@-D: at
the plan's P + D, else the plan's), three (the (256, 128), (128, 192) and wide forms, exp. 108;
three@P:Q: P and Q CTAs offered to the first two), tTMxTN (the single-form kernel with any tile of
configs.GROUP_MIXED_TILES, e.g. t256x80: m64 x n80 wgmmas, exp. 112), fTMxTN+TMxTN+... (the multi-form
kernel with those tiles, in configs.form_order; fTILES@P:Q:..: the CTAs offered to all forms but the last).
Dual: rule, mixed (the (256, 128) mixed-input form, stream-K where its plan splits), narrow,
wg3, wide (exp. 91), wide192 (192 A rows, exp. 111) -- each with its own stream-K decision --, pairs, wg3pairs, widepairs
(their split-K pairs), pre91 (the mixed-input pick of the rules before exp. 91), pre106 (the
pick without exp. 106's wide pairs over the stored-decode pairs) and pre111 (without exp. 111's
192-row wide form);
FORM@nopad: a dual mixed form with an A16 workspace of exactly M rows, as before exp. 92 (a
TMA box may then pass the tensor's end).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import nvfp4gemm  # noqa: E402,F401  (must precede cutlass)

import configs  # noqa: E402

FORMS = {
    "group": {
        "mixed256": lambda shape: configs.sm90_group_mixed(),
        "mixed128": lambda shape: configs.sm90_group_mixed(tile=(128, 128)),
        "mixed64": lambda shape: configs.sm90_group_mixed(tile=(256, 64)),
        "mixedwide": lambda shape: configs.sm90_group_mixed(tile=(128, 256)),
        "mixed192": lambda shape: configs.sm90_group_mixed(tile=(192, 128)),
        "mixedn192": lambda shape: configs.sm90_group_mixed(tile=(128, 192)),
        "pairs": lambda shape: configs.sm90_group_mixed(pairs=True),
        "rule": lambda shape: configs.select_config("group", "sm_90a", shape),
        "pre93": lambda shape: _pick_without(shape, "_sm90_group_wide_ok"),
        "pre99": lambda shape: _pre99_group(shape),
        "pre100": lambda shape: _pick_without(shape, "_sm90_group_mixed256_ok"),
        "pre29": lambda shape: _pre99_group(shape, "_sm90_group_mixed256_ok"),
        "pre102": lambda shape: _pick_without(shape, "group_wave_plan_applies"),
        "pre106": lambda shape: _pick_without(shape, "_sm90_group_wide_ok"),
        "pre107": lambda shape: _pick_without(shape, "_sm90_group_mixed192_ok"),
        "pre108": lambda shape: _pick_without(shape, "_sm90_group_n192_forms"),
        "pre112": lambda shape: _pick_without(shape, "_sm90_group_widths"),
        "widths": lambda shape: _widths(shape),
        "two": lambda shape: configs.sm90_group_mixed_two_forms(),
        "three": lambda shape: configs.sm90_group_mixed_three_forms(),
    },
    "dual": {
        "mixed": configs.sm90_dual_mixed,
        "narrow": configs.sm90_dual_mixed_narrow,
        "wg3": configs.sm90_dual_mixed_wg3,
        "wide": configs.sm90_dual_mixed_wide,
        "wide192": configs.sm90_dual_mixed_wide192,
        "widepairs": lambda shape: configs.sm90_dual_mixed_wide_pairs(),
        "pairs": lambda shape: configs.sm90_dual_mixed_pairs(),
        "wg3pairs": lambda shape: configs.sm90_dual_mixed_wg3_pairs(),
        "rule": lambda shape: configs.select_config("dual", "sm_90a", shape),
        # the mixed-input pick of the rules before exp. 91 (where they pick one)
        "pre91": configs._sm90_mixed_rule_wg3,
        "pre106": lambda shape: _pick_without(shape, "_sm90_wide_pairs_over_stored_pairs", problem="dual"),
        "pre111": lambda shape: _pick_without(shape, "_sm90_dual_wide192", problem="dual"),
    },
}


def _pick_without(shape, *rules: str, problem: str = "group"):
    """The rule's pick with the named `configs` rule predicates switched off (a CONFIG_MAP pin
    that is not the rule's pick stays: the leaderboard shapes' entries were made at import)."""
    mapped = configs.select_config(problem, "sm_90a", shape)
    if mapped != configs.default_config(problem, "sm_90a", configs.shape_key(problem, shape)):
        return mapped
    keep = {name: getattr(configs, name) for name in rules}
    for name in rules:
        setattr(configs, name, lambda *_args: False)
    try:
        return configs.default_config(problem, "sm_90a", configs.shape_key(problem, shape))
    finally:
        for name, fn in keep.items():
            setattr(configs, name, fn)


def _widths(shape):
    """Exp. 112's forms (`configs.width_forms`) whatever the rule says."""
    tiles = configs.width_forms(shape)
    if not tiles:
        return None
    return configs.sm90_group_mixed(tile=tiles[0]) if len(tiles) == 1 else configs.sm90_group_mixed_forms(tiles)


def _pre99_group(shape, *more: str):
    """Without exp. 99's two-form rule (nor its leaderboard unpinning) and any `more` rules."""
    if shape == configs.GROUP_BENCHMARKS[1]:
        return configs.sm90_group_mixed()
    return _pick_without(shape, "_sm90_group_two_forms_ok", *more)


def form_config(problem: str, name: str, shape):
    """The config of form `name`: a FORMS entry, or (grouped) tTMxTN, the single-form grouped
    mixed-input kernel with tile (TM, TN) of configs.GROUP_MIXED_TILES (e.g. t256x80, exp. 112)."""
    if problem == "group" and name.startswith("t") and "x" in name:
        tm, tn = (int(v) for v in name[1:].split("x"))
        return configs.sm90_group_mixed(tile=(tm, tn))
    if problem == "group" and name.startswith("f") and "+" in name:
        return configs.sm90_group_mixed_forms(tuple(tuple(int(v) for v in t.split("x")) for t in name[1:].split("+")))
    return FORMS[problem][name](shape)


def poisoned_check(launch, data, outs, problem: str) -> str | None:
    """One `launch()` with every output NaN-poisoned: None if it wrote all of them and matches
    the reference (reference.check_implementation), else why not."""
    import torch

    import reference as R

    for c in outs:
        c.fill_(float("nan"))
    launch()
    torch.cuda.synchronize()
    unwritten = sum(int(torch.isnan(c).sum()) for c in outs)
    ok, msg = R.check_implementation(data, outs[0] if problem == "dual" else outs)
    return None if ok and not unwritten else f"{unwritten} NaN left; {msg[:200]}"


def parse_shapes(problem: str, spec: str) -> list:
    if problem == "dual":
        if spec == "leaderboard":
            return list(configs.DUAL_BENCHMARKS)
        return [tuple(int(x) for x in s.split("x")) + (1,) for s in spec.split(";") if s]
    if spec == "leaderboard":
        return list(configs.GROUP_BENCHMARKS)
    return [tuple(tuple(int(x) for x in g.split("x")) for g in s.split("/")) for s in spec.split(";") if s]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="group", choices=("group", "dual"))
    ap.add_argument("--forms", default=None, help="default: rule,mixed256 (group), rule,mixed (dual)")
    ap.add_argument("--shapes", default="leaderboard")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()

    import torch

    import reference as R
    from benchmarks.timing import Timer
    from nvfp4gemm import harness
    from nvfp4gemm.dispatch import PackedLaunch

    timer = Timer(args.iters)
    prob = args.problem
    forms = (args.forms or ("rule,mixed256" if prob == "group" else "rule,mixed")).split(",")
    rows = []
    keep = []  # workspaces the packed launches point into
    for shape in parse_shapes(prob, args.shapes):
        if prob == "dual":
            data = R.generate_input(*shape, 1111, device="cuda", poison_padding=True)
            outs = [data[-1]]
            label = "x".join(str(x) for x in shape[:3])
        else:
            ms, ns, ks = (list(x) for x in zip(*shape))
            data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda", poison_padding=True)
            outs = [c for _, _, c in data[0]]
            label = " ".join(f"{m}" for m in ms) + f" | N {ns[0]} K {ks[0]}"
        runs = {}
        for name in forms:
            base, _, variant = name.partition("@")
            cfg = form_config(prob, base, shape)
            if cfg is None or configs.check_config(cfg) or not configs.fits(cfg, shape):
                print(f"{name}: not valid for this shape", flush=True)
                continue
            mod, cls = harness.kernel_module(prob, "sm_90a", cfg)
            if hasattr(cls, "can_implement"):
                try:
                    cls.can_implement(cfg, *shape) if prob == "dual" else cls.can_implement(cfg, shape)
                except ValueError as e:
                    print(f"{name}: {e}", flush=True)
                    continue
            ck = harness.compile_kernel(prob, "sm_90a", cfg, shape)
            if cfg.forms and variant:  # two@P: the two-form kernel split at CTA P (two@+D: plan's P + D);
                # fTILES@P:Q:...: the CTAs offered to each form but the last;
                # three@P:Q: the three-form kernel, P and Q CTAs offered to its first two forms
                split = tuple(int(v) for v in variant.split(":"))
                if base == "two" and variant[0] in "+-":
                    split = (split[0] + configs.mixed_group_two_forms_plan(
                        shape, torch.cuda.get_device_properties(0).multi_processor_count)["narrow_ctas"],)
                fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream(), split)
            else:
                fargs = mod.runtime_args(data, cfg, torch.cuda.current_stream())
            if variant == "nopad":  # dual mixed forms: an A16 workspace of exactly M rows (before exp. 92)
                from cutlass import Int32
                from cutlass.cute.runtime import make_ptr

                m, _n, k, _l = shape
                a16 = torch.empty((m, k), dtype=torch.float16, device="cuda")
                fargs = list(fargs)
                fargs[2] = make_ptr(fargs[2].dtype, a16.data_ptr(), fargs[2].memspace, assumed_align=16)
                fargs[15] = Int32(m)
                fargs = tuple(fargs)
                keep.append(a16)
            wrong = poisoned_check(lambda: ck.fn(*fargs), data, outs, prob)
            if wrong:
                print(f"{name} {cfg.short()}: WRONG ({wrong})", flush=True)
                rows.append({"shape": shape, "form": name, "correct": False})
                continue
            # the dispatcher's launch path (arguments converted once): `ck.fn(*fargs)` spends tens
            # of us of Python per call, which the events time on short kernels
            runs[name] = (cfg, PackedLaunch(ck.fn, fargs), [])
        for _ in range(args.rounds):
            for name, (_cfg, fn, ts) in runs.items():
                ts.append(timer(fn))
        base = statistics.median(next(iter(runs.values()))[2]) if runs else None
        for name, (cfg, _fn, ts) in runs.items():
            med = statistics.median(ts)
            rows.append({"shape": shape, "form": name, "config": cfg.short(), "correct": True, "rounds_us": ts,
                         "us": med, "ratio": med / base})
            print(f"{label:48s} {name:9s} {cfg.short():34s} " + " ".join(f"{t:7.1f}" for t in ts)
                  + f"  med {med:7.1f}  x{med / base:.3f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
    return 0 if all(r["correct"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
