"""Exp. 171f: the skinny kernels with `chunk_pairs` (two K chunks per cp.async stage, a row's two
copies back to back) against the rule's configs.  Dual: exp. 156's sweep (each config compiled
once, checked once per shape with C poisoned, timed in alternating rounds, L2 flushed, median of
30 per round, min over rounds).  Variants: None = the rule; ("p", S) = the rule's config with
chunk_pairs and S stages (S None: the rule's).  `python3 exp171f.py dual|dual2` ($OUT/exp171f_*.json)."""
import dataclasses, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "exp155_skinny64"))
sys.path.insert(0, "benchmarks")
import exp156 as E

SHAPES = {
    "dual": [(1, 2048, 7168), (16, 2048, 7168), (8, 1024, 4096), (16, 7168, 2048), (1, 4096, 7168),
             (16, 4096, 7168), (1, 14336, 4096), (16, 14336, 4096), (16, 12288, 3072), (1, 28672, 8192),
             (16, 28672, 8192), (16, 1024, 4096), (16, 512, 7168), (4, 7168, 2048), (16, 8192, 8192)],
}
VARIANTS = [None, ("p", None), ("p", 2), ("p", 3)]


def pair_config(rule, v):
    if v is None:
        return rule
    return dataclasses.replace(rule, chunk_pairs=True, ab_stages=v[1] or rule.ab_stages)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "dual"
    out, _ = E.sweep(SHAPES[which], VARIANTS, make_config=pair_config, rounds=3)
    E.save(out, f"exp171f_{which}.json")
