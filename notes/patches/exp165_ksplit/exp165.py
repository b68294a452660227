"""Exp. 165: the dual skinny kernel with K split over a cluster of k_split CTAs (KernelConfig.
k_split, partial sums into rank 0's shared memory) for grids of fewer CTAs than SMs.
`python3 exp165.py [set] [rounds]` (writes $OUT/exp165*.json); exp. 156's `sweep` with a
variant = (B rows, k_warps, ab_stages, k_split)."""
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "exp155_skinny64"))
import configs
import exp156 as E


def make_config(rule, v):
    if v is None:
        return rule
    return configs.KernelConfig("dual", "sm_90a", (v[0], rule.mma_tile_mn[1]), skinny=True, k_warps=v[1],
                                ab_stages=v[2], k_split=v[3])


SETS = {
    "165": ([(m, n, k) for m in (1, 16) for n in (256, 512, 1024, 2048) for k in (2048, 4096, 7168)]
            + [(16, 1024, 8192), (1, 512, 16384)],
            [None, (16, 4, 3, 2), (16, 4, 3, 4), (16, 4, 3, 8), (16, 2, 3, 4), (16, 2, 3, 8), (16, 4, 2, 4)]),
    # new shapes (K 5120-14336, 8-64 CTAs) to place the rule's K bound; None: the rule before k_split
    "165b": ([(1, 384, 5120), (16, 768, 6144), (8, 1024, 5120), (16, 640, 8192), (1, 896, 14336), (12, 1024, 7168),
              (16, 128, 7168), (16, 512, 6144), (1, 1024, 6144), (16, 384, 5120)],
             [None, (16, 4, 3, 2), (16, 4, 3, 4)]),
    # exp. 166: K 2048-4096 at <= 64 CTAs (below the rule's K bound), clusters of fewer-warp CTAs
    "166": ([(m, n, k) for m in (1, 16) for n in (256, 512, 1024) for k in (2048, 3072, 4096)],
            [None, (16, 4, 3, 2), (16, 2, 3, 2), (16, 2, 3, 4), (16, 1, 3, 4), (16, 2, 4, 2)]),
}

if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "165"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    E.save(E.sweep(*SETS[which], make_config=make_config, rounds=rounds)[0], f"exp{which}.json")
