"""GPU checks of the kernels through the leaderboard entry point (custom_kernel).

Runs only on a CUDA GPU of capability (9, 0) (the sm_90a kernels) or (10, x) (dispatch
picks the sm_100a kernels there); skips elsewhere.  Every leaderboard test and benchmark
shape of both problems plus fresh random seeds; outputs are poisoned with NaN before each
run, then checked fully written and by reference.check_implementation.
"""

import random

import pytest
import torch

import configs
import reference as R

_REASON = "needs a CUDA GPU of capability (9, 0) or (10, x)"


def _gpu_ok() -> bool:
    if not torch.cuda.is_available():
        return False
    cap = torch.cuda.get_device_capability()
    return cap == (9, 0) or cap[0] == 10


pytestmark = pytest.mark.skipif(not _gpu_ok(), reason=_REASON)

_SEEDS = [1111, random.randrange(1 << 30)]


def _run(data, problem):
    """Two calls: the first prepares the launch, the second takes the cached packed-argument
    path of the dispatcher; each must write every output element correctly."""
    from nvfp4gemm.dispatch import custom_kernel

    outs = [data[-1]] if problem == "dual" else [c for _, _, c in data[0]]
    for call in ("first", "cached"):
        for c in outs:
            c.fill_(float("nan"))
        out = custom_kernel(data)
        torch.cuda.synchronize()
        got = [out] if problem == "dual" else list(out)
        for o in got:
            assert not torch.isnan(o).any(), f"{call} call: output not fully written (NaN left)"
        ok, msg = R.check_implementation(data, out)
        assert ok, f"{call} call: {msg}"


@pytest.mark.parametrize("seed", _SEEDS)
@pytest.mark.parametrize("shape", configs.DUAL_TESTS + configs.DUAL_BENCHMARKS, ids=str)
def test_dual(shape, seed):
    _run(R.generate_input(*shape, seed, device="cuda"), "dual")


@pytest.mark.parametrize("seed", _SEEDS)
@pytest.mark.parametrize("shape", configs.GROUP_TESTS + configs.GROUP_BENCHMARKS,
                         ids=lambda s: "-".join(f"{m}x{n}x{k}" for m, n, k in s))
def test_grouped(shape, seed):
    ms, ns, ks = (list(x) for x in zip(*shape))
    _run(R.generate_input(ms, ns, ks, len(shape), seed, device="cuda"), "group")


def test_dual_poisoned_padding():
    """Scale padding filled with NaN must never reach C."""
    data = R.generate_input(256, 384, 512, 1, 7, device="cuda", poison_padding=True)
    _run(data, "dual")


def test_grouped_poisoned_padding_and_tiny_m():
    data = R.generate_input([1, 40, 129], [128, 256, 128], [256, 512, 256], 3, 8, device="cuda",
                            poison_padding=True)
    _run(data, "group")


def test_grouped_swap_ab_poisoned_padding_and_tiny_m():
    """Every N a multiple of 256 selects swap_ab (C^T = B A^T, ragged M on the 64-wide side)."""
    shape = ((1, 256, 256), (40, 512, 512), (129, 256, 256), (64, 768, 256))
    assert configs.select_config("group", "sm_90a", shape).swap_ab
    ms, ns, ks = (list(x) for x in zip(*shape))
    _run(R.generate_input(ms, ns, ks, len(shape), 9, device="cuda", poison_padding=True), "group")


@pytest.mark.parametrize("shape,splits,full", [
    ((512, 768, 7168, 1), 5, 0),  # 24 tiles of 128x128, every tile split 5 ways (in-order sum)
    ((1536, 512, 7168, 1), 2, 0),  # 48 tiles, split 2 ways (p0 + p1)
    ((7168, 384, 2304, 1), 3, 132),  # 168 tiles: one whole wave, the 36 tail tiles split 3 ways
], ids=str)
def test_dual_split_k(shape, splits, full):
    """Split-K of the dual GEMM: poisoned C and scale padding, the same input three times
    (the kernel resets its per-tile counters), bit-identical results (fixed sum order)."""
    data = R.generate_input(*shape, 12, device="cuda", poison_padding=True)
    if torch.cuda.get_device_capability() == (9, 0):
        from nvfp4gemm import scheduler
        from nvfp4gemm.sm90.common import sm_count

        cfg = configs.select_config("dual", "sm_90a", shape)
        m, n, k, l = shape
        tiles = (m // cfg.mma_tile_mn[0]) * (n // cfg.mma_tile_mn[1]) * l
        sms = sm_count(torch.device("cuda", torch.cuda.current_device()))
        if sms == 132:  # the plan this test was written for (H100 / H200)
            assert scheduler.split_plan(tiles, sms, k // 256)[1:] == (full, splits), cfg
    _run(data, "dual")
    first = data[-1].clone()
    _run(data, "dual")
    assert torch.equal(first, data[-1]), "split-K result changed between calls"


@pytest.mark.parametrize("shape", [
    # 128x128 tiles: 62 + 33 + 25 + 18 = 138 tiles, on 132 SMs the last 6 (group 3, ragged
    # M = 130) are split 2 ways over K; K differs per group
    ((200, 3968, 1024), (1, 4224, 512), (77, 3200, 768), (130, 1152, 2048)),
    # swap_ab 256x64 tiles: 32 + 8 + 60 + 20 + 15 = 135 tiles, the last 3 split 3 ways
    ((100, 4096, 768), (1, 2048, 1024), (300, 3072, 768), (65, 2560, 1536), (64, 3840, 768)),
], ids=["128x128", "swap"])
def test_grouped_split_k_tail(shape):
    """Split-K tail: poisoned C, poisoned scale padding, the same input three times (per-call
    counters reset by the kernel), bit-identical results (fixed reduction order)."""
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), 10, device="cuda", poison_padding=True)
    if torch.cuda.get_device_capability() == (9, 0):
        from nvfp4gemm.sm90.common import sm_count
        from nvfp4gemm import scheduler
        from nvfp4gemm.scheduler import tail_splits

        cfg = configs.select_config("group", "sm_90a", shape)
        total = scheduler.grouped_tile_offsets(cfg, shape)[-1]
        assert total > sm_count(torch.device("cuda", torch.cuda.current_device()))
        ctas = min(total, sm_count(torch.device("cuda", torch.cuda.current_device())))
        assert tail_splits(total, ctas, [k // 256 for k in ks]) > 1
    _run(data, "group")
    first = [c.clone() for _, _, c in data[0]]
    _run(data, "group")
    for c0, (_, _, c) in zip(first, data[0]):
        assert torch.equal(c0, c), "split-K result changed between calls"
