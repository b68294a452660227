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
