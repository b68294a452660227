"""GPU checks of MaskedGroupedGemm (nvfp4gemm/masked.py, exp. 144): grouped GEMMs whose row
counts M_g are read on the GPU.

Every call: the count's rows of C NaN-poisoned, the rows past it a canary that must survive,
the scales of the A rows past it NaN (rows the kernel must not read), then each group's rows
compared with the reference at capacity (rows are independent).  Runs on an sm_90 GPU; on
sm_100 it checks the refusal; skipped without a GPU."""

import random

import pytest
import torch

import reference as R
from kernel_checks import SM90_MASKED_CASES, sm90_masked_picks
from nvfp4gemm.formats import E4M3_NAN, permuted_index

pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and torch.cuda.get_device_capability()[0] in (9, 10)),
                                reason="needs a CUDA GPU of capability (9, 0) or (10, x)")

CANARY = 7.0


def _sm90_only():
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("MaskedGroupedGemm is sm_90a only")


def _poison_a_scales(data, counts):
    """NaN in the permuted A scales of every row past each group's count (restored by the
    caller from `_scales_of`)."""
    for (sfa_p, _sfb_p), (m, _n, k, _l), cnt in zip(data[2], data[3], counts):
        if cnt >= m:
            continue
        rows = torch.arange(cnt, m, device=sfa_p.device)
        cols = torch.arange(k // 16, device=sfa_p.device)
        r, j = torch.meshgrid(rows, cols, indexing="ij")
        idx = permuted_index(r, j)
        sfa_p.view(torch.uint8)[idx[0], idx[1], idx[2], idx[3], idx[4], 0] = E4M3_NAN


def _scales_of(data):
    return [sfa_p.clone() for sfa_p, _ in data[2]]


def _restore(data, saved):
    for (sfa_p, _), s in zip(data[2], saved):
        sfa_p.copy_(s)


def _prepare(data, counts):
    """Outputs: NaN in each group's first counts[g] rows, the canary past them."""
    for (_a, _b, c), cnt in zip(data[0], counts):
        c[:cnt].fill_(float("nan"))
        c[cnt:].fill_(CANARY)


def _check(data, ref, outs, counts, what):
    for g, ((_a, _b, c), cnt) in enumerate(zip(data[0], counts)):
        assert outs[g] is c, f"{what}: group {g}: the output is not the caller's C_g"
        assert not torch.isnan(c[:cnt]).any(), f"{what}: group {g}: rows below the count {cnt} not fully written"
        assert bool((c[cnt:] == CANARY).all()), f"{what}: group {g}: a row at or past the count {cnt} was written"
        errs = R.compare(c[:cnt], ref[g][:cnt])
        assert not errs, f"{what}: group {g} (count {cnt}): " + "; ".join(errs)


def _effective(raw, caps):
    return [min(max(int(x), 0), cap) for x, cap in zip(raw, caps)]


def _masked_calls(caps, n, k, count_sets, seed, expected_m=None, small=None, device="cuda"):
    from nvfp4gemm.masked import MaskedGroupedGemm

    g = len(caps)
    data = R.generate_input(list(caps), [n] * g, [k] * g, g, seed, device=device, poison_padding=True)
    current = torch.cuda.current_device()
    ref = R.ref_group(data)
    saved = _scales_of(data)
    gemm = MaskedGroupedGemm(data, expected_m=expected_m, small=small)
    for i, raw in enumerate(count_sets):
        counts = _effective(raw, caps)
        _restore(data, saved)
        _poison_a_scales(data, counts)
        _prepare(data, counts)
        # int64, int32 (read in place by the masked kernel: a new address each call), a strided
        # int32 view (copied first)
        if i % 3 == 2:
            dev = torch.tensor([x for v in raw for x in (v, -99)], dtype=torch.int32, device=device)[::2]
        else:
            dev = torch.tensor(raw, dtype=torch.int32 if i % 3 else torch.int64, device=device)
        outs = gemm(dev)
        assert torch.cuda.current_device() == current, "the call changed the current device"
        torch.cuda.synchronize(device)
        _check(data, ref, outs, counts, f"N{n} K{k} caps {caps} counts {raw}")
    _restore(data, saved)
    return gemm, data, ref


@pytest.mark.parametrize("n,k,g", [(4096, 7168, 8), (7168, 2048, 8), (3072, 4096, 2), (2048, 7168, 16)], ids=str)
def test_masked_counts(n, k, g):
    """Device-scheduled form reading the counts itself: counts 0 .. capacity (all zero, all full,
    random, some past the capacity or negative: clamped), int32 in place, int64 and strided int32
    through its copy, one object."""
    _sm90_only()
    rnd = random.Random(144 + n + k + g)
    caps = [rnd.choice([64, 128, 200, 256, 320]) for _ in range(g)]
    sets = [[0] * g, caps, [rnd.randint(0, c) for c in caps], [rnd.randint(1, 17) for _ in caps],
            [c + 50 if i % 3 == 0 else (-4 if i % 3 == 1 else rnd.randint(0, c)) for i, c in enumerate(caps)]]
    gemm, _data, _ref = _masked_calls(caps, n, k, sets, 1440 + g)
    assert gemm.cfg.device_schedule and gemm.cfg.masked, gemm.cfg.short()
    assert len(gemm.configs) == 1, gemm.configs  # (expected counts: the capacities, all > 16)


@pytest.mark.parametrize("small", [True, False], ids=["skinny+mixed", "mixed_alone"])
def test_masked_small_counts(small):
    """Exp. 147: capacities over 16 with counts on both sides of 16 (decode-sized, prefill-sized,
    16 and 17 exactly, zeros), through the skinny kernel + the mixed form (small=True) and the
    mixed form alone (small=False)."""
    _sm90_only()
    caps = [256, 64, 128, 256, 32, 192, 256, 96]
    rnd = random.Random(1447)
    sets = [[rnd.randint(1, 16) for _ in caps], [16, 17, 1, 0, 32, 15, 200, 96],
            [rnd.randint(0, 8) for _ in caps], [rnd.choice([0, rnd.randint(1, 16), rnd.randint(17, c)]) for c in caps],
            caps, [0] * 8]
    gemm, _data, _ref = _masked_calls(caps, 4096, 2048, sets, 1447, small=small)
    assert len(gemm.configs) == (2 if small else 1), [c.short() for c in gemm.configs]
    if small:
        assert gemm.configs[0].skinny and gemm.cfg.masked_above == 16


@pytest.mark.two_gpus
def test_masked_on_another_device():
    """A process using two GPUs: MaskedGroupedGemm on the tensors of the GPU that is not the
    current one (the skinny + mixed split, so its side stream too, and the mixed form alone) runs
    there, correct, and leaves the current device as it was."""
    _sm90_only()
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs")
    if torch.cuda.get_device_capability(0) != torch.cuda.get_device_capability(1):
        pytest.skip("needs two GPUs of one kind")
    assert torch.cuda.current_device() == 0
    caps = [256, 64, 128, 32]
    sets = [[5, 64, 100, 0], [16, 17, 1, 32], caps]
    for small in (True, False):
        gemm, _data, _ref = _masked_calls(caps, 2048, 1024, sets, 1571, small=small, device="cuda:1")
        assert len(gemm.configs) == (2 if small else 1) and gemm.device == torch.device("cuda:1")
    with torch.cuda.device(1):  # and GPU 0's tensors from under a guard for GPU 1
        _masked_calls(caps, 2048, 1024, sets, 1572, small=True, device="cuda:0")


def test_masked_skinny():
    """Capacities <= 16: the skinny kernel (its launch covers N_g only), counts 0 .. 16."""
    _sm90_only()
    caps = [16, 9, 16, 12, 16, 16, 3, 16]
    rnd = random.Random(1441)
    sets = [[0] * 8, caps, [rnd.randint(0, c) for c in caps], [30, -1, 5, 12, 0, 16, 3, 1]]
    gemm, _data, _ref = _masked_calls(caps, 7168, 2048, sets, 1441)
    assert gemm.cfg.skinny and gemm.cfg.masked and len(gemm.configs) == 1, gemm.cfg.short()


@pytest.mark.parametrize("case", SM90_MASKED_CASES,
                         ids=[f"caps{c[0]}x{len(c)}-N{n}-K{k}-{s}" for c, n, k, _e, s in SM90_MASKED_CASES])
def test_masked_compiled_configs(case):
    """Every MaskedGroupedGemm buffer set whose picks CI compiles (kernel_checks.SM90_MASKED_CASES):
    counts zero, full, random and past the capacity, through the picks (with the mixed form
    beside the skinny kernel where the case has one)."""
    _sm90_only()
    caps, n, k, expected_m, small = case
    rnd = random.Random(58 + n + k + len(caps))
    sets = [[0] * len(caps), caps, [rnd.randint(0, c) for c in caps], [c + 3 for c in caps]]
    gemm, _data, _ref = _masked_calls(caps, n, k, sets, 5800 + k, expected_m=expected_m, small=small)
    assert tuple(gemm.configs) == tuple(sm90_masked_picks(case)), [c.short() for c in gemm.configs]


@pytest.mark.parametrize("caps,n,k,expect", [
    ([16, 3], 256, 7168, (16, 4, 2)),  # 32 16-row CTAs at K 7168: 2-CTA clusters splitting K (exp. 168)
    ([16, 9, 16, 5, 12, 16], 2048, 2048, (32, 2, 1)),  # 384 32-row CTAs at K 2048: 2 warps, not 1 (exp. 168)
    ([16, 9, 16, 5], 2048, 2048, (16, 4, 1)),  # 256: 16-row CTAs of 4 warps, 2 stages (exp. 168f)
], ids=["ksplit", "two_warps", "rows16"])
def test_masked_skinny_small_launches(caps, n, k, expect):
    """The masked skinny kernel in exp. 168's rule picks for small launches: counts 0 .. capacity,
    past it, negative; the K-split clusters return together for an empty group."""
    _sm90_only()
    rnd = random.Random(1680)
    sets = [[0] * len(caps), caps, [rnd.randint(0, c) for c in caps], [40, -2] + caps[2:]]
    gemm, _data, _ref = _masked_calls(caps, n, k, sets, 1680)
    cfg = gemm.cfg
    assert cfg.skinny and cfg.masked and (cfg.mma_tile_mn[0], cfg.k_warps, cfg.k_split) == expect, cfg.short()


_WIDE_24 = ([16, 7, 12, 16] * 6, 2048, 1024, 1)  # 24 groups, skinny: one launch of the wide table (exp. 153)
_MIXED_40 = ([64, 128, 256, 96, 200] * 8, 1024, 2048, 3)  # 40 groups, mixed form: 12 + 12 + 16 (exp. 152)
_WIDE_260 = ([16, 5, 9, 16] * 65, 256, 512, 2)  # 260 groups, skinny: two wide-table launches, 128 + 132


@pytest.mark.parametrize("caps,n,k,launches,streams", [
    (*_WIDE_24, True), (*_MIXED_40, True), (*_MIXED_40, False), (*_WIDE_260, True), (*_WIDE_260, False),
], ids=["g24_skinny_wide", "g40_mixed-side_by_side", "g40_mixed-stream_order", "g260_skinny_wide-side_by_side",
        "g260_skinny_wide-stream_order"])
@pytest.mark.graphs
def test_masked_more_groups_than_a_launch(caps, n, k, launches, streams, monkeypatch):
    """More groups than one launch's table: the masked skinny kernel's wide table (exp. 153: up to
    256 groups in one launch), else one object per range of groups (exp. 152: boundaries at
    multiples of 4 groups), each reading its slice of the counts, on forked streams (default) or
    in stream order; int32 in place, int64 and strided int32 through the copy (`_masked_calls`)."""
    from nvfp4gemm import masked

    _sm90_only()
    g = len(caps)
    monkeypatch.setattr(masked, "CHUNK_STREAMS", streams)
    rnd = random.Random(152 + g)
    sets = [[0] * g, caps, [rnd.randint(0, c) for c in caps], [rnd.randint(-2, c + 3) for c in caps]]
    gemm, data, ref = _masked_calls(caps, n, k, sets, 1520 + g)
    assert len(gemm.configs) == launches, [c.short() for c in gemm.configs]
    if launches == 1:
        assert gemm.chunks is None and gemm.cfg.table_groups == 256 and gemm.cfg.skinny
    else:
        assert [s.groups for s in gemm.chunks] == [hi - lo for lo, hi in gemm._ranges]
        assert all(lo % 4 == 0 for lo, _hi in gemm._ranges) and gemm._ranges[-1][1] == g
    # a CUDA graph of a call (the chunks' fork and joins captured) replays with new counts
    saved = _scales_of(data)
    graph, counts_dev = _captured(gemm, caps)
    _replays_checked(graph, counts_dev, data, ref, saved, gemm, caps, ([rnd.randint(0, c) for c in caps], [0] * g))
    _restore(data, saved)


def _captured(gemm, caps):
    """(a CUDA graph of one call of `gemm`, the int32 counts tensor it reads): an eager warm-up
    call off the default stream first, as torch's docs ask."""
    counts_dev = torch.tensor(caps, dtype=torch.int32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemm(counts_dev)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm(counts_dev)
    return graph, counts_dev


def _replays_checked(graph, counts_dev, data, ref, saved, gemm, caps, raw_sets):
    """Replay `graph` once per counts set (written into `counts_dev`), each into poisoned
    outputs and A scales past the counts, and check every group's rows."""
    for raw in raw_sets:
        counts = _effective(raw, caps)
        _restore(data, saved)
        _poison_a_scales(data, counts)
        _prepare(data, counts)
        counts_dev.copy_(torch.tensor(raw, dtype=torch.int32))
        graph.replay()
        torch.cuda.synchronize()
        _check(data, ref, gemm.outputs, counts, f"graph replay, counts {raw}")


@pytest.mark.graphs
def test_masked_graph_replay():
    """A torch.cuda.graph of the call replays with the counts the tensor holds at replay time;
    then custom_kernel on the same buffers (full capacity) and a masked call again, both correct
    (no state shared between the two paths)."""
    from nvfp4gemm.dispatch import custom_kernel
    from nvfp4gemm.masked import MaskedGroupedGemm

    _sm90_only()
    caps, n, k = [256, 128, 192, 256, 64, 256, 160, 224], 7168, 2048
    data = R.generate_input(caps, [n] * 8, [k] * 8, 8, 1442, device="cuda", poison_padding=True)
    ref = R.ref_group(data)
    saved = _scales_of(data)
    gemm = MaskedGroupedGemm(data, expected_m=[8] * 8)  # (two launches in the graph: skinny, mixed)
    assert len(gemm.configs) == 2
    graph, counts_dev = _captured(gemm, caps)
    rnd = random.Random(1442)
    _replays_checked(graph, counts_dev, data, ref, saved, gemm, caps,
                     ([0] * 8, [rnd.randint(0, c) for c in caps], [c + 1 for c in caps],
                      [rnd.randint(0, 16) for c in caps], [rnd.randint(0, c) for c in caps]))
    _restore(data, saved)
    _prepare(data, caps)
    out = custom_kernel(data)
    torch.cuda.synchronize()
    ok, msg = R.check_implementation(data, out)
    assert ok, f"custom_kernel on the masked buffers: {msg}"
    counts = [rnd.randint(0, c) for c in caps]
    _poison_a_scales(data, counts)
    _prepare(data, counts)
    gemm(torch.tensor(counts, device="cuda"))
    torch.cuda.synchronize()
    _check(data, ref, gemm.outputs, counts, "masked call after custom_kernel")


def test_masked_refusals():
    """Bad counts and shapes are refused before anything is written, naming the constraint; on
    sm_100 the class refuses the GPU."""
    from nvfp4gemm.masked import MaskedGroupedGemm
    from nvfp4gemm.validate import InputError

    data = R.generate_input([64, 32], [4096, 4096], [2048, 2048], 2, 1443, device="cuda")
    if torch.cuda.get_device_capability()[0] == 10:
        with pytest.raises(InputError, match="sm_90"):
            MaskedGroupedGemm(data)
        return
    gemm = MaskedGroupedGemm(data)
    before = [c.clone() for _a, _b, c in data[0]]
    for bad, what in ((torch.tensor([1.0, 2.0], device="cuda"), "int32 or int64"),
                      (torch.tensor([1, 2, 3], device="cuda"), r"shape \(2,\)"),
                      (torch.tensor([1, 2]), "on cuda"),
                      ([1, 2], "int32 or int64")):
        with pytest.raises(InputError, match=what):
            gemm(bad)
    torch.cuda.synchronize()
    assert all(torch.equal(b, c) for b, (_a, _b, c) in zip(before, data[0])), "a refused call wrote C"
    narrow = R.generate_input([64, 32], [192, 192], [2048, 2048], 2, 1444, device="cuda")
    with pytest.raises(InputError, match="multiple of 128"):
        MaskedGroupedGemm(narrow)
    with pytest.raises(InputError, match="shape"):
        MaskedGroupedGemm((data[0], data[1], data[2], [(64, 4096, 2048, 1), (33, 4096, 2048, 1)]))


def test_masked_keeps_its_buffers():
    """The launch holds the buffers' addresses, so the object keeps the tensors alive: with the
    caller's references dropped and their memory offered to new allocations (filled with other
    values), a call still reads the original A_g, B_g and scales."""
    import gc

    from nvfp4gemm.masked import MaskedGroupedGemm

    _sm90_only()
    caps = [128, 96, 200, 64]
    data = R.generate_input(caps, [4096] * 4, [2048] * 4, 4, 1445, device="cuda", poison_padding=True)
    ref = R.ref_group(data)
    gemm = MaskedGroupedGemm(data)
    del data
    gc.collect()
    junk = [torch.full((1 << 22,), 3, dtype=torch.uint8, device="cuda") for _ in range(64)]  # (reuses freed blocks)
    counts = [100, 96, 17, 0]
    outs = gemm(torch.tensor(counts, device="cuda"))
    torch.cuda.synchronize()
    for g, (c, m) in enumerate(zip(outs, counts)):
        errs = R.compare(c[:m], ref[g][:m])
        assert not errs, f"group {g}: " + "; ".join(errs)
    del junk
