"""Exp. 175c: which operand's values cost the wide draw its ~3% on g8 N4096 K7168 (exp. 175b:
it follows the values, at an unchanged 1980 MHz SM clock)?  One buffer set (leaderboard-draw
allocation); A (data + both scale forms) and B (same) each take the leaderboard or the wide draw's
values, four combinations, timed the leaderboard's way (flush before each call) in alternating
rounds, then 1 s of flush + call pairs per combination with nvidia-smi sampling clock and power.
Mixed combinations may overflow fp16 (the draws' scales are built in pairs): timing only.

    python3 notes/patches/exp175_draw_values/exp175c.py OUT.json
"""

import json
import statistics
import sys

import torch

sys.path.insert(0, ".")
import configs  # noqa: E402
from benchmarks.timing import Timer, clone_input  # noqa: E402
from exp175 import make  # noqa: E402
from exp175b import flush_sustained  # noqa: E402
from submission import custom_kernel  # noqa: E402

ROUNDS, ITERS = 5, 30
CASES = [configs.GROUP_BENCHMARKS[0], configs.GROUP_BENCHMARKS[1]]


def set_operands(x, a_src, b_src):
    """Grouped input x gets A (a, sfa, sfa_perm) from a_src and B (b, sfb, sfb_perm) from b_src."""
    for g in range(len(x[0])):
        x[0][g][0].copy_(a_src[0][g][0])
        x[0][g][1].copy_(b_src[0][g][1])
        for i in (1, 2):
            x[i][g][0].copy_(a_src[i][g][0])
            x[i][g][1].copy_(b_src[i][g][1])
    torch.cuda.synchronize()


def main(out_path):
    timer = Timer(ITERS)
    rows = []
    for shape in CASES:
        x, w = make("group", shape, False), make("group", shape, True)
        vals = {"lb": clone_input(x), "wide": clone_input(w)}
        del w
        combos = [("lb", "lb"), ("wide", "lb"), ("lb", "wide"), ("wide", "wide")]
        t = {}
        for _ in range(ROUNDS):
            for a, b in combos:
                set_operands(x, vals[a], vals[b])
                t.setdefault(f"A{a}_B{b}", []).append(timer(lambda: custom_kernel(x)))
        med = {k: statistics.median(v) for k, v in t.items()}
        sus = {}
        for a, b in combos:
            set_operands(x, vals[a], vals[b])
            sus[f"A{a}_B{b}"] = flush_sustained(lambda: custom_kernel(x), timer)
        row = {"case": [list(s) for s in shape], "us": med, "rounds_us": t, "flush_sustained": sus,
               "over_lb": {k: v / med["Alb_Blb"] for k, v in med.items()}}
        print(json.dumps({k: row[k] for k in ("us", "over_lb")}), flush=True)
        print(json.dumps({k: (round(v["us_median"], 2), round(v["sm_mhz_mean"]), round(v["power_w_mean"]), v["reasons"])
                          for k, v in sus.items()}), flush=True)
        rows.append(row)
        del x, vals
        torch.cuda.empty_cache()
    json.dump({"device": torch.cuda.get_device_name(0), "rows": rows}, open(out_path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
