"""Compile-only checks of the sm_100a dual GEMM (no Blackwell GPU needed).

For every sm_100a dual config in CONFIG_MAP and the config `select_config` picks for each
leaderboard test shape (plus one M = 128 x odd shape, which takes the 1-CTA path): compile
for sm_100a, then check the PTX issues NVFP4 block-scaled MMAs with 16-element scale blocks
(both GEMMs' per k-block, with SFA's and both SFBs' scale copies; the TMEM columns each copy
writes and each MMA reads: accumulators, SFA, each GEMM's own SFB, the N=64 tiles' shift;
every mbarrier's arrival count against counts derived from the config),
ptxas reports no spills and no stack frame, and the shared memory fits one CTA per SM.
Distinct configs are compiled once (the kernel takes shapes at run time).  The PTX and
ptxas checks are shared with the grouped GEMM's tests (tests/kernel_checks.py).
"""

import re

import pytest

import configs
from kernel_checks import (
    check_mma_issue, check_multicast_loads_split, check_nvfp4_block_scaled_mma, check_resources,
    check_barrier_inits, check_tmem_operands,
    compile_with_ptx, sm100_cases,
)
from nvfp4gemm.sm100.dual_gemm import Sm100DualGemmKernel

_EXTRA_SHAPES = [(384, 512, 256, 1), (640, 448, 512, 2)]  # 1-CTA tiles; N % 128 != 0; L > 1

CASES = sm100_cases("dual", _EXTRA_SHAPES)


@pytest.mark.parametrize("cfg,shape", CASES, ids=[f"{c.short()}@{s}" for c, s in CASES])
def test_compiles_nvfp4_mma_no_spills(cfg, shape, tmp_path):
    Sm100DualGemmKernel.can_implement(cfg, *shape)
    ck, ptx = compile_with_ptx("dual", cfg, shape, str(tmp_path))
    check_nvfp4_block_scaled_mma(ptx, cfg.cta_group)
    check_mma_issue(ptx, gemms=2)
    check_tmem_operands(ptx, cfg)
    check_barrier_inits(ptx, cfg)
    check_multicast_loads_split(ptx, at_least=2 if cfg.cta_group == 2 else 0)
    check_resources(ck)


def test_every_config_the_rule_reaches_is_compiled():
    """Every sm_100a dual config `select_config` returns for a shape this kernel accepts is one CI
    compiles above (CASES): a config first met on a B200 would compile there for the first time.
    Sweeps M, N, K, L over the kernel's legal granules (M % 128, N % 64, K % 256); each shape the
    shape rules accept must be accepted by the config the rule picks for it."""
    compiled = {cfg for cfg, _ in CASES}
    reached = set()
    for m in (128, 256, 384, 512, 640, 1024, 1536, 4608, 7168):
        for n in (64, 128, 192, 256, 320, 384, 512, 768, 3072, 4096, 7168):
            for k in (256, 512, 1536, 7168):
                for l in (1, 2):
                    shape = (m, n, k, l)
                    if configs.check_shape("dual", shape, "sm_100a"):
                        continue  # refused whatever the config
                    cfg = configs.select_config("dual", "sm_100a", shape)
                    Sm100DualGemmKernel.can_implement(cfg, *shape)  # the rule's pick must run it
                    reached.add(cfg)
    assert len(reached) >= 2, "the sweep reached too few configs to mean anything"
    assert reached <= compiled, f"not compiled in CI: {sorted(c.short() for c in reached - compiled)}"


@pytest.mark.parametrize("shape,needle", [
    ((200, 512, 256, 1), "M=200"),
    ((256, 96, 256, 1), "N=96"),
    ((256, 512, 300, 1), "K=300"),
    ((256, 512, 256, 0), "L=0"),
])
def test_can_implement_names_the_broken_constraint(shape, needle):
    cfg = configs.select_config("dual", "sm_100a", (256, 512, 256, 1))
    with pytest.raises(ValueError, match=re.escape(needle)):
        Sm100DualGemmKernel.can_implement(cfg, *shape)


def test_can_implement_rejects_wrong_config():
    cfg = configs.select_config("dual", "sm_90a", (256, 512, 256, 1))
    with pytest.raises(ValueError, match="sm_100a"):
        Sm100DualGemmKernel.can_implement(cfg, 256, 512, 256, 1)


def test_launch_probe_compiles_for_both_archs():
    """tests/sm100_descriptor_check.py's `DualLaunchProbe`, which stands in for this kernel in
    tests/test_gpu_kernels.py::test_sm100_dual_launch_path_on_this_gpu (its arguments, its launch),
    compiles for sm_90a (where that test runs on H100s) and sm_100a, with this kernel's compile
    arguments; the first config of each cluster shape CI compiles."""
    import sm100_descriptor_check as check

    seen = set()
    for cfg, _shape in CASES:
        if cfg.cluster_mn in seen:
            continue
        seen.add(cfg.cluster_mn)
        for arch in ("sm_90a", "sm_100a"):
            check.compile_dual_probe(cfg, arch)
