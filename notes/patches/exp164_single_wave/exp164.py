"""Exp. 164: the dual skinny kernel's configs where the rule's grid is at most one CTA per SM
(N / 16 <= 132: N 512-2048), the decode shapes exps. 161-163 found latency-bound (few warps,
each with a long serial chain of chunks).  Exp. 157 saw deeper rings win there (0.88-0.95x on
two shapes) but too few shapes to rule on.  `python3 exp164.py` (writes $OUT/exp164.json); the
timing loop is exp. 156's `sweep` (alternating rounds, L2 flushed, median of 30, checked)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exp155_skinny64"))
import exp156 as E

SETS = {
    # the sweep (the rule before exp. 164: kw2 ab3 at K <= 4096, kw4 ab2 above, for 16 A rows)
    "164": ([(m, n, k) for m in (1, 16) for n in (512, 1024, 2048) for k in (2048, 4096, 7168)],
            [None, (16, 4, 4), (16, 4, 6), (16, 8, 3), (16, 8, 4), (16, 16, 3), (16, 2, 4), (16, 2, 6)]),
    # the check of the new term (None = kw4 ab4) on shapes not in the sweep, against the old picks
    "164b": ([(16, 768, 3072), (16, 1536, 5120), (16, 1792, 8192), (16, 2112, 1536), (12, 1024, 6144),
              (16, 1280, 2560), (9, 2048, 3072), (16, 640, 8192), (16, 1536, 1536), (16, 896, 4096)],
             [None, (16, 2, 3), (16, 4, 2), (16, 4, 3)]),
    # 3 or 4 stages for the new term (None: kw4 ab4 at K >= 2048), both sets' 16- and 9/12-row shapes
    "164c": ([(16, n, k) for n in (512, 1024, 2048) for k in (2048, 4096, 7168)]
             + [(16, 768, 3072), (16, 1536, 5120), (16, 1792, 8192), (12, 1024, 6144), (16, 1280, 2560),
                (9, 2048, 3072), (16, 640, 8192), (16, 896, 4096)],
             [None, (16, 4, 3)]),
    # the final term (None: kw4 ab3 at K >= 2048) against the picks before it, both sets' shapes
    "164d": ([(16, n, k) for n in (512, 1024, 2048) for k in (2048, 4096, 7168)]
             + [(16, 768, 3072), (16, 1536, 5120), (16, 1792, 8192), (12, 1024, 6144), (16, 1280, 2560),
                (9, 2048, 3072), (16, 640, 8192), (16, 896, 4096)],
             [None, (16, 2, 3), (16, 4, 2)]),
}

if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "164"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    E.save(E.sweep(*SETS[which], rounds=rounds)[0], f"exp{which}.json")
