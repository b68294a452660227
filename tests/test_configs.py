"""CONFIG_MAP and the rule-based defaults pass the per-architecture validity checks; the
checks themselves catch what they claim to."""

from dataclasses import replace

import re

import pytest

import configs as C


@pytest.mark.parametrize("key", sorted(C.CONFIG_MAP, key=repr), ids=lambda k: f"{k[0]}-{k[1]}-{hash(k[2]) % 10**6}")
def test_config_map_entry_valid(key):
    arch, problem, shape = key
    cfg = C.CONFIG_MAP[key]
    assert (cfg.arch, cfg.problem) == (arch, problem)
    assert C.check_config(cfg) == []
    assert C.fits(cfg, shape), f"{cfg.short()} does not tile {shape}"
    assert C.check_shape(problem, shape) == []
    assert C.select_config(problem, arch, shape) == cfg


def test_every_benchmark_case_has_an_entry_per_arch():
    for arch in C.ARCHS:
        for s in C.DUAL_BENCHMARKS:
            assert (arch, "dual", s) in C.CONFIG_MAP
        for s in C.GROUP_BENCHMARKS:
            assert (arch, "group", s) in C.CONFIG_MAP


@pytest.mark.parametrize("arch", C.ARCHS)
def test_defaults_cover_all_legal_shapes(arch):
    shapes = list(C.DUAL_TESTS) + [(128, 64, 256, 1), (384, 192, 768, 3), (640, 320, 2560, 2)]
    for s in shapes:
        cfg = C.select_config("dual", arch, s)
        assert C.check_config(cfg) == [] and C.fits(cfg, s), (s, cfg)
    for s in list(C.GROUP_TESTS) + [((1, 64, 256),), tuple((m, 192, 512) for m in range(1, 17))]:
        cfg = C.select_config("group", arch, s)
        assert C.check_config(cfg) == [] and C.fits(cfg, s), (s, cfg)


def test_checks_catch_bad_configs():
    base = C.CONFIG_MAP[("sm_100a", "dual", C.DUAL_BENCHMARKS[0])]
    assert any("TMEM" in e for e in C.check_config(replace(base, mma_tile_mn=(256, 256), acc_stages=2)))
    assert any("shared memory" in e for e in C.check_config(replace(base, ab_stages=12)))
    assert any("128 x cta_group" in e for e in C.check_config(replace(base, mma_tile_mn=(128, 64))))
    h = C.sm90_dual_tile_rule(C.DUAL_BENCHMARKS[0])  # the 128x128 kernel's config
    mixed = C.CONFIG_MAP[("sm_90a", "dual", C.DUAL_BENCHMARKS[0])]
    assert mixed.a_prepass and mixed.cluster_mn == (2, 1) and C.check_config(mixed) == []
    assert any("a_prepass" in e for e in C.check_config(replace(mixed, cluster_mn=(1, 2))))
    assert any("split_k" in e for e in C.check_config(replace(mixed, split_k=False)))
    # the narrow mixed form: whole tiles or stream-K, two consumer warpgroups, no cluster
    narrow = C.sm90_dual_mixed_narrow()
    assert C.check_config(narrow) == [] and C.dual_tiles(narrow, (256, 3072, 4096, 1)) == 96
    assert C.check_config(replace(narrow, split_k=True)) == []
    for bad in (replace(narrow, mma_warpgroups=1), replace(narrow, cluster_mn=(2, 1), split_k=True)):
        assert any("narrow form" in e for e in C.check_config(bad)), bad
    assert any("registers" in e for e in C.check_config(replace(h, mma_tile_mn=(128, 256))))
    assert any("cta_group" in e for e in C.check_config(replace(h, cta_group=2)))
    assert C.check_shape("dual", (256, 512, 384, 1)) == ["K=384 must be a multiple of 256"]
    assert C.check_shape("dual", (200, 512, 256, 1)) == []  # ragged M: arch-specific
    assert C.check_shape("dual", (200, 512, 256, 1), "sm_90a") == []
    assert C.check_shape("dual", (200, 512, 256, 1), "sm_100a") == [
        "M=200 must be a multiple of 128 for the sm_100a dual kernel (sm_90a takes any M)"]
    assert C.check_shape("group", [(40, 100, 256)]) == ["group 0: N=100 must be a multiple of 64"]
    # 32-bit layouts: each batch's A, B and C below 2^31 elements (session 57's review: a larger
    # one would wrap a kernel's Int32 batch stride; refused, not run)
    assert C.check_shape("dual", (2**17, 4096, 2**14 - 256, 3)) == []
    assert C.check_shape("dual", (2**17, 4096, 2**14, 1)) == [
        "A (M x K) = 2147483648 elements per batch: must be below 2^31 (32-bit strides)"]
    assert C.check_shape("dual", (128, 2**17, 2**14, 1)) == [
        "B1, B2 (N x K) = 2147483648 elements per batch: must be below 2^31 (32-bit strides)"]
    assert C.check_shape("dual", (2**15, 2**16, 256, 1), "sm_90a") == [
        "C (M x N) = 2147483648 elements per batch: must be below 2^31 (32-bit strides)"]
    assert C.check_shape("group", [(40, 512, 256), (2**17, 512, 2**14)]) == [
        "group 1: A (M x K) = 2147483648 elements: must be below 2^31 (32-bit strides)"]
    assert C.check_shape("group", [(40, 2**17, 2**14)], launch=False) == [
        "group 0: B (N x K) = 2147483648 elements: must be below 2^31 (32-bit strides)"]


def _bad_config_cases():
    b100 = C.CONFIG_MAP[("sm_100a", "dual", C.DUAL_BENCHMARKS[0])]  # 2-CTA, cluster (2, 2)
    h = C.sm90_dual_tile_rule(C.DUAL_BENCHMARKS[0])
    sk = C.select_config("dual", "sm_90a", (8, 512, 1024, 1))
    assert sk.skinny and C.check_config(sk) == [] and C.check_config(b100) == [] and C.check_config(h) == []
    return [
        (b100, dict(raster="x"), "raster"), (b100, dict(ab_stages=0), "stage counts"),
        (b100, dict(masked=True), "masked (M_g"), (b100, dict(table_groups=17), "table_groups 17"),
        (b100, dict(pdl="x"), "pdl 'x'"), (b100, dict(pdl="loop"), "sm_90a skinny dual option"),
        (b100, dict(k_split=2), "k_split 2"), (b100, dict(masked_above=4), "masked_above 4"),
        (b100, dict(cta_group=3, mma_tile_mn=(384, 64)), "cta_group 3"),
        (b100, dict(mma_tile_mn=(256, 96)), "multiple of 64 in [64, 256]"),
        (b100, dict(cluster_mn=(3, 1)), "multiple of cta_group"), (b100, dict(cluster_mn=(4, 8)), "larger than 16"),
        (b100, dict(split_k=True), "sm_90a options"), (b100, dict(epi_tile_mn=(96, 32)), "epilogue tile"),
        (h, dict(dec_stages=4), "rs_a=True"), (h, dict(cluster_mn=(2, 1), split_k=False), "split-K pairs"),
        (h, dict(mma_warpgroups=3), "64 x mma_warpgroups"), (h, dict(mma_tile_mn=(128, 12)), "wgmma N"),
        (sk, dict(mma_tile_mn=(48, 8)), "skinny tile"), (sk, dict(k_warps=17), "k_warps 17"),
        (sk, dict(ab_stages=9), "ab_stages 9"), (sk, dict(cluster_mn=(2, 1)), "skinny takes no"),
        (sk, dict(k_split=3), "k_split 3: 1, 2, 4 or 8"),
    ]


def test_each_config_rule_refuses_its_case():
    """Each rule of check_config, broken alone from a legal config, is reported by name (a rule
    dropped would let an illegal config compile into a kernel that hangs or writes wrongly)."""
    for base, change, needle in _bad_config_cases():
        errs = C.check_config(replace(base, **change))
        assert any(needle in e for e in errs), (change, errs)


def test_sm100_dual_can_implement_rules():
    """The sm_100a dual kernel's own rules beyond check_config, each broken alone."""
    from nvfp4gemm.sm100.dual_gemm import Sm100DualGemmKernel

    cg1 = C.select_config("dual", "sm_100a", (128, 512, 1024, 1))
    Sm100DualGemmKernel.can_implement(cg1, 128, 512, 1024, 1)
    for change, needle in ((dict(mma_tile_mn=(128, 192), acc_stages=1), "two accumulators per stage"),
                           (dict(cluster_mn=(3, 1)), "1, 2 or 4"), (dict(swap_ab=True), "swap_ab"),
                           (dict(occupancy=2), "occupancy must be 1"), (dict(epi_tile_mn=(64, 32)), "epilogue tile M 64")):
        with pytest.raises(ValueError, match=re.escape(needle)):
            Sm100DualGemmKernel.can_implement(replace(cg1, **change), 128, 512, 1024, 1)


def test_tmem_alloc_is_power_of_two():
    assert [C.tmem_alloc_columns(x) for x in (1, 32, 33, 304, 512)] == [32, 32, 64, 512, 512]


@pytest.mark.parametrize("align", [1, 2, 4, 8, 16])
def test_group_chunks(align):
    """Exp. 152: `group_chunks` covers every group once, in order, in as few ranges of at most
    GROUPS_PER_LAUNCH as possible, every boundary but the last a multiple of `align`, sizes as
    even as that allows (within `align`)."""
    per = C.GROUPS_PER_LAUNCH
    for g in range(1, 300):
        r = C.group_chunks(g, align)
        assert r[0][0] == 0 and r[-1][1] == g and all(a[1] == b[0] for a, b in zip(r, r[1:]))
        assert all(0 < hi - lo <= per for lo, hi in r)
        assert len(r) == -(-(-(-g // align)) // (per // align))  # (ceil(g / per) where align is 1)
        assert all(hi % align == 0 for _lo, hi in r[:-1])
        full = [hi - lo for lo, hi in r[:-1]]
        assert not full or max(full) - min(full) <= align
    assert C.group_chunks(40, 4) == [(0, 12), (12, 24), (24, 40)]
    with pytest.raises(ValueError):
        C.group_chunks(0)
    with pytest.raises(ValueError):
        C.group_chunks(8, 3)


def test_group_count_per_launch():
    """A launch takes 1 to GROUPS_PER_LAUNCH groups; an input any number of at least 1."""
    shape = ((64, 128, 256),) * (C.GROUPS_PER_LAUNCH + 1)
    assert any("per launch" in e for e in C.check_shape("group", shape))
    assert not C.check_shape("group", shape, launch=False)
    assert not C.check_shape("group", shape[:C.GROUPS_PER_LAUNCH])
    assert C.check_shape("group", (), launch=False)
