"""Compile-only checks of the sm_100a dual GEMM (no Blackwell GPU needed).

For every sm_100a dual config in CONFIG_MAP and the config `select_config` picks for each
leaderboard test shape (plus one M = 128 x odd shape, which takes the 1-CTA path): compile
for sm_100a, then check the PTX issues NVFP4 block-scaled MMAs with 16-element scale blocks,
ptxas reports no spills and no stack frame, and the shared memory fits one CTA per SM.
Distinct configs are compiled once (the kernel takes shapes at run time).
"""

import re

import pytest

import configs
from nvfp4gemm import harness
from nvfp4gemm.sm100.dual_gemm import Sm100DualGemmKernel

SMEM_LIMIT = 232448  # 227 KB per CTA on sm_100a

_EXTRA_SHAPES = [(384, 512, 256, 1), (640, 448, 512, 2)]  # 1-CTA tiles; N % 128 != 0; L > 1


def _cases():
    """(config, shape) per distinct config, the first shape that selects it."""
    seen = {}
    for (arch, problem, shape), cfg in configs.CONFIG_MAP.items():
        if arch == "sm_100a" and problem == "dual":
            seen.setdefault(cfg, shape)
    for shape in configs.DUAL_TESTS + configs.DUAL_BENCHMARKS + _EXTRA_SHAPES:
        seen.setdefault(configs.select_config("dual", "sm_100a", shape), shape)
    return [(cfg, shape) for cfg, shape in seen.items()]


CASES = _cases()


@pytest.mark.parametrize("cfg,shape", CASES, ids=[f"{c.short()}@{s}" for c, s in CASES])
def test_compiles_nvfp4_mma_no_spills(cfg, shape, tmp_path):
    Sm100DualGemmKernel.can_implement(cfg, *shape)
    ck = harness.compile_kernel("dual", "sm_100a", cfg, shape, dump_dir=str(tmp_path))
    assert ck.ptx_path, "no PTX dumped"
    ptx = harness.read_ptx(ck.ptx_path)

    mmas = set(re.findall(r"tcgen05\.mma\.cta_group::(\d)\.kind::(\w+)\.block_scale([\w:.]*)", ptx))
    assert mmas, "no block-scaled tcgen05.mma in the PTX"
    for cta_group, kind, suffix in mmas:
        assert int(cta_group) == cfg.cta_group, mmas
        assert kind == "mxf4nvf4", mmas
        # 16-element scale blocks: PTX 8.8 spells it .scale_vec::4X, newer PTX .block16.
        assert (".scale_vec::4X" in suffix or ".block16" in suffix), mmas
        assert "scale_vec::2X" not in suffix and "block32" not in suffix, mmas

    assert ck.spill_bytes == 0, f"{ck.spill_bytes} bytes of spills"
    assert ck.stack_bytes == 0, f"{ck.stack_bytes} bytes of stack frame"
    assert ck.smem_bytes <= SMEM_LIMIT, f"shared memory {ck.smem_bytes} B > {SMEM_LIMIT} B"


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
