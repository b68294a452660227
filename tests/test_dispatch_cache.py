"""custom_kernel reuses a prepared launch only while the very same tensors come back."""

import types

import torch

import reference as R
from nvfp4gemm import dispatch


def fake_env(monkeypatch):
    calls = {"prepare": 0, "launch": 0}

    def prepare(data):
        calls["prepare"] += 1
        p = dispatch._Prepared()
        p.data, p.device = data, torch.device("cpu")
        p.objs, p.sizes = dispatch._identity(data)
        p.fn = None
        p.launch = lambda: calls.__setitem__("launch", calls["launch"] + 1)
        p.args, p.stream_handle, p.result = ("stream0",), 0, "out"
        return p

    monkeypatch.setattr(dispatch, "_prepare", prepare)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    dispatch._RECENT.clear()
    return calls


def test_same_tensors_reuse_prepared_launch(monkeypatch):
    calls = fake_env(monkeypatch)
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    for _ in range(3):
        assert dispatch.custom_kernel(d) == "out"
    assert calls == {"prepare": 1, "launch": 3}
    d2 = tuple(t.clone() for t in d)  # equal values, new tensors: prepared anew
    dispatch.custom_kernel(d2)
    assert calls["prepare"] == 2


def test_grouped_list_mutation_misses_cache(monkeypatch):
    calls = fake_env(monkeypatch)
    g = R.generate_input([40, 72], [128, 64], [256, 256], 2, 1, device="cpu")
    dispatch.custom_kernel(g)
    dispatch.custom_kernel(g)
    assert calls["prepare"] == 1
    a, b, c = g[0][1]
    g[0][1] = (a.clone(), b, c)  # same outer tuple, one new tensor inside a list
    dispatch.custom_kernel(g)
    assert calls["prepare"] == 2
    g[3][1] = (72, 64, 512, 1)  # sizes changed in place
    dispatch.custom_kernel(g)
    assert calls["prepare"] == 3


def test_kept_launches_keep_their_workspaces(monkeypatch):
    """A prepared launch is replayed from raw pointers while the dispatcher keeps it (its last
    RECENT_PREPARED inputs), so the kernel modules' caches must not drop the buffers it points
    into (nvfp4gemm/cache.py; the sm_90a caches once cleared themselves whole when full).
    Simulated dispatcher traffic: mostly new outputs, some repeats of kept ones; after every
    prepare each kept launch's buffers must still be the cached objects."""
    import collections
    import random

    from nvfp4gemm.cache import RECENT_PREPARED
    from nvfp4gemm.sm90 import dual_gemm, dual_mixed, grouped_gemm

    monkeypatch.setattr(dual_gemm, "sm_count", lambda dev: 132)
    cfg = dual_gemm.KernelConfig("dual", "sm_90a", (128, 128), split_k=True)
    lookups = {
        "a16": (dual_mixed._A16_CACHE, lambda c: dual_mixed.a16_workspace(c, 100, 256, 128)),
        "stream-K": (dual_mixed._SK_CACHE, lambda c: dual_mixed.stream_k_workspace(c, 4)),
        "tables": (grouped_gemm._TABLES, lambda c: grouped_gemm.cached_launch_tables(("t", c.data_ptr()), lambda: [c])),
        "split-K": (dual_gemm._SPLIT_CACHE, lambda c: dual_gemm.split_args(cfg, 256, 256, 1024, 1, c)),
    }
    rnd = random.Random(36)
    for name, (cache, lookup) in lookups.items():
        cache.clear()
        outputs = [torch.empty(1) for _ in range(300)]  # distinct addresses: distinct keys
        kept = collections.deque(maxlen=RECENT_PREPARED)  # (output, what its launch points into)
        fresh = iter(outputs)
        for _ in range(200):
            c = rnd.choice(kept)[0] if kept and rnd.random() < 0.2 else next(fresh)
            kept.append((c, lookup(c)))
            for _c, bufs in kept:
                assert any(v is bufs for v in cache.values()), f"{name}: a kept launch's buffers were dropped"
        cache.clear()
