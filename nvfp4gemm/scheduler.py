"""Persistent tile scheduling shared by every kernel (sm_100a and sm_90a, dual and grouped).

A persistent launch has fewer CTAs (clusters) than output tiles; cluster `c` of `G` takes
linear tile indices c, c + G, c + 2G, ...  The linear index maps to a tile coordinate by
rasterisation: with raster "m" consecutive indices walk down M first, so the clusters that
run at the same time share the same B (N) tiles in L2 — B is the large operand of every
leaderboard shape.

Host side: `grid_for` (how many clusters to launch) and `tile_counts`.
Device side (plain functions traced inline into kernels): `linear_to_mnl` and, for grouped
problems, `group_of_tile`, which finds a tile's group from the prefix sums of per-group
tile counts with a branch-free scan (no per-tile walk over earlier groups' shapes).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute

from configs import KernelConfig, ceil_div


# ---------------------------------------------------------------------------- host side


def tile_counts(cfg: KernelConfig, m: int, n: int, l: int = 1) -> tuple[int, int, int]:
    """Output tiles along (M, N, L) for one GEMM (one group) of shape m x n x l."""
    tm, tn = cfg.mma_tile_mn
    if cfg.swap_ab:
        tm, tn = tn, tm  # the MMA's M side runs over N
        return ceil_div(n, tm), ceil_div(m, tn), l
    return ceil_div(m, tm), ceil_div(n, tn), l


def grid_for(cfg: KernelConfig, num_tiles: int, sm_count: int) -> int:
    """Clusters to launch: one per output tile, at most what fits on the chip at once."""
    cluster = cfg.cluster_mn[0] * cfg.cluster_mn[1]
    resident = max(1, (sm_count // cluster) * cfg.occupancy)
    return max(1, min(num_tiles, resident))


def group_tile_offsets(cfg: KernelConfig, shapes) -> list[int]:
    """Prefix sums of per-group tile counts: group g owns linear tiles
    [offsets[g], offsets[g+1]).  len(shapes) + 1 entries."""
    offs = [0]
    for m, n, _k in shapes:
        tm, tn, _ = tile_counts(cfg, m, n)
        offs.append(offs[-1] + tm * tn)
    return offs


# ---------------------------------------------------------------------------- device side


def linear_to_mnl(idx, tiles_m, tiles_n, raster_m: bool):
    """Tile coordinate (m_blk, n_blk, l) of linear tile `idx` (Int32 values).
    `raster_m` is a compile-time choice: True walks M first."""
    if raster_m:
        m_blk = idx % tiles_m
        rest = idx // tiles_m
        n_blk = rest % tiles_n
        l_idx = rest // tiles_n
    else:
        n_blk = idx % tiles_n
        rest = idx // tiles_n
        m_blk = rest % tiles_m
        l_idx = rest // tiles_m
    return m_blk, n_blk, l_idx


def group_of_tile(idx, offsets: cute.Tensor, num_groups: int):
    """Group g with offsets[g] <= idx < offsets[g+1], and idx's rank inside that group.
    `offsets` holds len(groups)+1 Int32 prefix sums (registers or shared memory);
    `num_groups` is a compile-time bound.  Branch-free: counts the boundaries passed."""
    g = cutlass.Int32(0)
    for i in cutlass.range_constexpr(1, num_groups):
        g = g + cutlass.Int32(idx >= offsets[i])
    return g, idx - offsets[g]
