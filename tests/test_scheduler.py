"""Stream-K schedule (configs.stream_k_plan on the host, scheduler.stream_k_* in the kernels):
the properties the mixed-input dual kernel's reduction relies on, walked on CPU exactly as
the kernel walks them (the device functions are plain arithmetic on Python ints here)."""

import dataclasses
import itertools
import math
import random

import pytest

import configs
from nvfp4gemm import scheduler


def walk(tiles, k_blocks, ctas, dp):
    """Every CTA's work, as the kernel's producer and consumers walk it: (cta, tile, kb0,
    kb1, s, ns) in the CTA's order."""
    sk_units = (tiles - dp) * k_blocks
    div = max(sk_units, 1)  # the kernels' guard: no stream-K part
    out = []
    for c in range(ctas):
        tile_dp = c
        u, end = scheduler.stream_k_range(c, ctas, sk_units)
        while True:
            t, kb0, kb1, s, ns, valid = scheduler.stream_k_work(tile_dp, u, end, c, ctas, dp, k_blocks, div)
            if not valid:
                break
            out.append((c, t, kb0, kb1, s, ns))
            tile_dp, u = scheduler.stream_k_advance(tile_dp, u, dp, ctas, kb0, kb1)
    return out


SHAPES = [(96, 28, 132), (64, 28, 132), (48, 16, 132), (192, 6, 132), (128, 28, 132), (1792, 16, 132),
          (300, 7, 132), (5, 3, 132), (133, 2, 132), (264, 9, 132), (40, 1, 132), (1, 64, 132)]


@pytest.mark.parametrize("tiles,k_blocks,sms", SHAPES + [
    (random.Random(s).randint(1, 700), random.Random(s + 99).randint(1, 64), random.Random(s + 7).choice([8, 132]))
    for s in range(20)])
def test_stream_k_partition(tiles, k_blocks, sms):
    ctas, dp = configs.stream_k_plan(tiles, k_blocks, sms)
    assert ctas <= sms and dp in (0, tiles)
    check_walk(tiles, k_blocks, ctas, dp, sms)


@pytest.mark.parametrize("tiles,k_blocks,ctas", [(300, 7, 132), (1792, 16, 132), (301, 5, 100), (50, 9, 16)])
def test_stream_k_partition_after_whole_waves(tiles, k_blocks, ctas):
    """Whole waves first, then a stream-K tail: the kernels' walk supports it (the plan does
    not pick it now, exp. 66)."""
    check_walk(tiles, k_blocks, ctas, (tiles // ctas - 1) * ctas, ctas)


@pytest.mark.parametrize("tiles,k_blocks,dp", [(5, 3, 0), (1, 64, 0), (3, 1, 0), (5, 3, 4), (4, 7, 2)])
def test_stream_k_partition_one_cta(tiles, k_blocks, dp):
    """A stream-K part walked by a single CTA (a one-SM plan never picks one, but the kernels'
    walk must hold it: a range shifted by one unit broke only here, third review of session 56)."""
    check_walk(tiles, k_blocks, 1, dp, 1)


def check_walk(tiles, k_blocks, ctas, dp, sms):
    work = walk(tiles, k_blocks, ctas, dp)
    # every (tile, k-block) exactly once
    seen = {}
    for c, t, kb0, kb1, s, ns in work:
        assert 0 <= kb0 < kb1 <= k_blocks
        for kb in range(kb0, kb1):
            assert (t, kb) not in seen
            seen[(t, kb)] = (c, s, ns)
    assert set(seen) == {(t, kb) for t in range(tiles) for kb in range(k_blocks)}
    by_cta = {}
    for w in work:
        by_cta.setdefault(w[0], []).append(w)
    for t in range(tiles):
        segs = sorted({seen[(t, kb)] for kb in range(k_blocks)})
        ns = segs[0][2]
        # ns segments, of consecutive CTAs, ranked s = 0.. in k order
        assert len(segs) == ns and [s for _, s, _ in segs] == list(range(ns))
        assert [c for c, _, _ in segs] == list(range(segs[0][0], segs[0][0] + ns))
        assert all(seen[(t, kb)][1] <= seen[(t, kb + 1)][1] for kb in range(k_blocks - 1))
    for c, ws in by_cta.items():
        split = [w for w in ws if w[5] > 1]
        # the finisher's (s == 0) segment of a split tile is its CTA's last
        for w in split:
            if w[4] == 0:
                assert w is ws[-1], (c, ws)
        # a CTA writes at most one partial, in its first stream-K segment
        writers = [w for w in split if w[4] > 0]
        assert len(writers) <= 1
        if writers:
            assert writers[0] is [w for w in ws if w[1] >= dp][0]
    # balance: busiest CTA's k-blocks
    load = {}
    for c, t, kb0, kb1, s, ns in work:
        load[c] = load.get(c, 0) + kb1 - kb0
    busiest = max(load.values())
    whole = configs.ceil_div(tiles, sms) * k_blocks
    if dp < tiles:  # stream-K: balanced to one k-block, and shorter than whole tiles
        assert dp % ctas == 0
        assert busiest - min(load.get(c, 0) for c in range(ctas)) <= 1
        assert busiest < whole or ctas == 1  # (one CTA runs every unit)
    else:
        assert busiest == whole


def test_stream_k_plan_leaderboard():
    """The dual leaderboard shapes' 256 x 128 mixed tiles on 132 SMs."""
    assert configs.stream_k_plan(128, 28, 132) == (128, 128)  # 512x4096x7168: whole tiles
    # 512x3072x7168: 21 k-blocks, not 28; 128 CTAs (3 tiles per 4 CTAs) cut every tile in two,
    # 132 would leave tiles in 3 segments whose finishers read 2 partials (H100, exp. 81)
    assert configs.stream_k_plan(96, 28, 132) == (128, 0)
    assert configs.stream_k_plan(72, 28, 132) == (132, 0)  # 384x3072x7168: ties 126, more CTAs
    assert configs.stream_k_plan(64, 28, 132) == (128, 0)  # 256x4096x7168: 14, not 28 (2 segments)
    assert configs.stream_k_plan(48, 16, 132) == (96, 0)  # 256x3072x4096: 8 per CTA, 2 segments
    assert configs.stream_k_plan(192, 6, 132) == (128, 0)  # 3072x1024x1536: 9, not 12
    assert configs.stream_k_plan(300, 7, 132) == (132, 300)  # 2+ waves: whole tiles


def test_stream_k_plan_narrow_by_makespan():
    """The narrow form's split decision is the makespan model's alone (exp. 85, H100): it
    splits 256x3072x4096 (96 narrow tiles x 16 k-blocks: 128 CTAs, 0.958 of whole tiles;
    the segment-cost test of the (256, 128) form would keep them whole) and 256x2048x7168,
    and keeps 300x2048x2048 (96 x 8) whole, as measured."""
    assert configs.stream_k_plan(96, 16, 132) == (96, 96)  # segment-cost test: whole
    assert configs.stream_k_plan(96, 16, 132, True) == (128, 0)
    assert configs.stream_k_plan(64, 28, 132, True) == (128, 0)
    assert configs.stream_k_plan(96, 8, 132, True) == (96, 96)
    assert configs.stream_k_plan(300, 7, 132, True) == (132, 300)  # 2+ waves: whole tiles


def test_dual_rule_wide192():
    """Exp. 111's rule: the dual wide form with 192 A rows in place of the wide form where it
    pads M less (alone, stream-K or pairs before), and by the model in place of the other mixed
    forms that are no split-K pair nor the narrow form's whole tiles (the measured shapes:
    0.79-0.98 of the pick before); the leaderboard shapes keep theirs."""
    pick = lambda *s: configs.select_config("dual", "sm_90a", s + (1,))  # noqa: E731
    for shape in ((192, 4096, 7168), (160, 4096, 7168), (176, 4096, 7168),  # wide pairs before
                  (192, 7168, 4096), (130, 8192, 4096), (144, 7168, 2048),  # wide
                  (176, 5120, 7168), (192, 14336, 4096),  # wide stream-K
                  (192, 2048, 7168), (300, 1536, 7168), (1536, 512, 7168),  # narrow stream-K
                  (384, 4096, 7168), (576, 14336, 512),  # wg3
                  (576, 3072, 4096), (576, 4096, 2048), (320, 7168, 7168)):  # (256, 128), stream-K or not
        cfg = pick(*shape)
        assert cfg.a_prepass and tuple(cfg.mma_tile_mn) == (128, 192) and cfg.cluster_mn == (1, 1), (shape, cfg)
    for shape in ((160, 3072, 4096),  # wg3 pairs (measured 1.007)
                  (1152, 768, 4096), (576, 1536, 4096),  # the narrow form's whole tiles (1.014, 1.028)
                  (256, 4096, 7168), (512, 4096, 7168), (256, 3072, 4096), (512, 3072, 7168),  # leaderboard
                  (256, 7168, 4096),  # 256-row tiles pad no more
                  (100, 4096, 7168)):  # M <= 128
        assert tuple(pick(*shape).mma_tile_mn) != (128, 192), shape


def test_dual_rule_narrow_form(monkeypatch):
    """Where the dual rule (without exp. 111, which may follow it) picks the narrow mixed form (exp. 85): narrow tiles filling
    [0.48, 0.95) of the 132 SMs, not both N <= 1024 and K <= 2048, or [0.24, 0.48) with
    K >= 4096; stream-K as planned."""
    monkeypatch.setattr(configs, "_sm90_dual_wide192", lambda *_args: None)
    pick = lambda *s: configs.select_config("dual", "sm_90a", s + (1,))  # noqa: E731
    for shape, split in (((256, 2048, 7168), True), ((256, 2048, 4096), True), ((300, 2048, 2048), False),
                         ((1536, 512, 7168), True), ((256, 2048, 1024), False),
                         ((128, 3072, 7168), True), ((256, 1024, 7168), True)):  # under half a wave, K >= 4096
        cfg = pick(*shape)
        assert cfg.a_prepass and cfg.mma_tile_mn == (128, 128) and cfg.split_k == split, (shape, cfg)
    for shape in ((512, 1024, 2048), (1024, 512, 1024),  # short N and K: measured slower
                  (200, 1792, 2048), (256, 1536, 2048),  # under half a wave with K < 4096: slower
                  (128, 1024, 7168),  # 16 narrow tiles: under a quarter wave, not measured
                  (256, 4096, 7168),  # 128 narrow tiles: a whole wave, the mixed pairs
                  (512, 3072, 7168)):  # 192 narrow tiles
        assert pick(*shape).mma_tile_mn != (128, 128) or not pick(*shape).a_prepass, shape


def test_dual_rule_wg3_form(monkeypatch):
    """Where the dual rule (without exp. 111, which may follow it) picks the three-warpgroup mixed form (exp. 86): the cost model puts
    it 4% under the form the earlier rules pick (any N % 64 == 0 since exp. 88), or those pick
    no mixed form, N % 192 == 0 and its tiles fill half a wave; not for short N and K, nor
    instead of the split-K pairs.  As split-K pairs itself where two CTAs per tile fill [0.7, 1] of the SMs (exp. 87)."""
    monkeypatch.setattr(configs, "_sm90_dual_wide192", lambda *_args: None)
    pick = lambda *s: configs.select_config("dual", "sm_90a", s + (1,))  # noqa: E731
    wg3 = lambda c: c.a_prepass and c.mma_tile_mn == (192, 128) and c.mma_warpgroups == 3  # noqa: E731
    kind = lambda c: "pairs" if c.cluster_mn == (2, 1) else "stream-K" if c.split_k else "whole"  # noqa: E731
    for shape, form in (((512, 3072, 7168), "whole"), ((256, 3072, 4096), "pairs"),  # leaderboard: 0.89 / 0.91
                        ((384, 3072, 7168), "stream-K"), ((1024, 1152, 4096), "stream-K"),  # over the (256, 128) form
                        ((896, 1536, 4096), "whole"),
                        ((96, 6144, 4096), "pairs"),  # over the narrow form; 64 tiles: split-K pairs (exp. 87)
                        ((256, 4608, 7168), "stream-K"), ((1536, 576, 7168), "stream-K"),  # no mixed form before
                        # N % 96 != 0, a ragged last tile (exp. 88): over (256, 128) / narrow, as pairs
                        ((640, 7168, 7168), "whole"), ((768, 14336, 4096), "whole"), ((384, 2048, 7168), "pairs")):
        cfg = pick(*shape)
        assert wg3(cfg) and kind(cfg) == form, (shape, cfg)
    for shape in ((512, 4096, 7168), (256, 4096, 7168),  # N 4096: the wide form, its pairs (exp. 91)
                  (2048, 3072, 2048), (192, 9216, 4096),  # the model's margin: (256, 128) measured faster
                  (256, 1536, 7168), (128, 6144, 2048),  # the narrow form measured faster
                  (128, 1536, 7168), (200, 1536, 2048),  # 16 / 32 tiles: the stored-decode kernels
                  (1024, 768, 1536),  # short N and K
                  (64, 3072, 7168)):  # M <= 64: the swap kernels
        assert not wg3(pick(*shape)), shape
    # the model's ranking on two shapes it was fitted on, as measured (H100)
    s = (512, 3072, 7168, 1)
    assert configs.mixed_dual_model_us(configs.sm90_dual_mixed_wg3(s), s) < configs.mixed_dual_model_us(
        configs.sm90_dual_mixed(s), s)
    s = (7168, 2304, 2048, 1)
    assert configs.mixed_dual_model_us(configs.sm90_dual_mixed_wg3(s), s) > configs.mixed_dual_model_us(
        configs.sm90_dual_mixed(s), s)


def test_dual_rule_wide_form(monkeypatch):
    """Where the dual rule (without exp. 111, which may follow it) picks the wide mixed form (exp. 91: 64 columns of C x 256 A rows):
    in place of the (256, 128) form where the cost model puts it 5% under (whole tiles or
    stream-K), and of the (256, 128) split-K pairs where both have as many tiles; never in
    place of the narrow or three-warpgroup forms or their pairs (H100: wide lost 5-19% there);
    over the stored-decode kernel's whole tiles where it pads no more A rows and fills half a
    wave (exp. 94); its split-K pairs over the stored-decode kernel's cluster split-K pairs on as
    many tiles with N and K >= 1024 (exp. 106), where the wide form's whole tiles or stream-K lost."""
    monkeypatch.setattr(configs, "_sm90_dual_wide192", lambda *_args: None)
    pick = lambda *s: configs.select_config("dual", "sm_90a", s + (1,))  # noqa: E731
    wide = lambda c: c.a_prepass and c.mma_tile_mn == (128, 256) and c.mma_warpgroups == 2  # noqa: E731
    kind = lambda c: "pairs" if c.cluster_mn == (2, 1) else "stream-K" if c.split_k else "whole"  # noqa: E731
    # measured wins, new / old (one process, 3 rounds): the leaderboard's 0.898 / 0.912, fitted
    # 0.904-0.940, checked 0.911-0.961 (every check shape the rule switched)
    for shape, form in (((512, 4096, 7168), "whole"), ((256, 4096, 7168), "pairs"),
                        ((1024, 2048, 7168), "whole"), ((768, 4096, 7168), "stream-K"),
                        ((512, 7168, 7168), "stream-K"), ((4096, 4096, 4096), "whole"),
                        ((192, 14336, 4096), "stream-K"), ((448, 7168, 2048), "whole"),
                        ((640, 5120, 2048), "whole"), ((3072, 768, 2048), "stream-K"),
                        ((512, 2048, 7168), "pairs"), ((448, 2048, 7168), "pairs"),
                        # exp. 94: over the stored-decode kernel's whole tiles (0.70-0.98)
                        ((192, 5120, 2048), "whole"), ((256, 7168, 7168), "stream-K"),
                        ((256, 5120, 4096), "stream-K"), ((1536, 1024, 2048), "whole"),
                        ((3072, 512, 1024), "whole"),
                        # exp. 106: wide pairs over the stored-decode cluster pairs (0.86-0.95)
                        ((256, 4096, 1536), "pairs"), ((256, 4096, 2048), "pairs"), ((512, 2048, 1024), "pairs"),
                        ((1024, 1024, 4096), "pairs"), ((448, 2048, 4096), "pairs")):
        cfg = pick(*shape)
        assert wide(cfg) and kind(cfg) == form, (shape, cfg)
    for shape in ((640, 4096, 7168),  # 768 padded A rows against 640: measured 1.05 slower
                  (384, 4096, 7168), (512, 3072, 7168), (768, 14336, 4096), (512, 6144, 2048),  # wg3 faster
                  (384, 2048, 7168), (256, 3072, 4096), (320, 2048, 4096),  # wg3 pairs faster
                  (256, 2048, 7168), (64, 4096, 7168),  # the narrow form; M <= 64: the swap kernels
                  # exp. 106: N 512, the stored-decode cluster pairs (wide pairs 1.009)
                  (2048, 512, 4096),
                  (384, 4096, 4096), (128, 14336, 4096)):  # more padded A rows than 128-row tiles
        assert not wide(pick(*shape)), shape


def test_mixed_wide_config_model():
    """The wide config: valid whole, stream-K and as pairs; 64 columns of C x 256 A rows per
    tile; 5 A16 stages of 32 KB in the shared-memory model; 128 accumulator registers; the A16
    workspace padded to whole 256-row tiles (a TMA box past M measured up to 26% slower)."""
    from nvfp4gemm.sm90.dual_mixed import a16_rows

    cfg = configs.sm90_dual_mixed_wide()
    for c in (cfg, dataclasses.replace(cfg, split_k=True), configs.sm90_dual_mixed_wide_pairs()):
        assert not configs.check_config(c), configs.check_config(c)
    assert configs.dual_tiles(cfg, (512, 4096, 7168, 1)) == 2 * 64
    assert configs.dual_tiles(cfg, (300, 1024, 768, 1)) == 2 * 16
    assert configs.mixed_a16_stages(cfg) == 5 and configs.mixed_a16_stages(configs.sm90_dual_mixed()) == 8
    # 2 stages x (128 rows x 128 B + 2 atoms x 2 KB) + 5 A16 sub-blocks x 32 KB + 64 C rows x 128 B + 1 KB
    assert configs.sm90_smem_bytes(cfg) == 2 * (128 * 128 + 2 * 2048) + 5 * 32768 + 64 * 128 + 1024
    assert configs.sm90_acc_registers(cfg) == 128
    # every mixed dual form pads A16 to whole tiles of its A rows (exp. 92)
    assert (a16_rows(cfg, 300), a16_rows(cfg, 512), a16_rows(configs.sm90_dual_mixed(), 300)) == (512, 512, 384)
    bad = dataclasses.replace(cfg, mma_warpgroups=3)
    assert configs.check_config(bad), "tile (128, 256) needs two consumer warpgroups"


# Measured (H100, 2026-11-25, exps. 86 and 88; one process, medians of 3 rounds): us of the
# (256, 128) form ("W") and of the three-warpgroup form ("3"), each with its own plan, where
# one was at least 5% faster
_MEASURED_W_VS_WG3 = [((512, 3072, 7168), 75.5, 67.2), ((640, 2304, 4096), 49.6, 42.4),
                      ((640, 7168, 7168), 239.5, 179.3), ((768, 14336, 4096), 279.3, 241.9),
                      ((3072, 1536, 1536), 64.0, 52.4), ((1280, 3072, 2048), 56.8, 63.0),
                      ((2560, 1536, 2048), 58.3, 64.8), ((4096, 1536, 1024), 48.4, 50.9)]


@pytest.mark.parametrize("shape,us_w,us_3", _MEASURED_W_VS_WG3, ids=str)
def test_mixed_model_ranks_measured(shape, us_w, us_3):
    """configs.mixed_dual_model_us ranks the (256, 128) and three-warpgroup forms as measured
    where they differed by 5% or more (the rule's choice between them rests on it)."""
    s = shape + (1,)
    model_w = configs.mixed_dual_model_us(configs.sm90_dual_mixed(s), s)
    model_3 = configs.mixed_dual_model_us(configs.sm90_dual_mixed_wg3(s), s)
    assert (model_3 < model_w) == (us_3 < us_w), (model_w, model_3)


def test_mixed_wg3_config_model():
    """The three-warpgroup config: valid, 96 columns of C per tile, two scale atoms per B per
    stage in the shared-memory model, 64 accumulator registers per consumer thread."""
    cfg = configs.sm90_dual_mixed_wg3()
    assert not configs.check_config(cfg), configs.check_config(cfg)
    assert configs.dual_tiles(cfg, (512, 3072, 7168, 1)) == 128
    assert configs.mixed_dual_sf_atoms(192) == 2 and configs.mixed_dual_sf_atoms(256) == configs.mixed_dual_sf_atoms(128) == 1
    # 2 stages x (192 rows x 128 B + 4 atoms x 2 KB) + 8 A16 sub-blocks x 16 KB + 64 C rows x 192 B + 1 KB
    assert configs.sm90_smem_bytes(cfg) == 2 * (192 * 128 + 4 * 2048) + 8 * 16384 + 64 * 192 + 1024
    assert configs.sm90_acc_registers(cfg) == 64
    # any N % 64 == 0 (exp. 88: the last tile over N 32 or 64 columns)
    assert configs.fits(cfg, (512, 4096, 7168, 1)) and configs.fits(cfg, (512, 3072, 7168, 1))
    assert configs.dual_tiles(cfg, (512, 4096, 7168, 1)) == 4 * 43 and not configs.fits(cfg, (512, 4064, 7168, 1))
    bad = dataclasses.replace(cfg, mma_warpgroups=2)
    assert configs.check_config(bad), "tile (192, 128) needs three consumer warpgroups"


@pytest.mark.parametrize("tiles,k_blocks,ctas", [(96, 28, 132), (96, 28, 128), (72, 28, 132), (96, 21, 126),
                                                 (5, 3, 7), (40, 1, 33), (133, 2, 132), (64, 28, 100)])
def test_stream_k_makespan_matches_walk(tiles, k_blocks, ctas):
    """configs.stream_k_makespan (the host model choosing the CTA count) charges exactly the
    segments the kernels' walk (scheduler.stream_k_*) runs: recomputed here from `walk`."""
    W, R, E = configs.STREAM_K_WRITE_KB, configs.STREAM_K_READ_KB, configs.STREAM_K_EPILOGUE_KB
    end, ready, fin = {}, {}, []
    for c, t, kb0, kb1, s, ns in walk(tiles, k_blocks, ctas, 0):
        end[c] = end.get(c, 0.0) + (kb1 - kb0)
        if ns == 1:
            end[c] += E
        elif s > 0:
            end[c] += W
            ready[t] = max(ready.get(t, 0.0), end[c])
        else:
            fin.append((c, t, ns))
    for c, t, ns in fin:
        end[c] = max(end[c], ready[t]) + R * (ns - 1) + E
    assert configs.stream_k_makespan(tiles, k_blocks, ctas) == pytest.approx(max(end.values()))


def test_stream_k_makespan_prefers_aligned_ranges():
    """96 tiles x 28 k-blocks: 132 CTAs give some tiles 3 segments (a finisher reading 2
    partials), 128 CTAs give every tile exactly 2 -- the model must rank 128 first."""
    segs = {}
    for c, t, kb0, kb1, s, ns in walk(96, 28, 132, 0):
        segs[t] = ns
    assert max(segs.values()) == 3
    assert {ns for c, t, kb0, kb1, s, ns in walk(96, 28, 128, 0)} == {2}
    assert configs.stream_k_makespan(96, 28, 128) < configs.stream_k_makespan(96, 28, 132)


# ---------------------------------------------------------------- grouped mixed-input plan

_GM_SHAPES = list(configs.GROUP_BENCHMARKS) + [
    ((1, 512, 2048), (7, 256, 1024), (33, 768, 2048), (130, 512, 512), (257, 256, 2048), (300, 1024, 1536)),
    ((1, 256, 7168), (300, 256, 7168)),
    ((600, 14336, 4096), (384, 14336, 4096)),
] + [tuple((rnd.randint(1, 700), 256 * rnd.randint(1, 24), 256 * rnd.randint(1, 30))
           for _ in range(rnd.randint(1, 16))) for rnd in map(random.Random, range(12))]


# whole waves with a stream-K tail over more than half a wave (g8 M200-300: 336 tiles on 132
# CTAs), exactly whole waves (132 tiles), and a lockstep tail of short K (4 k-blocks)
_GM_WAVE_SHAPES = [tuple((m, 4096, 4096) for m in (218, 286, 278, 245, 221, 270, 291, 284)),
                   ((128, 5632, 1024),) * 6, tuple((m, 4096, 1024) for m in (80, 176, 128, 72, 64, 248, 96, 160))]


@pytest.mark.parametrize("waves", [True, False])
@pytest.mark.parametrize("sms", [132, 7, 1])
@pytest.mark.parametrize("shape", _GM_SHAPES + _GM_WAVE_SHAPES, ids=lambda s: f"g{len(s)}-{s[0]}")
def test_mixed_group_plan(shape, sms, waves):
    """configs.mixed_group_plan, the grouped mixed-input kernel's schedule: every k-block of
    every (group, 256 B rows, 128 A rows) tile exactly once; at most `sms` CTAs; a split
    tile's segments in k order on consecutive CTAs c, c + 1, .. with s = 0 (k-block 0) the
    last segment of its CTA (the finisher, which stages partials in the A16 ring), and every
    s > 0 (a writer) at most one per CTA and preceded only by whole tiles, which never wait --
    in the stream-K plan (waves=False, or where no wave plan applies) the first of its CTA; A16
    row offsets per group padded to 128 rows."""
    p = configs.mixed_group_plan(shape, sms, waves=waves)
    wave_plan = waves and configs.mixed_group_wave_plan(shape, sms) is not None
    segs, offs = p["segs"], p["seg_offs"]
    assert 1 <= p["ctas"] <= sms and len(offs) == p["ctas"] + 1
    assert offs[0] == 0 and offs[-1] == len(segs) and all(a < b for a, b in zip(offs, offs[1:]))
    cta_of = [c for c in range(p["ctas"]) for _ in range(offs[c], offs[c + 1])]
    by_tile = {}
    for i, (g, nb, m0, kb0, kb1, s, ns) in enumerate(segs):
        assert 0 <= kb0 < kb1 <= shape[g][2] // 256
        by_tile.setdefault((g, nb, m0), []).append((kb0, kb1, s, ns, cta_of[i], i))
    want = {(g, nb, m0) for g, (m, n, _k) in enumerate(shape) for nb in range(n // 256) for m0 in range(0, m, 128)}
    assert set(by_tile) == want
    for (g, _nb, _m0), parts in by_tile.items():
        parts.sort()
        assert parts[0][0] == 0 and parts[-1][1] == shape[g][2] // 256
        assert all(a[1] == b[0] for a, b in zip(parts, parts[1:])), "k ranges not contiguous"
        c0 = parts[0][4]
        for s, (_kb0, _kb1, s_, ns, c, i) in enumerate(parts):
            assert (s_, ns, c) == (s, len(parts), c0 + s)
            if ns > 1 and s == 0:
                assert i == offs[c + 1] - 1, "finisher last"
            elif ns > 1 and not wave_plan:
                assert i == offs[c], "writers first"
            elif ns > 1:
                before = segs[offs[c]:i]
                assert all(b[6] == 1 for b in before), "a writer after a split segment"
    for c in range(p["ctas"]):
        assert sum(1 for x in segs[offs[c]:offs[c + 1]] if x[6] > 1 and x[5] > 0) <= 1, "two partials on a CTA"
    pad = [-(-m // 128) * 128 for m, _n, _k in shape]
    assert p["row0"] == [sum(pad[:g]) for g in range(len(shape))] and p["a16_rows"] == sum(pad)


@pytest.mark.parametrize("shape", _GM_SHAPES + _GM_WAVE_SHAPES, ids=lambda s: f"g{len(s)}-{s[0]}")
def test_mixed_group_wave_plan(shape):
    """The wave plan (exp. 102) where every K_g is equal and there is at least a wave of tiles:
    all 132 CTAs; wave w of CTA c is tile w * 132 + c whole (in (g, nb, m0) order, so the A_g
    blocks of one B_g block run at the same time); a tail of at most half a wave is split at
    the same k-blocks in every tile, its finisher (which waits for the writers' partials
    anyway) the longest segment; else None."""
    sms = 132
    p = configs.mixed_group_wave_plan(shape, sms)
    tiles = [(g, nb, m0) for g, (m, n, _k) in enumerate(shape) for nb in range(n // 256) for m0 in range(0, m, 128)]
    if len({k for _m, _n, k in shape}) != 1 or len(tiles) < sms:
        assert p is None
        return
    kbs = shape[0][2] // 256
    waves, tail = divmod(len(tiles), sms)
    segs, offs = p["segs"], p["seg_offs"]
    assert p["ctas"] == sms
    for c in range(sms):
        mine = segs[offs[c]:offs[c + 1]]
        assert [x[:3] for x in mine[:waves]] == [tiles[w * sms + c] for w in range(waves)]
        assert all(x[3:] == (0, kbs, 0, 1) for x in mine[:waves])
    tail_segs = [x for c in range(sms) for x in segs[offs[c] + waves:offs[c + 1]]]
    assert {x[:3] for x in tail_segs} == set(tiles[waves * sms:])
    if tail and sms // tail >= 2:
        cuts = {(x[3], x[4], x[5]) for x in tail_segs}
        assert len(cuts) == tail_segs[0][6], "tail tiles cut at different k-blocks"
        first = [x for x in tail_segs if x[5] == 0][0]
        assert all(first[4] - first[3] >= x[4] - x[3] for x in tail_segs), "finisher not the longest"


@pytest.mark.parametrize("kbs", [1, 2, 3, 4, 5, 8, 16, 27, 28, 56])
def test_wave_tail_cuts(kbs):
    """configs._tail_cuts: s <= most segments covering [0, kbs) in order, none empty, the
    finisher's (k-block 0) at least as long as any writer's; exp. 103's measured split of
    g8 N4096 K7168 (28 k-blocks over 3 CTAs: 10 / 9 / 9, 1.7% faster than 8 / 10 / 10)."""
    for most in range(1, min(kbs, 12) + 1):
        s, cuts = configs._tail_cuts(kbs, most)
        assert 1 <= s <= most and len(cuts) == s + 1 and cuts[0] == 0 and cuts[-1] == kbs
        lens = [b - a for a, b in zip(cuts, cuts[1:])]
        assert min(lens) >= 1 and lens[0] == max(lens)
    if kbs == 28:
        assert configs._tail_cuts(28, 3) == (3, [0, 10, 19, 28])


def test_stream_k_fill_pieces():
    """configs.stream_k_fill fills each budget piece once (session 34): (1) a fill is one function
    on a piece -- random budgets in one `stream_k_fill_piece` give the same segments, and the
    piece changes where they do; (2) the memoized search returns exactly the fill-every-step
    search's plan, on random tile lists of 1-3 sizes and CTA counts 1-148."""
    rnd = random.Random(34)
    for _ in range(300):
        tk = [rnd.choice(rnd.sample([1, 2, 3, 5, 8, 12, 16, 28, 56], rnd.randint(1, 3))) for _ in range(rnd.randint(1, 300))]
        sms = rnd.choice([1, 3, 7, 60, 132, 148])
        sizes = sorted(set(tk))
        b0 = rnd.uniform(1, 2 * sum(tk) / sms + 4 * max(tk))
        fill0 = configs._stream_k_fill_at(tk, sms, b0)
        for b in [b0 + rnd.uniform(-1, 1) for _ in range(4)] + [math.floor(b0), math.floor(b0) + 1 - 1e-9]:
            if b <= 0:
                continue
            same_piece = configs.stream_k_fill_piece(sizes, b) == configs.stream_k_fill_piece(sizes, b0)
            if same_piece:
                assert configs._stream_k_fill_at(tk, sms, b) == fill0, (tk, sms, b0, b)
        assert configs.stream_k_fill(tk, sms) == configs.stream_k_fill(tk, sms, memo=False), (tk, sms)


def test_mixed_group_plan_stats():
    """configs.mixed_group_plan_stats (session 36: what the multi-form split search reads of a
    form's plan at a CTA count, from counts alone) equals (ctas, max(plan_cta_loads)) of the
    built plan, on random shapes with equal K_g (whole waves and a tail cut, or a tail stream-K
    fill, or fewer tiles than CTAs) and unequal K_g (the stream-K fill), CTA counts 1-148."""
    rnd = random.Random(361)
    tiles = sorted(configs.FORM_KB_US)
    for _ in range(400):
        tile = rnd.choice(tiles)
        k = rnd.choice([512, 1536, 2048, 7168])
        ks = [k] * 8 if rnd.random() < 0.75 else [rnd.choice([256, 1024, 2048, 4096]) for _ in range(8)]
        shape = tuple((rnd.randint(1, 400), tile[0] * rnd.randint(1, 24), kk) for kk in ks[:rnd.randint(1, 8)])
        sms = rnd.choice([1, 5, 17, 40, 66, 100, 132, 148])
        plan = configs.mixed_group_plan(shape, sms, tile)
        assert configs.mixed_group_plan_stats(shape, sms, tile) == (plan["ctas"], max(configs.plan_cta_loads(plan))), \
            (shape, sms, tile)


def test_forms_split_search_pruned(monkeypatch):
    """The multi-form split search (`configs._least_span`, session 36: candidates nearest the
    work-proportional split first, and any whose first forms are already busier than the best
    span so far skipped unplanned) returns exactly the plan of the exhaustive
    `min(cands, key=spans)`, on random two- and three-form shapes with equal and unequal K_g, and
    on a shape whose best split ties another's exactly (a form's work over its CTAs rounded an ulp
    above the tied span once, which skipped the first of the two)."""
    rnd = random.Random(36)
    form_sets = [((256, 128), (128, 256)), ((256, 128), (128, 192), (128, 256)), ((256, 80), (128, 176), (128, 208)),
                 ((256, 64), (256, 128), (128, 176)), ((256, 96), (128, 160))]
    tie = ([(m, 7168, 2048) for m in (157, 121, 224, 16, 59, 125, 252, 40)], ((256, 64), (256, 128), (128, 224)))
    checked = 0
    while checked < 40:
        if checked == 0:
            shape, tiles = tie
        else:
            tiles = rnd.choice(form_sets)
            n, k = rnd.choice([(4096, 7168), (7168, 2048), (3072, 4096), (2048, 2048)])
            ks = [k] * 8 if rnd.random() < 0.7 else [rnd.choice([k, 1024, 2048]) for _ in range(8)]
            shape = [(rnd.randint(1, 400), n, kk) for kk in ks[:rnd.randint(2, 8)]]
        if not all(configs.form_groups(shape, tiles)):
            continue
        configs._PLAN_CACHE.clear()
        fast = configs.mixed_group_forms_plan(shape, 132, tiles)
        with monkeypatch.context() as mp:
            mp.setattr(configs, "_least_span", lambda cands, _p0, _work, spans, _busiest: min(cands, key=spans))
            configs._PLAN_CACHE.clear()
            slow = configs.mixed_group_forms_plan(shape, 132, tiles)
        configs._PLAN_CACHE.clear()
        assert fast == slow, (shape, tiles, fast["splits"], slow["splits"])
        checked += 1


@pytest.mark.parametrize("shape", _GM_SHAPES, ids=lambda s: f"g{len(s)}-{s[0]}")
def test_mixed_group_plan_pairs(shape):
    """Split-K pairs: tile t (same (g, nb, m0) order) on CTAs 2t and 2t + 1, k-blocks
    [0, KB / 2) as s = 0 and [KB / 2, KB) as s = 1, one segment per CTA."""
    p = configs.mixed_group_plan(shape, 132, pairs=True)
    want = [(g, nb, m0) for g, (m, n, _k) in enumerate(shape) for nb in range(n // 256) for m0 in range(0, m, 128)]
    assert p["ctas"] == 2 * len(want) and p["seg_offs"] == list(range(2 * len(want) + 1))
    for t, (g, nb, m0) in enumerate(want):
        kbs = shape[g][2] // 256
        assert p["segs"][2 * t] == (g, nb, m0, 0, kbs // 2, 0, 2)
        assert p["segs"][2 * t + 1] == (g, nb, m0, kbs // 2, kbs, 1, 2)


_TWO_FORMS_SHAPES = [s for s in _GM_SHAPES if all(configs.two_forms_groups(s))]
# exp. 112: the seven forms of the leaderboard's g8 N4096 K7168 (each group's own width) and the
# A widths `width_forms` picks for each shape
_W7 = ((256, 64), (256, 80), (256, 96), (256, 128), (128, 160), (128, 176), (128, 256))
_FORMS_CASES = [(t, s) for t in (configs.MULTI_FORM_TILES, ((128, 192), (128, 256)), ((256, 128), (128, 192)), _W7)
                for s in _GM_SHAPES + [configs.GROUP_BENCHMARKS[0]] if all(configs.form_groups(s, t))] \
    + [(configs.width_forms(s), s) for s in _GM_SHAPES + configs.GROUP_BENCHMARKS if len(configs.width_forms(s)) > 1]


@pytest.mark.parametrize("given", [None, 1, 2])
@pytest.mark.parametrize("tiles,shape", _FORMS_CASES, ids=lambda x: str(x).replace(" ", "")[:40])
def test_mixed_group_forms_plan(tiles, shape, given):
    """configs.mixed_group_forms_plan (exp. 108): form f's CTAs [splits[f - 1], splits[f]) hold
    exactly the `mixed_group_plan` of its groups (`form_groups`) on at most the CTAs offered
    (given: None = the plan's choice; 1 = one CTA to each form but the last; 2 = 40 each, 12
    with more than three forms),
    the last form's on the SMs the others leave, group indices mapped back; each group in the
    cheapest form (the (256, 128) / wide choice by 128-row block parity); A16 by descending
    A rows per tile, each group's rows a multiple of its form's from row0, none overlapping."""
    sms = 132
    offered = None if given is None else (given if given == 1 else 40 if len(tiles) <= 3 else 12,) * (len(tiles) - 1)
    parts = configs.form_groups(shape, tiles)
    for f, gs in enumerate(parts):  # each group in a form no other (eligible) form runs for less
        for g in gs:
            cost = configs._form_group_cost(shape[g], tiles[f])
            for t in tiles:
                if t not in configs.TWO_FORMS_TILES and shape[g][1] % t[0] == 0:
                    assert cost <= configs._form_group_cost(shape[g], t) + 1e-9
    p = configs.mixed_group_forms_plan(shape, sms, tiles, offered)
    bounds = [0] + p["splits"] + [p["ctas"]]
    assert p["narrow_ctas"] == p["splits"][0] and p["ctas"] <= sms and len(p["splits"]) == len(tiles) - 1
    offs, segs = p["seg_offs"], p["segs"]
    for f, (a, b) in enumerate(zip(bounds, bounds[1:])):
        cap = offered[f] if offered and f < len(tiles) - 1 else \
            (sms - bounds[-2] if f == len(tiles) - 1 else b - a)
        ref = configs.mixed_group_plan([shape[g] for g in parts[f]], cap, tiles[f])
        assert b - a == ref["ctas"]
        assert segs[offs[a]:offs[b]] == [(parts[f][g], *r) for g, *r in ref["segs"]]
        assert [o - offs[a] for o in offs[a:b + 1]] == ref["seg_offs"]
    spans = []
    for f, gs in enumerate(parts):
        for g in gs:
            t = tiles[f][1]
            assert p["row0"][g] % t == 0
            spans.append((p["row0"][g], p["row0"][g] + -(-shape[g][0] // t) * t, t))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] <= p["a16_rows"]
    assert [t for _a, _b, t in spans] == sorted((t for _a, _b, t in spans), reverse=True)


@pytest.mark.parametrize("narrow_ctas", [None, 1, 40, 131])
@pytest.mark.parametrize("shape", _TWO_FORMS_SHAPES, ids=lambda s: f"g{len(s)}-{s[0]}")
def test_mixed_group_two_forms_plan(shape, narrow_ctas):
    """configs.mixed_group_two_forms_plan: CTAs [0, narrow_ctas) hold exactly the
    `mixed_group_plan` of the (256, 128) form's groups (on at most the CTAs asked for) and
    the others that of the wide (128, 256) form's on the remaining SMs, group indices mapped
    back; every tile's k-blocks once; A16 rows of the
    wide groups first, 256-row aligned, then the others 128-aligned, none overlapping."""
    sms = 132
    narrow, wide = configs.two_forms_groups(shape)
    assert all(-(-shape[g][0] // 128) % 2 for g in narrow) and not any(-(-shape[g][0] // 128) % 2 for g in wide)
    p = configs.mixed_group_two_forms_plan(shape, sms, narrow_ctas)
    ref_n = configs.mixed_group_plan([shape[g] for g in narrow], narrow_ctas or p["narrow_ctas"], (256, 128))
    ref_w = configs.mixed_group_plan([shape[g] for g in wide], sms - ref_n["ctas"], (128, 256))
    assert p["narrow_ctas"] == ref_n["ctas"] and p["ctas"] == ref_n["ctas"] + ref_w["ctas"] <= sms
    offs, segs = p["seg_offs"], p["segs"]
    k = p["narrow_ctas"]
    assert segs[:offs[k]] == [(narrow[g], *r) for g, *r in ref_n["segs"]]
    assert segs[offs[k]:] == [(wide[g], *r) for g, *r in ref_w["segs"]]
    assert offs[:k + 1] == ref_n["seg_offs"] and [o - offs[k] for o in offs[k:]] == ref_w["seg_offs"]
    spans = []
    for g, (m, _n, _k) in enumerate(shape):
        t = 256 if g in wide else 128
        assert p["row0"][g] % t == 0
        spans.append((p["row0"][g], p["row0"][g] + -(-m // t) * t))
    spans.sort()
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:])) and spans[-1][1] <= p["a16_rows"]
    assert max(p["row0"][g] for g in wide) < min(p["row0"][g] for g in narrow)


def test_forms_split_search():
    """Exp. 113: a split of up to three forms is the one of the window around the work-proportional
    split whose forms' modelled busiest CTAs, sorted largest first, are least (so among equal
    makespans the next busiest form is least busy): no candidate beats it; the leaderboard's
    g8 N7168 K2048 takes 34 / 75 / 23 CTAs (0.948-0.953 of the 36 / 75 / 21 the first equal
    candidate gave, H100) and g8 N4096 K7168's three widths 32 / 64 / 36 (0.917 of its two forms)."""
    lb = configs.GROUP_BENCHMARKS
    assert configs.mixed_group_forms_plan(lb[1], 132, ((256, 80), (128, 176), (128, 208)))["splits"] == [34, 109]
    assert configs.mixed_group_forms_plan(lb[0], 132, ((256, 80), (256, 128), (128, 176)))["splits"] == [32, 96]

    def spans(shape, tiles, given):
        p = configs.mixed_group_forms_plan(shape, 132, tiles, given)
        b = [0] + p["splits"] + [p["ctas"]]
        loads = configs.plan_cta_loads(p)
        return sorted((configs.FORM_KB_US[t] * max(loads[x:y]) for t, x, y in zip(tiles, b, b[1:])), reverse=True)

    for shape, tiles in ((lb[1], ((256, 80), (128, 176), (128, 208))), (lb[0], ((256, 128), (128, 256))),
                         (lb[2], ((128, 160), (128, 192)))):
        p = configs.mixed_group_forms_plan(shape, 132, tiles)
        b = [0] + p["splits"] + [p["ctas"]]
        best = spans(shape, tiles, tuple(y - x for x, y in zip(b, b[1:-1])))
        work = [configs.FORM_KB_US[t] * sum(configs._form_group_k_blocks(shape[g], t) for g in gs)
                for t, gs in zip(tiles, configs.form_groups(shape, tiles))]
        p0 = [round(132 * w / sum(work)) for w in work[:-1]]
        win = configs.TWO_FORMS_P_WINDOW if len(tiles) == 2 else configs.THREE_FORMS_WINDOW
        for cand in itertools.product(*[range(max(1, c - win), c + win + 1) for c in p0]):
            if sum(cand) < 131:
                try:
                    assert spans(shape, tiles, cand) >= best, (shape, cand)
                except ValueError:  # (a split that leaves the last form no CTA)
                    pass


def test_water_fill_ctas():
    """`_water_fill_ctas` (the split of more than three forms):
    the counts sum to the SMs, each >= 1, and no single CTA moved from one form to the busiest
    lowers the largest busiest CTA; on a model busiest = work / CTAs it is the optimum."""
    work = [448.0, 896.0, 448.0, 448.0, 896.0, 896.0, 896.0]
    busiest = lambda f, c: work[f] / c  # noqa: E731
    c = configs._water_fill_ctas(len(work), 132, work, busiest)
    assert sum(c) == 132 and min(c) >= 1
    top = max(busiest(f, c[f]) for f in range(len(work)))
    for f in range(len(work)):
        for g in range(len(work)):
            if f != g and c[g] > 1:
                moved = list(c)
                moved[f] += 1
                moved[g] -= 1
                assert max(busiest(h, moved[h]) for h in range(len(work))) >= top - 1e-9
    # a real plan: the seven widths of the leaderboard's g8 N4096 K7168
    p = configs.mixed_group_forms_plan(configs.GROUP_BENCHMARKS[0], 132, _W7)
    assert len(p["splits"]) == 6 and p["ctas"] <= 132


def test_width_forms():
    """Exp. 112's forms: at most WIDTH_FORMS tiles of FORM_TILES, the set with the least total
    modelled cost of every group in its cheapest tile of the set (fewer forms on ties), in CTA
    order; each group's own cheapest tile rounds M_g up to a multiple of 16."""
    lb = configs.GROUP_BENCHMARKS
    assert configs.width_forms(lb[0]) == ((256, 80), (256, 128), (128, 176))
    assert configs.width_forms(lb[1]) == ((256, 80), (128, 176), (128, 208))
    assert configs.width_forms(lb[2]) == ((128, 160), (128, 192))  # 320 = 2 x 160
    assert configs.width_forms(((80, 4096, 7168),) * 8) == ((256, 80),)
    assert configs.width_forms(((100, 1024, 1024), (100, 1000, 1024))) == ()  # N 1000: no tile fits
    for shape in _GM_SHAPES + lb:
        tiles = configs.width_forms(shape)
        assert 1 <= len(tiles) <= configs.WIDTH_FORMS and list(tiles) == sorted(set(tiles), key=configs.form_order)
        assert all(t in configs.FORM_TILES for t in tiles)
        if len(tiles) > 1:
            assert all(configs.form_groups(shape, tiles))
            assert configs.check_config(configs.sm90_group_mixed_forms(tiles)) == []
    # the config check: forms of FORM_TILES only, 2 to MAX_FORMS, in form order
    bad = [configs.sm90_group_mixed_forms(((128, 176), (256, 80))),
           configs.sm90_group_mixed_forms(((256, 80), (192, 128))),
           configs.sm90_group_mixed_forms(tuple(configs.FORM_TILES[:configs.MAX_FORMS + 1]))]
    assert all(configs.check_config(c) for c in bad)
    assert configs.check_config(configs.sm90_group_mixed(tile=(256, 88)))  # not a width of GROUP_MIXED_TILES


def test_grouped_rule_widths():
    """Exp. 112's rule: the forms of `width_forms` in place of a mixed-input pick of the other
    rules where their modelled busiest CTA is WIDTHS_MARGIN under the pick's.  The leaderboard's
    g8 N7168 K2048 (0.958 of the three forms before, H100) and the 10 check shapes measured
    (0.809-0.976); g8 N4096 K7168 in three widths since exp. 113's split search (0.917 of its
    two forms, H100; modelled equal under the water fill before); a stored-decode pick stays."""
    pick = lambda groups: configs.default_config("group", "sm_90a", tuple(groups))  # noqa: E731
    t = lambda *tiles: configs.sm90_group_mixed_forms(tiles)  # noqa: E731
    lb = configs.GROUP_BENCHMARKS
    assert pick(lb[1]) == t((256, 80), (128, 176), (128, 208))
    assert pick(lb[0]) == t((256, 80), (256, 128), (128, 176))
    assert not pick(lb[3]).a_prepass
    g = lambda n, k, *ms: [(m, n, k) for m in ms]  # noqa: E731
    for shape, want in (
            (g(7168, 7168, 88, 8, 64, 93), t((256, 64), (256, 96))),  # 0.809
            (g(7168, 2048, 55, 198, 155, 102, 191, 76, 89, 97), t((256, 112), (128, 160), (128, 208))),  # 0.935
            (g(4096, 7168, 199, 161, 131, 243, 208, 233, 238, 210), t((128, 176), (128, 208), (128, 256))),  # 0.962
            (g(4096, 7168, *[80] * 8), configs.sm90_group_mixed(tile=(256, 80)))):  # 0.853 (exp. 112's first run)
        assert pick(shape) == want, shape


def test_mixed_a16_stages():
    """A16 ring depth per A rows (exp. 117): 8 sub-blocks up to 128 rows, 6 up to 224 (208 and 224
    rows had 5 before: g8 N7168 K2048 0.922 with 6, H100), 5 beyond; every grouped mixed tile's
    shared memory within the limit."""
    for tile in sorted(configs.GROUP_MIXED_TILES):
        cfg = configs.sm90_group_mixed(tile=tile)
        tn = tile[1]
        assert configs.mixed_a16_stages(cfg) == (8 if tn <= 128 else 6 if tn <= 224 else 5), tile
        assert configs.sm90_smem_bytes(cfg) <= configs.SMEM_LIMIT["sm_90a"], tile
    # a sixth stage of 240 rows would not fit
    assert configs.sm90_smem_bytes(configs.sm90_group_mixed(tile=(128, 240))) + 240 * 64 * 2 > \
        configs.SMEM_LIMIT["sm_90a"]


def test_grouped_rule_dynamic_m(monkeypatch):
    """configs.DYNAMIC_M (NVFP4_DYNAMIC_M=1, for M_g that change every call): since exp. 136 the
    device-scheduled mixed-input form wherever a tile divides every N_g (its launch does not
    depend on M_g), so random M_g of one (N, K) map to at most three configs where the full rule
    gives dozens; the skinny kernel below it; the host-planned rule without exp. 112's A widths
    and the multi-form kernels (session 36) where N_g allows no device-scheduled tile.  Without
    it the rule is unchanged."""
    rnd = random.Random(35)
    shapes = [tuple((rnd.randint(1, 256), 4096, 7168) for _ in range(8)) for _ in range(60)]
    full = {configs.select_config("group", "sm_90a", s) for s in shapes}
    lb = {s: configs.select_config("group", "sm_90a", s) for s in configs.GROUP_BENCHMARKS}
    monkeypatch.setattr(configs, "DYNAMIC_M", True)
    dyn = {configs.select_config("group", "sm_90a", s) for s in shapes}
    assert len(dyn) <= 3 < len(full)
    for cfg in dyn:
        assert cfg.device_schedule and not configs.check_config(cfg), cfg.short()
    # the leaderboard shapes keep CONFIG_MAP's (full rule) configs; the rule itself would not
    assert all(configs.select_config("group", "sm_90a", s) == c for s, c in lb.items())
    assert configs.default_config("group", "sm_90a", configs.GROUP_BENCHMARKS[0], dynamic_m=True).device_schedule
    pick = lambda shape: configs.default_config("group", "sm_90a", shape, dynamic_m=True)  # noqa: E731
    # 8 x 16 tiles of 256 B_g rows: one wave; of 128 rows, two
    assert pick(((128, 4096, 7168),) * 8) == configs.sm90_group_mixed_dynamic((256, 128))
    assert pick(((40, 4096, 7168),) * 8) == configs.sm90_group_mixed_dynamic((256, 64))  # every M_g <= 64
    assert pick(((100, 3072, 4096),) * 2) == configs.sm90_group_mixed_dynamic((128, 128))  # N % 256 != 0
    # 2 groups of one 256-row tile column: 32 tiles on 132 SMs; 128-row tiles fill 64
    assert pick(((100, 4096, 4096),) * 2) == configs.sm90_group_mixed_dynamic((128, 128))
    assert pick(((8, 4096, 7168),) * 8).skinny  # M_g <= 16
    host = pick(((100, 4096 + 64, 7168),) * 2)  # no 128-row tile divides N_g
    assert not host.device_schedule and not host.forms, host.short()
    # the dispatcher's any-M family key (configs.any_m_tile) is the tile of the rule's pick
    # wherever that pick's launch serves any M_g, and None elsewhere
    for _ in range(300):
        n = rnd.choice([1024, 2048, 3072, 4096 + 64, 7168])
        shape = tuple((rnd.choice([rnd.randint(1, 16), rnd.randint(1, 300)]), n, 2048) for _ in range(rnd.randint(1, 8)))
        cfg = pick(shape)
        want = tuple(cfg.mma_tile_mn) if configs.launch_serves_any_m(cfg) else None
        assert configs.any_m_tile(shape) == want, (shape, cfg.short())


def _device_walk(shapes, tile, grid):
    """Every CTA's tiles in the device schedule (scheduler.device_tiles_of_cta, the kernel's
    arithmetic on Python ints)."""
    return [scheduler.device_tiles_of_cta(c, grid, shapes, tile[0], tile[1], configs.K_BLOCK) for c in range(grid)]


@pytest.mark.parametrize("seed", range(6))
def test_device_schedule_covers_every_tile_once(seed):
    """Exp. 136's device schedule: over all CTAs, each (group, B block, A block) of every group
    exactly once, with the group's k-blocks and its A16 rows where grouped_mixed.device_rows
    puts them (each group's first A16 row the earlier M_h rounded up to the tile); CTAs start on
    consecutive tiles, each B block's A blocks adjacent.  Groups of no rows (zero table rows,
    and M_g = 0 between groups) own no tile."""
    from nvfp4gemm.sm90.grouped_mixed import device_rows

    rnd = random.Random(seed)
    tile = rnd.choice(sorted(configs.DEVICE_SCHEDULE_TILES))
    g = rnd.randint(1, 16)
    shapes = [(rnd.choice([0, 1, 17, 64, 65, 128, 200, 256, 700]), tile[0] * rnd.randint(1, 12),
               configs.K_BLOCK * 4 * rnd.randint(1, 8)) for _ in range(g)]
    grid = rnd.choice([1, 7, 132])
    seen = [t for cta in _device_walk(shapes, tile, grid) for t in cta]
    want, row0 = [], 0
    for gi, (m, n, k) in enumerate(shapes):
        blocks = -(-m // tile[1])
        for nb in range(n // tile[0]):
            want += [(gi, nb, mb * tile[1], row0, k // configs.K_BLOCK) for mb in range(blocks)]
        row0 += blocks * tile[1]
    assert sorted(seen) == sorted(want) and len(set(seen)) == len(seen)
    assert row0 == device_rows(configs.sm90_group_mixed_dynamic(tile), shapes)
    # tile t of the walk is want[t]: CTA c's i-th tile is c + i * grid
    walks = _device_walk(shapes, tile, grid)
    assert all(w[i] == want[c + i * grid] for c, w in enumerate(walks) for i in range(len(w)))


@pytest.mark.parametrize("seed", range(4))
def test_device_schedule_prepass_halves(seed):
    """The device schedule's pre-pass (scheduler.device_half): half t of the concatenated
    groups' A rows (K_g / 32 per row) maps to its group, the group's first half and first A16
    row -- the rows `device_tile` reads -- and the total is every group's halves."""
    rnd = random.Random(100 + seed)
    tn = rnd.choice([64, 128, 256])
    shapes = [(rnd.choice([0, 1, 3, 64, 130]), 4096, 256 * rnd.randint(1, 4)) for _ in range(rnd.randint(1, 16))]
    ms = [m for m, _n, _k in shapes] + [0] * (16 - len(shapes))
    ks = [k for _m, _n, k in shapes] + [0] * (16 - len(shapes))
    t, row0 = 0, 0
    for g, (m, _n, k) in enumerate(shapes):
        for local in range(0, m * (k // 32), max(1, m * (k // 32) // 7)):  # (a few halves of each group)
            got = tuple(int(v) for v in scheduler.device_half(t + local, ms, ks, tn))
            assert got == (g, t, row0, sum(m_ * (k_ // 32) for m_, k_ in zip(ms, ks))), (g, local)
        t += m * (k // 32)
        row0 += -(-m // tn) * tn


def test_grouped_rule_n192_forms(monkeypatch):
    """Exp. 108's rule: the (128, 192) form takes the groups with 128 < M_g <= 192 (or 256 <
    M_g <= 384) from a pick of the (256, 128) and wide forms where the forms' modelled busiest
    CTA is lower: alone where it takes every group, else beside the forms that keep theirs.
    The measured shapes (H100, 0.821-0.952 of the pick before on 13, one tie), the leaderboard's
    g8 N7168 K2048 (0.975); g8 N4096 K7168 keeps the two forms (modelled equal, measured 1.017).
    (Without exp. 112's A widths, which may follow it.)"""
    monkeypatch.setattr(configs, "_sm90_group_widths", lambda *_args: None)
    pick = lambda groups: configs.default_config("group", "sm_90a", tuple(groups))  # noqa: E731
    t = lambda *tiles: configs.sm90_group_mixed_forms(tiles)  # noqa: E731
    n192 = configs.sm90_group_mixed(tile=(128, 192))
    three = configs.sm90_group_mixed_three_forms()
    assert pick(configs.GROUP_BENCHMARKS[1]) == three
    assert pick(configs.GROUP_BENCHMARKS[0]) == configs.sm90_group_mixed_two_forms()
    for shape, want in (
            ([(m, 7168, 4096) for m in (73, 594, 475, 51, 370, 356, 259, 223, 540, 518, 235)], three),  # 0.939
            ([(m, 2048, 4096) for m in (183, 262, 359, 370, 145, 7, 293, 191, 85, 70)],
             t((256, 128), (128, 192))),  # 0.890
            ([(m, 3072, 2048) for m in (146, 203, 228, 142, 228, 248, 176, 176, 173, 178, 168, 232, 189)],
             t((128, 192), (128, 256))),  # 0.846
            ([(129, 7168, 1024)] * 5, n192),  # 0.825 (the wide form before)
            ([(309, 14336, 7168)], n192),  # 0.900 (the (256, 128) form before)
            ([(m, 7168, 4096) for m in (179, 130, 189, 514, 172, 288)], n192),  # 0.845 (two forms before)
            ([(176, 4096, 7168)] * 8, n192)):  # 0.80 of the wide form (exp. 108's first run)
        assert pick(shape) == want, shape
    for shape in ([(m, 4096, 7168) for m in (100, 60, 120, 80)],  # no group for (128, 192)
                  [(256, 7168, 4096)] * 4,  # every group whole 256-row tiles: wide
                  [(m, 1024, 7168) for m in (200, 100, 220, 60)]):  # a stored-decode pick (N 1024)
        assert not pick(shape).forms and pick(shape).mma_tile_mn != (128, 192), shape


def test_grouped_rule_two_forms(monkeypatch):
    """Where the grouped rule (without exp. 108's (128, 192) forms, which may follow it) picks
    the two-form mixed-input kernel (exp. 99): groups of both
    forms, every N_g and K_g >= 2048, >= 2048 k-blocks of tiles; where the wave plan applies
    (every K_g equal, a wave of tiles: exp. 102) at any wide share and A16 <= 37 MB -- the
    leaderboard's two 8-group cases among them --, else only with >= 0.6 of the MACs in the wide
    form and A16 <= 26 MB, the (256, 128) form alone below that share (exp. 100); g2 N3072
    K4096 stays pinned to the 128 x 128 mixed tiles."""
    monkeypatch.setattr(configs, "_sm90_group_n192_forms", lambda *_args: None)
    monkeypatch.setattr(configs, "_sm90_group_widths", lambda *_args: None)
    two = configs.sm90_group_mixed_two_forms()
    pick = lambda groups: configs.default_config("group", "sm_90a", tuple(groups))  # noqa: E731
    for shape in ([(m, 4096, 7168) for m in (200, 180, 100, 220, 150, 240, 60, 170)],
                  [(m, 2048, 7168) for m in (150, 160, 170, 100, 180, 190, 200, 50)],
                  [(300, 14336, 4096), (200, 14336, 4096), (500, 14336, 4096), (160, 14336, 4096)],
                  [(m, 5120, 4096) for m in (140, 250, 90, 230, 200, 120)],
                  [(m, 4096, 2048) for m in (30, 250, 140, 90, 200, 180, 60, 240, 130, 170, 220, 40, 160, 110, 210, 190)],
                  [(150, 7168, 7168), (90, 7168, 7168), (250, 7168, 7168)], [(64, 14336, 4096), (230, 14336, 4096)],
                  configs.GROUP_BENCHMARKS[1],
                  # wave plan: low wide shares and a large A16 (measured 0.964-0.975 of the (256, 128)
                  # form, 0.878-0.908 of the stored-decode pick)
                  configs.GROUP_BENCHMARKS[0],  # share 0.55
                  [(m, 4096, 7168) for m in (20, 50, 100, 120, 70, 90, 30, 200)],  # 0.22
                  [(m, 4096, 7168) for m in (200, 280, 230, 300, 210, 260, 240, 290)],  # 0.40
                  [(m, 7168, 7168) for m in (200, 280, 230, 300, 210, 260, 240, 290)],  # A16 35 MB
                  # (not measured: shares 0.40, which took the (256, 128) form before exp. 102)
                  [(m, 7168, 2048) for m in (100, 120, 60, 200, 90, 110, 80, 190)],
                  [(200, 14336, 4096), (300, 14336, 4096)]):
        assert pick(shape) == two, shape
    # wave plan, A16 beyond the largest measured (36.8 MB): not the two-form kernel
    big = [(m, 7168, 7168) for m in (300, 420, 350, 500, 310, 460, 380, 490)]
    assert configs.group_wave_plan_applies(big) and pick(big) != two
    # no wave plan (K_g differ): the bounds of exp. 99 hold
    low_share = [(m, 4096, 7168) for m in (20, 50, 100, 120, 70, 90, 30)] + [(200, 4096, 4096)]
    assert not configs.group_wave_plan_applies(low_share) and configs.two_forms_wide_share(low_share) < 0.6
    assert pick(low_share) == configs.sm90_group_mixed()
    assert configs.select_config("group", "sm_90a", configs.GROUP_BENCHMARKS[2]) == \
        configs.sm90_group_mixed_forms(((128, 160), (128, 192)))  # (pinned: exp. 112)
    for shape in ([(200, 4096, 7168), (100, 4096, 7168)],  # 1344 k-blocks
                  [(130, 4096, 2048), (60, 4096, 2048), (200, 4096, 2048)],  # 640 (measured 1.088)
                  [(m, 1024, 7168) for m in (200, 100, 220, 60)],  # N 1024
                  [(m, 4096, 1024) for m in (200, 100, 220, 60)],  # K 1024
                  [(m, 4096, 7168) for m in (100, 60, 120, 80)],  # no wide group
                  [(256, 7168, 4096)] * 4,  # no (256, 128) group: the wide kernel (exp. 93)
                  [(200, 4096, 7168), (100, 3968, 7168), (220, 4096, 7168), (60, 4096, 7168)]):  # N % 256
        assert pick(shape) != two, shape


def test_grouped_rule_mixed256(monkeypatch):
    """Where the grouped rule (without exp. 108's (128, 192) forms, which may follow it) picks
    the (256, 128) mixed-input form alone (exp. 100): the
    ranking's non-swap stored-decode pick otherwise, every N_g >= 3072 and % 256, K_g >= 2048,
    >= 2048 k-blocks, A16 <= 20 MB; N 2048 (measured 1.02), short work and a large A16 (1.16)
    stay on the stored-decode kernels."""
    monkeypatch.setattr(configs, "_sm90_group_n192_forms", lambda *_args: None)
    monkeypatch.setattr(configs, "_sm90_group_widths", lambda *_args: None)
    mixed = configs.sm90_group_mixed()
    pick = lambda groups: configs.select_config("group", "sm_90a", tuple(groups))  # noqa: E731
    for shape in ([(m, 4096, 7168) for m in (100, 70, 128, 90, 110, 80, 120, 66)],
                  [(300, 8192, 4096), (350, 8192, 4096), (380, 8192, 4096), (260, 8192, 4096)],
                  [(128, 14336, 2048)] * 8, [(m, 5120, 7168) for m in (20, 128, 90, 40, 110, 70)]):
        assert pick(shape) == mixed, shape
    for shape in ([(m, 2048, 4096) for m in (70, 90, 128, 100, 75, 120, 85, 110, 95, 105, 115, 80, 125, 72, 88, 99)],
                  [(m, 7168, 2048) for m in (100, 70, 128, 90, 110, 80, 120, 66)],  # 1792 k-blocks
                  [(100, 4096, 1536)] * 8, *configs.GROUP_TESTS,
                  [(m, 7168, 7168) for m in (200, 280, 230, 300, 210, 260, 240, 290)]):  # A16 36.7 MB (1.161)
        assert pick(shape) != mixed, shape


def test_grouped_rule_wide_tiles(monkeypatch):
    """Where the grouped rule (without exp. 108's (128, 192) forms, which may follow it) picks
    the mixed-input kernel with 256-row A tiles (exp. 93): every
    M_g has an even number of 128-row blocks (no padding beyond the other kernels' tiles) and
    every N_g >= 2048; the leaderboard cases and the measured losses keep their kernels."""
    monkeypatch.setattr(configs, "_sm90_group_n192_forms", lambda *_args: None)
    monkeypatch.setattr(configs, "_sm90_group_widths", lambda *_args: None)
    wide = configs.sm90_group_mixed(tile=(128, 256))
    pick = lambda *groups: configs.select_config("group", "sm_90a", tuple(groups))  # noqa: E731
    for shape in ([(256, 7168, 4096)] * 4, [(512, 4096, 7168)] * 2, [(420, 5120, 2048), (512, 5120, 2048)],
                  [(1024, 3072, 4096), (768, 3072, 4096)], [(256, 8192, 4096)],
                  [(160, 2048, 7168), (256, 2048, 7168), (200, 2048, 7168)]):
        assert pick(*shape) == wide, shape
    for shape in ([(150 + 6 * i, 1024, 2048) for i in range(16)],  # N 1024: measured 1.08 slower
                  [(256, 1024, 1024)] * 4,  # 1.40
                  [(512, 14336, 4096), (384, 14336, 4096), (640, 14336, 4096)],  # 384 / 640: odd block counts
                  *configs.GROUP_BENCHMARKS, *configs.GROUP_TESTS):
        assert pick(*shape) != wide, shape


@pytest.mark.parametrize("seed", range(5))
def test_device_plan_segments(seed):
    """Exp. 137's device plan: each CTA's items (scheduler.device_segment, numbered without a walk)
    are exactly the segments scheduler.stream_k_work walks to -- whole tiles, then its stream-K
    range cut at tile ends -- so every (tile, k-block) unit runs once, each split tile's rank 0
    (its finisher) is its CTA's last item and every other rank its CTA's first stream-K item
    (the kernel's stream_k_handoff relies on both).  Stream-K only with one k-block count
    (device_totals), over the tiles past the whole waves or past all but one, never in
    ranges of no unit."""
    rnd = random.Random(137 + seed)
    for _ in range(300):
        ctas = rnd.choice([1, 3, 132])
        kb = rnd.randint(1, 40)
        total = rnd.randint(1, 3 * ctas)
        units = {}
        for cta in range(ctas):
            dp, u0, end, n_dp, items, div = scheduler.device_plan(total, kb, cta, ctas)
            waves = total // ctas
            assert dp == total or (total % ctas and dp in (waves * ctas, (waves - 1) * ctas)
                                   and (total - dp) * kb >= ctas)
            segs = [tuple(int(v) for v in scheduler.device_segment(j, cta, ctas, dp, u0, end, n_dp, kb, div))
                    for j in range(int(items))]
            walk, tdp, u = [], cta, u0
            while True:
                t, k0, k1, s, ns, valid = (int(v) for v in scheduler.stream_k_work(tdp, u, end, cta, ctas, dp, kb, div))
                if not valid:
                    break
                walk.append((t, k0, k1, s, ns))
                tdp, u = scheduler.stream_k_advance(tdp, u, dp, ctas, k0, k1)
            assert [(t, 0 if w else k0, kb if w else k1, s, ns) for t, k0, k1, s, ns, w in segs] == walk
            for j, (t, k0, k1, s, ns) in enumerate(walk):
                for k in range(k0, k1):
                    assert (t, k) not in units
                    units[(t, k)] = cta
                if ns > 1 and s == 0:
                    assert j == len(walk) - 1, "a finisher's segment is its CTA's last"
                if ns > 1 and s > 0:
                    assert all(w[4] == 1 for w in walk[:j]), "a partial writer's segment is its CTA's first split one"
        assert sorted(units) == [(t, k) for t in range(total) for k in range(kb)]
    # one K for the groups with rows, or none (a group of no rows has no say)
    ms, ns_, ks = [100, 0, 50] + [0] * 13, [4096] * 3 + [0] * 13, [7168, 1024, 7168] + [0] * 13
    assert tuple(int(v) for v in scheduler.device_totals(ms, ns_, ks, 256, 128, configs.K_BLOCK)) == (32, 7168 // configs.K_BLOCK)
    ks[2] = 4096
    assert int(scheduler.device_totals(ms, ns_, ks, 256, 128, configs.K_BLOCK)[1]) == 0


def test_device_busiest_kb():
    """Exp. 140's model of a device-scheduled launch (scheduler.device_busiest_kb, the tile rule's
    cost): with one k-block count, whole waves where device_plan cuts no tile, else the cut plan's
    modelled cost: under the whole waves and at least the busiest CTA's k-blocks (the plan adds
    DEVICE_SK_SEGMENT_KB per piece of a cut tile); with K_g that differ, whole waves at the mean."""
    def walk(total, kb, ctas):  # the k-blocks of each CTA under device_plan
        out = []
        for c in range(ctas):
            dp, u0, end, n_dp, items, div = scheduler.device_plan(total, kb, c, ctas)
            segs = [scheduler.device_segment(j, c, ctas, dp, u0, end, n_dp, kb, div) for j in range(int(items))]
            out.append(sum(kb if int(w) else int(k1) - int(k0) for _t, k0, k1, _s, _ns, w in segs))
        return out

    rnd = random.Random(140)
    for _ in range(200):
        g, (tm, tn) = rnd.randint(1, 16), rnd.choice([(256, 128), (256, 64), (128, 128)])
        k = rnd.choice([256, 1024, 2048, 7168])
        ms, ns, ks = [rnd.randint(1, 600) for _ in range(g)], [rnd.choice([256, 512, 4096]) for _ in range(g)], [k] * g
        ctas = rnd.choice([3, 132])
        total, kb = (int(v) for v in scheduler.device_totals(ms, ns, ks, tm, tn, configs.K_BLOCK))
        got = scheduler.device_busiest_kb(tuple(zip(ms, ns, ks)), [(tm, tn)], configs.K_BLOCK, ctas)[0]
        whole = -(-total // ctas) * kb
        if int(scheduler.device_plan(total, kb, 0, ctas)[0]) == total:
            assert got == whole
            continue
        most_kb = max(walk(total, kb, ctas))
        assert most_kb <= got < whole, (total, kb, ctas, got, most_kb)
    ms, ns, ks = [100, 300], [512, 512], [1024, 7168]  # K_g differ: 2 + 6 tiles of 4 / 28 k-blocks on 3 CTAs
    assert scheduler.device_busiest_kb(tuple(zip(ms, ns, ks)), [(256, 128)], configs.K_BLOCK, 3) == [3 * (2 * 4 + 6 * 28) / 8]


def test_device_schedule_tile_is_the_model():
    """Exp. 140 / 143: configs.device_schedule_tile (one pass over the groups, for the dispatcher's
    every new-M_g call) picks the tile of DEVICE_SCHEDULE_PICKS whose FORM_KB_US x
    scheduler.device_busiest_kb is least -- 256-row tiles only where every N_g allows, none where
    no 128-row tile divides N_g -- on random shapes with ragged and empty groups and mixed K_g."""
    rnd = random.Random(143)
    sms = configs.SM_COUNT["sm_90a"]
    for _ in range(3000):
        g = rnd.randint(1, 16)
        shape = tuple((0 if rnd.random() < 0.1 else rnd.randint(1, 600), rnd.choice([128, 256, 384, 2048, 4096, 7168]),
                       rnd.choice([256, 1024, 7168]) if rnd.random() < 0.2 else 4096) for _ in range(g))
        ms, ns, ks = zip(*shape)
        want = None
        if all(n % 128 == 0 for n in ns):
            wide = all(n % 256 == 0 for n in ns)
            want = min((t for t in configs.DEVICE_SCHEDULE_PICKS if wide or t[0] == 128),
                       key=lambda t: configs.FORM_KB_US[t] * scheduler.device_busiest_kb(shape, [t], configs.K_BLOCK, sms)[0])
        assert configs.device_schedule_tile(shape) == want, shape


def test_sm100_grouped_rule_ignores_dynamic_m():
    """Exp. 139's auto switch plans a churning structure with dynamic_m: on sm_100a that changes no
    pick (the rule there has no M_g-dependent forms, and one compiled kernel serves every M_g of a
    structure), so the switch matters on sm_90a only."""
    from nvfp4gemm import harness

    rnd = random.Random(139)
    for n, k in ((4096, 7168), (7168, 2048), (3072, 4096)):
        keys = set()
        for _ in range(40):
            shape = tuple((rnd.randint(1, 256), n, k) for _ in range(rnd.choice([2, 8, 16])))
            cfg = configs.select_config("group", "sm_100a", shape, dynamic_m=False)
            assert configs.select_config("group", "sm_100a", shape, dynamic_m=True) == cfg
            mod, _cls = harness.kernel_module("group", "sm_100a", cfg)
            keys.add((cfg, harness._static_key(mod, cfg, harness.shape_key("group", shape))))
        assert len(keys) == 1, (n, k, keys)


def test_masked_pick():
    """Exps. 144-147: MaskedGroupedGemm's configs (configs.sm90_group_masked_picks), in launch
    order -- the skinny kernel's masked form where every capacity <= SKINNY_MAX_M; else the
    device-scheduled masked form with the tile of the expected M_g (clamped to 1..capacity, or
    to SKINNY_MAX_M + 1.. when the skinny kernel takes the small counts; the capacities where
    none are given), after the masked skinny kernel for the counts <= SKINNY_MAX_M where `small`
    is True, or None and every expected M_g is <= SKINNY_MAX_M; () where no device-scheduled
    tile divides N_g; the expected M_g must be one per group."""
    picks = configs.sm90_group_masked_picks
    caps = ((512, 4096, 7168),) * 8
    skinny, cfg = picks(caps, small=True)
    assert skinny.skinny and skinny.masked and skinny.mma_tile_mn[1] == configs.SKINNY_MAX_M
    assert cfg.device_schedule and cfg.masked and cfg.masked_above == configs.SKINNY_MAX_M
    # the skinny launch: one CTA per B_g rows of its tile whatever the capacities (its first GPU
    # run counted ceil(capacity / 16) tiles per B block and mapped CTAs to the wrong groups)
    assert configs.grouped_tile_offsets(skinny, caps) == [i * 4096 // skinny.mma_tile_mn[0] for i in range(9)]
    assert tuple(cfg.mma_tile_mn) == configs.device_schedule_tile(caps)
    for c in (skinny, cfg):
        assert not configs.check_config(c) and "masked" in c.short(), configs.check_config(c)
    (alone,) = picks(caps)  # (the capacities are the expected counts: none <= 16)
    assert alone == dataclasses.replace(cfg, masked_above=0) and picks(caps, small=False) == (alone,)
    assert any("masked" in e for e in configs.check_config(dataclasses.replace(configs.sm90_group_mixed(), masked=True)))
    assert any("masked_above" in e for e in configs.check_config(dataclasses.replace(alone, masked_above=17)))
    assert any("masked_above" in e for e in configs.check_config(dataclasses.replace(configs.sm90_group_mixed_dynamic(),
                                                                                     masked_above=16)))
    (small,) = picks(caps, [8] * 8, small=False)
    assert small.device_schedule and tuple(small.mma_tile_mn) == configs.device_schedule_tile(((8, 4096, 7168),) * 8)
    assert tuple(small.mma_tile_mn) != tuple(cfg.mma_tile_mn)  # (the expected M_g do steer the tile)
    _sk, split = picks(caps, [8] * 8)  # (the mixed form then sees only counts > 16)
    assert tuple(split.mma_tile_mn) == configs.device_schedule_tile(((17, 4096, 7168),) * 8)
    for expected in ([100] * 8, [8] * 7 + [17]):  # some expected count > 16: no skinny launch
        (large,) = picks(caps, expected)
        assert large.masked and not large.masked_above
    _sk, clamped = picks(caps, [0, 9999] * 4, small=True)
    assert tuple(clamped.mma_tile_mn) == configs.device_schedule_tile(((17, 4096, 7168), (512, 4096, 7168)) * 4)
    (only,) = picks(((16, 4096, 7168), (3, 2048, 2048)))
    assert only.skinny and only.masked
    assert picks(((64, 192, 2048), (32, 192, 2048))) == ()
    with pytest.raises(ValueError, match="expected_m has 2 values for 8 groups"):
        picks(caps, [1, 2])

def test_sm90_grouped_launch_tables_sizes(monkeypatch):
    """The stored-decode grouped kernel's host tables (CPU): the tile prefix sums are padded past
    the last group with a value above the total tile count (the kernel's group search must never
    land in an unused group), and with a split-K plan the fp32 workspace holds each tail tile's
    partial sums once per split, with one zeroed counter per tail tile."""
    import torch

    from nvfp4gemm.sm90 import grouped_gemm as gg

    shapes = [(128, 4096, 1536), (384, 4096, 1536)]  # (the leaderboard's fourth grouped case)
    cfg = configs.select_config("group", "sm_90a", tuple(shapes))
    assert cfg.split_k
    offs, total = gg.padded_tile_offsets(cfg, shapes)
    assert offs[:len(shapes) + 1] == list(configs.grouped_tile_offsets(cfg, shapes)) and offs[len(shapes)] == total
    assert len(offs) == gg.MAX_GROUPS + 1 and all(o > total for o in offs[len(shapes) + 1:])
    monkeypatch.setattr(gg, "sm_count", lambda dev: 100)  # (fewer SMs than tiles: a split tail)
    rows = [[0] * gg.META_FIELDS for _ in shapes]
    k_blocks = shapes[0][2] // configs.K_BLOCK
    meta, offs_t, ws, cnt, items, full, splits, ctas = gg.launch_tables(
        cfg, torch.device("cpu"), rows, offs, total, k_blocks)
    n_tail = total - full
    assert (ctas, full, splits) == scheduler.split_plan(total, 100, k_blocks) and n_tail > 0 and splits > 1
    assert ws.dtype == torch.float32 and ws.numel() >= n_tail * splits * cfg.mma_tile_mn[0] * cfg.mma_tile_mn[1]
    assert cnt.numel() == n_tail and not cnt.any()
    assert items == full + n_tail * splits
    assert tuple(meta.shape) == (gg.MAX_GROUPS, gg.META_FIELDS) and offs_t.tolist() == offs


def test_grouped_tile_walk_helpers_on_python_ints(monkeypatch):
    """The sm_100a grouped kernel's tile walk, run on Python ints (those kernels have never run):
    `group_and_rank` agrees with a bisect over the tile offsets (empty groups included; entries
    past the last group hold the total), `blocked_tile_range`'s shares cover [0, T) in order
    and differ by at most one tile, and `linear_to_mnl` is a bijection onto M x N x L that walks
    M first when asked."""
    import bisect
    import types

    from nvfp4gemm.sm100.grouped_gemm import OFFSETS_USED  # (the kernel's offsets: this many, padded with the total)

    monkeypatch.setattr(scheduler, "cutlass", types.SimpleNamespace(Int32=int, max=max))
    for offs in ([0, 3, 3, 7, 12, 12, 20], [0, 0, 5], [0, 1], list(range(0, 17 * 4, 4))):
        total = offs[-1]
        padded = offs + [total] * (OFFSETS_USED - len(offs))
        for idx in range(total):
            want = bisect.bisect_right(padded, idx) - 1
            assert scheduler.group_and_rank(idx, padded, OFFSETS_USED) == (want, idx - padded[want])
    for clusters, tiles in ((4, 10), (7, 3), (148, 1000), (5, 5)):
        shares = [scheduler.blocked_tile_range(c, clusters, tiles) for c in range(clusters)]
        assert shares[0][0] == 0 and shares[-1][1] == tiles
        assert all(a[1] == b[0] for a, b in zip(shares, shares[1:]))
        sizes = [hi - lo for lo, hi in shares]
        assert max(sizes) - min(sizes) <= 1
    for tm, tn, l in ((3, 5, 2), (1, 4, 1), (6, 1, 3)):
        for raster_m in (True, False):
            coords = [scheduler.linear_to_mnl(i, tm, tn, raster_m) for i in range(tm * tn * l)]
            assert sorted(coords) == [(m, n, b) for m in range(tm) for n in range(tn) for b in range(l)]
            if raster_m and tm > 1:
                assert coords[1] == (1, 0, 0)
            if not raster_m and tn > 1:
                assert coords[1] == (0, 1, 0)


def test_grouped_tile_offsets_by_hand():
    """Tile prefix sums of the three kinds of grouped config, against counts worked out by hand:
    plain (ceil(M_g / tile M) x N_g / tile N, ragged M), swap_ab (N_g / 256 x ceil(M_g / 128)) and
    skinny (N_g / B rows per tile, one tile along M) -- one tile short per group leaves rows
    uncomputed on the GPU."""
    plain = configs.select_config("group", "sm_90a", ((740, 576, 2304),))
    assert plain.mma_tile_mn == (128, 64) and not plain.swap_ab
    assert configs.grouped_tile_offsets(plain, [(740, 576, 2304), (1, 576, 2304)]) == [0, 6 * 9, 6 * 9 + 9]
    swap = configs.select_config("group", "sm_100a", configs.GROUP_BENCHMARKS[0])
    assert swap.mma_tile_mn == (256, 128) and swap.swap_ab
    per_group = [16 * (1 if m <= 128 else 2) for m, _n, _k in configs.GROUP_BENCHMARKS[0]]  # (M_g 64-248)
    assert configs.grouped_tile_offsets(swap, configs.GROUP_BENCHMARKS[0]) == list(itertools.accumulate([0] + per_group))
    skinny = configs.select_config("group", "sm_90a", ((8, 512, 256), (16, 768, 256)))
    assert skinny.skinny and skinny.mma_tile_mn == (16, 16)
    assert configs.grouped_tile_offsets(skinny, [(8, 512, 256), (16, 768, 256)]) == [0, 32, 80]


def test_sm90_split_and_stream_k_workspaces(monkeypatch):
    """Workspace sizes of two sm_90a launches, on CPU (third mutation review: halving any of them
    passed every CPU test; on the GPU a short one is written out of bounds): the stored-decode
    dual kernel's split-K fp32 workspace holds every split tile's two accumulators once per split,
    one counter per split tile, and split pairs run two CTAs per tile; the grouped mixed kernel's
    stream-K workspace holds PARTIAL_BYTES per CTA, one flag per CTA, and its pre-pass half counts
    are M_g x K_g / 32 prefix sums."""
    import torch

    from nvfp4gemm.sm90 import dual_gemm as dg
    from nvfp4gemm.sm90 import grouped_mixed as gm

    monkeypatch.setattr(dg, "sm_count", lambda dev: 132)
    shape = (256, 512, 7168, 1)
    cfg = configs.sm90_dual_tile_rule(shape)
    assert cfg.split_k and not cfg.a_prepass
    c = torch.empty(256, 512, 1, dtype=torch.float16)
    ws, cnt, _items, full, splits, ctas = dg.split_args(cfg, *shape, c)
    tiles = configs.dual_tiles(cfg, shape)
    n_split = tiles - full
    assert n_split > 0 and splits > 1 and ctas <= 132
    assert ws.numel() >= n_split * splits * cfg.mma_tile_mn[0] * 2 * cfg.mma_tile_mn[1] and cnt.numel() == n_split
    pairs = dataclasses.replace(cfg, cluster_mn=(2, 1))
    ws, cnt, _items, full, splits, ctas = dg.split_args(pairs, *shape, torch.empty(256, 512, 1, dtype=torch.float16))
    assert (ctas, full, splits) == (2 * tiles, 0, 2)
    assert ws.numel() >= tiles * 2 * cfg.mma_tile_mn[0] * 2 * cfg.mma_tile_mn[1] and cnt.numel() == tiles

    monkeypatch.setattr(gm, "sm_count", lambda dev: 132)
    shapes = [(57, 3328, 4096)]
    g = configs.select_config("group", "sm_90a", tuple(shapes))
    assert g.a_prepass and not g.device_schedule and g.cluster_mn != (2, 1)
    t = gm.launch_tables(g, torch.device("cpu"), [[0] * gm.META_FIELDS for _ in shapes], shapes)
    halves, ws, flags, ctas = t[1], t[6], t[7], t[11]
    assert ws.numel() * 4 >= ctas * gm.Sm90GroupedMixedKernel.PARTIAL_BYTES and flags.numel() == ctas
    assert halves.tolist()[:2] == [0, 57 * 4096 // 32] and t[8] == halves.tolist()[1]


def test_sm90_dual_mixed_workspaces(monkeypatch):
    """The mixed-input dual kernel's host launch pieces, on CPU (third mutation review of session
    56: each survived the CPU tests; on the GPU a short workspace is written out of bounds):
    split-K pairs run one 2-CTA cluster per tile and no whole tiles; the stream-K workspace
    holds PARTIAL_BYTES per CTA and one zeroed flag per CTA; `runtime_args` hands the kernel
    a real workspace whenever the plan splits any tile -- one split tile included -- and C
    (never touched then) only where it splits none."""
    import torch
    from cuda.bindings.driver import CUstream

    import reference as R
    from nvfp4gemm.sm90 import dual_mixed as dm

    monkeypatch.setattr(dm, "sm_count", lambda dev: 132)
    shape = (256, 4096, 7168, 1)
    pairs = configs.sm90_dual_mixed_pairs()
    tiles = configs.dual_tiles(pairs, shape)
    assert dm.stream_k_plan(pairs, *shape[:3], "cpu") == (2 * tiles, 0)
    whole = dataclasses.replace(configs.sm90_dual_mixed(), split_k=False)
    assert dm.stream_k_plan(whole, *shape[:3], "cpu") == (min(configs.dual_tiles(whole, shape), 132),
                                                          configs.dual_tiles(whole, shape))

    c = torch.empty(256, 4096, 1, dtype=torch.float16)
    ws, flags = dm.stream_k_workspace(c, 7)
    assert ws.dtype == torch.float32 and ws.numel() * 4 == 7 * dm.Sm90DualMixedKernel.PARTIAL_BYTES
    assert flags.dtype == torch.int32 and flags.tolist() == [0] * 7

    split = dataclasses.replace(configs.sm90_dual_mixed(), split_k=True)
    n_tiles = configs.dual_tiles(split, shape)
    data = R.generate_input(*shape, 7, device="cpu")
    for dp_tiles, workspace in ((n_tiles - 1, True), (0, True), (n_tiles, False)):
        monkeypatch.setattr(dm, "stream_k_plan", lambda *a, dp=dp_tiles: (100, dp))
        keep = []
        args = dm.runtime_args(data, split, CUstream(0), keep=keep)
        _a16, ws, flags = keep
        assert int(args[13]) == 100 and int(args[14]) == dp_tiles
        if workspace:
            assert ws is not data[9] and ws.numel() * 4 >= 100 * dm.Sm90DualMixedKernel.PARTIAL_BYTES, dp_tiles
            assert flags is not data[9] and flags.numel() == 100 and not flags.any()
        else:
            assert ws is data[9] and flags is data[9]


def test_sm90_grouped_device_schedule_tables(monkeypatch):
    """The device schedule's launch tables (exp. 136), on CPU: an A16 buffer of the shapes'
    tile-rounded rows times DEVICE_ROWS_SLACK, rounded to the tile, by K_max; a stream-K
    workspace of PARTIAL_BYTES and one zeroed flag per CTA, one CTA per SM; the pre-pass's half
    count covers the capacity.  `device_fits` accepts a later input exactly while its rounded
    rows fit that capacity and its K_max is the buffer's row stride (a template built for one
    M_g set serves others; one past capacity would write past A16)."""
    import torch

    from nvfp4gemm.sm90 import grouped_mixed as gm

    monkeypatch.setattr(gm, "sm_count", lambda dev: 132)
    cfg = configs.sm90_group_mixed_dynamic()
    tn = cfg.mma_tile_mn[1]
    shapes = [(100, 4096, 7168), (300, 4096, 7168), (1, 4096, 2048)]
    need = sum(-(-m // tn) * tn for m, _n, _k in shapes)
    assert gm.device_rows(cfg, shapes) == need
    cap = -(-int(need * gm.DEVICE_ROWS_SLACK) // tn) * tn
    t = gm.launch_tables(cfg, torch.device("cpu"), [[0] * gm.META_FIELDS for _ in shapes], shapes)
    a16, ws, flags, total, k_max, rows, ctas = t[5:12]
    assert cap > need and (rows, k_max, ctas) == (cap, 7168, 132)
    assert tuple(a16.shape) == (cap, 7168) and a16.dtype == torch.float16 and not a16.any()
    assert ws.numel() * 4 >= 132 * gm.Sm90GroupedMixedKernel.PARTIAL_BYTES
    assert flags.tolist() == [0] * 132 and total == cap * (7168 // 32)

    args = [None] * 12
    args[9], args[10] = k_max, rows

    def fits(ms, k=7168):
        return gm.device_fits(cfg, args, (None, None, None, [(m, 4096, k, 1) for m in ms]))

    assert fits([cap]) and fits([cap - tn + 1]) and fits([1] * (cap // tn))
    assert not fits([cap + 1]) and not fits([1] * (cap // tn + 1))
    assert not fits([100], k=2048), "another K_max: the A16 row stride differs"
    assert gm.device_fits(configs.sm90_group_mixed(), args, (None, None, None, [(10**6, 4096, 7168, 1)]))
