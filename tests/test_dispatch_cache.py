"""custom_kernel validates each input signature in full once and launches through a template
whose data addresses it rewrites per call (nvfp4gemm/dispatch.py).  CPU only: a stand-in kernel
records the addresses each launch would pass."""

import collections
import ctypes
import gc
import types

import pytest
import torch

import reference as R
from nvfp4gemm import dispatch
from nvfp4gemm.formats import DUAL_DATA_SLOTS
from nvfp4gemm.validate import InputError


def _pointers(args):
    from cutlass.cute.runtime import _Pointer

    return [a._desc.value for a in args if isinstance(a, _Pointer)]


def fake_env(monkeypatch):
    """The dispatcher with a stand-in dual kernel module: DATA_SLOTS as the real dual kernels'
    (a, b1, b2, sfa_perm, sfb1_perm, sfb2_perm, c) plus one workspace pointer the template owns.
    Returns counters and the list of launches (each: the addresses passed)."""
    calls = collections.Counter()
    launches = []
    ws = torch.empty(64)

    def runtime_args(data, cfg, stream, keep=None):
        calls["runtime_args"] += 1
        if keep is not None:
            keep.append(ws)
        return _dual_args(data, ws, stream)

    mod = types.SimpleNamespace(DATA_SLOTS=DUAL_DATA_SLOTS,
                                runtime_args=runtime_args)
    fn = lambda *args: launches.append(_pointers(args))  # noqa: E731  (no generate_execution_args: plain calls)
    _cpu_dispatcher(monkeypatch, "validate_dual", calls, fn, mod)
    return calls, launches, ws


def _dual_args(data, ws, stream) -> tuple:
    """A stand-in dual module's arguments: the DATA_SLOTS tensors' addresses (a, b1, b2, sfa_perm,
    sfb1_perm, sfb2_perm, c), one workspace pointer, M, the stream."""
    from cutlass import Int32
    from cutlass.cute.runtime import make_ptr
    import cutlass
    import cutlass.cute as cute

    ptrs = [make_ptr(cutlass.Uint8, data[i].data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
            for i in (0, 1, 2, 6, 7, 8, 9)]
    return (*ptrs, make_ptr(cutlass.Float32, ws.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
            Int32(data[0].shape[0]), stream)


def _cpu_dispatcher(monkeypatch, validator: str, calls, fn, mod):
    """The dispatcher on CPU tensors with a stand-in plan (compiled `fn`, kernel module `mod`),
    counting full validations in calls["validate"]; its caches emptied."""
    real = getattr(dispatch, validator)

    def counted(data):
        calls["validate"] += 1
        return real(data)

    monkeypatch.setattr(dispatch, validator, counted)
    monkeypatch.setattr(dispatch, "validate_device", lambda used: torch.device("cpu"))
    monkeypatch.setattr(dispatch, "plan", lambda problem, shape, device, dynamic_m=None: ("sm_90a", None, types.SimpleNamespace(fn=fn), mod))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    # (a CUDA build of torch has the raw-stream call, which `_stream_handle` prefers: it would ask
    # for the CPU device's stream on a GPU machine)
    monkeypatch.setattr(dispatch, "_RAW_STREAM", None)
    dispatch.clear_caches()


def _expected(data, ws):
    return [data[i].data_ptr() for i in (0, 1, 2, 6, 7, 8, 9)] + [ws.data_ptr()]


def test_fresh_tensors_reuse_the_template(monkeypatch):
    """New tensors with the same signature (gpu-mode's eval.py makes a new input every timed call):
    validated by signature, launched through the first call's template with their own addresses."""
    calls, launches, ws = fake_env(monkeypatch)
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    assert dispatch.custom_kernel(d) is d[-1]
    clones = [tuple(t.clone() for t in d) for _ in range(3)]
    for c in clones + [d]:
        assert dispatch.custom_kernel(c) is c[-1]
    assert calls == {"validate": 1, "runtime_args": 1}
    assert launches == [_expected(x, ws) for x in [d] + clones + [d]]


def test_threads_do_not_mix_their_addresses(monkeypatch):
    """Two threads calling one signature on one stream share its launch template: each launch
    must carry its own call's addresses (exp. 134: a thread switch between one call's address
    rewrite and its launch let another call's rewrite in; `dispatch._LOCK`)."""
    import threading
    import time

    _calls, _launches, ws = fake_env(monkeypatch)
    seen = []
    fn = lambda *args: seen.append((threading.get_ident(), _pointers(args)))  # noqa: E731
    mod = dispatch.plan(None, None, None)[3]
    monkeypatch.setattr(dispatch, "plan", lambda problem, shape, device, dynamic_m=None: ("sm_90a", None, types.SimpleNamespace(fn=fn), mod))
    point_at = dispatch._Template._point_at

    def slow_point_at(self, *a):  # (a thread switch right after the rewrite)
        point_at(self, *a)
        time.sleep(0.001)

    monkeypatch.setattr(dispatch._Template, "_point_at", slow_point_at)
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    dispatch.custom_kernel(d)
    inputs = {k: [tuple(t.clone() for t in d) for _ in range(6)] for k in range(2)}
    done = {}

    def worker(k):
        for x in inputs[k]:
            dispatch.custom_kernel(x)
        done[k] = threading.get_ident()

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(2):
        mine = [p for ident, p in seen if ident == done[k]]
        assert mine == [_expected(x, ws) for x in inputs[k]], f"thread {k} launched another call's addresses"


def test_templates_on_two_streams_own_their_workspaces(monkeypatch):
    """Two streams' templates of one signature, made from the same input, get workspaces of
    their own from a module cache keyed by the output's address (exp. 135: they were handed
    the same buffer); a template made inside a caller's capture, which may not build (upload)
    tables, reuses the latest one."""
    from nvfp4gemm.cache import lru_lookup

    cache, launches, calls = collections.OrderedDict(), [], collections.Counter()

    def runtime_args(data, cfg, stream, keep=None):
        ws = lru_lookup(cache, data[9].data_ptr(), lambda: torch.empty(64), 8)[0]
        if keep is not None:
            keep.append(ws)
        return _dual_args(data, ws, stream)

    mod = types.SimpleNamespace(DATA_SLOTS=DUAL_DATA_SLOTS, runtime_args=runtime_args)
    _cpu_dispatcher(monkeypatch, "validate_dual", calls, lambda *args: launches.append(_pointers(args)[-1]), mod)
    handle, capturing = [1], [False]
    monkeypatch.setattr(dispatch, "_stream_handle", lambda device: handle[0])
    monkeypatch.setattr(dispatch, "_capturing", lambda: capturing[0])
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    dispatch.custom_kernel(d)
    handle[0] = 2
    dispatch.custom_kernel(d)
    handle[0], capturing[0] = 3, True
    dispatch.custom_kernel(d)
    assert launches[0] != launches[1], "two streams' templates share a workspace"
    assert launches[2] == launches[1] == cache[d[9].data_ptr()].data_ptr()


def test_new_signature_is_validated_in_full(monkeypatch):
    """Anything validation looks at -- a dtype, a stride, a shape, the problem sizes -- changes the
    signature, so bad input never rides on a validated one."""
    calls, launches, _ws = fake_env(monkeypatch)
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    dispatch.custom_kernel(d)
    bad_dtype = list(t.clone() for t in d)
    bad_dtype[9] = bad_dtype[9].float()
    with pytest.raises(InputError, match="c must have dtype torch.float16"):
        dispatch.custom_kernel(tuple(bad_dtype))
    bad_stride = list(t.clone() for t in d)
    bad_stride[9] = torch.empty(64, 128, 1, dtype=torch.float16).transpose(0, 1)
    with pytest.raises(InputError, match="c must be row-major"):
        dispatch.custom_kernel(tuple(bad_stride))
    bad_shape = list(t.clone() for t in d)
    bad_shape[9] = torch.empty(128, 128, 1, dtype=torch.float16)
    with pytest.raises(InputError, match="b1 has N=64 rows but c has N=128 columns"):
        dispatch.custom_kernel(tuple(bad_shape))
    assert calls["validate"] == 4 and len(launches) == 1


def test_misaligned_tensor_with_known_signature(monkeypatch):
    """A known signature still needs 16-byte aligned data: a misaligned view is caught by the
    full validation it falls back to, before any launch."""
    calls, launches, _ws = fake_env(monkeypatch)
    monkeypatch.setattr(dispatch, "validate_device", _aligned_only)
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    dispatch.custom_kernel(d)
    for off in (1, 4):  # same shape and strides, 2 or 8 bytes off
        shifted = list(t.clone() for t in d)
        c = shifted[9]
        buf = torch.empty(c.numel() + 8, dtype=torch.float16)
        shifted[9] = buf.as_strided(c.shape, c.stride(), off)
        with pytest.raises(InputError, match="c must be 16-byte aligned"):
            dispatch.custom_kernel(tuple(shifted))
        assert dispatch._signature(*dispatch._flatten(tuple(shifted))) == dispatch._signature(*dispatch._flatten(d))
    assert len(launches) == 1


def test_templates_past_the_limit_are_dropped(monkeypatch):
    """More streams than TEMPLATE_ENTRIES: the least recently used stream's template leaves the
    LRU and its entry's own dict (which would otherwise keep it and its workspaces alive)."""
    calls, launches, _ws = fake_env(monkeypatch)
    monkeypatch.setattr(dispatch, "TEMPLATE_ENTRIES", 2)
    handle = [0]
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: types.SimpleNamespace(cuda_stream=handle[0]))
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    for h in (11, 12, 11, 13):  # (12 is the least recently used when 13 comes)
        handle[0] = h
        dispatch.custom_kernel(d)
    assert sorted(dispatch._RECENT["dual"].templates) == [11, 13]
    assert sorted(h for _tid, h in dispatch._TEMPLATES) == [11, 13]
    assert len(launches) == 4 and calls["validate"] == 1


def test_known_signature_is_checked_by_its_guard(monkeypatch):
    """New tensors of the latest signature pass torch's C++ guard without the Python signature;
    the guard covers the tensors the kernel uses, so a used one of another dtype, shape or stride
    misses it and gets full validation.  Without TensorGuards the signature alone still serves."""
    calls, launches, _ws = fake_env(monkeypatch)
    real_sig = dispatch._signature
    monkeypatch.setattr(dispatch, "_signature", lambda *a: (calls.update(["signature"]), real_sig(*a))[1])
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    dispatch.custom_kernel(d)
    assert dispatch._RECENT["dual"].guard is not None, "torch has no usable TensorGuards"
    for _ in range(3):
        dispatch.custom_kernel(tuple(t.clone() for t in d))
    assert calls == {"signature": 1, "validate": 1, "runtime_args": 1}
    for i, bad in ((0, lambda t: torch.empty(t.shape, dtype=torch.int16)), (6, lambda t: t.clone()[:16]),
                   (9, lambda t: t.transpose(0, 1).contiguous().transpose(0, 1))):
        x = list(t.clone() for t in d)
        x[i] = bad(x[i])
        with pytest.raises(InputError):
            dispatch.custom_kernel(tuple(x))
    assert calls["validate"] == 4 and len(launches) == 4
    dispatch.clear_caches()
    monkeypatch.setattr(dispatch, "_TensorGuards", None)
    dispatch.custom_kernel(d)
    dispatch.custom_kernel(tuple(t.clone() for t in d))
    assert calls["validate"] == 5 and calls["signature"] == 6 and len(launches) == 6


def test_grouped_guard_covers_the_used_tensors(monkeypatch):
    """Grouped: the guard checks a, b, c and the permuted scales of every group; the plain scales,
    which no kernel reads, are validated with the signature's first input only, so a later input
    whose plain scale differs still takes the fast path, while a used tensor that differs (or
    sizes that no longer match) gets full validation."""
    calls = collections.Counter()
    _cpu_dispatcher(monkeypatch, "validate_group", calls, lambda *a: calls.update(["launch"]),
                    types.SimpleNamespace(runtime_args=lambda d, c, s: ()))
    real_sig = dispatch._signature
    monkeypatch.setattr(dispatch, "_signature", lambda *a: (calls.update(["signature"]), real_sig(*a))[1])
    g = R.generate_input([40, 72], [128, 64], [256, 256], 2, 1, device="cpu")

    def fresh(x):
        return ([tuple(t.clone() for t in grp) for grp in x[0]], [tuple(t.clone() for t in grp) for grp in x[1]],
                [tuple(t.clone() for t in grp) for grp in x[2]], [tuple(s) for s in x[3]])

    dispatch.custom_kernel(g)
    dispatch.custom_kernel(fresh(g))
    odd_plain = fresh(g)
    odd_plain[1][0] = (odd_plain[1][0][0][:8], odd_plain[1][0][1])  # group 0's plain sfa: other rows
    dispatch.custom_kernel(odd_plain)
    assert calls == {"signature": 1, "validate": 1, "launch": 3}
    bad_b = fresh(g)
    bad_b[0][1] = (bad_b[0][1][0], bad_b[0][1][1][:32], bad_b[0][1][2])  # group 1's b: 32 rows, not 64
    with pytest.raises(InputError):
        dispatch.custom_kernel(bad_b)
    bad_sizes = fresh(g)
    bad_sizes[3][0] = (40, 128, 512, 1)
    with pytest.raises(InputError):
        dispatch.custom_kernel(bad_sizes)
    assert calls["validate"] == 3 and calls["launch"] == 3


def test_dispatcher_holds_no_input(monkeypatch):
    """After a call nothing in the dispatcher keeps the input's tensors alive, so a caller's
    dropped input is freed where the caller drops it, not inside a later (timed) call; the same
    input object again still skips every check; new tensors at the same addresses (views) need
    no rewrite of the template."""
    import weakref

    calls, launches, ws = fake_env(monkeypatch)
    real = dispatch._guard_passes
    monkeypatch.setattr(dispatch, "_guard_passes", lambda *a: (calls.update(["guard"]), real(*a))[1])
    d = R.generate_input(128, 64, 256, 1, 1, device="cpu")
    dispatch.custom_kernel(d)
    x = tuple(t.clone() for t in d)
    refs = [weakref.ref(t) for t in x]
    dispatch.custom_kernel(x)
    dispatch.custom_kernel(x)
    assert calls["guard"] == 1, "the same input object again was checked"
    same_place = tuple(t[...] for t in x)
    dispatch.custom_kernel(same_place)
    assert calls["guard"] == 2 and len(launches) == 4
    del x, same_place
    assert all(r() is None for r in refs), "the dispatcher still holds a dropped input's tensors"
    dispatch.custom_kernel(tuple(t.clone() for t in d))
    assert calls == {"validate": 1, "runtime_args": 1, "guard": 3}


def _aligned_only(used):
    from nvfp4gemm.validate import _check_aligned

    _check_aligned(used)
    return torch.device("cpu")


def test_grouped_list_mutation_changes_signature(monkeypatch):
    """A list element of the same input object replaced by a new tensor of the same signature
    passes by signature; sizes changed in place no longer match the tensors: full validation,
    which refuses them.  (A stand-in module without a template: arguments built per call.)"""
    calls = collections.Counter()
    _cpu_dispatcher(monkeypatch, "validate_group", calls, lambda *a: None,
                    types.SimpleNamespace(runtime_args=lambda d, c, s: ()))
    g = R.generate_input([40, 72], [128, 64], [256, 256], 2, 1, device="cpu")
    dispatch.custom_kernel(g)
    dispatch.custom_kernel(g)
    assert calls["validate"] == 1
    a, b, c = g[0][1]
    g[0][1] = (a.clone(), b, c)  # a new tensor of the same signature: no new validation
    dispatch.custom_kernel(g)
    assert calls["validate"] == 1
    g[3][1] = (72, 64, 512, 1)  # sizes changed in place: the tensors no longer match them
    with pytest.raises(InputError):
        dispatch.custom_kernel(g)
    assert calls["validate"] == 2


def test_same_grouped_object_checks_its_used_tensors_only(monkeypatch):
    """The same grouped input object again is recognised from its used tensors (a, b, c and the
    permuted scales, by identity) and its sizes, without flattening it: a replaced plain scale,
    which no kernel reads, keeps the fast path; a replaced used tensor or sizes changed in
    place do not."""
    calls = collections.Counter()
    _cpu_dispatcher(monkeypatch, "validate_group", calls, lambda *a: calls.update(["launch"]),
                    types.SimpleNamespace(runtime_args=lambda d, c, s: ()))
    real = dispatch._guard_passes
    monkeypatch.setattr(dispatch, "_guard_passes", lambda *a: (calls.update(["guard"]), real(*a))[1])
    monkeypatch.setattr(dispatch, "_flatten", (lambda f: lambda d: (calls.update(["flatten"]), f(d))[1])(dispatch._flatten))
    g = R.generate_input([40, 72], [128, 64], [256, 256], 2, 1, device="cpu")
    dispatch.custom_kernel(g)
    dispatch.custom_kernel(g)
    assert calls == {"validate": 1, "flatten": 1, "launch": 2}
    g[1][0] = tuple(t.clone() for t in g[1][0])  # group 0's plain scales: new tensors
    dispatch.custom_kernel(g)
    assert calls == {"validate": 1, "flatten": 1, "launch": 3}
    g[2][1] = tuple(t.clone() for t in g[2][1])  # group 1's permuted scales: new tensors
    dispatch.custom_kernel(g)
    assert calls == {"validate": 1, "flatten": 2, "guard": 1, "launch": 4}
    dispatch.custom_kernel(g)
    assert calls["flatten"] == 2
    g[3][0] = list(g[3][0])  # the same sizes as a list: not equal to the kept tuple, so the full path
    dispatch.custom_kernel(g)
    dispatch.custom_kernel(g)  # (kept as given now: a hit)
    assert calls["flatten"] == 3 and calls["validate"] == 1
    g[3][0][2] = 512  # sizes changed in place: the full path, which refuses them
    with pytest.raises(InputError):
        dispatch.custom_kernel(g)


SLOT_CASES = [("sm90.dual_gemm", (256, 512, 1024, 1)), ("sm90.dual_skinny", (8, 512, 1024, 1)),
              ("sm90.dual_mixed", (256, 4096, 7168, 1)), ("sm90.dual_mixed", (512, 3072, 7168, 1)),
              ("sm90.dual_mixed", (384, 3072, 7168, 1)), ("sm100.dual_gemm", (256, 512, 1024, 1))]


@pytest.mark.parametrize("module,shape", SLOT_CASES)
def test_data_slots_match_runtime_args(monkeypatch, module, shape):
    """Each dual module's DATA_SLOTS names every argument that holds a data tensor's address: the
    template rewrites exactly those (CPU stand-in tensors, distinct addresses).  The one exception
    is the mixed kernel's stream-K workspace and flags, for which C stands in where the plan does
    not split (never touched then)."""
    import importlib

    from cuda.bindings.driver import CUstream
    from cutlass.cute.runtime import _Pointer

    import configs

    mod = importlib.import_module(f"nvfp4gemm.{module}")
    arch = "sm_100a" if module.startswith("sm100") else "sm_90a"
    cfg = configs.select_config("dual", arch, shape)
    assert dispatch.harness.kernel_module("dual", arch, cfg)[0] is mod, "the rule picks another kernel for this shape"
    if hasattr(mod, "sm_count"):
        monkeypatch.setattr(mod, "sm_count", lambda dev: 132)
    if hasattr(mod, "common"):
        monkeypatch.setattr(mod.common, "device_max_active_clusters", lambda *a, **k: 66)
    data = R.generate_input(*shape, 5, device="cpu")
    keep = []
    args = mod.runtime_args(data, cfg, CUstream(0), keep=keep)
    addr = {i: a._pointer for i, a in enumerate(args) if isinstance(a, _Pointer)}
    slots = dict(mod.DATA_SLOTS)
    for ai, di in slots.items():
        assert addr[ai] == data[di].data_ptr(), f"argument {ai} is not tensor {di}"
    data_addrs = {t.data_ptr() for t in data}
    for ai, v in addr.items():
        if ai in slots or v not in data_addrs:
            continue
        assert module == "sm90.dual_mixed" and ai in (8, 9) and v == data[9].data_ptr(), \
            f"argument {ai} holds a data address but is no slot"
    owned = {t.data_ptr() for t in keep if isinstance(t, torch.Tensor)}
    for ai, v in addr.items():  # every other address is a workspace the template holds
        assert ai in slots or v in owned or v in data_addrs, f"argument {ai}: its buffer is not in keep"
    if module == "sm100.dual_gemm":  # (its scalars: M, N, K, L, then the cluster count)
        m, n, k, l = shape
        assert [int(a) for a in args[7:12]] == [m, n, k, l, 66]


def test_sm90_grouped_pointer_table_layout():
    """The per-address-set group table that the template points the grouped kernels at has
    `launch_tables`' layout (per group a, b, c, sfa_perm, sfb_perm, M, N, K; zero rows up to
    MAX_GROUPS) and is cached per set;
    pointer_args hands back the table itself for the template to hold."""
    from nvfp4gemm.sm90 import grouped_gemm as gg

    g = R.generate_input([40, 72, 100], [128, 64, 256], [256, 256, 512], 3, 1, device="cpu")
    (pairs, table) = gg.pointer_args(g, None)
    assert pairs == ((0, table.data_ptr()),)
    want = []  # the layout the kernels' group_meta_tensor reads, spelled out
    for (a, b, c), (sa, sb), (m, n, k, _l) in zip(g[0], g[2], g[3]):
        want += [a.data_ptr(), b.data_ptr(), c.data_ptr(), sa.data_ptr(), sb.data_ptr(), m, n, k]
    assert table.tolist() == want + [0] * (gg.MAX_GROUPS * gg.META_FIELDS - len(want))
    rows, _shapes = gg.group_table_rows(g)
    assert [v for r in rows for v in r] == want
    assert gg.pointer_args(g, None)[1] is table, "same addresses: the cached table"
    other = ([(a.clone(), b, c) for a, b, c in g[0]], g[1], g[2], g[3])
    assert gg.pointer_args(other, None)[1] is not table


def test_dual_swap_pointer_table():
    """The dual swap_ab kernel's 2-row group table (row 1: B2 and its scales) per address set."""
    from nvfp4gemm.sm90 import dual_swap

    d = R.generate_input(40, 512, 1024, 1, 3, device="cpu")
    pairs, table = dual_swap.pointer_args(d, None)
    assert pairs == ((0, table.data_ptr()),)
    a, b1, b2, _sfa, _sfb1, _sfb2, sfa_p, sfb1_p, sfb2_p, c = d
    head = table.tolist()[:16]
    assert head == [a.data_ptr(), b1.data_ptr(), c.data_ptr(), sfa_p.data_ptr(), sfb1_p.data_ptr(), 40, 512, 1024,
                    0, b2.data_ptr(), 0, 0, sfb2_p.data_ptr(), 0, 0, 0]
    assert not any(table.tolist()[16:])


def test_template_with_pointer_args_holds_its_table(monkeypatch):
    """A module with pointer_args (the grouped kernels): each call on new tensors points the
    template's argument at that address set's table, which the template holds while it does."""
    from cutlass.cute.runtime import make_ptr
    import cutlass
    import cutlass.cute as cute

    calls, launches = collections.Counter(), []
    tables = {}

    def table_of(data):
        key = tuple(t.data_ptr() for grp in data[0] for t in grp)
        return tables.setdefault(key, torch.empty(16))

    def runtime_args(data, cfg, stream, keep=None):
        calls["runtime_args"] += 1
        return (make_ptr(cutlass.Int64, table_of(data).data_ptr(), cute.AddressSpace.gmem, assumed_align=16), stream)

    def pointer_args(data, cfg, stream_handle=None):
        calls["pointer_args"] += 1
        t = table_of(data)
        return ((0, t.data_ptr()),), t

    mod = types.SimpleNamespace(runtime_args=runtime_args, pointer_args=pointer_args)
    _cpu_dispatcher(monkeypatch, "validate_group", calls, lambda *args: launches.append(_pointers(args)), mod)
    g = R.generate_input([40, 72], [128, 64], [256, 256], 2, 1, device="cpu")
    other = ([tuple(t.clone() for t in grp) for grp in g[0]], g[1], g[2], g[3])
    for d in (g, g, other, g):
        dispatch.custom_kernel(d)
    want = [table_of(d).data_ptr() for d in (g, g, other, g)]
    assert launches == [[w] for w in want]
    assert calls == {"validate": 1, "runtime_args": 1, "pointer_args": 2}  # g repeated: nothing to rewrite
    (tpl,) = next(iter(dispatch._SIGS.values())).templates.values()
    assert tpl.owner is table_of(g)


def _writer_env(monkeypatch, handle=0):
    """The dispatcher with the table writer, the real sm_90a grouped table layout and stand-in
    launches recording ("writer", table address, entries) and ("main", table argument); the
    stream handle `handle`; `capturing[0]` is what a capture check answers (None: none allowed)."""
    from cutlass.cute.runtime import make_ptr
    import cutlass
    import cutlass.cute as cute

    from nvfp4gemm import table_writer
    from nvfp4gemm.sm90 import grouped_gemm as gg

    calls, order = collections.Counter(), []
    shared = torch.empty(128, dtype=torch.int64)

    def runtime_args(data, cfg, stream, keep=None):
        return (make_ptr(cutlass.Int64, shared.data_ptr(), cute.AddressSpace.gmem, assumed_align=16), stream)

    def writer(dst, entries, stream):
        order.append(("writer", dst._desc.value, [e._desc.value or 0 for e in entries]))  # (c_void_p 0 reads None)

    monkeypatch.setattr(table_writer, "compiled", lambda arch, runnable, n=table_writer.ENTRIES, total=None: writer)
    monkeypatch.setattr(dispatch, "TABLE_WRITER", True)
    mod = types.SimpleNamespace(runtime_args=runtime_args, table_entries=gg.table_entries, writer_target=gg.writer_target,
                                pointer_args=lambda *a, **k: pytest.fail("pointer_args used with the writer on"))
    main = lambda *args: order.append(("main", args[0]._desc.value))  # noqa: E731
    _cpu_dispatcher(monkeypatch, "validate_group", calls, main, mod)
    monkeypatch.setattr(dispatch, "plan", lambda problem, shape, device, dynamic_m=None: (
        "sm_90a", None, types.SimpleNamespace(fn=main, arch="sm_90a", runnable=False), mod))
    monkeypatch.setattr(dispatch, "_stream_handle", lambda device: handle)
    capturing = [False if handle else None]
    monkeypatch.setattr(dispatch, "_capturing", lambda: capturing[0] if capturing[0] is not None
                        else pytest.fail("capture checked on the default stream"))
    g = R.generate_input([40, 72], [128, 64], [256, 256], 2, 1, device="cpu")
    other = ([tuple(t.clone() for t in grp) for grp in g[0]], g[1], g[2], g[3])
    return order, capturing, g, other, gg


def _template():
    (tpl,) = next(iter(dispatch._SIGS.values())).templates.values()
    return tpl


def test_table_writer_template(monkeypatch):
    """The writer path: each address set gets a table of its own, written once (writer, then
    main); an address set seen before (the leaderboard's loops cycle through 15 or 50 inputs)
    launches the main kernel alone, pointed at its table.  The template's own table is not used
    by eager calls."""
    order, _capturing, g, other, gg = _writer_env(monkeypatch)
    for d in (g, g, other, g, other):
        dispatch.custom_kernel(d)
    tpl = _template()
    t_g, t_o = (tpl.bound[tuple(t.data_ptr() for t in tpl.entry.used(dispatch._flatten(d)[1]))] for d in (g, other))
    assert len({tpl.target.dst, t_g.dst, t_o.dst}) == 3 and t_g.dst == t_g.owner.data_ptr()
    pad = [0] * (32 - 16)  # (two groups' 16 entries: 32 parameters; the writer zeroes the other rows)
    assert len(tpl.entry_values) == 32
    assert order == [("writer", t_g.dst, list(gg.table_entries(g)) + pad), ("main", t_g.dst), ("main", t_g.dst),
                     ("writer", t_o.dst, list(gg.table_entries(other)) + pad), ("main", t_o.dst),
                     ("main", t_g.dst), ("main", t_o.dst)]


def test_table_writer_bound_tables_are_bounded(monkeypatch):
    """Beyond BOUND_ENTRIES address sets the least recently used table is dropped (and written
    again when its addresses come back)."""
    order, _capturing, g, other, _gg = _writer_env(monkeypatch)
    monkeypatch.setattr(dispatch, "BOUND_ENTRIES", 1)
    for d in (g, other, g):
        dispatch.custom_kernel(d)
    assert [o[0] for o in order] == ["writer", "main"] * 3 and len(_template().bound) == 1


def test_table_writer_in_capture(monkeypatch):
    """A captured launch at addresses an eager call has written a table for reads that table
    (kept for the caller's graph: no writer node, exp. 132); at new addresses it writes the
    template's own table every time (a replay writes its rows first).  Eager calls never read the
    template's own table, so after captures an eager call at known addresses still launches the
    main kernel alone, on its own table.  (On the default stream, handle 0, torch never
    captures: no capture check there -- `_writer_env`.)"""
    monkeypatch.setattr(dispatch, "_PINNED", {})
    order, capturing, g, other, _gg = _writer_env(monkeypatch, handle=7)
    dispatch.custom_kernel(g)
    capturing[0] = True
    dispatch.custom_kernel(g)
    dispatch.custom_kernel(other)
    capturing[0] = False
    dispatch.custom_kernel(g)
    dispatch.custom_kernel(other)
    tpl = _template()
    own = tpl.target.dst
    t_g, t_o = (tpl.bound[tuple(t.data_ptr() for t in tpl.entry.used(dispatch._flatten(d)[1]))] for d in (g, other))
    assert [o[:2] for o in order] == [("writer", t_g.dst), ("main", t_g.dst),
                                      ("main", t_g.dst), ("writer", own), ("main", own),
                                      ("main", t_g.dst), ("writer", t_o.dst), ("main", t_o.dst)]
    assert any(v is t_g for v in dispatch._PINNED.values()) and not any(v is t_o for v in dispatch._PINNED.values())


def test_capture_reads_a_table_written_on_another_stream(monkeypatch):
    """torch captures on a side stream, whose template is not the eager call's: the table the
    eager call's template wrote for these addresses is found there (same signature, same
    layout) and read by the captured launch (exp. 132)."""
    order, capturing, g, _other, _gg = _writer_env(monkeypatch, handle=7)
    dispatch.custom_kernel(g)
    eager = _template()
    handles = iter([8])
    monkeypatch.setattr(dispatch, "_stream_handle", lambda device: next(handles, 8))
    capturing[0] = True
    dispatch.custom_kernel(g)
    capturing[0] = False
    t_g = _table_of(eager, g)
    assert len(next(iter(dispatch._SIGS.values())).templates) == 2
    assert [o[:2] for o in order] == [("writer", t_g), ("main", t_g), ("main", t_g)]


def test_a_captured_template_outlives_eviction(monkeypatch):
    """A template that a caller's CUDA-graph capture launched through is kept, with what its
    arguments point into (its own table and workspaces), after the dispatcher drops it: the
    caller's graph still points there (exp. 131).  A template no capture used is freed."""
    import weakref

    monkeypatch.setattr(dispatch, "_PINNED", {})
    order, capturing, g, _other, _gg = _writer_env(monkeypatch, handle=7)
    dispatch.custom_kernel(g)
    eager = weakref.ref(_template())
    dispatch.clear_caches()
    gc.collect()
    assert eager() is None, "a template no capture used is kept"
    capturing[0] = True
    dispatch.custom_kernel(g)
    capturing[0] = False
    tpl = _template()
    captured, table = weakref.ref(tpl), tpl.target.owner
    assert [o[:2] for o in order[-2:]] == [("writer", tpl.target.dst), ("main", tpl.target.dst)]
    del tpl
    dispatch.clear_caches()
    gc.collect()
    assert captured() is not None and any(t is table for t in captured().keep)


def test_a_captured_uploaded_table_is_kept(monkeypatch):
    """With uploaded tables (NVFP4_TABLE_WRITER=0) a captured launch points into `pointer_args`'
    buffer, which the module's cache may drop: it is kept (exp. 131)."""
    monkeypatch.setattr(dispatch, "_PINNED", {})
    order, capturing, g, other, _gg = _writer_env(monkeypatch, handle=7)
    monkeypatch.setattr(dispatch, "TABLE_WRITER", False)
    owners = []

    def pointer_args(data, cfg, stream_handle=None):
        owners.append(torch.empty(16, dtype=torch.int64))
        return [(0, owners[-1].data_ptr())], owners[-1]

    monkeypatch.setattr(_template_mod(), "pointer_args", pointer_args)
    dispatch.custom_kernel(g)
    dispatch.custom_kernel(other)  # (eager: pointed at a table of its own)
    capturing[0] = True
    dispatch.custom_kernel(g)
    capturing[0] = False
    assert len(owners) == 2 and order[-1] == ("main", owners[-1].data_ptr())
    assert any(v is owners[-1] for v in dispatch._PINNED.values())
    assert not any(v is owners[0] for v in dispatch._PINNED.values())


def _template_mod():
    return next(iter(dispatch._SIGS.values())).mod if dispatch._SIGS else dispatch.plan("group", None, None)[3]


_REAL_CAPTURE = dispatch._Template._capture


def _graph_env(monkeypatch, handle=0):
    """`_writer_env` with launches that look packed (so templates may capture) and a stand-in
    capture: ("capture", table argument) recorded, and its graph's launches recorded as
    ("graph", the table argument at capture)."""
    order, capturing, g, other, gg = _writer_env(monkeypatch, handle)

    class Packed(dispatch.PackedLaunch):
        def __init__(self, fn, args):
            super().__init__(fn, args)
            self.capi, self.packed = (lambda packed: fn(*args)), None

    class Graph:
        def __init__(self, table):
            self.table = table

        def launch(self, stream):
            order.append(("graph", self.table))

    def capture(tpl):
        order.append(("capture", tpl.args[0]._desc.value))
        return Graph(tpl.args[0]._desc.value)

    monkeypatch.setattr(dispatch, "PackedLaunch", Packed)
    monkeypatch.setattr(dispatch._Template, "_capture", capture)
    monkeypatch.setattr(dispatch, "GRAPHS", True)
    return order, capturing, g, other


def _table_of(tpl, d):
    return tpl.bound[tuple(t.data_ptr() for t in tpl.entry.used(dispatch._flatten(d)[1]))].dst


def test_graphs_replay_address_sets_seen_before(monkeypatch):
    """An address set's launch is captured on its GRAPH_AFTER-th call, after its table is
    pointed at, and replayed from then on with nothing else launched."""
    order, _capturing, g, other = _graph_env(monkeypatch)
    for d in (g, other, g, other, g, g):
        dispatch.custom_kernel(d)
    tpl = _template()
    t_g, t_o = _table_of(tpl, g), _table_of(tpl, other)
    assert [o[:2] for o in order] == [("writer", t_g), ("main", t_g), ("writer", t_o), ("main", t_o),
                                      ("capture", t_g), ("graph", t_g), ("capture", t_o), ("graph", t_o),
                                      ("graph", t_g), ("graph", t_g)]


def test_graphs_are_dropped_with_their_tables(monkeypatch):
    """A table dropped beyond BOUND_ENTRIES takes its graph along: the address set starts over
    (its table written again, plain launches until it is captured again)."""
    order, _capturing, g, other = _graph_env(monkeypatch)
    monkeypatch.setattr(dispatch, "BOUND_ENTRIES", 1)
    for d in (g, g, other, g, g):
        dispatch.custom_kernel(d)
    assert [o[0] for o in order] == ["writer", "main", "capture", "graph", "writer", "main", "writer", "main",
                                     "capture", "graph"]
    assert list(_template().graphs) == list(_template().bound)


def test_graphs_off_and_not_in_a_callers_capture(monkeypatch):
    """NVFP4_GRAPHS=0 (GRAPHS False): no captures.  A call that is itself being captured
    launches plainly (on the table its eager calls wrote), even where a graph exists."""
    order, capturing, g, _other = _graph_env(monkeypatch, handle=7)
    for _ in range(3):
        dispatch.custom_kernel(g)
    capturing[0] = True
    dispatch.custom_kernel(g)
    tpl = _template()
    assert [o[0] for o in order] == ["writer", "main", "capture", "graph", "graph", "main"]
    assert order[-1][1] == _table_of(tpl, g)  # (its eager table: exp. 132)
    monkeypatch.setattr(dispatch, "GRAPHS", False)
    dispatch.clear_caches()
    order.clear()
    capturing[0] = False
    for _ in range(3):
        dispatch.custom_kernel(g)
    assert [o[0] for o in order] == ["writer", "main", "main", "main"]


def _fake_driver(monkeypatch, order, end_error=0):
    """dispatch's CUDA driver calls replaced by stand-ins that record what `_capture` and the
    graph launches do (capture stream 999; `end_error` fails cuStreamEndCapture)."""
    from cuda.bindings.driver import CUstream

    real = dispatch._cu

    def end(stream):
        order.append(("end", int(stream)))
        return end_error, "graph"

    fake = types.SimpleNamespace(
        CUstream_flags=real.CUstream_flags, CUstreamCaptureMode=real.CUstreamCaptureMode,
        cuStreamCreate=lambda flags: (0, CUstream(999)),
        cuStreamBeginCapture=lambda stream, mode: (order.append(("begin", int(stream), mode.name)), (0,))[1],
        cuStreamEndCapture=end,
        cuGraphInstantiate=lambda graph, flags: (0, "exe"),
        cuGraphDestroy=lambda graph: order.append(("destroy", graph)),
        cuGraphLaunch=lambda exe, stream: (order.append(("graph", exe, int(stream))), (0,))[1],
        cuGraphExecDestroy=lambda exe: None, cuStreamDestroy=lambda stream: None)
    monkeypatch.setattr(dispatch, "_cu", fake)


def test_capture_switches_the_packed_stream_and_back(monkeypatch):
    """The real `_capture` with a stand-in driver: the launch it captures reads the capture
    stream through the packed stream argument (relaxed mode), the argument reads the caller's
    stream again after it, and the graph is launched on the caller's stream; a failed capture
    leaves the template launching plainly, on the caller's stream."""
    order, _capturing, g, _other = _graph_env(monkeypatch, handle=0)
    monkeypatch.setattr(dispatch._Template, "_capture", _REAL_CAPTURE)
    main_calls = []

    class Packed(dispatch.PackedLaunch):
        def __init__(self, fn, args):
            super().__init__(fn, args)
            self.capi, self.packed = (lambda packed: (fn(*args), main_calls.append(int(args[-1])))), None

    monkeypatch.setattr(dispatch, "PackedLaunch", Packed)
    _fake_driver(monkeypatch, order)
    for _ in range(3):
        dispatch.custom_kernel(g)
    tpl = _template()
    assert [o[0] for o in order] == ["writer", "main", "begin", "main", "end", "destroy", "graph", "graph"]
    assert order[2] == ("begin", 999, "CU_STREAM_CAPTURE_MODE_RELAXED") and order[6] == ("graph", "exe", 0)
    assert main_calls[-2:] == [0, 999] and int(tpl.stream_arg) == 0  # (the writer's call first)
    dispatch.clear_caches()
    order.clear()
    main_calls.clear()
    _fake_driver(monkeypatch, order, end_error=1)
    for _ in range(3):
        dispatch.custom_kernel(g)
    tpl = _template()
    assert [o[0] for o in order] == ["writer", "main", "begin", "main", "end", "destroy", "main", "main"]
    assert not tpl.graph_ok and not tpl.graphs and int(tpl.stream_arg) == 0 and main_calls[-2:] == [0, 0]
    del tpl
    dispatch.clear_caches()
    gc.collect()  # (a template and its entry reference each other)
    dispatch._bury()  # (the stand-in handles destroyed by the stand-in driver)
    assert not dispatch._GRAVEYARD


def test_graphs_are_destroyed_outside_captures(monkeypatch):
    """A dropped graph (or capture stream) is destroyed at the next eager call, never where it
    is dropped: a template evicted while the caller captures in torch's global mode must not
    destroy anything inside that capture (exp. 128: it invalidated the capture)."""
    order, capturing, g, _other = _graph_env(monkeypatch, handle=7)
    destroyed = []
    monkeypatch.setattr(dispatch, "_GRAVEYARD", [])
    monkeypatch.setattr(dispatch, "_cu", types.SimpleNamespace(cuGraphExecDestroy=destroyed.append,
                                                                cuStreamDestroy=destroyed.append))
    dispatch.custom_kernel(g)
    x = dispatch._Graph("exe")
    del x
    assert destroyed == [] and len(dispatch._GRAVEYARD) == 1
    capturing[0] = True
    dispatch.custom_kernel(g)
    assert destroyed == []
    capturing[0] = False
    dispatch.custom_kernel(g)
    assert destroyed == ["exe"] and not dispatch._GRAVEYARD


def test_graphs_by_default_on_sm100a_only(monkeypatch):
    """NVFP4_GRAPHS unset (GRAPHS None): templates of sm_100a plans capture, sm_90a ones don't
    (exp. 128: on the H100 a graph saved ~5 µs of host and cost ~0.5% of GPU time)."""
    order, _capturing, g, _other = _graph_env(monkeypatch)
    monkeypatch.setattr(dispatch, "GRAPHS", None)
    for _ in range(3):
        dispatch.custom_kernel(g)
    assert [o[0] for o in order] == ["writer", "main", "main", "main"]
    plan = dispatch.plan
    monkeypatch.setattr(dispatch, "plan", lambda *a: (lambda p: (p[0], p[1], types.SimpleNamespace(
        fn=p[2].fn, arch="sm_100a", runnable=False), p[3]))(plan(*a)))
    dispatch.clear_caches()
    order.clear()
    for _ in range(3):
        dispatch.custom_kernel(g)
    assert [o[0] for o in order] == ["writer", "main", "capture", "graph", "graph"]


def test_table_writer_sizes():
    """A writer covers its signature's entries rounded up to ENTRIES_STEP, never more than its
    table."""
    from nvfp4gemm import table_writer as tw

    assert [tw.entries_for(u, 128) for u in (0, 1, 16, 32, 33, 64, 120, 128)] == [32, 32, 32, 32, 64, 64, 128, 128]
    assert [tw.entries_for(u, 80) for u in (10, 40, 80)] == [32, 64, 80]


def test_table_writer_entry_params_share_one_array():
    """The writer's entry parameters keep their C storage in one ctypes array, so one slice
    assignment rewrites what the packed launch passes (DSL 4.3.5's `_Pointer` internals)."""
    from nvfp4gemm import table_writer

    params, values = table_writer.entry_params()
    values[:3] = (7, 1 << 40, 3)
    assert [p.__c_pointers__()[0] for p in params[:3]] == [ctypes.addressof(values) + 8 * i for i in range(3)]
    assert [params[i]._desc.value for i in range(3)] == [7, 1 << 40, 3]
    assert not any(p._desc.value for p in params[3:])


def test_table_writer_compiles():
    """The writer kernel compiles for both archs (CPU, compile-only) into one coalesced 64-bit
    global store per 32 table entries, taking a parameter for each of its first n entries only
    (zeros after)."""
    import glob
    import os
    import tempfile

    import cutlass.cute as cute

    from nvfp4gemm import table_writer

    for arch, n, total in (("sm_90a", table_writer.ENTRIES, None), ("sm_90a", 32, table_writer.ENTRIES),
                           ("sm_100a", table_writer.ENTRIES, None), ("sm_100a", 64, 80)):
        with tempfile.TemporaryDirectory() as d:
            cute.compile(table_writer.TableWriter(n, total), *table_writer.compile_args(n),
                         options=f"--gpu-arch {arch} --keep-ptx --dump-dir {d}")
            (ptx,) = glob.glob(os.path.join(d, f"*.{arch}.ptx"))
            text = open(ptx).read()
            assert text.count("st.global.u64") == -(-(total or n) // 32), arch  # (one coalesced store per 32)
            assert text.count(".param .u64") == n + 1, arch


def _any_m_env(monkeypatch):
    """The dispatcher under NVFP4_DYNAMIC_M with the real sm_90a grouped rule (device-scheduled
    configs, exp. 136), the table writer and stand-in launches recording ("writer", table,
    entries) and ("main", table); `calls` counts full validations and runtime_args."""
    from cutlass import Int32
    from cutlass.cute.runtime import make_ptr
    import cutlass
    import cutlass.cute as cute

    import configs
    from nvfp4gemm import table_writer
    from nvfp4gemm.sm90 import grouped_gemm as gg
    from nvfp4gemm.sm90 import grouped_mixed as gm
    from nvfp4gemm.sm90 import grouped_skinny as gs

    calls, order = collections.Counter(), []
    shared = torch.empty(128, dtype=torch.int64)

    def runtime_args(data, cfg, stream, keep=None):  # (the real argument positions device_fits reads)
        calls["runtime_args"] += 1
        shapes = [(m, n, k) for m, n, k, _l in data[3]]
        cap = int(gm.device_rows(cfg, shapes) * gm.DEVICE_ROWS_SLACK)
        return (make_ptr(cutlass.Int64, shared.data_ptr(), cute.AddressSpace.gmem, assumed_align=16),
                *[Int32(0)] * 8, Int32(max(k for _m, _n, k in shapes)), Int32(cap), Int32(132), stream)

    def writer(dst, entries, stream):
        order.append(("writer", dst._desc.value, [e._desc.value or 0 for e in entries]))

    monkeypatch.setattr(configs, "DYNAMIC_M", True)
    monkeypatch.setattr(table_writer, "compiled", lambda arch, runnable, n=table_writer.ENTRIES, total=None: writer)
    monkeypatch.setattr(dispatch, "TABLE_WRITER", True)
    mod = types.SimpleNamespace(runtime_args=runtime_args, table_entries=gg.table_entries, writer_target=gg.writer_target,
                                device_fits=lambda cfg, args, data: (gs if cfg.skinny else gm).device_fits(cfg, args, data),
                                pointer_args=lambda *a, **k: pytest.fail("no writer"))
    main = lambda *args: order.append(("main", args[0]._desc.value))  # noqa: E731
    _cpu_dispatcher(monkeypatch, "validate_group", calls, main, mod)
    def plan(problem, shape, device, dynamic_m=None):
        calls["dynamic plan" if dynamic_m else "plan"] += 1
        return ("sm_90a", configs.select_config(problem, "sm_90a", shape, dynamic_m),
                types.SimpleNamespace(fn=main, arch="sm_90a", runnable=False), mod)

    monkeypatch.setattr(dispatch, "plan", plan)
    return calls, order, gg


def _written_ms(order, groups):
    """M_g of the last table the writer wrote (entry 5 of each group's 8)."""
    entries = [o for o in order if o[0] == "writer"][-1][2]
    return [entries[8 * g + 5] for g in range(groups)]


def test_new_m_of_a_device_scheduled_structure(monkeypatch):
    """Exp. 136: under NVFP4_DYNAMIC_M an input whose M_g are new but whose N_g, K_g and layout
    match a device-scheduled signature is not validated in full and reuses that launch template
    (a table written with its own M_g); the same addresses with other M_g (slices of one buffer)
    get a table of their own; a tensor whose rows disagree with its M_g, a leaderboard shape, or
    NVFP4_DYNAMIC_M off take the full path; an input with more rows than the template's A16
    buffer builds a new template."""
    import configs

    calls, order, _gg = _any_m_env(monkeypatch)
    big = R.generate_input([200, 150], [256, 256], [256, 256], 2, 1, device="cpu")
    dispatch.custom_kernel(big)
    assert calls == {"validate": 1, "runtime_args": 1, "dynamic plan": 1} and _written_ms(order, 2) == [200, 150]
    tpl = _template()
    fresh = R.generate_input([120, 90], [256, 256], [256, 256], 2, 2, device="cpu")
    dispatch.custom_kernel(fresh)
    assert calls == {"validate": 1, "runtime_args": 1, "dynamic plan": 1}, \
        "new M_g of a known structure: no validation, one template"
    assert _written_ms(order, 2) == [120, 90] and order[-1] == ("main", order[-2][1])

    def rows(t, m):
        return t.as_strided((m, t.shape[1], 1), (t.shape[1], 1, m * t.shape[1]))

    def atoms(t, m):
        rm, rk = -(-m // 128), t.shape[4]
        return t.as_strided((32, 4, rm, 4, rk, 1), (16, 4, rk * 512, 1, 512, rm * rk * 512))

    ms = [100, 7]  # the same addresses as `big`, fewer rows
    view = ([(rows(a, m), b, rows(c, m)) for (a, b, c), m in zip(big[0], ms)],
            [(rows(sa, m), sb) for (sa, sb), m in zip(big[1], ms)],
            [(atoms(sa, m), sb) for (sa, sb), m in zip(big[2], ms)], [(m, 256, 256, 1) for m in ms])
    n_writes = sum(o[0] == "writer" for o in order)
    dispatch.custom_kernel(view)
    assert sum(o[0] == "writer" for o in order) == n_writes + 1 and _written_ms(order, 2) == [100, 7]
    assert calls["validate"] == 1 and dispatch._SIGS and tpl is _template_of(view)
    # a's rows disagree with its size: full validation names it
    bad = R.generate_input([120, 90], [256, 256], [256, 256], 2, 3, device="cpu")
    bad[3][0] = (121, 256, 256, 1)
    with pytest.raises(InputError, match="group 0: a must have shape"):
        dispatch.custom_kernel(bad)
    assert calls["validate"] == 2
    # likewise c's rows, sfa_perm's row atoms (130 rows need 2) and b's rows (N_g is not free)
    bad = R.generate_input([120, 90], [256, 256], [256, 256], 2, 3, device="cpu")
    a, b, c = bad[0][0]
    bad[0][0] = (a, b, c[:119])
    with pytest.raises(InputError, match="group 0: c must have shape"):
        dispatch.custom_kernel(bad)
    bad = R.generate_input([130, 90], [256, 256], [256, 256], 2, 3, device="cpu")
    sfa_p = bad[2][0][0]  # (one row atom of the two, its batch stride kept: only the atom count is wrong)
    bad[2][0] = (sfa_p.as_strided((32, 4, 1) + tuple(sfa_p.shape[3:]), sfa_p.stride()), bad[2][0][1])
    with pytest.raises(InputError, match="group 0: sfa_perm must have the permuted shape"):
        dispatch.custom_kernel(bad)
    bad = R.generate_input([120, 90], [256, 256], [256, 256], 2, 3, device="cpu")
    a, b, c = bad[0][1]
    bad[0][1] = (a, b[:128], c)
    with pytest.raises(InputError, match="group 1: b must have shape"):
        dispatch.custom_kernel(bad)
    assert calls["validate"] == 5
    # more rows than the template's A16 buffer holds: a new template (runtime_args again)
    huge = R.generate_input([400, 400], [256, 256], [256, 256], 2, 4, device="cpu")
    dispatch.custom_kernel(huge)
    assert calls["runtime_args"] == 2 and calls["validate"] == 5 and _template_of(huge) is not tpl
    # NVFP4_DYNAMIC_M off: the signature path (a full validation)
    monkeypatch.setattr(configs, "DYNAMIC_M", False)
    dispatch.custom_kernel(R.generate_input([60, 50], [256, 256], [256, 256], 2, 5, device="cpu"))
    assert calls["validate"] == 6


def _template_of(data):
    """The launch template the dispatcher used for `data` (its entry's, on the one stream)."""
    entry = dispatch._entry_of(data)[0]
    (tpl,) = entry.templates.values()
    return tpl


def test_plans_follow_dynamic_m(monkeypatch):
    """dispatch.plan caches a config per shape and per NVFP4_DYNAMIC_M: a shape planned under one
    setting is planned again under the other (session 41's first host timing compared the two
    modes in one process and measured the first mode's cached picks twice)."""
    import configs

    seen = []
    monkeypatch.setattr(dispatch, "_plan", lambda problem, shape, device, dynamic_m: seen.append(dynamic_m) or len(seen))
    dispatch._PLANS.clear()
    shape = ((100, 4096, 7168),) * 2
    for dyn in (False, True, False, True):
        monkeypatch.setattr(configs, "DYNAMIC_M", dyn)
        dispatch.plan("group", shape, torch.device("cpu"))
    assert seen == [False, True]
    dispatch._PLANS.clear()


def test_new_m_of_a_skinny_structure(monkeypatch):
    """Exp. 138: the skinny grouped kernel's launch depends on N_g only, so under NVFP4_DYNAMIC_M
    new M_g (up to its tile's A rows) reuse its template without validation, each with a table
    of its own M_g; M_g past the tile's rows pick the wider tile: another entry, validated."""
    calls, order, _gg = _any_m_env(monkeypatch)
    dispatch.custom_kernel(R.generate_input([3, 12], [256, 256], [256, 256], 2, 1, device="cpu"))
    assert calls == {"validate": 1, "runtime_args": 1, "dynamic plan": 1} and _template().entry.cfg.skinny
    tpl = _template()
    for i, ms in enumerate(([16, 1], [9, 14], [2, 11])):  # (9-16 rows: the 16-row tile)
        d = R.generate_input(ms, [256, 256], [256, 256], 2, 10 + i, device="cpu")
        dispatch.custom_kernel(d)
        assert _written_ms(order, 2) == ms and _template_of(d) is tpl
    assert calls == {"validate": 1, "runtime_args": 1, "dynamic plan": 1}
    dispatch.custom_kernel(R.generate_input([4, 6], [256, 256], [256, 256], 2, 20, device="cpu"))  # (<= 8: 8-row tile)
    assert calls["validate"] == 2 and _written_ms(order, 2) == [4, 6]


def test_auto_dynamic_m_switches_a_churning_structure(monkeypatch):
    """Exp. 139, NVFP4_DYNAMIC_M unset (auto): a structure's first DYNAMIC_M_AFTER M_g sets are
    planned by the full rule; the next new one by the rule for changing M_g (the device-scheduled
    form), and from then on new M_g sets of that structure skip validation and reuse its template.
    A structure that keeps its M_g (new tensors every call, as the leaderboard's), or another
    structure, does not switch; NVFP4_DYNAMIC_M=0 never does."""
    import configs

    calls, order, _gg = _any_m_env(monkeypatch)
    monkeypatch.setattr(configs, "DYNAMIC_M", False)
    monkeypatch.setattr(configs, "DYNAMIC_M_AUTO", True)
    assert dispatch.DYNAMIC_M_AFTER == 2
    nk = ([256, 256], [256, 256])

    def call(ms, seed, n=nk[0]):
        d = R.generate_input(ms, n, nk[1], 2, seed, device="cpu")
        dispatch.custom_kernel(d)
        return d

    for seed in range(3):  # fixed M_g, new tensors every call: one plan
        call([200, 150], seed)
    assert calls["plan"] == 1 and calls["validate"] == 1 and "dynamic plan" not in calls
    call([120, 90], 3)
    assert calls["plan"] == 2 and "dynamic plan" not in calls
    call([300, 20], 4, n=[512, 512])  # another structure: counted on its own
    assert calls["plan"] == 3 and "dynamic plan" not in calls
    tpl = _template_of(call([160, 50], 5))  # the structure's third M_g set: switched
    assert calls["dynamic plan"] == 1 and calls["validate"] == 4 and tpl.entry.cfg.device_schedule
    for i, ms in enumerate(([70, 33], [1, 200], [128, 128])):
        d = call(ms, 6 + i)
        assert _written_ms(order, 2) == ms and _template_of(d) is tpl
    assert calls["validate"] == 4 and calls["dynamic plan"] == 1, "new M_g after the switch: no validation, no plan"
    call([310, 17], 9, n=[512, 512])  # the other structure's second M_g set: still the full rule
    assert calls["plan"] == 4 and calls["dynamic plan"] == 1
    # NVFP4_DYNAMIC_M=0: neither switches nor takes the switched structure's fast path
    monkeypatch.setattr(configs, "DYNAMIC_M_AUTO", False)
    call([90, 40], 10)
    call([91, 41], 11)
    assert calls["validate"] == 7 and calls["plan"] == 6 and calls["dynamic plan"] == 1
    dispatch.clear_caches()
    assert not dispatch._M_SETS


def test_auto_dynamic_m_leaves_the_leaderboard_alone():
    """Exp. 139: the leaderboard's grouped shapes (tests and benchmarks, each validated anew per
    signature, here three times over) never switch a structure in auto mode."""
    import configs

    dispatch._M_SETS.clear()
    for _ in range(3):
        for shape in configs.GROUP_TESTS + configs.GROUP_BENCHMARKS:
            assert not dispatch._m_churns(torch.device("cuda", 0), shape), shape
    dispatch._M_SETS.clear()


def test_known_sizes_skip_the_signature(monkeypatch):
    """Exp. 142: a grouped input whose problem sizes match a recent signature's (new tensors,
    alternating shapes) is checked by that entry's guard, without the Python signature or
    validation; after an auto switch (exp. 139) an M_g set planned before it keeps its
    host-planned entry, while new M_g sets take the device-scheduled one."""
    import configs

    calls, _order, _gg = _any_m_env(monkeypatch)
    monkeypatch.setattr(configs, "DYNAMIC_M", False)
    monkeypatch.setattr(configs, "DYNAMIC_M_AUTO", True)
    real_sig = dispatch._signature
    monkeypatch.setattr(dispatch, "_signature", lambda *a: calls.update(["signature"]) or real_sig(*a))

    def call(ms, seed, n=256):
        d = R.generate_input(ms, [n] * len(ms), [256] * len(ms), len(ms), seed, device="cpu")
        dispatch.custom_kernel(d)
        return dispatch._entry_of(d)[0]

    first = call([200, 150], 1)
    other = call([300, 20], 2, n=512)
    for i in range(3):  # alternating shapes, new tensors every call
        assert call([200, 150], 10 + i) is first and call([300, 20], 20 + i, n=512) is other
    assert calls["signature"] == 2 and calls["validate"] == 2
    call([120, 90], 30)
    switched = call([160, 50], 31)  # the structure's third M_g set: device-scheduled
    assert switched.cfg.device_schedule and not first.cfg.device_schedule
    n_sig = calls["signature"]
    assert call([200, 150], 32) is first, "an M_g set planned before the switch keeps its entry"
    assert call([70, 33], 33).cfg.device_schedule, "a new M_g set after the switch: the device schedule"
    assert calls["signature"] == n_sig and calls["validate"] == 4


def test_more_groups_than_a_launch_run_in_chunks(monkeypatch):
    """Exp. 152: a grouped input of more than GROUPS_PER_LAUNCH groups runs as the launches of
    `configs.group_chunks`' ranges, in order, each with its own groups' tensors; the output is
    every group's C.  A bad group anywhere is refused before the first launch, named by its
    index in the whole input; a later call of the same input takes each chunk's known entry."""
    import configs

    calls = collections.Counter()
    launched = []

    def runtime_args(d, cfg, stream):
        launched.append([grp[0].data_ptr() for grp in d[0]])
        return ()

    _cpu_dispatcher(monkeypatch, "validate_group", calls, lambda *a: calls.update(["launch"]),
                    types.SimpleNamespace(runtime_args=runtime_args))
    monkeypatch.setattr(dispatch, "CHUNK_STREAMS", False)  # (side streams need CUDA: the GPU tests run them)
    g = 37
    ms = [(7 * i) % 50 + 1 for i in range(g)]
    d = R.generate_input(ms, [64] * g, [256] * g, g, 5, device="cpu")
    outs = dispatch.custom_kernel(d)
    assert [o is grp[2] for o, grp in zip(outs, d[0])] == [True] * g and len(outs) == g
    ranges = configs.group_chunks(g)
    assert len(ranges) == 3 and calls["launch"] == 3 and calls["validate"] == 3
    assert launched == [[grp[0].data_ptr() for grp in d[0][lo:hi]] for lo, hi in ranges]
    real_entry_of = dispatch._entry_of
    def counted_entry_of(*a, **k):
        if not k.get("remember", True):  # (the chunks' own lookups; the whole input's goes first on every call)
            calls["entry_of"] += 1
        return real_entry_of(*a, **k)

    monkeypatch.setattr(dispatch, "_entry_of", counted_entry_of)
    dispatch.custom_kernel(d)  # (the same input object: the chunks' entries remembered, no lookup)
    assert calls["launch"] == 6 and calls["validate"] == 3 and calls["entry_of"] == 0
    moved = (d[0], d[1], d[2], [tuple(x) for x in d[3]])  # (a new object: each chunk looked up, not validated)
    dispatch.custom_kernel(moved)
    assert calls["launch"] == 9 and calls["validate"] == 3 and calls["entry_of"] == 3
    assert launched[-3:] == launched[:3]
    swapped = (list(d[0]), d[1], d[2], d[3])
    dispatch.custom_kernel(swapped)
    swapped[0][5] = tuple(t.clone() for t in swapped[0][5])  # (group 5's tensors replaced: not the input it was)
    dispatch.custom_kernel(swapped)
    assert launched[-1] == launched[2] and launched[-3][5] == swapped[0][5][0].data_ptr() != launched[0][5]
    assert calls["launch"] == 15
    bad = (list(d[0]), d[1], d[2], d[3])
    a, b, c = bad[0][33]
    bad[0][33] = (a, b[:32], c)  # group 33's b: 32 rows, not 64
    with pytest.raises(InputError, match="group 33: b must have shape"):
        dispatch.custom_kernel(bad)
    bad_sizes = (d[0], d[1], d[2], list(d[3]))
    bad_sizes[3][20] = (ms[20], 64, 300, 1)
    with pytest.raises(InputError, match="group 20"):
        dispatch.custom_kernel(bad_sizes)
    assert calls["launch"] == 15
    # more groups' tensors than sizes: the chunks come from the sizes, so the extra groups would
    # be returned unwritten (session 56's review); refused, as with <= GROUPS_PER_LAUNCH groups
    extra = (list(d[0]), list(d[1]), list(d[2]), list(d[3][:-2]))
    with pytest.raises(InputError, match="one entry per group"):
        dispatch.custom_kernel(extra)
    # a remembered chunked input changed in place: sizes (one size row itself, in place) or one
    # more group appended -- the full path, which refuses them
    sizes = [list(x) for x in d[3]]
    live = (list(d[0]), list(d[1]), list(d[2]), sizes)
    dispatch.custom_kernel(live)
    dispatch.custom_kernel(live)
    assert calls["launch"] == 21
    sizes[20][2] = 512  # (group 20's K; its tensors have 256)
    with pytest.raises(InputError, match="group 20"):
        dispatch.custom_kernel(live)
    sizes[20][2] = 256
    dispatch.custom_kernel(live)
    for part in live[:3]:
        part.append(part[0])
    with pytest.raises(InputError, match="one entry per group"):
        dispatch.custom_kernel(live)
    assert calls["launch"] == 24


def test_configs_of_reports_each_launch(monkeypatch):
    """`configs_of` (benchmarks' report): one config per launch, a chunked input's per chunk."""
    _cpu_dispatcher(monkeypatch, "validate_group", collections.Counter(), lambda *a: None,
                    types.SimpleNamespace(runtime_args=lambda d, c, s: ()))
    import configs

    def rule(shape):
        return configs.select_config("group", "sm_90a", tuple(shape), dynamic_m=False)

    monkeypatch.setattr(dispatch, "plan", lambda problem, shape, device, dynamic_m=None: (
        "sm_90a", rule(shape), types.SimpleNamespace(fn=lambda *a: None),
        types.SimpleNamespace(runtime_args=lambda d, c, s: ())))
    few = R.generate_input([40, 90], [128, 128], [256, 256], 2, 1, device="cpu")
    many = R.generate_input([40] * 10 + [8] * 10, [128] * 20, [256] * 20, 20, 1, device="cpu")
    assert dispatch.configs_of(few) == [rule([(40, 128, 256), (90, 128, 256)])]
    assert dispatch.configs_of(many) == [rule([(40, 128, 256)] * 10), rule([(8, 128, 256)] * 10)]
    assert rule([(40, 128, 256)] * 10) != rule([(8, 128, 256)] * 10)  # (the skinny kernel for M_g 8)


def _pushing(stack: list):
    """A stand-in for torch.cuda.stream / torch.cuda.device: a context manager that makes its
    argument the last item of `stack` (the current one) while it is open."""
    import contextlib

    @contextlib.contextmanager
    def ctx(item):
        stack.append(item)
        try:
            yield
        finally:
            stack.pop()

    return ctx


def _side_chunks_env(monkeypatch, stream_cls, event_cls, current: list) -> None:
    """The dispatcher's side-by-side chunks (`CHUNK_STREAMS`, its side streams made afresh) over
    stand-in torch.cuda.Stream / Event classes, with torch.cuda.stream / current_stream over the
    list `current` (its last stream is current)."""
    monkeypatch.setattr(torch.cuda, "Stream", stream_cls)
    monkeypatch.setattr(torch.cuda, "Event", event_cls)
    monkeypatch.setattr(torch.cuda, "stream", _pushing(current))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: current[-1])
    monkeypatch.setattr(dispatch, "CHUNK_STREAMS", True)
    monkeypatch.setattr(dispatch, "_CHUNK_SIDE", {})


def test_side_by_side_chunks_fork_and_join(monkeypatch):
    """Exp. 152, the chunks side by side (`CHUNK_STREAMS`), with stand-in streams and events: the
    fork is recorded on the caller's stream before any side stream waits on it; chunk i > 0
    launches on side stream i - 1 after that wait, with the side stream current while its launch
    builds what it uploads (a first-call race the review found: uploads went to the caller's
    stream, unordered with the side kernel); chunk 0 launches on the caller's stream; every side
    stream's join is recorded after its launch and waited on by the caller's stream.  Inside a
    capture the chunks run in stream order on the caller's stream."""
    import itertools

    import configs

    log = []
    ids = itertools.count(1)
    current = []

    class Stream:
        def __init__(self, device=None, name=None):
            self.name = name or f"side{next(ids)}"
            self.cuda_stream = 1000 + len(self.name) * 7 + sum(map(ord, self.name))

        def wait_event(self, ev):
            log.append(("wait", self.name, ev.n))

    class Event:
        def __init__(self):
            self.n = next(ids)

        def record(self, stream):
            log.append(("record", stream.name, self.n))

    cur = Stream(name="caller")
    current.append(cur)

    calls = collections.Counter()

    def runtime_args(d, cfg, stream, keep=None):
        log.append(("launch", current[-1].name, int(stream), d[3][0][0]))
        return (tuple(tuple(x[:3]) for x in d[3]),)

    def compiled_for(shape):
        # (each chunk launched by its own entry: the stand-in compiled function knows its shape)
        def fn(launched_shape):
            assert launched_shape == tuple(map(tuple, shape)), "a chunk launched by another chunk's entry"
        return types.SimpleNamespace(fn=fn)

    mod = types.SimpleNamespace(runtime_args=runtime_args)
    _cpu_dispatcher(monkeypatch, "validate_group", calls, None, mod)
    monkeypatch.setattr(dispatch, "plan", lambda problem, shape, device, dynamic_m=None: (
        "sm_90a", None, compiled_for(shape), mod))
    _side_chunks_env(monkeypatch, Stream, Event, current)
    g = 40
    ms = [i + 1 for i in range(g)]  # (each chunk's first M_g names it in the log)
    d = R.generate_input(ms, [64] * g, [256] * g, g, 7, device="cpu")
    ranges = configs.group_chunks(g)
    assert len(ranges) == 3
    dispatch.custom_kernel(d)
    fork = log[0]
    assert fork[:2] == ("record", "caller")
    sides = []
    i = 1
    for lo, _hi in ranges[1:]:
        wait, launch = log[i], log[i + 1]
        assert wait[0] == "wait" and wait[2] == fork[2] and wait[1] != "caller"
        # (on the side stream, and that stream current while it launches)
        assert launch == ("launch", wait[1], Stream(name=wait[1]).cuda_stream, ms[lo])
        sides.append(wait[1])
        i += 2
    assert log[i] == ("launch", "caller", cur.cuda_stream, ms[0])
    joins = log[i + 1:]
    assert len(joins) == 2 * len(sides)
    for k, side in enumerate(sides):
        rec, wait = joins[2 * k], joins[2 * k + 1]
        assert rec[:2] == ("record", side) and wait == ("wait", "caller", rec[2])
    log.clear()
    monkeypatch.setattr(dispatch, "_capturing", lambda: True)
    dispatch.custom_kernel(d)
    assert log == [("launch", "caller", cur.cuda_stream, ms[lo]) for lo, _hi in ranges]


def test_side_chunks_build_new_address_sets_on_their_stream(monkeypatch):
    """Chunks side by side (exp. 152) through table-writer templates: a new address set's table
    (`writer_target`, with `like` after the first: on sm_100a a new workspace whose shape rows
    are copied from the template's with torch's current stream) is made while the chunk's side
    stream is current, so what it allocates or copies is ordered before that stream's writer and
    kernel launches.  Session 54's review found it made on the caller's stream for every address
    set after a template's first (the copy unordered with the side stream's setup kernel).  A
    repeat of a template's last address set makes no side stream current (session 55: off the
    hot path)."""
    import itertools

    import configs

    order, capturing, _g, _other, gg = _writer_env(monkeypatch, handle=5)
    ids = itertools.count(1)
    current = []

    class Stream:
        def __init__(self, device=None, name=None):
            self.name = name or f"side{next(ids)}"
            self.cuda_stream = 1000 + next(ids)

        def wait_event(self, ev):
            pass

    class Event:
        def record(self, stream):
            pass

    current.append(Stream(name="caller"))

    made = []

    def writer_target(data, cfg, stream=None, like=None):
        made.append((data[3][0][0], current[-1].name, like is not None))
        return gg.writer_target(data, cfg, stream, like)

    (_arch, _cfg, _ck, mod) = dispatch.plan("group", None, None)
    mod.writer_target = writer_target
    _side_chunks_env(monkeypatch, Stream, Event, current)
    n = 40
    ms = [i + 1 for i in range(n)]  # (each chunk's first M_g names it)
    d = R.generate_input(ms, [64] * n, [256] * n, n, 7, device="cpu")
    moved = ([tuple(t.clone() for t in grp) for grp in d[0]], d[1], d[2], d[3])
    pushes = []
    push = _pushing(current)
    for x in (d, moved, d):
        dispatch.custom_kernel(x)
    firsts = [ms[lo] for lo, _hi in configs.group_chunks(n)]
    assert len(firsts) == 3
    # a repeat of the last address set (each template's hot path): no side stream is made current
    monkeypatch.setattr(torch.cuda, "stream", lambda s: (pushes.append(s.name), push(s))[1])
    dispatch.custom_kernel(d)
    assert pushes == []
    dispatch.custom_kernel(moved)  # (a bound table, pointed at again: made current per side chunk)
    assert len(pushes) == 2 and "caller" not in pushes
    # per chunk: its template's own table, then one table per address set (d, moved), d again bound
    assert sorted(m for m, _s, _l in made) == sorted(firsts * 3) and sum(lk for _m, _s, lk in made) == 6
    for m, stream, _like in made:
        assert (stream == "caller") == (m == firsts[0]), (m, stream)
    assert [o[0] for o in order].count("writer") == 6


def _stand_in_streams(monkeypatch, log):
    """torch.cuda.Stream and Event stand-ins (patched in) that log ("record", stream, event n) and
    ("wait", stream, event n); side streams are named side0, side1, ...  Returns the Stream class."""
    names = iter(f"side{i}" for i in range(10))

    class Stream:
        def __init__(self, device=None, name=None):
            self.name = name or next(names)

        def wait_event(self, ev):
            log.append(("wait", self.name, ev.n))

    class Event:
        count = 0

        def __init__(self):
            Event.count += 1
            self.n = Event.count

        def record(self, stream):
            log.append(("record", stream.name, self.n))

    monkeypatch.setattr(torch.cuda, "Stream", Stream)
    monkeypatch.setattr(torch.cuda, "Event", Event)
    return Stream


def test_side_streams_fork_then_join(monkeypatch):
    """`SideStreams.run`, the one fork/join of the side-by-side launches (the dispatcher's chunks,
    MaskedGroupedGemm's chunks and its skinny + mixed split), with stand-in streams and events:
    the fork is recorded on the caller's stream before any side stream waits on it; each side's
    work runs after its wait, on its own stream; the main work runs on the caller's stream after
    every side's work was enqueued; each side's join is recorded after its work and waited on by
    the caller's stream.  A later call with fewer sides reuses the first streams and joins only
    those; one with more grows the set."""
    from nvfp4gemm.side_streams import SideStreams

    log = []
    caller = _stand_in_streams(monkeypatch, log)(name="caller")
    sides = SideStreams("cuda:0")
    for n_sides in (2, 1, 3):
        log.clear()
        work = [lambda s, i=i: log.append(("work", s.name, i)) for i in range(n_sides)]
        sides.run(caller, work, lambda: log.append(("main", "caller")))
        fork = log[0]
        assert fork[:2] == ("record", "caller")
        used = []
        for i in range(n_sides):
            wait, done = log[1 + 2 * i], log[2 + 2 * i]
            assert wait[0] == "wait" and wait[2] == fork[2] and wait[1] != "caller"
            assert done == ("work", wait[1], i)
            used.append(wait[1])
        assert used == [f"side{i}" for i in range(n_sides)]  # (first streams reused, in order)
        assert log[1 + 2 * n_sides] == ("main", "caller")
        joins = log[2 + 2 * n_sides:]
        assert len(joins) == 2 * n_sides
        for i, side in enumerate(used):
            rec, wait = joins[2 * i], joins[2 * i + 1]
            assert rec[:2] == ("record", side) and wait == ("wait", "caller", rec[2])


def test_side_streams_join_when_a_work_item_raises(monkeypatch):
    """`SideStreams.run`: when a work item raises (say a template build fails on a new GPU), the
    side streams started by then are still joined into the caller's stream before the error
    propagates -- side 0's kernel writes the caller's outputs, which the caller may free after
    catching the error (session 54's review: no join was recorded on that path)."""
    from nvfp4gemm.side_streams import SideStreams

    log = []
    caller = _stand_in_streams(monkeypatch, log)(name="caller")

    def bad(s):
        raise RuntimeError("chunk 2's launch failed")

    with pytest.raises(RuntimeError, match="chunk 2"):
        SideStreams("cuda:0").run(caller, [lambda s: log.append(("kernel", s.name)), bad, lambda s: None],
                                  lambda: log.append(("kernel", "caller")))
    assert ("kernel", "caller") not in log
    recorded_on = {n: stream for op, stream, n in (e for e in log if len(e) == 3) if op == "record"}
    joined = [recorded_on[n] for op, stream, n in (e for e in log if len(e) == 3) if op == "wait" and stream == "caller"]
    assert joined == ["side0", "side1"]  # (the two sides started; the third never waited on the fork)


def test_cached_tables_from_another_stream_wait_for_their_upload(monkeypatch):
    """Session 54's review: device tables cached by address (sm_90a group tables and launch
    tables, sm_100a workspaces) were uploaded on the stream that first met the addresses and read
    from any other stream with nothing ordering the two (NVFP4_TABLE_WRITER=0's per-address-set
    tables on two streams).  Now the build records an event on its stream (`stream_mark`) and a
    hit from another stream waits on it and marks the tensors as used there (`stream_wait`);
    nothing on the same stream, on a CPU device or inside a capture."""
    from collections import OrderedDict

    from nvfp4gemm import cache

    log = []

    class Stream:
        def __init__(self, handle):
            self.cuda_stream = handle

        def wait_event(self, ev):
            log.append(("wait", self.cuda_stream, ev.on))

    class Event:
        on = None

        def record(self, stream):
            self.on = stream.cuda_stream
            log.append(("record", stream.cuda_stream))

    class Table:  # (a CUDA tensor's stand-in: record_stream is all stream_wait calls)
        def record_stream(self, stream):
            log.append(("record_stream", stream.cuda_stream))

    current, capturing, walked = [Stream(5)], [False], []
    cuda = types.SimpleNamespace(type="cuda")
    with monkeypatch.context() as mp:
        mp.setattr(cache, "_stream", lambda device, handle: current[0] if handle is None else Stream(handle))
        mp.setattr(cache, "in_capture", lambda: capturing[0])
        mp.setattr(cache, "_tensors", lambda value: walked.append(len(value)) or value)
        mp.setattr(torch.cuda, "Event", Event)
        mark = cache.stream_mark(cuda)
        assert mark[0] == 5 and mark[2] is cuda and log == [("record", 5)]
        assert cache.stream_mark(torch.device("cpu")) is None
        cache.stream_wait(mark, [Table()])  # same stream: nothing, not even the walk
        cache.stream_wait(mark, [Table()], handle=5)
        cache.stream_wait(mark, [Table()], handle=9)
        current[0] = Stream(7)
        cache.stream_wait(mark, [Table(), Table()])
        capturing[0] = True
        cache.stream_wait(mark, [Table()])  # inside a capture: nothing
        assert cache.stream_mark(cuda) is None
    assert log == [("record", 5), ("wait", 9, 5), ("record_stream", 9),
                   ("wait", 7, 5), ("record_stream", 7), ("record_stream", 7)]
    assert walked == [1, 2]

    # the lookup: built -> marked; hit -> waits on that mark with the cached value
    calls = []
    monkeypatch.setattr(cache, "stream_mark", lambda device: calls.append(("mark", device.type)) or "m1")
    monkeypatch.setattr(cache, "stream_wait", lambda m, value: calls.append(("wait", m, len(cache._tensors(value)))))
    tables, t = OrderedDict(), torch.zeros(4)
    for _ in range(2):
        value, built = cache.lru_lookup_on_stream(tables, "k", lambda: (t, 3, (t[1:], None)), 8)
        assert value[0] is t
    assert calls == [("mark", "cpu"), ("wait", "m1", 2)]


def test_plan_compiles_under_the_tensors_device(monkeypatch):
    """On a host with GPUs of two architectures, a call on device 1's tensors while device 0 is
    current must compile for device 1 as the current device: `harness.compile_kernel` makes a
    runnable kernel only when the current device has the target arch (session 54's review)."""
    current, seen = [0], []
    monkeypatch.setattr(torch.cuda, "device", _pushing(current))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(dispatch, "_current_device", lambda: current[-1])
    monkeypatch.setattr(dispatch, "_capability", lambda device: (10, 0) if device.index == 1 else (9, 0))
    monkeypatch.setattr(dispatch, "compiled_for", lambda problem, arch, cfg, shape: seen.append((arch, current[-1])) or (None, None))
    dispatch._plan("dual", (256, 512, 1024, 1), torch.device("cuda", 1), False)
    dispatch._plan("dual", (256, 512, 1024, 1), torch.device("cuda", 0), False)
    assert seen == [("sm_100a", 1), ("sm_90a", 0)] and current == [0]


def test_masked_grouped_host_paths(monkeypatch):
    """MaskedGroupedGemm's host side, on CPU (its constructor needs an sm_90 GPU, so the object is
    assembled here from stand-ins; session 56's review: no CPU test reached these paths).  Counts
    the kernels can read in place (int32, contiguous, 16-byte aligned) go straight to the launch;
    int64, strided or misaligned ones are first copied into the object's int32 buffer.  Every
    launch's counts argument is pointed at the counts' address before the launch; a launch is
    packed once per (stream, kernel) with that stream in its stream slot.  With two kernels
    (the skinny + mixed split) the mixed form runs on a side stream forked from the caller's and
    the skinny one on the caller's.  With chunks of groups, chunk i reads the counts at
    4 x its first group bytes on, side by side (chunk 0 on the caller's stream) or in order."""
    from cuda.bindings.driver import CUstream

    from nvfp4gemm import masked
    from nvfp4gemm.side_streams import SideStreams

    log = []
    Stream = _stand_in_streams(monkeypatch, log)
    caller = Stream(name="caller")
    handles = {"caller": 1000}

    def handle_of(stream):
        return handles.setdefault(stream.name, 1000 + len(handles))

    monkeypatch.setattr(Stream, "cuda_stream", property(handle_of), raising=False)
    packed = []

    class Packed:  # PackedLaunch stand-in: records what it was built with and each call
        def __init__(self, fn, args):
            self.fn, self.args = fn, args
            self.counts = [a._desc for a in args if hasattr(a, "_desc")]  # (its counts argument)
            packed.append(self)

        def __call__(self):
            stream = [int(a) for a in self.args if isinstance(a, CUstream)]
            log.append(("launch", self.fn, stream[0], [d.value for d in self.counts]))

    monkeypatch.setattr(masked, "PackedLaunch", Packed)

    class Desc:
        value = 0

    def leaf(kernels):
        obj = masked.MaskedGroupedGemm.__new__(masked.MaskedGroupedGemm)
        obj.chunks, obj._counts_at, obj._launches = None, None, {}
        obj._sides = SideStreams("cpu")
        obj._counts_args = [types.SimpleNamespace(_desc=Desc()) for _ in kernels]
        obj._kernels = [(fn, ("a0", obj._counts_args[i], CUstream(0), "a3"), 2) for i, fn in enumerate(kernels)]
        obj.device, obj.groups = torch.device("cpu"), 4
        obj._counts32 = torch.full((4,), -7, dtype=torch.int32)
        return obj

    def launches():
        out = [e for e in log if e[0] == "launch"]
        log.clear()
        return out

    # one kernel: the counts argument follows the address; one packed launch per stream
    one = leaf(["mixed"])
    one._enqueue_at(4096, caller)
    one._enqueue_at(8192, caller)
    assert launches() == [("launch", "mixed", 1000, [4096]), ("launch", "mixed", 1000, [8192])]
    assert len(packed) == 1, "one packed launch per (stream, kernel)"
    one._enqueue_at(8192, Stream(name="other"))
    assert launches() == [("launch", "mixed", handle_of(Stream(name="other")), [8192])] and len(packed) == 2

    # the skinny + mixed split: kernel 1 (mixed) on a side stream forked from the caller's, kernel 0 on it
    split = leaf(["skinny", "mixed"])
    split._enqueue_at(256, caller)
    side = handle_of(Stream(name="side0"))
    got = launches()
    assert sorted(got) == sorted([("launch", "mixed", side, [256]), ("launch", "skinny", 1000, [256])])
    assert side != 1000 and [a._desc.value for a in split._counts_args] == [256, 256]

    # counts: read in place, or copied into the int32 buffer first
    seen = []
    one._enqueue_at = lambda at, cur: seen.append(at)
    base = torch.arange(12, dtype=torch.int32) * 3
    aligned = base[:4] if base.data_ptr() % 16 == 0 else base[4:8]
    for counts, in_place in ((aligned, True), (aligned.to(torch.int64), False), (base[0:8:2], False),
                             (base[1:5] if base[1:5].data_ptr() % 16 else base[2:6], False)):
        seen.clear()
        one._counts32.fill_(-7)
        one._enqueue(counts)
        assert seen == [counts.data_ptr() if in_place else one._counts32.data_ptr()], (counts.dtype, counts.stride())
        if not in_place:
            assert one._counts32.tolist() == counts.tolist()

    # chunks of groups: chunk i's counts at 4 x its first group bytes on
    for side_by_side in (True, False):
        monkeypatch.setattr(masked, "CHUNK_STREAMS", side_by_side)
        top = leaf([])
        subs = [types.SimpleNamespace(_enqueue_at=lambda at, cur, i=i: log.append(("chunk", i, at, cur.name)))
                for i in range(3)]
        top.chunks, top._ranges = subs, [(0, 16), (16, 32), (32, 36)]
        log.clear()
        top._enqueue_at(1 << 20, caller)
        chunks = sorted(e for e in log if e[0] == "chunk")
        assert [(i, at) for _c, i, at, _s in chunks] == [(0, 1 << 20), (1, (1 << 20) + 64), (2, (1 << 20) + 128)]
        streams = [s for *_x, s in chunks]
        if side_by_side:  # (chunk 0 on the caller's stream, each other chunk on a side stream of its own)
            assert streams[0] == "caller" and "caller" not in streams[1:] and len(set(streams)) == 3, streams
        else:
            assert streams == ["caller"] * 3
