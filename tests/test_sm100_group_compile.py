"""Compile-only checks of the sm_100a grouped GEMM (no Blackwell GPU needed), and CPU checks of
its host-side descriptor/workspace cache.

Compiles every sm_100a grouped CONFIG_MAP entry and the config `select_config` picks for each
leaderboard grouped test case (distinct configs once: the kernel takes shapes, pointers and
the group count at run time), then checks the PTX: NVFP4 block-scaled tcgen05.mma with
16-element scale blocks (one GEMM's 4 per k-block, SFA's and SFB's scale copies; the TMEM
columns each copy writes and each MMA reads; every mbarrier's arrival count), the main
kernel reading per-group descriptors (tensormap acquire + prefetch) and never editing one, no
spills, no stack frame, shared memory within one CTA per SM.  The setup-only function of each config: one tensormap.replace of the address and one
release copy per descriptor (A, B, SFA, SFB, C), no MMA.  The PTX and ptxas checks common
to the dual GEMM's tests are in tests/kernel_checks.py.
"""

import re

import pytest
import torch

import configs
import cutlass
import reference as R
from configs import KernelConfig
from kernel_checks import (
    check_mma_issue, check_multicast_loads_split, check_nvfp4_block_scaled_mma, check_resources,
    check_barrier_inits, check_tmem_operands,
    compile_with_ptx, sm100_cases,
)
from nvfp4gemm import harness
from nvfp4gemm.sm100 import grouped_gemm as gg
from nvfp4gemm.sm100.grouped_gemm import Sm100GroupedGemmKernel

# M = 1 and 16 groups (the limits), with the 1-CTA 128x64 path (N % 128 != 0).
_EXTRA_SHAPES = [tuple((1 + 7 * g, 192, 256) for g in range(16))]

CASES = sm100_cases("group", _EXTRA_SHAPES)


@pytest.mark.parametrize("cfg,shapes", CASES, ids=[f"{c.short()}" for c, _ in CASES])
def test_compiles_nvfp4_mma_no_spills(cfg, shapes, tmp_path):
    for s in [shapes] + [s for s in configs.GROUP_TESTS + configs.GROUP_BENCHMARKS
                         if configs.select_config("group", "sm_100a", s) == cfg]:
        Sm100GroupedGemmKernel.can_implement(cfg, s)
    ck, ptx = compile_with_ptx("group", cfg, shapes, str(tmp_path))
    check_nvfp4_block_scaled_mma(ptx, cfg.cta_group)
    check_mma_issue(ptx, gemms=1)
    check_tmem_operands(ptx, cfg)
    check_barrier_inits(ptx, cfg)
    check_multicast_loads_split(ptx, at_least=1 if cfg.cta_group == 2 else 0)

    # The main kernel never edits a descriptor; it loads through per-group descriptor
    # pointers, acquired and prefetched when its group changes.
    assert ptx.count(".entry ") == 1
    assert "tensormap.replace" not in ptx and "tensormap.cp_fenceproxy" not in ptx
    assert "fence.proxy.tensormap::generic.acquire" in ptx
    assert "prefetch.tensormap" in ptx
    check_template_params_unread(ptx)

    check_resources(ck)


def test_every_config_the_rule_reaches_is_compiled():
    """Every sm_100a grouped config `select_config` returns for shapes this kernel accepts is one
    CI compiles above (CASES): a config first met on a B200 would compile there for the first
    time.  Sweeps group counts, ragged M_g and every N_g granule the rule distinguishes (N_g %
    256, % 128, % 64, mixed across groups); the config the rule picks must accept each shape."""
    compiled = {cfg for cfg, _ in CASES}
    reached = set()
    ns_sets = [(256,), (512, 256), (128,), (384, 128), (64,), (192, 64), (256, 128), (256, 64), (4096, 192)]
    for ns in ns_sets:
        for ms in ((1,), (40, 300), (128, 128, 7), (512,) * 4):
            for k in (256, 2048):
                shape = tuple((m, ns[i % len(ns)], k) for i, m in enumerate(ms))
                assert not configs.check_shape("group", shape), shape
                cfg = configs.select_config("group", "sm_100a", shape)
                Sm100GroupedGemmKernel.can_implement(cfg, shape)  # the rule's pick must run it
                reached.add(cfg)
    assert len(reached) >= 3, "the sweep reached too few configs to mean anything"
    assert reached <= compiled, f"not compiled in CI: {sorted(c.short() for c in reached - compiled)}"


def check_template_params_unread(ptx: str) -> None:
    """The main kernel never reads the TMA templates (the 128-byte descriptor parameters, each
    followed by its TMA tensor's shape): it loads through the workspace's per-group descriptors,
    and its coordinates come from the shape rows.  So the templates' sizes
    (`grouped_gemm.template_shape`, exp. 179) cannot change what it computes."""
    entry = ptx[ptx.index(".entry "):]
    head, body = entry[:entry.index(")")], entry[entry.index(")"):]
    params = re.findall(r"\.param (?:\.align \d+ )?\.\w+ ?(\w+)(\[\d+\])?", head)
    templates = [i for i, (_n, size) in enumerate(params) if size == "[128]"]
    assert len(templates) == len(gg.Desc), [size for _n, size in params]
    for i in templates:
        for name, _size in params[i:i + 2]:  # (the descriptor, then its tensor's shape)
            assert not re.search(re.escape(name) + r"\b", body), f"the main kernel reads {name}"


@pytest.mark.parametrize("cfg", [c for c, _ in CASES], ids=[c.short() for c, _ in CASES])
def test_setup_function_writes_each_descriptor_once(cfg, tmp_path):
    gg.compile_setup(cfg, dump_dir=str(tmp_path))
    ptx_files = sorted(tmp_path.glob("*.sm_100a.ptx"))
    assert ptx_files, "no PTX dumped"
    ptx = harness.read_ptx(str(ptx_files[-1]))
    assert ptx.count(".entry ") == 1 and "kernel_cutlass_setup_kernel" in ptx
    assert ptx.count("tensormap.replace.tile.global_address") == len(gg.Desc)
    assert ptx.count("tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu") == len(gg.Desc)
    assert "tcgen05.mma" not in ptx


@pytest.mark.parametrize("cfg", [c for c, _ in CASES], ids=[c.short() for c, _ in CASES])
def test_setup_function_built_for_sm90_is_the_sm100_one(cfg, tmp_path):
    """tests/sm100_descriptor_check.py runs the setup function on H100s (exp. 179): its sm_90a
    build (traced as sm_100a) must be the sm_100a code -- the same PTX but for `.target` -- and
    the host-encoding dump it is compared with, and the launch-path probe, must compile for both
    archs."""
    import sm100_descriptor_check as check

    def ptx_of(build, d):
        d.mkdir()
        build(str(d))
        files = sorted(d.glob("*.ptx"))
        assert files, "no PTX dumped"
        text = re.sub(r"kernel_\w+", "K", harness.read_ptx(str(files[-1])))
        return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(("//", ".target"))]

    sm90 = ptx_of(lambda d: check.compile_setup(cfg, "sm_90a", d), tmp_path / "sm90")
    sm100 = ptx_of(lambda d: gg.compile_setup(cfg, dump_dir=d), tmp_path / "sm100")
    assert any("tensormap.replace" in ln for ln in sm90)
    assert sm90 == sm100
    for arch in ("sm_90a", "sm_100a"):
        check.compile_dump(cfg, arch)
        check.compile_probe(cfg, arch)  # (the launch-path probe: tests/test_gpu_kernels.py)


def test_template_shape_is_no_larger_than_any_group():
    """The TMA templates' sizes (exp. 179): each no larger than every group's, in MMA roles."""
    cfg = CASES[0][0]
    shapes = [(256, 7168, 2048), (40, 4096, 7168), (128, 512, 256)]
    mm, nn, k = gg.template_shape(cfg, shapes)
    for gm, gn, gk in gg.mma_shapes(cfg, shapes):
        assert mm <= gm and nn <= gn and k <= gk
    ms, ns, ks = zip(*shapes)
    assert (mm, nn, k) == (min(ns), min(ms), min(ks))  # (this config swaps A and B)
    ws = gg._build_workspace(cfg, R.generate_input(list(ms), list(ns), list(ks), 3, 1, device="cpu"), None)
    assert [repr(a) for a in ws.args[4:7]] == [repr(cutlass.Int32(v)) for v in (mm, nn, k)]


def test_descriptor_check_compare_masks_only_a_clear_extent_flag():
    """sm100_descriptor_check.compare (the GPU check's verdict, run here on stand-in bytes):
    equal bytes pass; the extent flag clear on the device where the host sets it passes; set on
    the device where the host clears it fails; any other differing byte fails; an unwritten
    reference fails."""
    import sm100_descriptor_check as check

    g = torch.Generator().manual_seed(179)
    ref = torch.randint(0, 256, (2, len(gg.Desc), check.DESC_BYTES), dtype=torch.uint8, generator=g)
    ref[:, :, check.EXTENT_FLAG_BYTE] |= check.EXTENT_FLAG_BIT
    shapes = [(256, 128, 512), (512, 64, 256)]
    assert check.compare(ref.clone(), ref, shapes) == []
    dev = ref.clone()
    dev[1, gg.Desc.B, check.EXTENT_FLAG_BYTE] &= ~check.EXTENT_FLAG_BIT & 0xFF
    assert check.compare(dev, ref, shapes) == []
    bad = check.compare(ref, dev, shapes)  # (the device's flag set, the host's clear)
    assert len(bad) == 1 and bad[0].startswith("group 1 B") and "extent flag" in bad[0]
    dev = ref.clone()
    dev[0, gg.Desc.SFB, 40] ^= 1
    bad = check.compare(dev, ref, shapes)
    assert len(bad) == 1 and bad[0].startswith("group 0 SFB") and "bytes [40]" in bad[0]
    ref[1, gg.Desc.C] = check.POISON
    assert check.compare(ref.clone(), ref, shapes) == ["group 1 C: the reference was not written"]


@pytest.mark.parametrize("shapes,needle", [
    (((128, 96, 256),), "N=96"),
    (((128, 256, 300),), "K=300"),
    (((0, 256, 256),), "M=0"),
    (((64, 0, 256),), "N=0"),
    (((64, 256, 0),), "K=0"),
    (tuple((64, 256, 256) for _ in range(17)), "17 groups"),
])
def test_can_implement_names_the_broken_constraint(shapes, needle):
    cfg = configs.select_config("group", "sm_100a", ((128, 256, 256),))
    with pytest.raises(ValueError, match=re.escape(needle)):
        Sm100GroupedGemmKernel.can_implement(cfg, shapes)


def test_can_implement_swap_needs_n_multiple_of_mma_m():
    cfg = configs.CONFIG_MAP[("sm_100a", "group", configs.GROUP_BENCHMARKS[0])]
    assert cfg.swap_ab
    with pytest.raises(ValueError, match=re.escape("N=384")):
        Sm100GroupedGemmKernel.can_implement(cfg, ((64, 384, 256),))


def test_can_implement_rejects_wrong_config():
    cfg = configs.select_config("group", "sm_90a", ((128, 256, 256),))
    with pytest.raises(ValueError, match="sm_100a"):
        Sm100GroupedGemmKernel.can_implement(cfg, ((128, 256, 256),))


# ---------------------------------------------------------------- host tables and cache


def test_host_tables_mma_coordinates_and_padding():
    cfg = KernelConfig("group", "sm_100a", (256, 128), cta_group=2, cluster_mn=(2, 1), swap_ab=True)
    shapes = ((40, 512, 256), (300, 256, 512))
    rows, offsets, total = gg.host_tables(cfg, shapes)
    # swap_ab: MMA M over N (256-row tiles), MMA N over M (128-wide tiles)
    assert rows[0][:5] == [512, 40, 256, 2, 1]
    assert rows[1][:5] == [256, 300, 512, 1, 3]
    assert total == 2 * 1 + 1 * 3
    assert offsets[:3] == [0, 2, 5] and all(o == total for o in offsets[2:])
    assert len(rows) == gg.MAX_GROUPS and len(offsets) == 32


class _Counter:
    def __init__(self):
        self.builds = 0

    def __call__(self, key):
        self.builds += 1
        return gg.Workspace(buffer=None, args=(key,))


def test_workspace_lookup_reuses_and_revalidates():
    import collections

    cache, build = collections.OrderedDict(), _Counter()
    cfg = configs.select_config("group", "sm_100a", configs.GROUP_BENCHMARKS[3])
    key = (cfg, ((128, 4096, 1536, 1),), (1000, 2000, 3000, 4000, 5000))
    ws, setup = gg.workspace_lookup(cache, key, build)
    assert setup and build.builds == 1
    # Until the caller has launched the setup kernel, a hit still asks for it.
    ws1, setup1 = gg.workspace_lookup(cache, key, build)
    assert ws1 is ws and setup1 and build.builds == 1
    ws.setup_done = True
    # Same shapes and pointers: cached descriptors, no rebuild, no setup kernel.
    ws2, setup2 = gg.workspace_lookup(cache, key, build)
    assert ws2 is ws and not setup2 and build.builds == 1
    # One pointer changed: new workspace and descriptors.
    key3 = (cfg, key[1], (1000, 2000, 3000, 4000, 5008))
    ws3, setup3 = gg.workspace_lookup(cache, key3, build)
    assert ws3 is not ws and setup3 and build.builds == 2
    ws3.setup_done = True
    # Shapes changed with the same pointers: rebuild as well.
    key4 = (cfg, ((64, 4096, 1536, 1),), key[2])
    _ws4, setup4 = gg.workspace_lookup(cache, key4, build)
    assert setup4 and build.builds == 3
    # Back to the first tensors: still cached.
    _ws5, setup5 = gg.workspace_lookup(cache, key, build)
    assert not setup5 and build.builds == 3
    # Least recently used entries are evicted beyond max_entries (at least
    # MIN_ENTRIES: nvfp4gemm/cache.py refuses fewer).
    for i in range(8):
        gg.workspace_lookup(cache, (cfg, key[1], (i,)), build, max_entries=8)
    assert len(cache) == 8 and key not in cache
    with pytest.raises(ValueError, match="captured launch"):
        gg.workspace_lookup(cache, key, build, max_entries=3)


def _cpu_group_data(shapes):
    """Stand-in grouped input on the CPU (only pointers, shapes and devices are read)."""
    abc, sfs, sfs_p, sizes = [], [], [], []
    for m, n, k in shapes:
        a = torch.empty(m * k // 2, dtype=torch.uint8)
        b = torch.empty(n * k // 2, dtype=torch.uint8)
        c = torch.empty(m * n * 2, dtype=torch.uint8)
        sfa = torch.empty(configs.round_up(m, 128) * k // 16, dtype=torch.uint8)
        sfb = torch.empty(configs.round_up(n, 128) * k // 16, dtype=torch.uint8)
        abc.append((a, b, c))
        sfs.append((None, None))
        sfs_p.append((sfa, sfb))
        sizes.append((m, n, k, 1))
    return abc, sfs, sfs_p, sizes


def test_cache_key_covers_sizes_and_every_pointer():
    """The descriptor cache's key changes with any problem size at the same addresses (M_g
    prefix views of one buffer, as MoE callers make: their descriptors' dims differ) and with
    any of the five pointers of any group."""
    shapes = [(256, 512, 256), (128, 512, 256)]
    cfg = configs.select_config("group", "sm_100a", shapes)
    data = _cpu_group_data(shapes)
    key = gg.cache_key(cfg, data)
    assert gg.cache_key(cfg, data) == key
    fewer = (data[0], data[1], data[2], [(200, 512, 256, 1), data[3][1]])
    assert gg.cache_key(cfg, fewer) != key
    for g in range(2):
        for i in range(5):
            moved = _cpu_group_data(shapes)
            abc, sfs_p = [list(t) for t in data[0]], [list(t) for t in data[2]]
            parts = abc[g] + sfs_p[g]
            parts[i] = moved[0][g][i] if i < 3 else moved[2][g][i - 3]
            abc[g], sfs_p[g] = parts[:3], parts[3:]
            assert gg.cache_key(cfg, (abc, data[1], sfs_p, data[3])) != key, (g, i)


def test_cache_outlives_dispatcher_replays():
    from nvfp4gemm.cache import MIN_ENTRIES

    assert gg._CACHE_ENTRIES >= 4 * MIN_ENTRIES


def test_runtime_args_cache_hit_builds_nothing(monkeypatch):
    shapes = configs.GROUP_BENCHMARKS[1]
    cfg = configs.select_config("group", "sm_100a", shapes)
    data = _cpu_group_data(shapes)
    stream = object()
    setups = []
    monkeypatch.setattr(gg, "_launch_setup", lambda c, ws, st: setups.append((ws, st)))
    gg._WORKSPACES.clear()
    first = gg.runtime_args(data, cfg, stream)
    assert len(setups) == 1 and setups[0][1] is stream, "first call must launch the setup kernel"
    assert first[-1] is stream and len(first) == len(gg.compile_args(cfg, shapes))
    ws = next(iter(gg._WORKSPACES.values()))
    table = ws.buffer[gg.WS_PTRS:gg.WS_SHAPES].view(torch.int64).view(gg.MAX_GROUPS, gg.NUM_DESC)
    a, b, c = data[0][0]
    sfa, sfb = data[2][0]
    # swap_ab: the MMA's A is the group's B
    assert table[0].tolist() == [b.data_ptr(), a.data_ptr(), sfb.data_ptr(), sfa.data_ptr(), c.data_ptr()]
    second = gg.runtime_args(data, cfg, stream)
    assert len(setups) == 1 and second == first and len(gg._WORKSPACES) == 1
    # new C tensor for group 3 -> new descriptors
    abc = list(data[0])
    abc[3] = (abc[3][0], abc[3][1], torch.empty_like(abc[3][2]))
    third = gg.runtime_args((abc, *data[1:]), cfg, stream)
    assert len(setups) == 2 and third[0] is not first[0] and len(gg._WORKSPACES) == 2
    gg._WORKSPACES.clear()


def test_pointer_args_match_runtime_args(monkeypatch):
    """The dispatcher's template for this kernel rewrites its four workspace pointers per call
    (`pointer_args`): for the template's own input they are runtime_args' first four arguments,
    for new tensors those of their own workspace (built, and its setup kernel launched, once),
    and the scalars after them depend on the sizes only."""
    from cutlass.cute.runtime import _Pointer

    shapes = configs.GROUP_BENCHMARKS[0]
    cfg = configs.select_config("group", "sm_100a", shapes)
    setups = []
    monkeypatch.setattr(gg, "_launch_setup", lambda c, ws, st: setups.append(ws))
    gg._WORKSPACES.clear()
    data = _cpu_group_data(shapes)
    keep = []
    args = gg.runtime_args(data, cfg, "stream", keep=keep)
    assert len(keep) == 1 and keep[0].buffer.data_ptr() == args[0]._pointer
    slots, owner = gg.pointer_args(data, cfg, stream_handle=0)
    assert owner is keep[0]
    assert [ai for ai, _ in slots] == [0, 1, 2, 3] and all(isinstance(args[ai], _Pointer) for ai, _ in slots)
    assert [addr for _, addr in slots] == [args[ai]._pointer for ai, _ in slots]
    assert len(setups) == 1, "the template's own input needs no second setup"
    other = _cpu_group_data(shapes)
    slots2, owner2 = gg.pointer_args(other, cfg, stream_handle=0)
    ws2 = setups[-1]
    assert owner2 is ws2 and len(setups) == 2 and slots2[0][1] == ws2.buffer.data_ptr() != slots[0][1]
    assert [a - slots2[0][1] for _, a in slots2] == [a - slots[0][1] for _, a in slots]
    args2 = gg.runtime_args(other, cfg, "stream")
    assert [repr(a) for a in args2[4:-1]] == [repr(a) for a in args[4:-1]], "scalars must not depend on addresses"
    gg._WORKSPACES.clear()


def test_writer_target_is_a_private_workspace():
    """The template's workspace (table writer path): built from the first input like a cached
    one (same shape and tile rows, same pointer rows: `table_entries`, swap_ab-ordered), but never
    in the cache, since the writer rewrites its pointer rows for every new address set."""
    shapes = configs.GROUP_BENCHMARKS[1]
    cfg = configs.select_config("group", "sm_100a", shapes)
    assert cfg.swap_ab
    gg._WORKSPACES.clear()
    data = _cpu_group_data(shapes)
    t = gg.writer_target(data, cfg, "stream")
    assert t.after is None  # (CPU stand-in data: no setup launch)
    assert t.owner not in gg._WORKSPACES.values() and not gg._WORKSPACES
    base = t.owner.buffer.data_ptr()
    assert t.dst == base + gg.WS_PTRS and t.n == gg.MAX_GROUPS * gg.NUM_DESC and t.dst % 16 == 0
    assert t.arg_pairs == ((0, base + gg.WS_DESC), (1, base + gg.WS_PTRS), (2, base + gg.WS_SHAPES),
                           (3, base + gg.WS_OFFSETS))
    rows = t.owner.buffer[gg.WS_PTRS:gg.WS_SHAPES].view(torch.int64).tolist()
    want = []
    for (a, b, c), (sfa, sfb) in zip(data[0], data[2]):  # Desc order, swapped: the MMA's A is B
        want += [b.data_ptr(), a.data_ptr(), sfb.data_ptr(), sfa.data_ptr(), c.data_ptr()]
    assert list(gg.table_entries(data, cfg)) == want and rows == want + [0] * (t.n - len(want))
    cached = gg._build_workspace(cfg, data, None)
    assert torch.equal(cached.buffer[gg.WS_SHAPES:], t.owner.buffer[gg.WS_SHAPES:])
    assert [repr(a) for a in cached.args[4:]] == [repr(a) for a in t.owner.args[4:]]


def test_template_writes_rows_then_setup_then_main(monkeypatch):
    """Through the dispatcher (CPU stand-ins for the three launches): each new address set gets
    a workspace of its own (its size rows copied from the template's, `_workspace_like`); its
    first call launches the writer with that input's rows, the setup kernel, then the main
    kernel with its four workspace arguments pointing there; an address set seen before
    launches the main kernel alone, pointed back at its workspace."""
    import types

    import reference as R
    from nvfp4gemm import dispatch, table_writer

    order = []
    monkeypatch.setattr(gg, "_launch_setup", lambda c, ws, st: None)  # (runtime_args' cached workspace)
    monkeypatch.setattr(gg, "_packed_setup", lambda c, ws, st: lambda: order.append(("setup", ws.buffer.data_ptr())))
    monkeypatch.setattr(table_writer, "compiled", lambda arch, runnable, n, total=None: (
        lambda dst, entries, stream: order.append(("writer", dst._desc.value, [e._desc.value or 0 for e in entries]))))
    main = lambda *args: order.append(("main", [a._desc.value for a in args[:4]]))  # noqa: E731
    monkeypatch.setattr(dispatch, "TABLE_WRITER", True)
    monkeypatch.setattr(dispatch, "validate_device", lambda used: torch.device("cpu"))
    monkeypatch.setattr(dispatch, "_stream_handle", lambda device: 0)
    shapes = ((40, 256, 256), (72, 256, 256))
    cfg = configs.select_config("group", "sm_100a", shapes)
    monkeypatch.setattr(dispatch, "plan", lambda problem, shape, device, dynamic_m=None: (
        "sm_100a", cfg, types.SimpleNamespace(fn=main, arch="sm_100a", runnable=False), gg))
    dispatch.clear_caches()
    g = R.generate_input([40, 72], [256, 256], [256, 256], 2, 1, device="cpu")
    other = ([tuple(t.clone() for t in grp) for grp in g[0]], g[1], [tuple(t.clone() for t in grp) for grp in g[2]], g[3])
    for d in (g, g, other, g):
        dispatch.custom_kernel(d)
    (tpl,) = next(iter(dispatch._SIGS.values())).templates.values()
    ws_g, ws_o = (tpl.bound[tuple(t.data_ptr() for t in tpl.entry.used(dispatch._flatten(d)[1]))].owner
                  for d in (g, other))
    own = tpl.target.owner
    assert len({own.buffer.data_ptr(), ws_g.buffer.data_ptr(), ws_o.buffer.data_ptr()}) == 3
    for ws in (ws_g, ws_o):  # the size rows and scalars of the template's workspace
        assert torch.equal(ws.buffer[gg.WS_SHAPES:], own.buffer[gg.WS_SHAPES:])
        assert [repr(a) for a in ws.args[4:]] == [repr(a) for a in own.args[4:]]

    def ws_args(ws):
        b = ws.buffer.data_ptr()
        return [b + gg.WS_DESC, b + gg.WS_PTRS, b + gg.WS_SHAPES, b + gg.WS_OFFSETS]

    pad = [0] * (32 - 10)  # (two groups' 10 pointers: a 32-entry writer, table_writer.entries_for)
    assert order == [("writer", ws_args(ws_g)[1], list(gg.table_entries(g, cfg)) + pad), ("setup", ws_g.buffer.data_ptr()),
                     ("main", ws_args(ws_g)), ("main", ws_args(ws_g)),
                     ("writer", ws_args(ws_o)[1], list(gg.table_entries(other, cfg)) + pad), ("setup", ws_o.buffer.data_ptr()),
                     ("main", ws_args(ws_o)), ("main", ws_args(ws_g))]
    dispatch.clear_caches()
    gg._WORKSPACES.clear()


def _capture_env(monkeypatch, packed_setup=None):
    """Stand-ins for the dispatcher's sm_100a grouped path on CPU data with captures: host uploads
    refused while `capturing[0]` (as on a CUDA device), no setup or writer launches (or
    `packed_setup`'s), the current stream `handle[0]`.  Returns (handle, capturing, uploads, cfg,
    g, moved): the stream and capture switches, the upload log, the config, and a 2-group input
    and a copy of it at new addresses.  Every dispatcher cache starts empty."""
    import types

    import reference as R
    from nvfp4gemm import dispatch, table_writer

    handle, capturing, uploads = [5], [False], []
    real_build = gg._build_workspace

    def build(config, data, key):  # (as on a CUDA device: refused inside a capture)
        if capturing[0]:
            raise RuntimeError("upload inside a capture")
        uploads.append(key)
        return real_build(config, data, key)

    monkeypatch.setattr(gg, "_build_workspace", build)
    monkeypatch.setattr(gg, "in_capture", lambda: capturing[0])
    monkeypatch.setattr(gg, "_launch_setup", lambda c, ws, st: None)
    monkeypatch.setattr(gg, "_packed_setup", packed_setup or (lambda c, ws, st: lambda: None))
    monkeypatch.setattr(table_writer, "compiled", lambda arch, runnable, n, total=None: lambda dst, entries, stream: None)
    monkeypatch.setattr(dispatch, "TABLE_WRITER", True)
    monkeypatch.setattr(dispatch, "GRAPHS", False)
    monkeypatch.setattr(dispatch, "_PINNED", {})
    monkeypatch.setattr(dispatch, "validate_device", lambda used: torch.device("cpu"))
    monkeypatch.setattr(dispatch, "_stream_handle", lambda device: handle[0])
    monkeypatch.setattr(dispatch, "_capturing", lambda: capturing[0])
    shapes = ((40, 256, 256), (72, 256, 256))
    cfg = configs.select_config("group", "sm_100a", shapes)
    monkeypatch.setattr(dispatch, "plan", lambda problem, shape, device, dynamic_m=None: (
        "sm_100a", cfg, types.SimpleNamespace(fn=lambda *a: None, arch="sm_100a", runnable=False), gg))
    dispatch.clear_caches()
    monkeypatch.setattr(gg, "_WORKSPACES", type(gg._WORKSPACES)())
    g = R.generate_input([40, 72], [256, 256], [256, 256], 2, 1, device="cpu")
    moved = ([tuple(t.clone() for t in grp) for grp in g[0]], g[1], [tuple(t.clone() for t in grp) for grp in g[2]], g[3])
    return handle, capturing, uploads, cfg, g, moved


def test_template_made_inside_a_capture_after_eager_calls(monkeypatch):
    """torch.cuda.graph captures on a stream of its own, so a caller that warms up eagerly and
    then captures meets a stream with no template: the template is made inside the capture.  No
    host upload may run there (`refuse_in_capture`), so its own workspace takes its size rows
    from this input's eagerly uploaded workspace by a device copy (session 54's review: it
    uploaded and so refused every such capture on sm_100a).  A later eager address set on that
    stream copies its rows from the uploaded workspace too, not from the template's, whose
    captured copy lands only at replay."""
    from nvfp4gemm import dispatch

    handle, capturing, uploads, cfg, g, other = _capture_env(monkeypatch)
    dispatch.custom_kernel(g)  # eager, stream 5
    uploaded = gg._WORKSPACES[gg.cache_key(cfg, g)]
    handle[0], capturing[0] = 9, True  # with torch.cuda.graph(...): custom_kernel(g)
    dispatch.custom_kernel(g)
    capturing[0] = False
    dispatch.custom_kernel(other)  # eager on stream 9: a new address set for that template
    tpl = next(iter(dispatch._SIGS.values())).templates[9]
    own = tpl.target.owner
    ws_o = tpl.bound[tuple(t.data_ptr() for t in tpl.entry.used(dispatch._flatten(other)[1]))].owner
    assert own.rows_src is uploaded and ws_o.rows_src is uploaded
    assert len(uploads) == 2  # (both at the eager call: its runtime_args and its template's own)
    for ws in (own, ws_o):
        assert torch.equal(ws.buffer[gg.WS_SHAPES:], uploaded.buffer[gg.WS_SHAPES:])
    dispatch.clear_caches()


def test_second_capture_copies_the_size_rows_it_reads(monkeypatch):
    """torch.cuda.graph captures every graph on one stream, so a caller's captures share one
    template, made inside the first; its own workspace's size rows are a copy recorded in that
    capture.  A second capture, of addresses no eager call bound, writes that workspace (writer,
    then setup): its graph must record the rows copy again before the setup, or replaying it
    before the first graph ever ran builds descriptors from uninitialised rows (session 55's
    review)."""
    from nvfp4gemm import dispatch

    log = []
    real_copy = gg._copy_rows

    def copy_rows(ws):
        log.append(("rows", ws.buffer.data_ptr(), capturing[0]))
        real_copy(ws)

    def packed_setup(config, ws, stream):
        return lambda: log.append(("setup", ws.buffer.data_ptr(), capturing[0]))

    handle, capturing, _uploads, _cfg, g, fresh = _capture_env(monkeypatch, packed_setup)
    monkeypatch.setattr(gg, "_copy_rows", copy_rows)
    dispatch.custom_kernel(g)  # eager warm-up on stream 5
    handle[0], capturing[0] = 9, True
    dispatch.custom_kernel(g)  # capture 1 (g is bound: no writer in it)
    own = next(iter(dispatch._SIGS.values())).templates[9].target.owner.buffer.data_ptr()
    assert log[-1] == ("rows", own, True)  # (the template's rows: graph 1's copy)
    log.clear()
    dispatch.custom_kernel(fresh)  # capture 2, same stream: writer, setup and main into the template's own
    capturing[0] = False
    assert log == [("rows", own, True), ("setup", own, True)]
    dispatch.clear_caches()


def test_cached_workspace_from_another_stream_waits_for_its_setup(monkeypatch):
    """A workspace cached by address is uploaded and set up on the stream that first met the
    addresses; a lookup from another stream (NVFP4_TABLE_WRITER=0's pointer_args on a second
    stream's template) waits for that stream's mark before its launch reads the descriptors
    (session 54's review: it got `setup_done` and read them unordered)."""
    import reference as R

    log = []
    monkeypatch.setattr(gg, "stream_mark", lambda device, handle: log.append(("mark", int(handle))) or ("m", int(handle)))
    monkeypatch.setattr(gg, "stream_wait", lambda mark, value, handle=None: log.append(("wait", mark, int(handle))))
    gg._WORKSPACES.clear()
    g = R.generate_input([40, 72], [256, 256], [256, 256], 2, 1, device="cpu")
    cfg = configs.select_config("group", "sm_100a", ((40, 256, 256), (72, 256, 256)))
    gg.runtime_args(g, cfg, gg.cuda.CUstream(5))
    gg.runtime_args(g, cfg, gg.cuda.CUstream(9))
    assert log == [("mark", 5), ("wait", ("m", 5), 9)]
    gg._WORKSPACES.clear()
