"""Compile-only checks of the sm_90a kernels (no GPU needed).

For every sm_90a CONFIG_MAP entry and the config `select_config` picks for each leaderboard
test and benchmark shape (dual and grouped): compile for sm_90a, then check the PTX issues
fp16 x fp16 -> fp32 `wgmma.mma_async`, uses no `cvt ... e2m1` (ptxas rejects it on
sm_90a), and ptxas reports no spills, no stack frame and no performance advisory (C7513:
wgmma serialized).  The kernels assert at trace time
that configs.sm90_smem_bytes / sm90_acc_registers match what they allocate.  Distinct
configs are compiled once (the kernels take shapes at run time).
"""

import dataclasses
import random
import re
from dataclasses import replace

import pytest

import configs
from kernel_checks import SM90_GROUP_SKINNY, SM90_MASKED_CASES, SM90_RULE_GAP_SHAPES, SM90_SKINNY, sm90_masked_picks
from nvfp4gemm import harness
from nvfp4gemm.sm90.dual_gemm import Sm90DualGemmKernel
from nvfp4gemm.sm90.grouped_gemm import Sm90GroupedGemmKernel

SMEM_LIMIT = 232448


def _cases():
    seen = {}
    for (arch, problem, shape), cfg in configs.CONFIG_MAP.items():
        if arch == "sm_90a":
            seen.setdefault((problem, cfg), shape)
    for shape in configs.DUAL_TESTS + configs.DUAL_BENCHMARKS:
        seen.setdefault(("dual", configs.select_config("dual", "sm_90a", shape)), shape)
    for shape in configs.GROUP_TESTS + configs.GROUP_BENCHMARKS:
        seen.setdefault(("group", configs.select_config("group", "sm_90a", shape)), shape)
    # small M_g (no leaderboard shape): the grouped swap_ab kernel with MMA N 32 and the grouped
    # mixed-input kernel's 64-row tiles (exp. 90), which the rules pick; the swap kernel with
    # MMA N 64, which no grouped rule picks since (its dual twin, dual_swap.py, still runs)
    for tiny_m in (((32, 4096, 7168),) * 8, ((64, 4096, 7168),) * 8):
        seen.setdefault(("group", configs.select_config("group", "sm_90a", tiny_m)), tiny_m)
    seen.setdefault(("group", replace(configs._sm90_swap_ab("group", 64), split_k=True)), ((64, 4096, 7168),) * 8)
    # grouped 128x256 stored-decode tiles (the rule's pick for N_g 2048; the 8-group leaderboard
    # cases now run the mixed-input kernel) and the grouped mixed-input split-K pairs
    for shape in (((384, 2048, 7168),) * 8, ((64, 4096, 7168), (128, 4096, 7168), (96, 4096, 7168))):
        seen.setdefault(("group", configs.select_config("group", "sm_90a", shape)), shape)
    # the grouped mixed-input kernel's 256-row A tiles (exp. 93: every M_g an even number of
    # 128-row blocks, N_g >= 2048)
    wide_g = ((256, 7168, 4096),) * 4
    seen.setdefault(("group", configs.select_config("group", "sm_90a", wide_g)), wide_g)
    # grouped swap with MMA N 16 (every M_g <= 16 now runs the skinny kernel)
    seen.setdefault(("group", replace(configs._sm90_swap_ab("group", 16), split_k=True)), ((8, 4096, 7168),) * 8)
    for shape in ((17, 4096, 7168, 1), (32, 4096, 7168, 1), (64, 4096, 7168, 1), (24, 14336, 4096, 1)):
        seen.setdefault(("dual", configs.select_config("dual", "sm_90a", shape)), shape)
    # the narrow mixed form with whole tiles (1536x512x7168 runs it stream-K), the stored-decode
    # split-K cluster pairs the rule still picks for short K (128x128, 128x64), which no
    # leaderboard shape runs since the narrow form took 1536x512x7168 and 512x768x7168 (exp. 85),
    # and the three-warpgroup form stream-K (the leaderboard's 256x3072x4096 runs it as pairs)
    for shape in ((300, 2048, 2048, 1), (1536, 512, 2048, 1), (256, 1536, 2048, 1), (384, 3072, 7168, 1)):
        seen.setdefault(("dual", configs.select_config("dual", "sm_90a", shape)), shape)
    # the (256, 128) mixed form whole, stream-K and as split-K pairs: the wide form (exp. 91)
    # took the leaderboard shapes that ran them
    for cfg in (configs.sm90_dual_mixed(), replace(configs.sm90_dual_mixed(), split_k=True),
                configs.sm90_dual_mixed_pairs()):
        seen.setdefault(("dual", cfg), (640, 4096, 7168, 1))
    # the dual swap kernel with MMA N 16 (M <= 16 now runs the skinny kernel)
    seen.setdefault(("dual", configs.sm90_dual_swap_ab((16, 4096, 7168, 1))), (16, 4096, 7168, 1))
    # the 2-buffer decode path (wgmmas drained at each sub-block barrier), which the rules
    # now pick only where 3 buffers leave fewer than 2 AB stages
    # (dual: the 128x128 kernel's own rule; the default rule gives this shape to the mixed-input
    # kernel, which has no decoded buffers)
    for problem, shape in (("dual", configs.DUAL_BENCHMARKS[1]), ("group", configs.GROUP_BENCHMARKS[2])):
        cfg = (configs.sm90_dual_tile_rule(shape) if problem == "dual"
               else configs.default_config(problem, "sm_90a", shape))  # (the rule: 128x128 stored-decode)
        seen.setdefault((problem, configs._fill_stages(replace(cfg, dec_stages=2), cap=4)), shape)
    # both grouped mixed-input forms in one launch (exp. 99)
    seen.setdefault(("group", configs.sm90_group_mixed_two_forms()), configs.GROUP_BENCHMARKS[1])
    # the grouped mixed-input kernel's three-warpgroup form (exp. 107: 192 B_g rows x 128 A rows)
    seen.setdefault(("group", configs.sm90_group_mixed(tile=(192, 128))), configs.GROUP_BENCHMARKS[2])
    # exp. 111: the dual wide form with 192 A rows, whole tiles and stream-K
    for cfg in (configs.sm90_dual_mixed_wide192(), replace(configs.sm90_dual_mixed_wide192(), split_k=True)):
        seen.setdefault(("dual", cfg), (192, 4096, 7168, 1))
    # exp. 108: 192-row A tiles (m64 x n192 wgmmas) alone and beside each other form
    seen.setdefault(("group", configs.sm90_group_mixed(tile=(128, 192))), ((176, 4096, 7168),) * 8)
    seen.setdefault(("group", configs.sm90_group_mixed_three_forms()), configs.GROUP_BENCHMARKS[1])
    seen.setdefault(("group", configs.sm90_group_mixed_forms(((128, 192), (128, 256)))),
                    ((176, 3072, 2048), (228, 3072, 2048)))
    seen.setdefault(("group", configs.sm90_group_mixed_forms(((256, 128), (128, 192)))),
                    ((85, 2048, 4096), (145, 2048, 4096)))
    # exp. 112: A widths between the powers of two, alone (two-rep and one-rep kinds, C staging in
    # 16- and 8-row passes) and seven forms in one launch
    for tile in ((256, 80), (256, 112), (128, 144), (128, 240)):
        seen.setdefault(("group", configs.sm90_group_mixed(tile=tile)), configs.GROUP_BENCHMARKS[2])
    seen.setdefault(("group", configs.sm90_group_mixed_forms(
        ((256, 64), (256, 80), (256, 96), (256, 128), (128, 160), (128, 176), (128, 256)))), configs.GROUP_BENCHMARKS[0])
    # exp. 136: the device-scheduled form's tiles that NVFP4_DYNAMIC_M picks
    for tile in ((256, 128), (256, 64), (128, 128)):
        seen.setdefault(("group", configs.sm90_group_mixed_dynamic(tile)), ((100, 4096, 7168),) * 8)
        # exp. 145: the same with the counts read from a tensor (MaskedGroupedGemm)
        seen.setdefault(("group", configs.sm90_group_mixed_dynamic(tile, masked=True)), ((100, 4096, 7168),) * 8)
        # exp. 147: the counts <= 16 left to the masked skinny kernel
        seen.setdefault(("group", configs.sm90_group_mixed_dynamic(tile, masked=True, masked_above=16)),
                        ((100, 4096, 7168),) * 8)
    # configs the rules reach that no shape above selected (session 58's sweep)
    for problem, shape in SM90_RULE_GAP_SHAPES:
        seen.setdefault((problem, configs.select_config(problem, "sm_90a", shape, dynamic_m=False)), shape)
    return [(p, c, s) for (p, c), s in seen.items()]


CASES = _cases()


def _rule_key(cfg):
    """A config as far as CI's compile coverage goes: a multi-form grouped config by everything
    but its form tiles (each form tile is checked on its own), any other config whole."""
    return dataclasses.replace(cfg, forms=(), mma_tile_mn=(0, 0)) if len(cfg.forms) > 1 else cfg


def _form_tiles(cfg):
    """The A16-prepass grouped tiles a config compiles (its forms, or its one tile)."""
    if cfg.forms:
        return set(cfg.forms)
    return {tuple(cfg.mma_tile_mn)} if cfg.problem == "group" and cfg.a_prepass else set()


def _rule_sweep(seed: int = 1, count: int = 3000):
    """(problem, config, shape) the rules pick for `count` random legal shapes of each problem,
    drawn as tools/fuzz_gpu.py draws them for the GPU (grouped: 1-20 groups, ragged M_g of up to 16
    / 64 / 256 / 600 rows, N_g % 64, K_g % 256, with and without NVFP4_DYNAMIC_M; dual: M from 1 to
    8192 in four bands, N % 64, K % 256, L 1-3)."""
    from tools.fuzz_gpu import dual_shape, group_shape

    rnd = random.Random(seed)
    for _ in range(count):
        shape = group_shape(rnd)
        if not configs.check_shape("group", shape):
            for dyn in (False, True):
                yield "group", configs.select_config("group", "sm_90a", shape, dynamic_m=dyn), shape
        shape = dual_shape(rnd)
        if not configs.check_shape("dual", shape, "sm_90a"):
            yield "dual", configs.select_config("dual", "sm_90a", shape), shape


def _masked_sweep(seed: int = 1, count: int = 3000):
    """(capacities as a grouped shape, expected_m, small) for MaskedGroupedGemm's picks: 1-256
    groups, capacities 1-1024 (mostly equal), expected counts or none, `small` None / on / off."""
    rnd = random.Random(seed)
    for _ in range(count):
        g = rnd.choice([1, 2, 4, 8, 16, 20, 40, 64, 128, 256])
        n = rnd.choice(range(128, 14337, rnd.choice([64, 128, 256])))
        k = rnd.choice(range(256, 8193, 256))
        cap = rnd.choice([1, 8, 16, 32, 64, 128, 256, 512, 1024])
        shape = tuple((cap if rnd.random() < .7 else rnd.randint(1, cap), n, k) for _ in range(g))
        if configs.check_shape("group", shape):
            continue
        expected_m = rnd.choice([None, tuple(rnd.randint(0, m) for m, _, _ in shape)])
        for small in (None, True, False):
            yield shape, expected_m, small


def _accepts(problem, cfg, shape):
    """The pick's kernel accepts the shape the shape rules accepted (else the dispatcher would
    refuse a legal input by the kernel's name)."""
    cls = harness.kernel_module(problem, "sm_90a", cfg)[1]
    cls.can_implement(cfg, *shape) if problem == "dual" else cls.can_implement(cfg, shape)


def test_sweep_reaches_only_compiled_configs():
    """#5 asks CI to compile every sm_90a config.  The rules pick among far more multi-form
    grouped configs than CI can compile (a form set per shape), so CI compiles each config the
    rules reach up to its form set, and every form tile: over 3000 random shapes of each problem
    (and 3000 MaskedGroupedGemm buffer sets) every pick must be one of CASES / SKINNY_CASES so
    counted, and must accept the shape that picked it.  A rule change that reaches an uncompiled
    config fails here with a shape that picks it: add that shape to
    kernel_checks.SM90_RULE_GAP_SHAPES (or the buffer set to SM90_MASKED_CASES), which CI
    compiles and the GPU tests run.  Session 58 found 19 such
    configs (11 of the rules, 8 of MaskedGroupedGemm; one with the (128, 224) form tile, in no
    compiled config before)."""
    compiled = {(p, _rule_key(c)) for p, c, _ in CASES} | {(p, _rule_key(c)) for p, c in SKINNY_CASES}
    tiles = set().union(*(_form_tiles(c) for _, c, _ in CASES))
    missing = {}
    for problem, cfg, shape in _rule_sweep():
        _accepts(problem, cfg, shape)
        if (problem, _rule_key(cfg)) not in compiled:
            missing.setdefault(f"{problem} {cfg.short()}", shape)
        for t in sorted(_form_tiles(cfg) - tiles):
            missing.setdefault(f"{problem} form {t}", shape)
    for shape, expected_m, small in _masked_sweep():
        for cfg in configs.sm90_group_masked_picks(shape, expected_m, small):
            _accepts("group", cfg, shape)
            if ("group", _rule_key(cfg)) not in compiled:
                missing.setdefault(f"masked {cfg.short()}", (shape, expected_m, small))
    assert not missing, f"reached but not compiled in CI (config: a shape that picks it): {missing}"


@pytest.mark.parametrize("problem,cfg,shape", CASES, ids=[f"{p}-{c.short()}" for p, c, _ in CASES])
def test_compiles_f16_wgmma_no_spills(problem, cfg, shape, tmp_path):
    _mod, cls = harness.kernel_module(problem, "sm_90a", cfg)
    cls.can_implement(cfg, *shape) if problem == "dual" else cls.can_implement(cfg, shape)
    ck = harness.compile_kernel(problem, "sm_90a", cfg, shape, dump_dir=str(tmp_path))
    assert ck.ptx_path, "no PTX dumped"
    ptx = harness.read_ptx(ck.ptx_path)
    mmas = set(re.findall(r"wgmma\.mma_async\.sync\.aligned\.m64n(\d+)k16\.(\w+)\.(\w+)\.(\w+)", ptx))
    assert mmas, "no wgmma.mma_async in the PTX"
    parts = configs.form_parts(cfg) if cfg.forms else (cfg,)
    assert {int(n) for n, *_ in mmas} == {c.mma_tile_mn[1] * c.gemms for c in parts}, mmas
    for n, acc, a, b in mmas:
        assert (acc, a, b) == ("f32", "f16", "f16"), mmas
        # dual: B1 and B2 share one m64 x (2 * tile_n) wgmma (fused N); dual swap_ab
        # stacks them on the M side instead (cfg.gemms == 1); forms: each form's width
    assert "e2m1" not in ptx, "e2m1 conversion instruction in sm_90a PTX"
    if cfg.rs_a:  # A from registers: wgmma's A operand is a {4 x b32} register list
        assert re.search(r"wgmma\.mma_async[^;]*\}, \{%r", ptx), "rs_a but no register-A wgmma"
    if cfg.a_prepass:  # mixed-input kernels: nothing decoded is stored; A16 comes from a pre-pass
        assert re.findall(r"griddepcontrol\.\w+", ptx) == ["griddepcontrol.launch_dependents"] + [
            "griddepcontrol.wait"] * len(parts), "pre-pass / PDL handshake (each form's producer waits)"
        # the pre-pass stages its A16 stores through shared memory (coalescing); the main
        # kernel stores no decoded tile: its only shared stores are the epilogue's 32-bit C
        # pairs (a decoded tile is written 16 bytes at a time and needs a proxy fence before
        # the wgmma reads it)
        main = [e for e in re.split(r"(?=\.entry )", ptx)[1:] if "prepass_kernel" not in e.split("(")[0]]
        assert len(main) == 1, "expected one main kernel beside the pre-pass"
        pairs = cfg.cluster_mn == (2, 1)
        # split-K pairs: the fp32 partial exchange after the mainloop, 16-byte stores into the
        # peer's shared memory, behind one proxy fence (the wgmma reads of the ring first)
        allowed = {"st.shared.b32"} | ({"st.shared::cluster.v4.f32"} if pairs else set())
        stores = re.findall(r"st\.shared[\w.:]*", main[0])
        if cfg.device_schedule:  # one thread's 7-word device plan (exp. 137): a few u32 stores
            plan = [x for x in stores if x in ("st.shared.u32", "st.shared.v2.u32", "st.shared.v4.u32")]
            assert len(plan) <= 3, plan
            stores = [x for x in stores if x not in plan]
        assert set(stores) <= allowed, "the mixed-input kernel stores no decoded tile"
        assert main[0].count("fence.proxy.async") == (1 if pairs else 0), \
            "the mixed-input kernel stores no decoded tile"
        if pairs:
            assert main[0].count("barrier.cluster.arrive") == 2 and "mapa.shared::cluster" in main[0]
    else:
        assert "fence.proxy.async.shared::cta" in ptx, "decoded tiles need a proxy fence before wgmma"
    assert ck.spill_bytes == 0, f"{ck.spill_bytes} bytes of spills"
    assert ck.stack_bytes == 0, f"{ck.stack_bytes} bytes of stack frame"
    # C7513: ptxas serializes every wgmma (waits after each) when non-wgmma instructions
    # define wgmma inputs inside a pipeline stage, e.g. a branch around a wgmma: measured
    # 15-25% slower on an H200 (notes/sm90.md experiment 30)
    assert not ck.perf_warnings, f"ptxas performance advisories {ck.perf_warnings}"
    assert ck.smem_bytes <= SMEM_LIMIT


# the skinny (mma.sync) kernels: dual M <= 16 and grouped M_g <= 16 (tests/test_gpu_kernels.py
# runs the same sets)
SKINNY_CASES = [("dual", c) for c in SM90_SKINNY] + [("group", c) for c in SM90_GROUP_SKINNY]
# MaskedGroupedGemm's masked skinny configs (exps. 146, 153, 168 and session 58's sweep; its mixed
# forms are the device-scheduled ones above)
SKINNY_CASES += [("group", c) for c in sorted({c for case in SM90_MASKED_CASES for c in sm90_masked_picks(case)
                                               if c.skinny}, key=lambda c: c.short())]


@pytest.mark.parametrize("problem,cfg", SKINNY_CASES, ids=[f"{p}-{c.short()}" for p, c in SKINNY_CASES])
def test_skinny_compiles_mma_sync_no_spills(problem, cfg, tmp_path):
    assert not configs.check_config(cfg), configs.check_config(cfg)
    cls = harness.kernel_module(problem, "sm_90a", cfg)[1]
    if problem == "dual":
        shape = (cfg.mma_tile_mn[1], 1024, 1280, 2)
        assert cls.__name__ == "Sm90DualSkinnyKernel"
        cls.can_implement(cfg, *shape)
    else:
        shape = ((cfg.mma_tile_mn[1], 1024, 1280), (1, 512, 256))
        assert cls.__name__ == ("Sm90GroupedSkinnyMaskedKernel" if cfg.masked else "Sm90GroupedSkinnyKernel")
        cls.can_implement(cfg, shape)
    ck = harness.compile_kernel(problem, "sm_90a", cfg, shape, dump_dir=str(tmp_path))
    ptx = harness.read_ptx(ck.ptx_path)
    mmas = set(re.findall(r"mma\.sync\.aligned\.(m\d+n\d+k\d+)\.row\.col\.(\w+)\.(\w+)\.(\w+)\.(\w+)", ptx))
    assert mmas == {("m16n8k16", "f32", "f16", "f16", "f32")}, mmas
    assert "wgmma" not in ptx and "e2m1" not in ptx
    # exp. 165: K split over a cluster -- partial sums into rank 0 by DSMEM between cluster barriers
    assert ("st.shared::cluster" in ptx and "barrier.cluster.wait" in ptx) == (cfg.k_split > 1)
    # B straight from global memory to the warp's ring, no TMA
    assert "cp.async.cg.shared.global" in ptx and "cp.async.bulk" not in ptx
    if cfg.pdl:  # exp. 170: what runs before griddepcontrol.wait, and where the next kernel is let in
        body = ptx[ptx.index(".entry"):]
        pre = body[:body.index("griddepcontrol.wait")]
        copies = re.findall(r"cp\.async\.(c[ag])\S* \[[^\]]*\], \[[^\]]*\], (\d+)", pre)
        n_b = 2 * 2 * (cfg.mma_tile_mn[0] // 16) * (cfg.ab_stages - 1)  # (B1, B2) x rows g, g + 8 x stages
        # only B: its data (.cg, 16 bytes) and scale words (4 bytes) of the prologue's stages,
        # not committed; no A row, no store
        assert sorted(copies) == sorted([("cg", "16")] * n_b + [("ca", "4")] * n_b), copies
        assert "commit_group" not in pre and "st.global" not in pre
        release = body.index("griddepcontrol.launch_dependents")
        assert body.count("griddepcontrol.launch_dependents") == 1
        assert body.rindex("mma.sync") < release < body.index("st.global")
        # "sums": after the warps' partial sums are stored (and the barrier after them); "loop": before
        partials = max(body.rfind("st.shared.f32"), body.rfind("st.shared::cluster"))
        assert (partials < release) == (cfg.pdl == "sums"), (cfg.pdl, partials, release)
    else:
        assert "griddepcontrol" not in ptx
    assert ck.spill_bytes == 0 and ck.stack_bytes == 0, (ck.spill_bytes, ck.stack_bytes)
    assert ck.smem_bytes == configs.smem_bytes(cfg) <= SMEM_LIMIT
    if problem == "group":  # the masked form's kernel takes the counts tensor: one more parameter
        entry = re.search(r"\.entry\s+\S+\(([^)]*)\)", ptx)
        assert entry and entry.group(1).count(".param") == (3 if cfg.masked else 2), entry and entry.group(1)
    if problem == "dual" and cfg in (configs.sm90_dual_skinny((1, 4096, 7168, 1)),
                                     configs.sm90_dual_skinny((16, 4096, 7168, 1)),
                                     configs.sm90_dual_skinny((16, 4096, 2048, 1)),
                                     configs.sm90_dual_skinny((16, 14336, 7168, 1)),
                                     configs.sm90_dual_skinny((16, 1024, 4096, 1))):
        # the rule's configs: <= 128 registers, so 4 CTAs of 4 warps (8 of 2) fit an SM's registers
        assert ck.registers <= 128, ck.registers
    if problem == "group" and cfg.k_warps in (1, 2, 4):  # the rule's warp counts: <= 128 registers
        # (64-row CTAs, exp. 155: <= 168, so 12 one-warp CTAs fit an SM's registers)
        assert ck.registers <= (168 if cfg.mma_tile_mn[0] == 64 else 128), ck.registers


def test_group_skinny_rule_and_can_implement():
    """Every M_g <= 16: the skinny grouped kernel, 32 rows of B_g per CTA when that makes at
    least 2 CTAs per SM (sum N_g / 32 >= 264, exp. 168f), else 16, and 64 for 16 A rows at K_g <=
    2048 with >= 3 such CTAs per SM (exp. 155); A rows 8 / 16 by the largest M_g; one CTA per tile
    of rows (the grouped tile offsets); the kernel names what it cannot do."""
    from nvfp4gemm.sm90.grouped_skinny import Sm90GroupedSkinnyKernel

    for shape, tile in ((((8, 4096, 7168),) * 8, (32, 8)), (((1, 256, 7168),), (16, 8)),
                        (((3, 1024, 7168), (16, 1024, 7168)), (16, 16)),
                        (((1, 2048, 2048), (16, 4096, 512)), (16, 16)),
                        # exp. 155: 64 rows from 3 x 132 = 396 such CTAs (K_g <= 2048, 16 A rows)
                        (((16, 2048, 768),) * 13, (64, 16)), (((8, 2048, 768),) * 13, (32, 8)),
                        (((16, 2048, 2048),) * 8, (32, 16)), (((16, 4096, 2048),) * 6 + ((9, 768, 1024),), (64, 16)),
                        (((16, 4096, 2048),) * 6 + ((9, 704, 1024),), (32, 16)),
                        (((16, 2048, 768),) * 12 + ((16, 2048, 2304),), (32, 16))):
        cfg = configs.select_config("group", "sm_90a", shape)
        assert cfg.skinny and cfg.mma_tile_mn == tile and configs.fits(cfg, shape), (shape, cfg.short())
        assert harness.kernel_module("group", "sm_90a", cfg)[1] is Sm90GroupedSkinnyKernel
        Sm90GroupedSkinnyKernel.can_implement(cfg, shape)
        assert configs.grouped_tile_offsets(cfg, shape)[-1] == sum(n // tile[0] for _, n, _ in shape)
    assert not configs.select_config("group", "sm_90a", ((16, 4096, 7168), (17, 4096, 7168))).skinny
    # warps splitting K in 32-row CTAs: 1 up to K_g 2048 (exp. 154) from 8 CTAs per SM (exp. 168:
    # 9 x 4096 / 32 = 1152 >= 1056), else 2 (exp. 151)
    for k, kw in ((768, 1), (2048, 1), (2304, 2), (7168, 2)):
        assert configs.sm90_group_skinny(((8, 4096, k),) * 9).k_warps == kw, k
    assert configs.sm90_group_skinny(((8, 4096, 2048),) + ((8, 4096, 7168),) * 2).k_warps == 2  # (the largest K_g)
    # exp. 168: below 8 32-row CTAs per SM (1024 < 1056; 4 at short K), 2 warps and 2 stages; 64-row
    # CTAs keep 1 warp
    for shape, tile, kw, ab in ((((8, 4096, 2048),) * 8, (32, 8), 2, 2), (((16, 2048, 2048),) * 5, (32, 16), 2, 2),
                                (((1, 2048, 1024),) * 5, (32, 8), 2, 2), (((16, 4096, 1024),) * 8, (64, 16), 1, 2),
                                (((1, 4224, 2048),) * 8, (32, 8), 1, 2),
                                # (every K_g <= 1024: from 4 CTAs per SM, 528)
                                (((4, 2048, 1024),) * 8, (32, 8), 2, 2), (((4, 2048, 1024),) * 9, (32, 8), 1, 2),
                                (((4, 2048, 1024),) * 8 + ((4, 2048, 1536),), (32, 8), 2, 2)):
        cfg = configs.sm90_group_skinny(shape)
        assert (cfg.mma_tile_mn, cfg.k_warps, cfg.ab_stages, cfg.k_split) == (tile, kw, ab, 1), (shape, cfg.short())
    # exp. 168f: 1-2 32-row CTAs per SM (132 <= sum N_g / 32 < 264) -> 16-row CTAs, 4 warps, 2 stages
    for shape, tile in ((((1, 2048, 2048), (16, 4096, 512)), (16, 16)), (((1, 4224, 7168),), (16, 8)),
                        (((16, 2048, 768),) * 4, (16, 16)), (((16, 8432, 2048),), (16, 16))):
        cfg = configs.sm90_group_skinny(shape)
        assert (cfg.mma_tile_mn, cfg.k_warps, cfg.ab_stages, cfg.k_split) == (tile, 4, 2, 1), (shape, cfg.short())
    assert configs.sm90_group_skinny(((16, 8448, 2048),)).mma_tile_mn == (32, 16)  # (264 32-row CTAs)
    assert configs.sm90_group_skinny(((16, 4208, 7168),)).ab_stages == 3  # (131: the 16-row rule before)
    # exp. 168: 2-CTA clusters splitting K where 2 x sum N_g / 16 <= 132 and every K_g >= 5120
    for shape, ks in ((((16, 512, 7168),), 2), (((1, 1024, 5120), (3, 32, 8192)), 2), (((1, 1072, 5120),), 1),
                      (((16, 512, 7168), (16, 256, 4096)), 1), (((16, 512, 4864),), 1), (((1, 256, 16384),) * 4, 2)):
        cfg = configs.sm90_group_skinny(shape)
        assert (cfg.mma_tile_mn[0], cfg.k_warps, cfg.ab_stages, cfg.k_split) == (16, 4, 3, ks), (shape, cfg.short())
    cfg = configs.sm90_group_skinny(((8, 4096, 7168),) * 8)
    with pytest.raises(ValueError, match="group 1: M=9 exceeds the skinny tile's 8 A rows"):
        Sm90GroupedSkinnyKernel.can_implement(cfg, ((8, 4096, 7168), (9, 4096, 7168)))
    with pytest.raises(ValueError, match="group 0: N=4080 must be a multiple of the skinny tile's 32 rows"):
        Sm90GroupedSkinnyKernel.can_implement(cfg, ((8, 4080, 7168),))
    with pytest.raises(ValueError, match="group 0: K=320"):
        Sm90GroupedSkinnyKernel.can_implement(cfg, ((8, 4096, 320),))
    with pytest.raises(ValueError, match="17 groups"):
        Sm90GroupedSkinnyKernel.can_implement(cfg, ((8, 4096, 7168),) * 17)
    with pytest.raises(ValueError, match="grouped config"):
        Sm90GroupedSkinnyKernel(configs.sm90_dual_skinny((8, 4096, 7168, 1)))


def test_dual_skinny_rule():
    """M <= 16: 16 rows of B1 / B2 per CTA; 4 warps and 3 / 2 stages for 8 / 16 A rows, except,
    for 16 A rows, 2 warps and 2 stages at 529-1056 CTAs (exp. 159: N / 16 x L) and 2 warps
    and 3 stages at K <= 4096 otherwise (exp. 156), and 4 warps, 3 stages in one wave of at most
    one CTA per SM (N / 16 x L <= 132) from K 2048 (exp. 164), split over 2-CTA clusters where
    N / 16 x L <= 66 from K 5120 (exp. 165)."""
    for shape, kw, ab in (((1, 4096, 2048, 1), 4, 3), ((8, 4096, 7168, 1), 4, 3), ((16, 4096, 7168, 1), 4, 2),
                          ((16, 4096, 4096, 1), 2, 3), ((9, 14336, 1024, 2), 2, 3), ((16, 4096, 4352, 1), 4, 2),
                          ((16, 14336, 4096, 1), 2, 2), ((16, 8448, 7168, 1), 4, 2), ((16, 8464, 7168, 1), 2, 2),
                          ((16, 16896, 6144, 1), 2, 2), ((16, 16912, 6144, 1), 4, 2), ((16, 8192, 4096, 1), 2, 3),
                          ((16, 7168, 7168, 2), 2, 2), ((8, 14336, 4096, 1), 4, 3),
                          # exp. 164: <= 132 CTAs at K >= 2048 (8 A rows keep the rule)
                          ((16, 1024, 4096, 1), 4, 3), ((12, 2112, 2048, 1), 4, 3), ((16, 1024, 4096, 2), 4, 3),
                          ((16, 2128, 4096, 1), 2, 3), ((16, 2048, 4096, 2), 2, 3), ((16, 2112, 1536, 1), 2, 3),
                          ((16, 2048, 7168, 1), 4, 3), ((8, 1024, 4096, 1), 4, 3)):
        cfg = configs.select_config("dual", "sm_90a", shape)
        assert cfg.skinny and cfg.mma_tile_mn == (16, 8 if shape[0] <= 8 else 16), (shape, cfg.short())
        assert (cfg.k_warps, cfg.ab_stages, cfg.k_split) == (kw, ab, 1), (shape, cfg.short())
    # exp. 165: 2-CTA clusters splitting K where 2 x N / 16 x L <= 132 and K >= 5120
    for shape, ks in (((16, 512, 7168, 1), 2), ((1, 1056, 5120, 1), 2), ((8, 1072, 5120, 1), 1),
                      ((16, 512, 4864, 1), 1), ((3, 256, 16384, 4), 2), ((16, 256, 7168, 5), 1)):
        cfg = configs.select_config("dual", "sm_90a", shape)
        assert cfg.skinny and (cfg.k_warps, cfg.ab_stages, cfg.k_split) == (4, 3, ks), (shape, cfg.short())


def test_dual_skinny_static_b_rule(monkeypatch):
    """Exp. 170: NVFP4_STATIC_B (configs.STATIC_B) gives the skinny dual rule's config `pdl`:
    "loop" (the next kernel let in after the main loop) where it launches at most
    SKINNY_PDL_LOOP_MAX_CTAS (66) CTAs or splits K over clusters, "sums" (after the partial sums)
    above SKINNY_PDL_SUMS_MIN_CTAS (132), none in between; unset, nothing changes; pdl is refused
    outside the skinny dual kernel."""
    assert (configs.SKINNY_PDL_LOOP_MAX_CTAS, configs.SKINNY_PDL_SUMS_MIN_CTAS) == (66, 132)
    for shape, pdl in (((16, 1024, 4096, 1), "loop"), ((8, 1056, 2048, 1), "loop"), ((16, 1072, 4096, 1), ""),
                       ((16, 2048, 4096, 1), ""), ((16, 2112, 7168, 1), ""), ((16, 2128, 4096, 1), "sums"),
                       ((16, 528, 4096, 2), "loop"), ((16, 544, 4096, 2), ""), ((16, 1072, 4096, 2), "sums"),
                       ((1, 1024, 14336, 1), "loop"), ((16, 640, 8192, 1), "loop"), ((16, 14336, 4096, 1), "sums")):
        base = configs.sm90_dual_skinny(shape, static_b=False)
        assert base.pdl == ""
        cfg = configs.sm90_dual_skinny(shape, static_b=True)
        assert cfg == replace(base, pdl=pdl), (shape, cfg.short())
        assert not configs.check_config(cfg), configs.check_config(cfg)
        assert not configs.select_config("dual", "sm_90a", shape).pdl  # (STATIC_B off: the default)
        monkeypatch.setattr(configs, "STATIC_B", True)
        assert configs.select_config("dual", "sm_90a", shape) == cfg
        monkeypatch.setattr(configs, "STATIC_B", False)
    monkeypatch.setattr(configs, "STATIC_B", True)
    assert not configs.select_config("dual", "sm_90a", (256, 1024, 4096, 1)).pdl  # (not skinny)
    assert not any(c.pdl for c in (configs.select_config("group", "sm_90a", ((8, 1024, 4096),) * 2),
                                   configs.select_config("dual", "sm_100a", (256, 1024, 4096, 1))))
    for cfg in (replace(configs.sm90_group_skinny(((8, 1024, 4096),)), pdl="loop"),
                replace(configs.select_config("dual", "sm_90a", (256, 1024, 4096, 1)), pdl="sums"),
                replace(configs.select_config("dual", "sm_100a", (256, 1024, 4096, 1)), pdl="loop")):
        assert any("pdl" in e for e in configs.check_config(cfg)), cfg.short()
    assert any("must be one of" in e for e in configs.check_config(
        replace(configs.sm90_dual_skinny((16, 1024, 4096, 1), static_b=False), pdl="entry")))


def test_skinny_can_implement_names_constraint():
    from nvfp4gemm.sm90.dual_skinny import Sm90DualSkinnyKernel

    cfg = configs.sm90_dual_skinny((8, 4096, 7168, 1))
    Sm90DualSkinnyKernel.can_implement(cfg, 8, 4096, 7168, 3)
    with pytest.raises(ValueError, match="M=9 exceeds the skinny tile's 8 A rows"):
        Sm90DualSkinnyKernel.can_implement(cfg, 9, 4096, 7168, 1)
    with pytest.raises(ValueError, match="K=320"):
        Sm90DualSkinnyKernel.can_implement(cfg, 8, 4096, 320, 1)
    big = configs.KernelConfig("dual", "sm_90a", (32, 16), skinny=True, k_warps=4)
    with pytest.raises(ValueError, match="N=4080"):
        Sm90DualSkinnyKernel.can_implement(big, 8, 4080, 7168, 1)
    # (the wide table with a K split: more than 16 groups of N_g % 64 == 0 make more than the 66
    # 16-row CTAs the split is for, so no rule picks it and it has never run)
    wide = configs.KernelConfig("group", "sm_90a", (16, 16), skinny=True, k_warps=4, ab_stages=3, k_split=2,
                                masked=True, table_groups=configs.WIDE_TABLE_GROUPS)
    assert "wide table" in " ".join(configs.check_config(wide))
    assert not configs.check_config(replace(wide, table_groups=configs.GROUPS_PER_LAUNCH))
    bad = configs.KernelConfig("dual", "sm_90a", (64, 16), skinny=True, k_warps=17, ab_stages=1)
    errs = " ".join(configs.check_config(bad))
    assert "B rows 16 or 32" in errs and "k_warps 17" in errs and "ab_stages 1" in errs
    # (64 B rows: grouped only, exp. 155)
    assert not configs.check_config(configs.KernelConfig("group", "sm_90a", (64, 16), skinny=True, k_warps=1))
    assert "B rows" in " ".join(configs.check_config(configs.KernelConfig("group", "sm_90a", (128, 16), skinny=True)))
    assert "skinny" in " ".join(configs.check_config(configs.KernelConfig(
        "dual", "sm_100a", (128, 128), skinny=True)))


@pytest.mark.parametrize("shape,needle", [
    ((0, 512, 256, 1), "M=0"),
    ((256, 96, 256, 1), "N=96"),
    ((256, 512, 320, 1), "K=320"),
])
def test_dual_can_implement_names_constraint(shape, needle):
    cfg = configs.select_config("dual", "sm_90a", (256, 512, 256, 1))
    with pytest.raises(ValueError, match=needle):
        Sm90DualGemmKernel.can_implement(cfg, *shape)


@pytest.mark.parametrize("shape", [(1, 512, 256, 1), (200, 4096, 7168, 1), (300, 768, 512, 2)], ids=str)
def test_dual_ragged_m_is_accepted(shape):
    """sm_90a dual takes any M: the rule's config fits, the tile count rounds up, and
    can_implement passes (the sm_100a kernel keeps M % 128, test_sm100_dual_compile)."""
    cfg = configs.select_config("dual", "sm_90a", shape)
    assert configs.fits(cfg, shape)
    harness.kernel_module("dual", "sm_90a", cfg)[1].can_implement(cfg, *shape)
    m, n, _, l = shape
    if cfg.skinny:  # M = 1: the mma.sync kernel, one CTA per 16 rows of B1 / B2 and batch
        assert configs.dual_tiles(cfg, shape) == n // cfg.mma_tile_mn[0] * l
    elif cfg.swap_ab:  # columns of C per tile: 128 (dual swap), tile M / 2 (mixed-input forms)
        cols = cfg.mma_tile_mn[0] // 2 if cfg.a_prepass else 128
        assert configs.dual_tiles(cfg, shape) == -(-m // cfg.mma_tile_mn[1]) * -(-n // cols) * l
    else:
        assert configs.dual_tiles(cfg, shape) == -(-m // 128) * (n // cfg.mma_tile_mn[1]) * l


def test_dual_small_m_rule_and_swap_constraints():
    """The rule picks the dual swap_ab kernel for M <= 32 (MMA N 16 / 32), and for M <= 64
    (MMA N 64) when its work units run >= 4 k-blocks (notes/sm90.md experiments 40-41); the
    grouped rule narrows its swap tile the same way; the kernel names what it cannot do."""
    for ms, tn in (([17] * 8, 32), ([32] * 8, 32), ([1, 40, 17], 64)):  # (every M_g <= 16: skinny)
        g = configs.select_config("group", "sm_90a", tuple((m, 4096, 7168) for m in ms))
        # (M_g up to 64: the grouped mixed-input kernel's 64-row tiles, exp. 90)
        assert g.swap_ab and g.mma_tile_mn == (256, tn) and g.a_prepass == (tn == 64), g.short()
    from nvfp4gemm.sm90.dual_swap import Sm90DualSwapKernel

    from nvfp4gemm.sm90.dual_skinny import Sm90DualSkinnyKernel

    from nvfp4gemm.sm90.dual_mixed import Sm90DualMixedKernel

    for shape, swap in (((17, 4096, 7168, 1), 32), ((24, 14336, 4096, 1), 32), ((64, 7168, 2048, 1), 64),
                        ((32, 2048, 2048, 1), 32), ((48, 3072, 4096, 1), False),
                        ((17, 4096, 7168, 2), False), ((17, 4032, 7168, 1), False)):
        cfg = configs.select_config("dual", "sm_90a", shape)
        assert cfg.swap_ab == bool(swap), (shape, cfg.short())
        assert not swap or cfg.mma_tile_mn == (256, swap), (shape, cfg.short())
        assert harness.kernel_module("dual", "sm_90a", cfg)[1] is (Sm90DualSwapKernel if swap else Sm90DualGemmKernel)
    # M = 65, just past the swap kernel: the mixed kernel's narrow form (64 tiles, exp. 85)
    cfg = configs.select_config("dual", "sm_90a", (65, 4096, 7168, 1))
    assert cfg.a_prepass and cfg.mma_tile_mn == (128, 128), cfg.short()
    assert harness.kernel_module("dual", "sm_90a", cfg)[1] is Sm90DualMixedKernel
    # M <= 16: the skinny kernel, whatever N (% 16), K and L
    for shape, tn in (((1, 4096, 7168, 1), 8), ((8, 14336, 4096, 3), 8), ((9, 4032, 256, 1), 16),
                      ((16, 512, 7168, 2), 16)):
        cfg = configs.select_config("dual", "sm_90a", shape)
        assert cfg.skinny and cfg.mma_tile_mn == (16, tn) and configs.fits(cfg, shape), (shape, cfg.short())
        assert harness.kernel_module("dual", "sm_90a", cfg)[1] is Sm90DualSkinnyKernel
    assert configs.sm90_acc_registers(configs.sm90_dual_swap_ab((16, 4096, 7168, 1))) == 16  # MMA N 16
    cfg = configs.sm90_dual_swap_ab((16, 4096, 7168, 1), 64)
    assert cfg.gemms == 1 and configs.sm90_acc_registers(cfg) == 64
    with pytest.raises(ValueError, match="Sm90DualSwapKernel"):
        Sm90DualGemmKernel.can_implement(cfg, 16, 4096, 7168, 1)
    with pytest.raises(ValueError, match="L=2"):
        Sm90DualSwapKernel.can_implement(cfg, 16, 4096, 7168, 2)
    with pytest.raises(ValueError, match="N=4032 must be a multiple of the tile M .swap_ab. 128"):
        Sm90DualSwapKernel.can_implement(cfg, 16, 4032, 7168, 1)


def test_grouped_can_implement_names_constraint():
    cfg = configs.select_config("group", "sm_90a", ((128, 128, 256),))
    with pytest.raises(ValueError, match="N=96"):
        Sm90GroupedGemmKernel.can_implement(cfg, ((64, 96, 256),))
    with pytest.raises(ValueError, match="17 groups"):
        Sm90GroupedGemmKernel.can_implement(cfg, ((64, 128, 256),) * 17)


def test_grouped_rule_ranks_tiles_by_cost():
    """The sm_90a grouped rule ranks 128x256, 128x128 and swap_ab 256x64 by the cost model:
    on the benchmark cases it picks what measured fastest (H200, 2026-11-21); tiny M favours
    swap_ab (ragged M pads to 64, not 128).  swap_ab needs N % 256 == 0; the dual kernel
    rejects it."""
    from dataclasses import replace

    # (the mixed-input rules and CONFIG_MAP put three of them on the mixed-input kernels:
    # test_grouped_mixed_rule)
    want = [(128, 256), (128, 256), (128, 128), (128, 128)]
    for shape, tile in zip(configs.GROUP_BENCHMARKS, want):
        cfg = configs.sm90_group_ranked(shape)
        assert cfg.mma_tile_mn == tile and not cfg.swap_ab, (shape, cfg)
    cfg = configs.select_config("group", "sm_90a", ((20, 4096, 7168),) * 8)
    assert cfg.swap_ab and not cfg.a_prepass and cfg.mma_tile_mn == (256, 32), cfg
    Sm90GroupedGemmKernel.can_implement(cfg, ((1, 512, 256), (129, 256, 512)))
    with pytest.raises(ValueError, match="N=384"):
        Sm90GroupedGemmKernel.can_implement(cfg, ((64, 384, 256),))
    dual = configs.select_config("dual", "sm_90a", configs.DUAL_BENCHMARKS[1])
    with pytest.raises(ValueError, match="swap_ab"):
        Sm90DualGemmKernel(replace(dual, swap_ab=True))


def test_grouped_mixed_rule():
    """The grouped mixed-input kernel: as split-K pairs by rule where the stored-decode ranking
    picks a non-swap tile, every N_g >= 4096 and K_g > 4096, and 2 x its 256 x 128 tiles fill
    [0.7, 1] of the SMs (configs._sm90_group_mixed_rule, H100, exp. 79); stream-K by the rules
    of exps. 99-100 and 102 (tests/test_scheduler.py) and where CONFIG_MAP pins it (g2 N3072
    K4096, now in exp. 112's A widths); g8 N4096 K7168 and g8 N7168 K2048 take exp. 112's three A
    widths (the former since exp. 113's split search).  can_implement names N % 256 and, for pairs, K >= 512."""
    from nvfp4gemm.sm90.grouped_mixed import Sm90GroupedMixedKernel

    pairs = configs.sm90_group_mixed(pairs=True)
    mixed = configs.sm90_group_mixed()
    for shape in [((64, 4096, 7168), (128, 4096, 7168), (96, 4096, 7168), (80, 4096, 7168)),
                  ((256, 4096, 7168),) * 2]:
        assert configs.select_config("group", "sm_90a", shape) == pairs, shape
    # (exp. 102 unpinned g8 N4096 K7168; exp. 113: three A widths, 0.917 of the two forms)
    assert configs.select_config("group", "sm_90a", configs.GROUP_BENCHMARKS[0]) == \
        configs.sm90_group_mixed_forms(((256, 80), (256, 128), (128, 176)))
    assert configs.select_config("group", "sm_90a", configs.GROUP_BENCHMARKS[1]) == \
        configs.sm90_group_mixed_forms(((256, 80), (128, 176), (128, 208)))  # exp. 112
    assert configs.select_config("group", "sm_90a", ((128, 4096, 7168),) * 8) == mixed  # exp. 100
    assert configs.select_config("group", "sm_90a", configs.GROUP_BENCHMARKS[2]) == \
        configs.sm90_group_mixed_forms(((128, 160), (128, 192)))
    # every M_g <= 64, some > 32, where the ranking picks the swap tile: 64-row tiles (exp. 90)
    for shape in [((64, 4096, 7168),) * 8, tuple((m, 4096, 7168) for m in (40, 20, 64, 33, 17, 60, 48, 25)),
                  ((33, 7168, 4096), (64, 7168, 4096))]:
        assert configs.select_config("group", "sm_90a", shape) == configs.sm90_group_mixed(tile=(256, 64)), shape
    for shape in configs.GROUP_BENCHMARKS[3:] + [
            ((384, 2048, 7168),) * 8, ((32, 4096, 7168),) * 8,  # N 2048; M_g <= 32 (swap MMA N 32)
            ((40, 4096, 2048), (50, 4096, 2048), (60, 4096, 2048), (64, 4096, 2048)),  # ranked non-swap
            ((192, 4096, 4096), (320, 4096, 4096)),  # K 4096
            ((600, 4096, 7168), (300, 3968, 7168))]:  # N % 256
        assert not configs.select_config("group", "sm_90a", shape).a_prepass, shape
    # N 2048 with 256 rows per group: the 256-row A tiles (exp. 93), not the pairs
    assert configs.select_config("group", "sm_90a", ((256, 2048, 7168),) * 8) == configs.sm90_group_mixed(tile=(128, 256))
    assert not configs.check_config(pairs) and not configs.check_config(mixed)
    assert not configs.check_config(configs.sm90_group_mixed(tile=(128, 128)))
    assert not configs.check_config(configs.sm90_group_mixed(tile=(256, 64)))
    assert configs.check_config(replace(mixed, mma_tile_mn=(128, 64)))
    assert configs.check_config(replace(pairs, mma_tile_mn=(128, 128)))
    with pytest.raises(ValueError, match="K=256: split-K pairs need at least 2 k-blocks"):
        Sm90GroupedMixedKernel.can_implement(pairs, ((600, 4096, 7168), (300, 4096, 256)))
    with pytest.raises(ValueError, match="N=3968 must be a multiple of 256"):
        Sm90GroupedMixedKernel.can_implement(mixed, ((600, 4096, 7168), (300, 3968, 7168)))


def test_grouped_tail_splits():
    """Split-K of the partial last wave: as many K splits per tail tile as leave every CTA
    at most one tail unit (<= 8, <= the smallest group's k-blocks); 1 without a partial wave."""
    from nvfp4gemm.scheduler import tail_splits

    assert tail_splits(304, 132, [28] * 8) == 3  # g8 N=4096 K=7168 swap: 40 tail tiles
    assert tail_splits(588, 132, [8] * 8) == 2  # g8 N=7168 K=2048 swap: 60 tail tiles
    assert tail_splits(352, 132, [28] * 8) == 1  # 128x128: 88 tail tiles, 2 units per CTA
    assert tail_splits(728, 132, [8] * 8) == 1
    assert tail_splits(96, 96, [16, 16]) == 1  # one full wave (CTAs = tiles)
    assert tail_splits(264, 132, [28]) == 1  # whole waves
    assert tail_splits(138, 132, [4, 2, 3, 8]) == 2  # at most the smallest group's k-blocks
    assert tail_splits(135, 132, [3, 4, 3, 6, 3]) == 3
    assert tail_splits(140, 132, [16]) == 8  # at most 8


def test_split_plan():
    """(ctas, full_tiles, splits): at most half a wave of tiles -> every tile split over K,
    one unit per CTA; otherwise only the partial last wave (tail_splits)."""
    from nvfp4gemm.scheduler import split_plan, split_units

    assert split_plan(64, 132, 28) == (128, 0, 2)  # 256x4096x7168 dual, 128x128 tiles
    assert split_plan(64, 132, 16) == (128, 0, 2)  # 256x3072x4096 dual, 128x96 tiles
    assert split_plan(24, 132, 28) == (120, 0, 5)
    assert split_plan(8, 132, 1) == (8, 8, 1)  # one k-block: nothing to split
    assert split_plan(60, 132, [16, 16]) == (120, 0, 2)  # grouped: the smallest K bounds it
    assert split_plan(10, 132, [28, 3]) == (30, 0, 3)
    assert split_plan(96, 132, 16) == (96, 96, 1)  # more than half a wave: whole tiles
    assert split_plan(304, 132, [28] * 8) == (132, 264, 3)  # tail of 40 tiles, 3 ways
    assert split_plan(264, 132, 28) == (132, 264, 1)
    assert split_units(304, 264, 3) == 384 and split_units(64, 0, 2) == 128 and split_units(96, 96, 1) == 96


@pytest.mark.parametrize("sms", [132, 7, 1])
def test_split_plan_units_are_last_items(sms):
    """The kernels stage split-K partials in the pipeline's shared memory, which is free only
    after a CTA's last work item: every CTA gets at most one split unit, as its last item,
    and never more CTAs than SMs or items."""
    from nvfp4gemm.scheduler import split_plan, split_units

    for total in range(1, 3 * sms + 3):
        for kb in (1, 2, 3, 28, [28, 2]):
            ctas, full, splits = split_plan(total, sms, kb)
            items = split_units(total, full, splits)
            assert 1 <= ctas <= min(sms, items) and 1 <= splits <= 8 and 0 <= full <= total
            assert splits <= min([kb] if isinstance(kb, int) else kb), "a split with no k-block"
            for c in range(ctas):
                mine = list(range(c, items, ctas))
                split = [i for i in mine if splits > 1 and i >= full]
                assert len(split) <= 1 and (not split or split[0] == mine[-1]), (total, kb, c)


def test_decode_table_is_exact():
    """The e4m3 placement used by decode.py, code s e1 e0 m0 -> e4m3 byte
    (s << 7) | (e1 e0 m0 << 2), reproduces every e2m1 code times 2^-6."""
    import torch
    from nvfp4gemm.formats import E2M1_VALUES
    from nvfp4gemm.sm90.decode import ACC_RESCALE

    for code in range(16):
        byte = ((code & 8) << 4) | ((code & 7) << 2)
        val = torch.tensor([byte], dtype=torch.uint8).view(torch.float8_e4m3fn).float().item()
        assert val * 2.0**6 == E2M1_VALUES[code], code
    assert ACC_RESCALE == 2.0**12  # both operands carry 2^-6


# The experiment paths were removed (notes/sm90.md): their configs must be rejected, not
# silently compiled into something else.
@pytest.mark.parametrize("problem,changes,shape", [
    ("dual", dict(rs_a=False), configs.DUAL_BENCHMARKS[1]),
    ("group", dict(rs_a=False), configs.GROUP_BENCHMARKS[0]),
    ("dual", dict(dec_stages=4), configs.DUAL_BENCHMARKS[1]),
])
def test_removed_paths_rejected(problem, changes, shape):
    from dataclasses import replace

    cfg = replace(configs.select_config(problem, "sm_90a", shape), **changes)
    kernel = Sm90DualGemmKernel if problem == "dual" else Sm90GroupedGemmKernel
    with pytest.raises(ValueError):
        kernel(cfg)


def _run_ptx(text: str, inputs: dict) -> dict:
    """Interpret the few PTX instructions of the skinny decode (`decode.decode_word_ptx`,
    `decode.skinny_scales_ptx`) on 32-bit integers; fp16 multiplies are IEEE round-to-nearest
    (numpy float16: the fp32 product of two fp16 is exact, then one rounding), e4m3 through
    torch; prmt in its default mode only (selector bit 3 clear)."""
    import numpy as np
    import torch

    regs = dict(inputs)
    m32 = 0xFFFFFFFF

    def val(x):
        return regs[x] if x in regs else int(x, 0)

    def f16(bits):
        return np.array([bits], dtype=np.uint16).view(np.float16)[0]

    def bits16(x):
        return int(np.array([x], dtype=np.float16).view(np.uint16)[0])

    mem = regs.setdefault("mem", {})  # shared memory: byte address -> 32-bit word (aligned)
    for line in text.splitlines():
        line = line.strip().rstrip(";")
        if not line or line in "{}" or line.startswith(".reg"):
            continue
        op, rest = line.split(None, 1)
        if op.startswith("ld.shared.v"):  # ld.shared.vN.b32 {d0, ...}, [addr]
            dsts, addr = rest.split("},")
            base = val(addr.strip(" []"))
            for i, d in enumerate(x.strip() for x in dsts.strip("{ ").split(",")):
                regs[d] = mem[base + 4 * i]
            continue
        if op.startswith("st.shared.v"):  # st.shared.vN.b32 [addr], {s0, ...}
            addr, srcs = rest.split("],")
            base = val(addr.strip(" ["))
            for i, x in enumerate(y.strip() for y in srcs.strip(" {}").split(",")):
                mem[base + 4 * i] = val(x)
            continue
        if op == "mov.b32" and "{" in rest and not rest.startswith("{"):  # pack two halves
            d, halves = rest.split(",", 1)
            lo, hi = (val(h.strip()) for h in halves.strip(" {}").split(","))
            regs[d.strip()] = lo | hi << 16
            continue
        if op == "mov.b32" and rest.startswith("{"):  # split into halves
            halves, src = rest.split("},")
            lo, hi = (h.strip() for h in halves.strip("{ ").split(","))
            regs[lo], regs[hi] = val(src.strip()) & 0xFFFF, val(src.strip()) >> 16
            continue
        d, *src = (x.strip() for x in rest.split(","))
        a = [val(x) for x in src]
        if op == "mov.b32":
            r = a[0]
        elif op == "shl.b32":
            r = (a[0] << a[1]) & m32
        elif op == "shr.b32":
            r = a[0] >> a[1]
        elif op == "prmt.b32":  # default mode: selector nibble i picks byte i of d from {b, a}
            src = a[0] | a[1] << 32
            r = sum(((src >> 8 * ((a[2] >> 4 * i) & 7)) & 0xFF) << 8 * i for i in range(4))
        elif op == "and.b32":
            r = a[0] & a[1]
        elif op == "xor.b32":
            r = a[0] ^ a[1]
        elif op == "mul.lo.u32":
            r = (a[0] * a[1]) & m32
        elif op == "mul.hi.u32":
            r = (a[0] * a[1]) >> 32
        elif op == "lop3.b32":
            lut = a[3]
            r = 0
            for bit in range(32):
                idx = (((a[0] >> bit) & 1) << 2) | (((a[1] >> bit) & 1) << 1) | ((a[2] >> bit) & 1)
                r |= ((lut >> idx) & 1) << bit
        elif op == "mul.rn.f16x2":
            r = 0
            for h in range(2):
                x, y = f16((a[0] >> 16 * h) & 0xFFFF), f16((a[1] >> 16 * h) & 0xFFFF)
                r |= bits16(np.float32(x) * np.float32(y)) << 16 * h
        elif op == "cvt.rn.f16x2.e4m3x2":
            pair = torch.tensor([a[0] & 0xFF, a[0] >> 8], dtype=torch.uint8).view(torch.float8_e4m3fn)
            r = bits16(pair[0].float().item()) | bits16(pair[1].float().item()) << 16
        else:
            raise AssertionError(f"no interpreter for {op}")
        regs[d] = r
    return regs


def test_skinny_word_decode_is_exact():
    """The PTX text of the skinny kernels' decode (`decode.decode_word_ptx`,
    `decode.skinny_scales_ptx`), interpreted instruction by instruction: every e2m1 code in
    every nibble of a word, times every finite e4m3 scale in either byte of the lane's scale
    halfword, comes out as the exact fp16 value e2m1 * scale * 2^-6, in the K order the
    docstring names (registers: codes (0, 2), (1, 3), (4, 6), (5, 7))."""
    import numpy as np
    import torch
    from nvfp4gemm.formats import E2M1_VALUES
    from nvfp4gemm.sm90 import decode

    assert decode.ACC_RESCALE == 2.0**12  # both operands carry 2^-6
    e4m3 = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    word_ptx, scale_ptx = decode.decode_word_ptx(), decode.skinny_scales_ptx()
    order = ((0, 2), (1, 3), (4, 6), (5, 7))
    rng = np.random.default_rng(5)
    checked = 0
    for sb in range(256):
        s = e4m3[sb].item()
        if s != s:  # NaN encodings are never scales of real data
            continue
        other = int(rng.integers(0, 0x7F))  # the other scale byte: any finite value
        for pos, h in ((0, sb | other << 8), (1, other | sb << 8)):
            pair = _run_ptx(scale_ptx, {"$2": h})[f"${pos}"]
            want_s = int(np.array([s], dtype=np.float16).view(np.uint16)[0])
            assert pair & 0xFFFF == pair >> 16 == want_s, (sb, pos)
        scale = _run_ptx(scale_ptx, {"$2": sb})["$0"]
        for word in [int(rng.integers(0, 2**32))] + [c * 0x11111111 for c in range(16)]:
            out = _run_ptx(word_ptx, {"$4": word, "$5": scale})
            for j, codes in enumerate(order):
                for half, nib in enumerate(codes):
                    code = (word >> 4 * nib) & 0xF
                    got = np.array([(out[f"${j}"] >> 16 * half) & 0xFFFF], dtype=np.uint16).view(np.float16)[0]
                    want = E2M1_VALUES[code] * s * 2.0**-6
                    assert float(got) == want, (hex(word), sb, j, half, float(got), want)
                    checked += 1
    assert checked == 254 * 17 * 8  # 254 finite e4m3 encodings (all but 0x7F, 0xFF), 17 words, 8 codes


def test_wgmma_decode_scales_and_b_task_are_exact():
    """The leaderboard kernels' decode PTX, interpreted: `scale_quad` (the A operand's 4 scales
    of a row) gives (s_g, s_g) for every e4m3 byte in every position, and `decode_task` (32
    codes of a B row into 4 swizzled 16-byte fp16 chunks) stores e2m1 * scale * 2^-6 in the K
    order of decode.py's docstring: chunk 2 grp holds the group's even codes, 2 grp + 1 its
    odd ones, for either half of the scale word; and in the pair-major order chunk c holds
    k16 step c // 2 of all 4 words (`_decode_b_ptx`); `scale_pair` gathers any two scales."""
    import numpy as np
    import torch
    from nvfp4gemm.formats import E2M1_VALUES
    from nvfp4gemm.sm90 import decode

    e4m3 = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    f16 = lambda bits: float(np.array([bits], dtype=np.uint16).view(np.float16)[0])  # noqa: E731
    quad = decode.scale_quad_ptx()
    finite = [b for b in range(256) if e4m3[b].item() == e4m3[b].item()]
    rng = np.random.default_rng(7)
    for b in finite:
        for pos in range(4):
            others = [int(x) for x in rng.choice(finite, 3)]
            byts = others[:pos] + [b] + others[pos:]
            out = _run_ptx(quad, {"$4": sum(x << 8 * i for i, x in enumerate(byts))})[f"${pos}"]
            assert f16(out & 0xFFFF) == f16(out >> 16) == e4m3[b].item(), (b, pos)
    pair = decode.scale_pair_ptx()
    for b in finite:
        for pos in range(4):
            others = [int(x) for x in rng.choice(finite, 3)]
            byts = others[:pos] + [b] + others[pos:]
            word = sum(x << 8 * i for i, x in enumerate(byts))
            other = int(rng.integers(0, 4))
            for out, sel in (("$0", pos | other << 4), ("$1", other | pos << 4)):
                got = _run_ptx(pair, {"$2": word, "$3": sel})[out]
                assert f16(got & 0xFFFF) == f16(got >> 16) == e4m3[b].item(), (b, pos, sel)
    for pair_major in (False, True):
        task = decode._decode_b_ptx(4, pair_major=pair_major)
        for trial in range(300):
            words = [int(x) for x in rng.integers(0, 2**32, 4)]
            sbytes = [int(x) for x in rng.choice(finite, 4)]
            shift = 16 * (trial % 2)
            src, dst = 0x100, 0x400 + 16 * int(rng.integers(0, 8))  # dst: chunk 0 already swizzled
            regs = _run_ptx(task, {"$0": src, "$1": sum(x << 8 * i for i, x in enumerate(sbytes)), "$2": shift,
                                   "$3": dst, "mem": {src + 4 * i: w for i, w in enumerate(words)}})
            codes = [(words[i // 8] >> 4 * (i % 8)) & 0xF for i in range(32)]
            for c in range(4):  # chunk c at dst ^ 16 c
                for v in range(8):
                    if pair_major:  # k16 step c // 2: fp16 pair v // 2 from word v // 2 (A thread v // 2)
                        t, odd = divmod(c, 2)
                        wi, e = divmod(v, 2)
                        grp, code = wi // 2, 8 * wi + 4 * t + 2 * e + odd
                    else:  # group c // 2, even (c % 2 == 0) or odd codes
                        grp, odd = divmod(c, 2)
                        code = 16 * grp + 2 * v + odd
                    s = e4m3[sbytes[shift // 8 + grp]].item()
                    word = regs["mem"][(dst ^ (16 * c)) + 4 * (v // 2)]
                    got = f16((word >> 16 * (v % 2)) & 0xFFFF)
                    want = E2M1_VALUES[codes[code]] * s * 2.0**-6
                    assert got == want, (pair_major, trial, c, v, got, want)


def test_prepass_routing_is_the_pair_major_b_task():
    """The mixed-input kernels' A pre-pass (mixed.PREPASS_CHUNKS / _WORD_SCALE over
    `decode_word`) writes a 32-code half row exactly as the pair-major B task
    (`_decode_b_ptx(4, pair_major=True)`) stores it into shared memory, so A16 pairs with the
    register operand of `Sm90Common.decode_a` as the stored B tiles do (both PTX texts
    interpreted on random words and scales)."""
    import numpy as np
    import torch
    from nvfp4gemm.sm90 import decode
    from nvfp4gemm.sm90.mixed import PREPASS_CHUNKS, PREPASS_WORD_SCALE

    e4m3 = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(torch.float8_e4m3fn).float()
    finite = [b for b in range(256) if e4m3[b].item() == e4m3[b].item()]
    rng = np.random.default_rng(11)
    task, word_ptx = decode._decode_b_ptx(4, pair_major=True), decode.decode_word_ptx()
    f16x2 = lambda b: (b << 16) | b  # noqa: E731
    for trial in range(100):
        words = [int(x) for x in rng.integers(0, 2**32, 4)]
        sbytes = [int(x) for x in rng.choice(finite, 2)]
        regs = _run_ptx(task, {"$0": 0x100, "$1": sbytes[0] | sbytes[1] << 8, "$2": 0, "$3": 0x400,
                               "mem": {0x100 + 4 * i: w for i, w in enumerate(words)}})
        scales = [f16x2(int(np.array([e4m3[b].item()], dtype=np.float16).view(np.uint16)[0])) for b in sbytes]
        dec = [_run_ptx(word_ptx, {"$4": words[v], "$5": scales[PREPASS_WORD_SCALE[v]]}) for v in range(4)]
        for c in range(4):
            want = [regs["mem"][(0x400 ^ (16 * c)) + 4 * i] for i in range(4)]
            got = [dec[v][f"${r}"] for v, r in PREPASS_CHUNKS[c]]
            assert got == want, (trial, c)


@pytest.mark.parametrize("n_rows, bases, ways", [
    (128, (0,), 1), (256, (0,), 1), (96, (0, 32, 64, 96), 2), (64, (0, 64), 2), (48, (0, 16), 4)])
def test_spread_rows_bijective_and_conflict_free(n_rows, bases, ways):
    """`Sm90Common.spread_rows` (which B row each decode task takes): a bijection of the
    tile's rows; every quarter-warp's 8 rows have distinct r % 8 (the packed 16-byte loads
    and the swizzled decoded stores stay conflict-free); and one warp's B scale-word loads
    (row r's word at 4 (r % 32) + (r % 128) // 32 of the permuted atom, atoms 2 KB apart)
    hit each bank at most `ways` times: 1 for 128-row multiples, 2 for 96 and 64, and the
    unchanged 4 for tile N 48 (identity)."""
    from nvfp4gemm.sm90.common import SF_STAGE_BYTES, Sm90Common

    rows = [Sm90Common.spread_rows(t, n_rows) for t in range(n_rows)]
    assert sorted(rows) == list(range(n_rows))
    worst = 0
    for base in bases:  # the tile's first row inside its 128-row atom
        for w in range(n_rows // 32):  # 32 consecutive tasks are one warp
            warp = [base + rows[32 * w + lane] for lane in range(32)]
            for q in range(0, len(warp), 8):
                assert len({r % 8 for r in warp[q:q + 8]}) == 8, (base, w, q)
            addrs = {(r // 128) * SF_STAGE_BYTES + 4 * (4 * (r % 32) + (r % 128) // 32) for r in warp}
            per_bank = {}
            for a in addrs:
                per_bank.setdefault((a // 4) % 32, set()).add(a)
            worst = max(worst, max(len(v) for v in per_bank.values()))
    assert worst == ways


def test_mixed_narrow_row_pairing():
    """The narrow mixed form's register rows (dual_mixed.b_row): the 256 consumer threads
    cover B rows 0..63 four times each (the 4 lanes of a quad), and every thread's shuffle
    partner lane + 4 (c_t_word) holds the next row b + 1 within the same 8-row group, with
    the row parity the lane parity that c_t_lane selects by -- what store_c_t_staged's
    32-bit word pairing (C[c, b], C[c, b + 1]) assumes."""
    from collections import Counter

    from nvfp4gemm.sm90.common import Sm90Common
    from nvfp4gemm.sm90.dual_mixed import Sm90DualMixedKernel as K

    rows = [K.b_row(ct) for ct in range(256)]
    assert Counter(rows) == {b: 4 for b in range(64)}
    for ct in range(256):
        lane = ct % 32
        odd, _sel = Sm90Common.c_t_lane(ct)
        assert rows[ct] % 2 == odd
        if (lane // 4) % 2 == 0:  # even lane quads pair with lane + 4
            assert rows[ct + 4] == rows[ct] + 1


def test_grouped_mixed192_rule():
    """Exp. 107: the grouped mixed-input kernel's three-warpgroup form (192 B_g rows) by rule
    where every N_g % 192 == 0 (>= 3072), K_g >= 2048, some M_g > 64, the pick before it is no
    two-form / pairs / 64-row form, and its model is 5% under every other single form's --
    the six fit shapes it won (0.774-0.969); not LB g2 N3072 K4096 (pinned, and its model picks
    the 128 x 128 tiles: 192 ran 1.078), not where the two-form kernel runs (1.030) or the
    model prefers the (256, 128) tiles (g3 M384 N3072 K2048: 1.255)."""
    from nvfp4gemm.sm90.grouped_mixed import Sm90GroupedMixedKernel

    g192 = configs.sm90_group_mixed(tile=(192, 128))
    assert not configs.check_config(g192) and g192.mma_warpgroups == 3
    for shape in [((256, 3072, 4096),) * 2, ((128, 3072, 7168),) * 4,
                  ((100, 5760, 2048), (250, 5760, 2048), (180, 5760, 2048), (128, 5760, 2048)) * 2,
                  ((512, 3072, 7168),), ((200, 9216, 2048),) * 4, ((64, 6144, 7168), (128, 6144, 7168), (96, 6144, 7168))]:
        assert configs.select_config("group", "sm_90a", shape) == g192, shape
    for shape in [configs.GROUP_BENCHMARKS[2], ((300, 6144, 4096), (400, 6144, 4096)), ((384, 3072, 2048),) * 3,
                  ((64, 6144, 7168),) * 3,  # every M_g <= 64
                  ((128, 3072, 1536),) * 4,  # K < 2048
                  ((128, 4096, 7168),) * 4]:  # N % 192
        assert configs.select_config("group", "sm_90a", shape) != g192, shape
    with pytest.raises(ValueError, match="N=4096 must be a multiple of 192"):
        Sm90GroupedMixedKernel.can_implement(g192, ((128, 4096, 7168),))


def test_group_skinny_wide_table():
    """Exp. 153: the masked skinny kernel's wide table takes 17 to WIDE_TABLE_GROUPS groups in one
    launch (the plain table 16); its per-CTA map lists every block of every group in order, as
    the prefix sums would."""
    from nvfp4gemm.sm90 import grouped_skinny

    wide = configs.sm90_group_masked_picks(((16, 4096, 7168),) * 40)[0]
    plain = configs.sm90_group_masked_picks(((16, 4096, 7168),) * 16)[0]
    assert wide.table_groups == configs.WIDE_TABLE_GROUPS and plain.table_groups == configs.GROUPS_PER_LAUNCH
    assert "g256" in wide.short() and "g" not in plain.short().split("masked")[1]
    cls = harness.kernel_module("group", "sm_90a", wide)[1]
    cls.can_implement(wide, ((16, 512, 256),) * configs.WIDE_TABLE_GROUPS)
    with pytest.raises(ValueError, match=f"{configs.WIDE_TABLE_GROUPS + 1} groups"):
        cls.can_implement(wide, ((16, 512, 256),) * (configs.WIDE_TABLE_GROUPS + 1))
    with pytest.raises(ValueError, match="17 groups"):
        cls.can_implement(plain, ((16, 512, 256),) * 17)
    assert configs.check_config(dataclasses.replace(plain, table_groups=64))
    assert configs.check_config(dataclasses.replace(configs.sm90_group_mixed_dynamic(masked=True), table_groups=256))
    shapes = [(3, 64, 256), (9, 32, 512), (16, 96, 256)]
    cfg = dataclasses.replace(wide, mma_tile_mn=(32, 16))
    m = grouped_skinny.wide_cta_map(cfg, shapes)
    offs = [0, 2, 3, 6]
    assert [(x >> 16, x & 0xFFFF) for x in m] == [(g, b) for g in range(3) for b in range(offs[g + 1] - offs[g])]


def test_dual_mixed_can_implement():
    """The mixed-input dual kernel's own shape rules, each by name: split-K pairs need two
    k-blocks (with one, rank 0's k-range would be empty -- session 56's third review found the
    pairs plan allows it, so this rule is what keeps a pinned config from it); one batch; N a
    multiple of the tile's B rows per GEMM, except the three-warpgroup form's ragged N (% 64)."""
    from nvfp4gemm.sm90.dual_mixed import Sm90DualMixedKernel as K

    pairs = configs.sm90_dual_mixed_pairs()
    K.can_implement(pairs, 256, 4096, 512, 1)  # two k-blocks: one per rank
    with pytest.raises(ValueError, match=r"K=256: split-K pairs need at least 2 k-blocks \(K >= 512\)"):
        K.can_implement(pairs, 256, 4096, 256, 1)
    K.can_implement(replace(pairs, cluster_mn=(1, 1)), 256, 4096, 256, 1)  # stream-K: one k-block is fine
    with pytest.raises(ValueError, match=r"L=2: the mixed-input dual kernel runs one batch"):
        K.can_implement(pairs, 256, 4096, 7168, 2)
    with pytest.raises(ValueError, match=r"N=4032 must be a multiple of 128 \(the mixed-input tile\)"):
        K.can_implement(configs.sm90_dual_mixed(), 256, 4032, 7168, 1)
    K.can_implement(configs.sm90_dual_mixed_wg3(), 256, 4032, 7168, 1)  # ragged N: % 64 suffices
