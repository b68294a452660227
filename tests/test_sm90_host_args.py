"""The sm_90a kernels' host launch arguments on CPU (CPU stand-in tensors, `sm_count` patched):
the scalars each `runtime_args` passes in the order of its kernel's `__call__`, the launch tables
(tile prefix sums, group table rows, split plans) and their cache keys, what the dispatcher's
templates must hold (`keep`), and the skinny grouped kernel's grid and wide table.  Session 57's
mutation review: each test here fails on a change that would give wrong C or read out of
bounds on a GPU, and which no CPU test caught before (the GPU suite would)."""

import dataclasses
import inspect

import pytest
import torch

import configs
import reference as R


def _ints(args):
    return [int(a) for a in args]


def _ptr(a):
    return a._pointer


# --------------------------------------------------------------------------- dual kernels


def test_sm90_dual_gemm_runtime_args_scalars(monkeypatch):
    """The stored-decode dual kernel's scalar arguments are M, N, K (codes, not bytes), L, then the
    split plan's items, full tiles, splits and CTAs in the order of Sm90DualGemmKernel.__call__; and
    a config without split-K gets its own (unsplit) plan for the same output, not the split one.
    Fails on: K passed as K/2; full / splits swapped; M / N swapped; split_k not in the key."""
    from cuda.bindings.driver import CUstream

    from nvfp4gemm.sm90 import dual_gemm as dg

    monkeypatch.setattr(dg, "sm_count", lambda dev: 132)
    shape = (200, 512, 7168, 2)
    m, n, k, l = shape
    cfg = configs.sm90_dual_tile_rule(shape)
    assert cfg.split_k and cfg.cluster_mn == (1, 1) and not cfg.swap_ab
    data = R.generate_input(*shape, 5, device="cpu")
    keep = []
    args = dg.runtime_args(data, cfg, CUstream(0), keep=keep)
    names = list(inspect.signature(dg.Sm90DualGemmKernel.__call__).parameters)[1:]
    assert names[9:17] == ["m", "n", "k", "l", "total_items", "full_tiles", "splits", "num_ctas"]
    tiles = configs.dual_tiles(cfg, shape)
    ctas, full, splits = configs.split_plan(tiles, 132, k // configs.K_BLOCK)
    assert splits > 1 and full != splits
    assert _ints(args[9:17]) == [m, n, k, l, configs.split_units(tiles, full, splits), full, splits, ctas]
    whole = dataclasses.replace(cfg, split_k=False)
    w = dg.runtime_args(data, whole, CUstream(0))
    assert _ints(w[13:17]) == [tiles, tiles, 1, min(tiles, 132)], "the unsplit config got the split plan"


def test_sm90_dual_skinny_runtime_args_scalars():
    """The skinny dual kernel's scalars are M, N, K (codes), L, in __call__'s order (L > 1: one
    grid row per batch).  Fails on: K passed as K/2; L forced to 1; M / N swapped."""
    from cuda.bindings.driver import CUstream

    from nvfp4gemm.sm90 import dual_skinny as dk

    shape = (8, 512, 1024, 3)
    cfg = configs.sm90_dual_skinny(shape, static_b=False)
    data = R.generate_input(*shape, 7, device="cpu")
    args = dk.runtime_args(data, cfg, CUstream(0))
    names = list(inspect.signature(dk.Sm90DualSkinnyKernel.__call__).parameters)[1:]
    assert names[7:11] == ["m", "n", "k", "l"]
    assert _ints(args[7:11]) == list(shape)


def test_dual_swap_runtime_args_tables(monkeypatch):
    """The dual swap_ab kernel's launch tables: tile prefix sums [0, N / 128 x ceil(M / tile N), huge
    ...], the group table's row 0 with this call's M, N, K, the split plan over those tiles, all held
    in `keep`; and a call on the same addresses with another M (a slice of the same buffers) gets
    tables of its own M.  Fails on: last tile dropped; half the tiles; M not in the key."""
    from cuda.bindings.driver import CUstream

    from nvfp4gemm.sm90 import dual_swap as ds
    from nvfp4gemm.sm90 import grouped_gemm as gg

    monkeypatch.setattr(gg, "sm_count", lambda dev: 132)
    shape = (40, 512, 1024, 1)
    m, n, k, _l = shape
    cfg = configs.sm90_dual_swap_ab(shape, 16)
    data = R.generate_input(*shape, 3, device="cpu")

    def check(d, m):
        keep = []
        args = ds.runtime_args(d, cfg, CUstream(0), keep=keep)
        meta, offs, _ws, _cnt, items, full, splits, ctas = keep[0]
        tiles = configs.dual_tiles(cfg, (m, n, k, 1))
        assert tiles == (n // 128) * -(-m // 16)
        assert offs.tolist() == [0, tiles] + [1 << 30] * (gg.MAX_GROUPS - 1)
        assert meta[0].tolist()[5:] == [m, n, k]
        plan = configs.split_plan(tiles, 132, k // configs.K_BLOCK) if cfg.split_k else (min(tiles, 132), tiles, 1)
        assert (ctas, full, splits) == plan
        assert items == configs.split_units(tiles, full, splits)
        assert _ptr(args[0]) == meta.data_ptr() and _ptr(args[1]) == offs.data_ptr()
        assert _ints(args[4:8]) == [items, full, splits, ctas]

    check(data, m)
    a, b1, b2, sfa, sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    check((a[:20], b1, b2, sfa[:20], sfb1, sfb2, sfa_p, sfb1_p, sfb2_p, c[:20]), 20)  # same addresses


# --------------------------------------------------------------------------- grouped kernels


def test_sm90_grouped_tables_per_config_and_kept(monkeypatch):
    """`grouped_tables` is cached per config as well as per input: the skinny and the plain grouped
    config on one input get their own tile prefix sums; `runtime_args` hands its tables to `keep`
    (the dispatcher's template holds them past the cache's eviction).  Fails on: config not in the
    key; tables not kept."""
    from cuda.bindings.driver import CUstream

    from nvfp4gemm.sm90 import grouped_gemm as gg

    monkeypatch.setattr(gg, "sm_count", lambda dev: 132)
    shapes = ((8, 512, 1024), (16, 256, 1024))
    data = R.generate_input([m for m, _n, _k in shapes], [n for _m, n, _k in shapes],
                            [k for _m, _n, k in shapes], len(shapes), 11, device="cpu")
    skinny = configs.select_config("group", "sm_90a", shapes)
    plain = configs.select_config("group", "sm_90a", ((300, 512, 1024), (300, 256, 1024)))
    assert skinny.skinny and not plain.skinny and not plain.a_prepass
    for cfg in (skinny, plain, skinny):
        offs = gg.grouped_tables(cfg, data)[1].tolist()
        assert offs[:3] == configs.grouped_tile_offsets(cfg, shapes), cfg.short()
    keep = []
    args = gg.runtime_args(data, plain, CUstream(0), keep=keep)
    held = {t.data_ptr() for x in keep for t in (x if isinstance(x, tuple) else (x,)) if isinstance(t, torch.Tensor)}
    assert {_ptr(a) for a in args[:4]} <= held


def test_sm90_grouped_skinny_runtime_args_grid_and_tables(monkeypatch):
    """The skinny grouped kernel launches one CTA per R rows of every B_g (not persistent: the grid
    is the item count, not min(items, SMs)); with the wide table (masked, > 16 groups) argument 1
    points at the per-CTA map (`wide_cta_map`) and the grid is its length.  Fails on: grid = CTAs
    of a persistent plan; wide grid one short; wide config given the prefix sums."""
    from cuda.bindings.driver import CUstream

    from nvfp4gemm.sm90 import grouped_gemm as gg
    from nvfp4gemm.sm90 import grouped_skinny as gs

    monkeypatch.setattr(gg, "sm_count", lambda dev: 4)  # (fewer SMs than blocks)
    shapes = ((8, 512, 1024), (16, 256, 1024))
    data = R.generate_input([8, 16], [512, 256], [1024, 1024], 2, 13, device="cpu")
    cfg = configs.select_config("group", "sm_90a", shapes)
    assert cfg.skinny and not cfg.masked
    args = gs.runtime_args(data, cfg, CUstream(0))
    assert int(args[-2]) == sum(n // cfg.mma_tile_mn[0] for _m, n, _k in shapes)

    groups = 20
    wshapes = ((16, 512, 256),) * groups
    wide = configs.sm90_group_masked_picks(wshapes)[0]
    assert wide.table_groups == configs.WIDE_TABLE_GROUPS
    wdata = R.generate_input([16] * groups, [512] * groups, [256] * groups, groups, 17, device="cpu")
    keep = []
    wargs = gs.runtime_args(wdata, wide, CUstream(0), keep=keep)
    meta_t, map_t = keep[0][0], keep[0][1]
    want = gs.wide_cta_map(wide, wshapes)
    assert map_t.tolist() == want and _ptr(wargs[1]) == map_t.data_ptr()
    assert tuple(meta_t.shape) == (wide.table_groups, gg.META_FIELDS)
    assert int(wargs[-2]) == len(want)


def test_sm90_grouped_skinny_device_fits_the_tiles_a_rows():
    """A skinny launch template serves later inputs only while every M_g fits the tile's A rows
    (tile N: 8 or 16), not its B rows (tile M: 16-64).  Fails on: device_fits against tile M."""
    from nvfp4gemm.sm90 import grouped_skinny as gs

    cfg = configs.sm90_group_skinny(((8, 4096, 7168),) * 8)
    assert cfg.mma_tile_mn == (32, 8)

    def fits(*ms):
        return gs.device_fits(cfg, None, (None, None, None, [(m, 4096, 7168, 1) for m in ms]))

    assert fits(8, 1) and not fits(8, 9) and not fits(32)


def test_sm90_grouped_skinny_wide_table_block_bound():
    """The wide table's CTA map holds a block index in 16 bits: N_g / tile M must stay below 65536.
    Fails on: the bound raised to 2^17."""
    from nvfp4gemm.sm90.grouped_skinny import Sm90GroupedSkinnyMaskedKernel

    wide = configs.sm90_group_masked_picks(((16, 4096, 7168),) * 40)[0]
    rows = wide.mma_tile_mn[0]
    with pytest.raises(ValueError, match="65536"):
        Sm90GroupedSkinnyMaskedKernel.can_implement(wide, ((16, rows << 16, 256),))


def test_own_table_target_and_counts_argument():
    """A template's own group table holds all MAX_GROUPS rows (a 16-group input's last row is read);
    the masked kernels' counts argument COUNTS_ARG is the skinny kernel's counts pointer and the
    mixed kernel's row-offset pointer.  Fails on: table one row short; COUNTS_ARG = 1."""
    from nvfp4gemm.sm90 import grouped_gemm as gg
    from nvfp4gemm.sm90.grouped_mixed import Sm90GroupedMixedKernel
    from nvfp4gemm.sm90.grouped_skinny import Sm90GroupedSkinnyMaskedKernel

    t = gg.own_table_target(torch.device("cpu"))
    assert t.n == gg.MAX_GROUPS * gg.META_FIELDS == t.owner.numel()
    assert t.arg_pairs == ((0, t.owner.data_ptr()),)
    skinny = list(inspect.signature(Sm90GroupedSkinnyMaskedKernel.__call__).parameters)[1:]
    mixed = list(inspect.signature(Sm90GroupedMixedKernel.__call__).parameters)[1:]
    assert skinny[gg.COUNTS_ARG] == "counts_ptr" and mixed[gg.COUNTS_ARG] == "row0_ptr"
