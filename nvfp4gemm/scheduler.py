"""Persistent tile scheduling shared by every kernel (sm_100a and sm_90a, dual and grouped).

A persistent launch has fewer CTAs (clusters) than output tiles; cluster `c` of `G` takes
linear tile indices c, c + G, c + 2G, ...  The linear index maps to a tile coordinate by
rasterisation: with raster "m" consecutive indices walk down M first, so the clusters that
run at the same time share the same B (N) tiles in L2 — B is the large operand of every
leaderboard shape.

Device side (plain functions traced inline into kernels): `linear_to_mnl`;
`TileInfoPipeline`, the shared-memory ring through which one warp broadcasts each tile to
the other roles (computed once per tile); for grouped problems `grouped_tile_offsets`
(host: prefix sums of per-group tile counts), `blocked_tile_range` (contiguous shares, so a
CTA stays inside a group) and `group_and_rank`, a branch-free scan of the prefix sums; the
sm_90a grouped mixed kernel's device schedule (`device_tile`, `device_half`, `device_totals`,
`device_plan`, `device_segment`: each CTA's tiles and stream-K segments from the group table's
sizes, exps. 136-137).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import cutlass
import cutlass.cute as cute


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


# ---------------------------------------------------------------------------- tile ring


@dataclass(frozen=True)
class TileInfoPipeline:
    """Shared-memory ring that broadcasts each work tile from the scheduling warp to the
    warps that consume it (MMA, epilogue), so the schedule is computed once per tile.

    Slot i holds FIELDS Int32: (m_tile, n_tile, l, valid).  One mbarrier pipeline guards it
    (`cutlass.pipeline.PipelineAsync`): the producer warp waits for a free slot, one elected
    lane writes the slot and arrives on "full" (the arrive releases the writes); each
    consumer warp waits on "full" (acquire), reads, syncs the warp and arrives on "empty"
    with one elected lane.  The producer ends the walk by publishing valid = 0.
    All methods are traced inline by the calling @cute.jit code; the warp-collective ones
    must be called by the whole warp."""

    FIELDS: ClassVar[int] = 4
    pipe: object  # cutlass.pipeline.PipelineAsync
    buf: cute.Tensor  # (FIELDS, STAGES) Int32 in shared memory

    @staticmethod
    def stages_for(acc_stages: int) -> int:
        """Ring depth: the epilogue may trail the scheduler by the accumulator stages plus
        the tile the MMA works on and the one being loaded."""
        return acc_stages + 2

    @staticmethod
    def create(barrier_ptr, buf: cute.Tensor, num_stages: int, num_consumer_warps: int):
        """barrier_ptr: 2 * num_stages Int64 in shared memory; initialised by warp 0 and made
        visible by the caller's pipeline_init_arrive/wait (defer_sync)."""
        import cutlass.pipeline as pipeline

        pipe = pipeline.PipelineAsync.create(
            num_stages=num_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 1),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, num_consumer_warps),
            barrier_storage=barrier_ptr,
            defer_sync=True,
        )
        return TileInfoPipeline(pipe, buf)

    def publish(self, state, m_tile, n_tile, l_idx, valid):
        """Producer warp: write one tile (valid: Boolean) into the next slot."""
        self.pipe.producer_acquire(state)
        with cute.arch.elect_one():
            i = state.index
            self.buf[0, i] = cutlass.Int32(m_tile)
            self.buf[1, i] = cutlass.Int32(n_tile)
            self.buf[2, i] = cutlass.Int32(l_idx)
            self.buf[3, i] = cutlass.Int32(valid)
            self.pipe.producer_commit(state)
        state.advance()
        return state

    def fetch(self, state):
        """Consumer warp: (state, m_tile, n_tile, l, valid) of the next published tile."""
        self.pipe.consumer_wait(state)
        i = state.index
        m_tile = self.buf[0, i]
        n_tile = self.buf[1, i]
        l_idx = self.buf[2, i]
        valid = self.buf[3, i] != 0
        cute.arch.sync_warp()  # every lane has read the slot before it is handed back
        with cute.arch.elect_one():
            self.pipe.consumer_release(state)
        state.advance()
        return state, m_tile, n_tile, l_idx, valid


# ------------------------------------------------------- grouped problems, MMA coordinates
# "MMA coordinates": the MMA's M side runs over the rows of the operand fed as A.  Without
# swap_ab that is the group's M; with swap_ab (C^T = B A^T) it is the group's N, and the
# MMA's N side runs over the group's M.  grouped_mma_tiles / grouped_tile_offsets are pure
# Python, defined in configs.py (the sm_90a grouped cost model counts tiles too).
from configs import grouped_mma_tiles, grouped_tile_offsets  # noqa: E402,F401


def blocked_tile_range(cluster, num_clusters, num_tiles):
    """Contiguous share [start, end) of the linear tiles for `cluster` (host ints or device
    Int32).  Unlike the strided c, c + G, ... walk, consecutive tiles stay in one group for
    as long as the group lasts, so a CTA changes TMA descriptors at most once per group it
    touches; shares differ by at most one tile."""
    start = (cluster * num_tiles) // num_clusters
    end = ((cluster + 1) * num_tiles) // num_clusters
    return start, end


def group_and_rank(idx, offsets, num_groups: int):
    """(g, idx - offsets[g]) with offsets[g] <= idx < offsets[g+1], by a branch-free scan
    that also selects the base (offsets are non-decreasing), so
    `offsets` may be a register tensor indexed only by compile-time indices (no local
    memory).  Entries past the last group must hold the total tile count."""
    g = cutlass.Int32(0)
    base = cutlass.Int32(0)
    for i in range(1, num_groups):  # plain function: a Python loop unrolls at trace time
        passed = cutlass.Int32(idx >= offsets[i])
        g = g + passed
        base = cutlass.max(base, passed * offsets[i])
    return g, idx - base


# ------------------------------------------- device schedule of the grouped mixed kernel (exp. 136)
# The sm_90a grouped mixed-input kernel with config.device_schedule walks whole tiles t = CTA,
# + grid, ... (and stream-K segments, exp. 137 below) and finds each tile's group, B block and A
# rows from the group table's M_g, N_g, K_g (no host-made schedule), so one launch serves any M_g.  Plain functions: traced inline
# into the kernel (Int32 sizes read from the table) and run by the tests (Python ints).
# Group g owns ceil(M_g / tile_n) x (N_g / tile_m) tiles after group g - 1's, each B block's A
# blocks consecutive (the CTAs that start together share B blocks: exp. 102's waves); its A16
# rows start at the sum of the earlier M_h rounded up to tile_n.  A group of no rows starts
# where the next one does, so "the last group starting at or before t" is t's group.


def device_tile(t, ms, ns, ks, tile_m: int, tile_n: int, k_block: int):
    """(g, nb, m0, r0g, kb, total) of tile t: group, B block, first A row, the group's first A16
    row, its k-blocks, and the launch's tile count (ms, ns, ks: every table row's sizes, zeros
    past the groups).  Branch-free: each group's start, when at or before t, replaces the
    selection so far (starts do not decrease)."""
    total = rows = g = first = r0g = 0
    mb = 1
    for h in range(len(ms)):  # (unrolled at trace time)
        blocks = (ms[h] + (tile_n - 1)) // tile_n
        p = _flag(t >= total)
        g, first, r0g = g + p * (h - g), first + p * (total - first), r0g + p * (rows - r0g)
        mb = mb + p * (blocks - mb)
        total = total + blocks * (ns[h] // tile_m)
        rows = rows + blocks * tile_n
    mb = mb + _flag(mb == 0)  # (t past the last tile, in a group of no rows: no division by zero)
    local = t - first
    return g, local // mb, (local % mb) * tile_n, r0g, ks[g] // k_block, total


def device_half(t, ms, ks, tile_n: int):
    """(g, first, r0g, total) of pre-pass half t (32 codes of one A row): its group, the group's
    first half, its first A16 row (as `device_tile`) and the halves of all groups (M_g rows of
    K_g / 32 each, in group order)."""
    total = rows = g = first = r0g = 0
    for h in range(len(ms)):
        p = _flag(t >= total)
        g, first, r0g = g + p * (h - g), first + p * (total - first), r0g + p * (rows - r0g)
        total = total + ms[h] * (ks[h] // 32)
        rows = rows + (ms[h] + (tile_n - 1)) // tile_n * tile_n
    return g, first, r0g, total


# Exp. 137: a device-scheduled launch whose groups with rows share one k-block count may cut
# some tiles into stream-K segments (the units of `stream_k_range`, split as `stream_k_owners`
# says, reduced by the kernel's `stream_k_handoff`): first "tail" -- whole waves, then the
# tiles past them over all CTAs -- else "tail2" -- the last whole wave joins them (two waves
# or more) -- each where its modelled busiest CTA (k-blocks, plus DEVICE_SK_SEGMENT_KB per
# segment of its split tile) is under the whole tiles'; else whole tiles.  Each CTA computes
# the same plan.  A CTA's work items are its whole tiles cta, cta + ctas, ... below dp, then the
# segments of its unit range, one per tile it touches, numbered so that item j maps to its
# segment without a walk (`device_segment`).  H100 (notes/sm90.md exp. 137), kernel time
# against whole tiles on 10 random shapes: "all" tiles under two waves (the dual rule's)
# 1.000 (0.894-1.073), "tail" 0.969, "tail2" 0.965; this order of the two with a segment
# charge of 3 (2 split tiles with 27 of 28 k-blocks per CTA when charged 2: 1.07) picks the
# best or within 2% of it on all 10; on 12 others 0.991 (0.907-1.057, the 1.057 a launch with no
# whole wave: hence DEVICE_SK_ALL_MARGIN).  DEVICE_STREAM_K = False: whole tiles only.
DEVICE_SK_SEGMENT_KB = 3
DEVICE_STREAM_K = True
# With no whole wave, "tail" cuts every tile: measured 0.896 at a modelled 0.82 of the whole
# tiles' k-blocks, 1.07 and 1.057 at 0.96-1.04 (exp. 137): it must model under this percentage.
DEVICE_SK_ALL_MARGIN = 85


def device_totals(ms, ns, ks, tile_m: int, tile_n: int, k_block: int):
    """(tiles, kb) of a device-scheduled launch: its tile count, and the k-blocks of its groups
    with rows if they all have the same count, else 0 (then no stream-K)."""
    total = kb = mixed = 0
    for h in range(len(ms)):
        has = _flag(ms[h] > 0)
        kh = ks[h] // k_block
        total = total + (ms[h] + (tile_n - 1)) // tile_n * (ns[h] // tile_m)
        kb = kb + has * _flag(kb == 0) * kh  # (the first group with rows sets it)
        mixed = mixed + has * _flag(kh != kb)
    return total, kb * _flag(mixed == 0)


def _device_split(total, kb, ctas):
    """(waves, rest, whole, tail_cost, tail2_cost, use_tail, use_tail2): `device_plan`'s choice
    of the tiles to cut and the busiest CTA's k-blocks it models for each (plain ints or DSL
    values)."""
    waves = total // ctas
    rest = total - waves * ctas
    whole = (waves + _flag(rest > 0)) * kb
    # "tail": the rest over every CTA after `waves` whole waves
    tail = rest * kb
    short = tail // ctas
    tail_cost = waves * kb + (tail + ctas - 1) // ctas + DEVICE_SK_SEGMENT_KB * (
        (kb + short - 1) // (short + _flag(short == 0)))
    # (with no whole wave every tile is cut: there it must win by DEVICE_SK_ALL_MARGIN)
    use_tail = _flag(kb > 0) * _flag(rest > 0) * _flag(tail >= ctas) * _flag(tail_cost < whole) * (
        1 - _flag(waves == 0) * _flag(100 * tail_cost > DEVICE_SK_ALL_MARGIN * whole))
    # "tail2": the last whole wave too (each CTA's range then spans a tile or more: one more segment)
    tail2_cost = (waves - 1) * kb + ((ctas + rest) * kb + ctas - 1) // ctas + DEVICE_SK_SEGMENT_KB
    use_tail2 = (1 - use_tail) * _flag(kb > 0) * _flag(rest > 0) * _flag(waves >= 2) * _flag(tail2_cost < whole)
    return waves, rest, whole, tail_cost, tail2_cost, use_tail, use_tail2


def device_plan(total, kb, cta, ctas):
    """(dp, u0, end, n_dp, items, div) of CTA `cta`: whole tiles below dp (all of them where
    stream-K does not win), its stream-K unit range [u0, end) (counted from tile dp), its whole
    tiles n_dp, all its work items, and the unit count as `stream_k_owners` divides by (at
    least 1)."""
    _waves, rest, _whole, _tc, _t2c, use_tail, use_tail2 = _device_split(total, kb, ctas)
    use = (use_tail + use_tail2) * int(DEVICE_STREAM_K)
    dp = total - use * (rest + use_tail2 * ctas)
    sk_units = (total - dp) * kb
    u0, end = stream_k_range(cta, ctas, sk_units)
    n_dp = (dp - cta + ctas - 1) // ctas  # (0 where dp <= cta < ctas)
    kbs = kb + _flag(kb == 0)
    n_sk = _flag(end > u0) * ((end - 1) // kbs - u0 // kbs + 1)
    return dp, u0, end, n_dp, n_dp + n_sk, sk_units + _flag(sk_units == 0)


def device_split_kb(total: int, kb: int, ctas: int) -> int:
    """The busiest CTA's k-blocks `device_plan` models for `total` tiles of `kb` k-blocks (kb >
    0) on `ctas` CTAs: whole waves, or its "tail" / "tail2" cost where it cuts tiles (host side)."""
    _w, _r, whole, tail_cost, tail2_cost, use_tail, use_tail2 = _device_split(total, kb, ctas)
    if DEVICE_STREAM_K and (use_tail or use_tail2):
        return tail_cost if use_tail else tail2_cost
    return whole


def device_busiest_kb(shape, tiles, k_block: int, ctas: int) -> list:
    """For each (tile_m, tile_n) of `tiles`, the k-blocks of the busiest CTA of a device-scheduled
    launch of `shape` ((M_g, N_g, K_g) per group) as `device_plan` models them (host side, plain
    ints; exps. 140, 143): its pick among whole tiles, "tail" and "tail2" where every group with
    rows has one k-block count, else whole tiles at the groups' mean k-blocks.  One pass over
    the groups for all tiles, few allocations: the dispatcher's tile rule runs it on every
    new-M_g call (`device_totals`' sums, in plain ints)."""
    totals, kb_sums, kb = [0] * len(tiles), [0] * len(tiles), -1
    for m, n, k in shape:
        kg = k // k_block
        if m > 0:
            kb = kg if kb in (-1, kg) else 0  # (one k-block count among groups with rows, else 0)
        for i, (tm, tn) in enumerate(tiles):
            t = (m + tn - 1) // tn * (n // tm)
            totals[i] += t
            kb_sums[i] += t * kg
    if kb > 0:
        return [device_split_kb(total, kb, ctas) for total in totals]
    return [-(-total // ctas) * s / max(total, 1) for total, s in zip(totals, kb_sums)]


def device_segment(j, cta, ctas, dp, u0, end, n_dp, kb, div):
    """Work item j of CTA `cta` under `device_plan`: (tile, kb0, kb1, s, ns, whole) -- whole
    tiles (whole == 1: kb0 = kb1 = 0, the caller runs the tile's own k-blocks), then its
    stream-K segments: k-blocks [kb0, kb1) of tile dp + its stream-K tile, rank s of the tile's
    ns segments (the same segments `stream_k_work` walks to)."""
    whole = _flag(j < n_dp)
    out = 1 - whole
    kbs = kb + _flag(kb == 0)
    skt = u0 // kbs + out * (j - n_dp)
    ua = skt * kbs
    kb0 = out * _flag(j == n_dp) * (u0 - ua)
    left = end - ua
    kb1 = out * (kbs + _flag(left < kbs) * (left - kbs))
    first, last = stream_k_owners(skt, kbs, ctas, div)
    tile = whole * (cta + j * ctas) + out * (dp + skt)
    return tile, kb0, kb1, out * (cta - first), 1 + out * (last - first), whole


class _IntIndexed(tuple):
    """A tuple indexed by Python ints or host-side DSL integers (`device_tiles_of_cta`)."""

    def __getitem__(self, i):
        return tuple.__getitem__(self, int(i))


def device_tiles_of_cta(cta, grid, shapes, tile_m: int, tile_n: int, k_block: int, groups: int = 16) -> list:
    """Host mirror of one CTA's walk (tests): [(g, nb, m0, r0g, kb), ...] for t = cta, cta +
    grid, ... < total, shapes [(M_g, N_g, K_g)] padded with zero rows to `groups`."""
    pad = [(0, 0, 0)] * (groups - len(shapes))
    ms, ns, ks = (_IntIndexed(col) for col in zip(*(list(shapes) + pad)))
    total = device_tile(0, ms, ns, ks, tile_m, tile_n, k_block)[5]
    return [tuple(int(v) for v in device_tile(t, ms, ns, ks, tile_m, tile_n, k_block)[:5])
            for t in range(cta, int(total), grid)]


# ------------------------------------------------------------------ split-K work plan (host)
# Pure Python, defined in configs.py (the sm_90a grouped config choice costs plans too).
from configs import MAX_SPLITS, split_plan, split_units, tail_splits  # noqa: E402,F401


# ------------------------------------------------------------------ stream-K (device side)
# Plan: configs.stream_k_plan (host).  Tiles dp_tiles.. form the stream-K part; its units are
# (tile, k-block) pairs in tile-major order, sk_units = (tiles - dp_tiles) * k_blocks of them,
# and CTA c of `ctas` runs the contiguous range [c * sk_units // ctas, (c + 1) * sk_units // ctas).
# A tile's k-blocks are thus cut into segments of consecutive CTAs ("owners" first..last).
# Properties the kernels rely on (tests/test_scheduler.py checks them):
#  * the segment holding a split tile's k-block 0 is its CTA's last segment (the CTA's range
#    ends inside that tile), so that CTA -- the tile's finisher -- may wait for the others at
#    the very end of its work without holding anything another CTA waits for;
#  * every other segment of a split tile is its CTA's first segment, so a CTA writes at most
#    one partial tile (the workspace is indexed by CTA) and writes it before anything else.
# Plain functions (Int32 or Python ints): traced inline into kernels and run by the tests.


def stream_k_range(cta, ctas, sk_units):
    """[start, end) of `cta`'s stream-K units."""
    return (cta * sk_units) // ctas, ((cta + 1) * sk_units) // ctas


def stream_k_owners(sk_tile, k_blocks, ctas, sk_units):
    """(first, last) CTA running a segment of stream-K tile `sk_tile` (counted from
    dp_tiles): unit u lies in the range of CTA ((u + 1) * ctas - 1) // sk_units."""
    first = ((sk_tile * k_blocks + 1) * ctas - 1) // sk_units
    last = ((sk_tile + 1) * k_blocks * ctas - 1) // sk_units
    return first, last


def _flag(b):
    """A comparison as 0 / 1 (Python bool or DSL Boolean)."""
    return int(b) if isinstance(b, bool) else cutlass.Int32(b)


def stream_k_work(tile_dp, u, end, cta, ctas, dp_tiles, k_blocks, sk_units):
    """A CTA's next work segment, from its walk state (tile_dp: next whole tile, strided by
    `ctas`; [u, end): its stream-K units left): (tile, kb0, kb1, s, ns, valid) -- the linear
    tile, its k-blocks [kb0, kb1), this segment's rank s of the tile's ns segments (ns == 1:
    a whole tile), and 0 once the walk is over.  Branch-free, so one loop body serves both
    phases; advance with `stream_k_advance`."""
    in_dp = _flag(tile_dp < dp_tiles)
    skt, kb0, kb1 = stream_k_segment(u, end, k_blocks)
    first, last = stream_k_owners(skt, k_blocks, ctas, sk_units)
    out = 1 - in_dp
    tile = dp_tiles + skt + in_dp * (tile_dp - dp_tiles - skt)
    return (tile, out * kb0, in_dp * k_blocks + out * kb1, out * (cta - first), 1 + out * (last - first),
            in_dp + out * _flag(u < end))


def stream_k_advance(tile_dp, u, dp_tiles, ctas, kb0, kb1):
    """The walk state after the segment stream_k_work returned."""
    in_dp = _flag(tile_dp < dp_tiles)
    return tile_dp + in_dp * ctas, u + (1 - in_dp) * (kb1 - kb0)


def stream_k_segment(u, end, k_blocks):
    """The segment starting at unit u of a range ending at `end`: (stream-K tile, first
    k-block, one past the last k-block)."""
    sk_tile = u // k_blocks
    kb0 = u - sk_tile * k_blocks
    left = end - u
    room = k_blocks - kb0
    if isinstance(left, int) and isinstance(room, int):
        return sk_tile, kb0, kb0 + min(left, room)
    return sk_tile, kb0, kb0 + cutlass.min(left, room)
