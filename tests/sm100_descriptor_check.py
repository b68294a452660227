"""The sm_100a grouped kernel's setup kernel run on any GPU of sm_90 or later: the TMA
descriptors it writes on the device against those the DSL encodes on the host for the same
tensors.

The setup kernel (`Sm100GroupedGemmKernel(config, setup_only=True)`) copies host-encoded
template descriptors to shared memory, replaces each one's address, sizes and strides with a
group's (tensormap.replace) and publishes it to the workspace (tensormap.cp_fenceproxy).  None
of that is tcgen05: its sm_90a PTX equals its sm_100a PTX but for `.target`
(test_sm100_group_compile checks it), so an H100 runs the code a B200 would.  The DSL refuses to
build the tcgen05 MMA and 2-CTA TMA ops, whose tile shapes set the descriptors' boxes, unless the
target is sm_100a/sm_103a, so the trace runs with the DSL's arch query answering sm_100a
(`traced_as_sm100a`) while ptxas targets the GPU present.

The reference (`TemplateDump`): the same class's `_problem_tensors` and `_tma_atoms` on a group's
real addresses and sizes, encoded on the host, copied out unchanged by a one-warp kernel.  Equal
bytes mean the device-side replacement wrote every field the host encoding would.  One bit may
differ by design (`EXTENT_FLAG_BYTE`): a flag of the tensor's extent that tensormap.replace
leaves as the template had it; our templates are no larger than any group's tensors, so it is
never set where the host encoding clears it.  Both sides build their tensors with
`_problem_tensors`, so a wrong stride there would pass: only a B200 run can show that.

`LaunchProbe` stands in for the main kernel (its arguments, its launch) and copies what it would
read of each group into the group's C; with `sm100_dispatch` the dispatcher's whole
sm_100a grouped path (templates, table writer, setup relaunch, CUDA graphs, side-stream chunks,
captures) runs on this GPU with the probe in the main kernel's place
(tests/test_gpu_kernels.py::test_sm100_grouped_launch_path_on_this_gpu).

    python3 tests/sm100_descriptor_check.py      (a GPU of sm_90 or later; prints every mismatch)
"""

from __future__ import annotations

import contextlib
import os
import sys

if __name__ == "__main__":  # (run as a script from the repository root)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import nvfp4gemm  # noqa: F401,E402  (compile-only set-up before cutlass is imported)
import torch  # noqa: E402
import cutlass  # noqa: E402
import cutlass.cute as cute  # noqa: E402
import cutlass.utils as utils  # noqa: E402
import cuda.bindings.driver as cuda  # noqa: E402
from cutlass.base_dsl.arch import Arch  # noqa: E402
from cutlass.base_dsl.dsl import BaseDSL  # noqa: E402
from cutlass.cute.nvgpu import cpasync  # noqa: E402

from nvfp4gemm import harness  # noqa: E402
from nvfp4gemm.sm100 import common  # noqa: E402
from nvfp4gemm.sm100 import grouped_gemm as gg  # noqa: E402

DESC_BYTES = common.TENSORMAP_BYTES
POISON = 0xA5  # (the workspace's descriptor slots and the dump's output before each run)
# A flag the host encoder sets iff the tensor spans >= 128 KiB (exp. 179: found by this check,
# mapped over sizes on an H200) and tensormap.replace never touches: a device-written descriptor
# carries its template's.  No template is larger than any group's tensor
# (`grouped_gemm.template_shape`), so a template has it set only where every group's encoding does:
# a descriptor may lack it where the host would set it, never the reverse.
EXTENT_FLAG_BYTE, EXTENT_FLAG_BIT = 10, 0x20


@contextlib.contextmanager
def traced_as_sm100a():
    """The DSL's arch query answers sm_100a while open (its op constructors check it); the
    compile target stays the `--gpu-arch` option's."""
    cls = type(BaseDSL._get_dsl())
    own = cls.__dict__.get("get_arch_enum")  # (None: inherited, so deleted again after)
    cls.get_arch_enum = lambda self: Arch.sm_100a
    try:
        yield
    finally:
        if own is None:
            del cls.get_arch_enum
        else:
            cls.get_arch_enum = own


def target_arch() -> str:
    """The GPU present's arch (sm_90a or sm_100a), else sm_90a (compile only)."""
    arch = harness.device_arch()
    return arch if arch in ("sm_90a", "sm_100a") else "sm_90a"


class TemplateDump(gg.Sm100GroupedGemmKernel):
    """Host-encoded descriptors of one group's tensors, copied unchanged to `out`."""

    def __init__(self, config):
        super().__init__(config, setup_only=True)

    @cute.jit
    def __call__(self, out_ptr: cute.Pointer, a: cutlass.Int64, b: cutlass.Int64,
                 sfa: cutlass.Int64, sfb: cutlass.Int64, c: cutlass.Int64,
                 mm: cutlass.Int32, nn: cutlass.Int32, k: cutlass.Int32, stream: cuda.CUstream):
        """a..c: the group's addresses in `Desc` order (MMA roles); mm, nn, k: its MMA-coordinate
        sizes (`grouped_gemm.mma_shapes`)."""
        self._setup_attributes()
        # (NUM_DESC, 16) Int64: one 128-byte descriptor per Desc slot
        out = cute.make_tensor(out_ptr, cute.make_layout((gg.NUM_DESC, 16), stride=(16, 1)))
        atoms = self._tma_atoms(*self._problem_tensors((a, b, sfa, sfb, c), mm, nn, k))

        @cute.struct
        class DumpStorage:
            # (NUM_DESC, 16) Int64
            descs: cute.struct.Align[cute.struct.MemRange[cutlass.Int64, gg.NUM_DESC * 16], DESC_BYTES]

        self.dump_storage = DumpStorage
        self.dump_kernel(atoms[0][0], atoms[1][0], atoms[2][0], atoms[3][0], atoms[4][0], out).launch(
            grid=(1, 1, 1), block=[32, 1, 1], stream=stream)

    @cute.kernel
    def dump_kernel(self, atom_a: cute.CopyAtom, atom_b: cute.CopyAtom, atom_sfa: cute.CopyAtom,
                    atom_sfb: cute.CopyAtom, atom_c: cute.CopyAtom, out: cute.Tensor):
        storage = utils.SmemAllocator().allocate(self.dump_storage)
        smem_base = storage.descs.data_ptr()
        atoms = (atom_a, atom_b, atom_sfa, atom_sfb, atom_c)
        with cute.arch.elect_one():
            for i in cutlass.range_constexpr(gg.NUM_DESC):
                cpasync.copy_tensormap(atoms[i], smem_base + i * 16)
        cute.arch.sync_warp()
        for i in cutlass.range_constexpr(gg.NUM_DESC):
            cpasync.cp_fence_tma_desc_release(common.tensormap_ptr(out[(i, None)].iterator),
                                              smem_base + i * 16)


# What `LaunchProbe` copies to the start of each group's C: its NUM_DESC descriptors, its shape
# row (SHAPE_FIELDS Int32), then PROBE_TAIL Int32: the launch's scalars (tmpl_mm, tmpl_nn,
# tmpl_k, num_groups, num_tiles, num_clusters) and the tile offsets (OFFSETS_USED), zero-padded.
PROBE_SCALARS = 6
PROBE_TAIL = 24
PROBE_BYTES = gg.NUM_DESC * DESC_BYTES + (gg.SHAPE_FIELDS + PROBE_TAIL) * 4
assert PROBE_SCALARS + gg.OFFSETS_USED <= PROBE_TAIL


class LaunchProbe(gg.Sm100GroupedGemmKernel):
    """A stand-in for the main kernel, compiled with its arguments (`__call__`'s signature): one
    warp per group copies what the main kernel would read of that group -- its five workspace
    descriptors and its shape row -- to the start of the group's C (whose address it reads from
    the pointer rows, as the setup kernel does).  Run through the dispatcher in its place, it shows
    which workspace each launch of the sm_100a path points at: templates, the table writer, the
    setup relaunch, CUDA-graph replays, side-stream chunks, a caller's capture."""

    @cute.jit
    def __call__(self, desc_ptr: cute.Pointer, ptrs_ptr: cute.Pointer, shapes_ptr: cute.Pointer,
                 offsets_ptr: cute.Pointer, tmpl_mm: cutlass.Int32, tmpl_nn: cutlass.Int32,
                 tmpl_k: cutlass.Int32, num_groups: cutlass.Int32, num_tiles: cutlass.Int32,
                 num_clusters: cutlass.Int32, stream: cuda.CUstream):
        # (MAX_GROUPS, NUM_DESC * 16) Int64: each group's descriptors, as words
        descs = cute.make_tensor(desc_ptr, cute.make_layout((gg.MAX_GROUPS, gg.NUM_DESC * 16),
                                                            stride=(gg.NUM_DESC * 16, 1)))
        # (MAX_GROUPS, NUM_DESC) Int64 data pointers
        ptrs = cute.make_tensor(ptrs_ptr, cute.make_layout((gg.MAX_GROUPS, gg.NUM_DESC),
                                                           stride=(gg.NUM_DESC, 1)))
        # (MAX_GROUPS, SHAPE_FIELDS) Int32
        shapes = cute.make_tensor(shapes_ptr, cute.make_layout((gg.MAX_GROUPS, gg.SHAPE_FIELDS),
                                                               stride=(gg.SHAPE_FIELDS, 1)))
        # (OFFSETS_USED,) Int32 tile prefix sums
        offsets = cute.make_tensor(offsets_ptr, cute.make_layout(gg.OFFSETS_USED))
        self.probe_kernel(descs, ptrs, shapes, offsets, tmpl_mm, tmpl_nn, tmpl_k, num_groups, num_tiles,
                          num_clusters).launch(grid=(num_groups, 1, 1), block=[32, 1, 1], stream=stream)

    @cute.kernel
    def probe_kernel(self, descs: cute.Tensor, ptrs: cute.Tensor, shapes: cute.Tensor, offsets: cute.Tensor,
                     tmpl_mm: cutlass.Int32, tmpl_nn: cutlass.Int32, tmpl_k: cutlass.Int32,
                     num_groups: cutlass.Int32, num_tiles: cutlass.Int32, num_clusters: cutlass.Int32):
        g, _, _ = cute.arch.block_idx()
        lane, _, _ = cute.arch.thread_idx()
        c_addr = ptrs[g, int(gg.Desc.C)]
        words = gg.NUM_DESC * 16
        # (words,) Int64 at the start of the group's C
        out = cute.make_tensor(cute.make_ptr(cutlass.Int64, c_addr, cute.AddressSpace.gmem, assumed_align=16),
                               cute.make_layout(words))
        for i in cutlass.range_constexpr((words + 31) // 32):
            w = lane + 32 * i
            if w < words:
                out[w] = descs[g, w]
        # (SHAPE_FIELDS,) Int32 after them
        row = cute.make_tensor(cute.make_ptr(cutlass.Int32, c_addr + words * 8, cute.AddressSpace.gmem,
                                             assumed_align=16), cute.make_layout(gg.SHAPE_FIELDS))
        if lane < gg.SHAPE_FIELDS:
            row[lane] = shapes[g, lane]
        # (PROBE_TAIL,) Int32 after the row
        tail = cute.make_tensor(cute.make_ptr(cutlass.Int32, c_addr + words * 8 + gg.SHAPE_FIELDS * 4,
                                              cute.AddressSpace.gmem, assumed_align=16),
                                cute.make_layout(PROBE_TAIL))
        if lane == 0:
            scalars = (tmpl_mm, tmpl_nn, tmpl_k, num_groups, num_tiles, num_clusters)
            for i in cutlass.range_constexpr(PROBE_SCALARS):
                tail[i] = scalars[i]
        if lane < gg.OFFSETS_USED:
            tail[PROBE_SCALARS + lane] = offsets[lane]
        if PROBE_SCALARS + gg.OFFSETS_USED <= lane and lane < PROBE_TAIL:
            tail[lane] = cutlass.Int32(0)


def compile_probe(config, arch: str, dump_dir: str | None = None):
    """`LaunchProbe(config)` compiled for `arch`, with the main kernel's compile arguments."""
    return _compiled("probe", config, arch, dump_dir, lambda: (
        LaunchProbe(config), gg.compile_args(config, ((128, 1024, gg.K_BLOCK),))))


def probe_mismatches(config, data) -> list[str]:
    """After a dispatcher call whose main launch was `LaunchProbe`: each group's C must start with
    the host encoding of that group's descriptors (`compare`), its shape row and the launch's
    scalars and tile offsets (`host_tables`, `template_shape`, the cluster count)."""
    shapes = _shapes(data)
    groups = len(shapes)
    torch.cuda.synchronize()
    got = torch.stack([grp[2].reshape(-1).view(torch.uint8)[:PROBE_BYTES] for grp in data[0]]).cpu()
    descs = got[:, :gg.NUM_DESC * DESC_BYTES].reshape(groups, gg.NUM_DESC, DESC_BYTES)
    bad = compare(descs, host_descriptors(config, data, target_arch()), gg.mma_shapes(config, shapes))
    ints = got[:, gg.NUM_DESC * DESC_BYTES:].contiguous().view(torch.int32)
    rows, tails = ints[:, :gg.SHAPE_FIELDS], ints[:, gg.SHAPE_FIELDS:]
    table, offsets, total = gg.host_tables(config, shapes)
    device = data[0][0][0].device
    clusters = max(1, min(total, gg.device_max_active_clusters(config, device.index or 0)))
    tail = [*gg.template_shape(config, shapes), groups, total, clusters, *offsets[:gg.OFFSETS_USED]]
    tail += [0] * (PROBE_TAIL - len(tail))
    for g in range(groups):
        if rows[g].tolist() != table[g]:
            bad.append(f"group {g}: shape row {rows[g].tolist()}, expected {table[g]}")
        if tails[g].tolist() != tail:
            bad.append(f"group {g}: scalars and tile offsets {tails[g].tolist()}, expected {tail}")
    return bad


class DualLaunchProbe:
    """A stand-in for the sm_100a dual kernel, compiled with its arguments (`Sm100DualGemmKernel.
    __call__`'s signature): one thread writes the launch's arguments -- the seven data addresses,
    m, n, k, l and the cluster count -- as DUAL_PROBE_WORDS Int64 to the start of C.  Run through the
    dispatcher in the kernel's place, it shows what each launch of the sm_100a dual path is handed
    (templates' data slots, CUDA-graph replays, a caller's capture)."""

    @cute.jit
    def __call__(self, a_ptr: cute.Pointer, b1_ptr: cute.Pointer, b2_ptr: cute.Pointer,
                 sfa_ptr: cute.Pointer, sfb1_ptr: cute.Pointer, sfb2_ptr: cute.Pointer,
                 c_ptr: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32, k: cutlass.Int32,
                 l: cutlass.Int32, max_active_clusters: cutlass.Int32, stream: cuda.CUstream):
        self.probe_kernel(a_ptr, b1_ptr, b2_ptr, sfa_ptr, sfb1_ptr, sfb2_ptr, c_ptr, m, n, k, l,
                          max_active_clusters).launch(grid=(1, 1, 1), block=[32, 1, 1], stream=stream)

    @cute.kernel
    def probe_kernel(self, a_ptr: cute.Pointer, b1_ptr: cute.Pointer, b2_ptr: cute.Pointer,
                     sfa_ptr: cute.Pointer, sfb1_ptr: cute.Pointer, sfb2_ptr: cute.Pointer,
                     c_ptr: cute.Pointer, m: cutlass.Int32, n: cutlass.Int32, k: cutlass.Int32,
                     l: cutlass.Int32, max_active_clusters: cutlass.Int32):
        lane, _, _ = cute.arch.thread_idx()
        # (DUAL_PROBE_WORDS,) Int64 at the start of C
        out = cute.make_tensor(cute.make_ptr(cutlass.Int64, c_ptr.toint(), cute.AddressSpace.gmem,
                                             assumed_align=16), cute.make_layout(DUAL_PROBE_WORDS))
        if lane == 0:
            words = (a_ptr.toint(), b1_ptr.toint(), b2_ptr.toint(), sfa_ptr.toint(), sfb1_ptr.toint(),
                     sfb2_ptr.toint(), c_ptr.toint(), m, n, k, l, max_active_clusters)
            for i in cutlass.range_constexpr(DUAL_PROBE_WORDS):
                out[i] = cutlass.Int64(words[i])


DUAL_PROBE_WORDS = 12


def compile_dual_probe(config, arch: str, dump_dir: str | None = None):
    """`DualLaunchProbe` compiled for `arch` with the sm_100a dual kernel's compile arguments."""
    from nvfp4gemm.sm100 import dual_gemm

    return _compiled("dual probe", config, arch, dump_dir, lambda: (
        DualLaunchProbe(), dual_gemm.compile_args(config, 256, 256, 256, 1)))


def dual_probe_mismatches(config, data) -> list[str]:
    """After a dispatcher call whose launch was `DualLaunchProbe`: C must start with the input's
    data addresses (the permuted scales), its sizes and this GPU's cluster count."""
    a, b1, b2, _sfa, _sfb1, _sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    torch.cuda.synchronize()
    # (the first bytes at C's address, whatever its strides)
    got = c.as_strided((DUAL_PROBE_WORDS * 4,), (1,)).view(torch.uint8).cpu().view(torch.int64).tolist()
    m, k2, l = a.shape
    clusters = gg.device_max_active_clusters(config, a.device.index or 0)
    want = [t.data_ptr() for t in (a, b1, b2, sfa_p, sfb1_p, sfb2_p, c)] + [m, b1.shape[0], 2 * k2, l, clusters]
    return [] if got == want else [f"launch arguments {got}, expected {want}"]


def sm100_dispatch(monkeypatch) -> None:
    """Make the dispatcher take its sm_100a paths on this GPU (pytest `monkeypatch`, undone after
    the test): inputs plan for sm_100a; a grouped input's main launch is `LaunchProbe`, with the
    setup and table writer built for this GPU, a dual input's is `DualLaunchProbe`; every cache
    that would keep them is fresh."""
    import types
    from collections import OrderedDict

    from nvfp4gemm import dispatch, table_writer

    arch = target_arch()
    real_compiled_for = dispatch.compiled_for

    def compiled_for(problem, plan_arch, cfg, shape):
        if plan_arch == "sm_100a" and problem == "dual":
            from nvfp4gemm.sm100 import dual_gemm

            dual_gemm.Sm100DualGemmKernel.can_implement(cfg, *shape)
            return dual_gemm, types.SimpleNamespace(fn=compile_dual_probe(cfg, arch), arch="sm_100a", runnable=True)
        if problem != "group" or plan_arch != "sm_100a":
            return real_compiled_for(problem, plan_arch, cfg, shape)
        gg.Sm100GroupedGemmKernel.can_implement(cfg, shape)
        small = [(m, n) for m, n, _k in shape if m * n * 2 < PROBE_BYTES]
        assert not small, f"groups {small}: C smaller than the probe's {PROBE_BYTES} bytes"
        return gg, types.SimpleNamespace(fn=compile_probe(cfg, arch), arch="sm_100a", runnable=True)

    real_buffer = gg._workspace_buffer

    def poisoned_buffer(device):  # (every new workspace: nothing stale can pass for a written one)
        return real_buffer(device).fill_(POISON)

    dispatch.clear_caches()
    monkeypatch.setattr(dispatch, "_capability", lambda device: (10, 0))
    monkeypatch.setattr(dispatch, "_PLANS", OrderedDict())
    monkeypatch.setattr(dispatch, "compiled_for", compiled_for)
    monkeypatch.setattr(gg, "compile_setup", lambda cfg, dump_dir=None: compile_setup(cfg, arch, dump_dir))
    monkeypatch.setattr(gg, "_WORKSPACES", OrderedDict())
    monkeypatch.setattr(gg, "_workspace_buffer", poisoned_buffer)
    monkeypatch.setattr(table_writer, "_COMPILED", {})
    monkeypatch.setattr(dispatch, "_PINNED", {})  # (what a probe capture pins goes with the test)


def _options(arch: str, dump_dir: str | None) -> str:
    opts = [f"--gpu-arch {arch}"]
    if dump_dir:
        opts += ["--keep-ptx", "--keep-cubin", f"--dump-dir {dump_dir}"]
    return " ".join(opts)


_COMPILED: dict = {}


def _compiled(kind: str, config, arch: str, dump_dir, build):
    """`build()`'s (kernel, compile arguments) compiled for `arch` under `traced_as_sm100a`, once
    per (kind, config, arch, dump_dir)."""
    key = (kind, config, arch, dump_dir)
    if key not in _COMPILED:
        with traced_as_sm100a():
            kernel, args = build()
            _COMPILED[key] = cute.compile(kernel, *args, options=_options(arch, dump_dir))
    return _COMPILED[key]


def compile_setup(config, arch: str, dump_dir: str | None = None):
    """The setup-only function of `config` compiled for `arch` (sm_90a: traced as sm_100a)."""
    return _compiled("setup", config, arch, dump_dir, lambda: (
        gg.Sm100GroupedGemmKernel(config, setup_only=True), gg.compile_args(config, ((128, 1024, gg.K_BLOCK),))))


def compile_dump(config, arch: str, dump_dir: str | None = None):
    """`TemplateDump(config)` compiled for `arch` (any group: addresses and sizes are run time)."""
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    return _compiled("dump", config, arch, dump_dir, lambda: (TemplateDump(config), (
        make_ptr(cutlass.Int64, 1 << 20, cute.AddressSpace.gmem, assumed_align=128),
        *(cutlass.Int64(1 << 21) for _ in range(gg.NUM_DESC)),
        cutlass.Int32(128), cutlass.Int32(1024), cutlass.Int32(gg.K_BLOCK), make_fake_stream())))


def _shapes(data) -> list[tuple[int, int, int]]:
    return [(int(m), int(n), int(k)) for m, n, k, _l in data[3]]


def _stream():
    return cuda.CUstream(torch.cuda.current_stream().cuda_stream)


def _poison_descriptors(ws) -> torch.Tensor:
    """ws's descriptor slots, poisoned (returned as a uint8 view)."""
    slots = ws.buffer[gg.WS_DESC:gg.WS_DESC + gg.MAX_GROUPS * gg.NUM_DESC * DESC_BYTES]
    slots.fill_(POISON)
    return slots


def host_descriptors(config, data, arch: str) -> torch.Tensor:
    """(groups, NUM_DESC, DESC_BYTES) uint8 on the CPU: the host encoding of every group's
    tensors (`TemplateDump`), in `Desc` order."""
    from cutlass.cute.runtime import make_ptr

    shapes = _shapes(data)
    dump = compile_dump(config, arch)
    addrs = gg.table_entries(data, config)
    host = torch.full((len(shapes), gg.NUM_DESC * DESC_BYTES), POISON, dtype=torch.uint8,
                      device=data[0][0][0].device)
    for g, (mm, nn, k) in enumerate(gg.mma_shapes(config, shapes)):
        out = make_ptr(cutlass.Int64, host[g].data_ptr(), cute.AddressSpace.gmem, assumed_align=128)
        dump(out, *(cutlass.Int64(x) for x in addrs[g * gg.NUM_DESC:(g + 1) * gg.NUM_DESC]),
             cutlass.Int32(mm), cutlass.Int32(nn), cutlass.Int32(k), _stream())
    torch.cuda.synchronize()
    return host.view(len(shapes), gg.NUM_DESC, DESC_BYTES).cpu()


def descriptor_mismatches(config, data) -> list[str]:
    """The upload path (`_build_workspace`, as `runtime_args` and NVFP4_TABLE_WRITER=0 use it):
    run the setup kernel on a grouped input's workspace (GPU) and compare every group's
    descriptors with the host encoding of its tensors; one line per differing descriptor."""
    arch = target_arch()
    ws = gg._build_workspace(config, data, None)
    slots = _poison_descriptors(ws)
    compile_setup(config, arch)(*ws.args, _stream())
    torch.cuda.synchronize()
    groups = len(_shapes(data))
    dev = slots.view(gg.MAX_GROUPS, gg.NUM_DESC, DESC_BYTES)[:groups].cpu()
    return compare(dev, host_descriptors(config, data, arch), gg.mma_shapes(config, _shapes(data)))


def writer_path_mismatches(config, first, second) -> list[str]:
    """The dispatcher's default sm_100a path for a new address set (`writer_target` with `like`):
    a workspace whose size rows are copied on the device from the template's own (made for
    `first`), whose pointer rows the table writer stores from its kernel parameters (the values of
    `second`, same sizes), then the setup kernel (`Target.after`) -- compared with the host
    encoding of `second`'s tensors."""
    from nvfp4gemm import table_writer

    arch = target_arch()
    stream = _stream()
    real = gg.compile_setup
    gg.compile_setup = lambda cfg, dump_dir=None: compile_setup(cfg, arch, dump_dir)  # (this GPU's build)
    try:
        own = gg.writer_target(first, config, stream)
        t = gg.writer_target(second, config, stream, like=own)
    finally:
        gg.compile_setup = real
    slots = _poison_descriptors(t.owner)
    vals = gg.table_entries(second, config)
    n = table_writer.entries_for(len(vals), t.n)
    entries, values = table_writer.entry_params(n)
    values[:len(vals)] = vals
    table_writer.compiled(arch, True, n, t.n)(table_writer.entry_ptr(t.dst, align=16), entries, stream)
    t.after()
    torch.cuda.synchronize()
    groups = len(_shapes(second))
    dev = slots.view(gg.MAX_GROUPS, gg.NUM_DESC, DESC_BYTES)[:groups].cpu()
    return compare(dev, host_descriptors(config, second, arch), gg.mma_shapes(config, _shapes(second)))


def compare(dev, ref, mma_shapes) -> list[str]:
    """Lines naming each (group, Desc) whose device bytes differ from the host's beyond the extent
    flag being clear on the device where the host sets it."""
    bad = []
    for g, shape in enumerate(mma_shapes):
        for d in gg.Desc:
            x, y = dev[g, d].clone(), ref[g, d].clone()
            if bool((y == POISON).all()):
                bad.append(f"group {g} {d.name}: the reference was not written")
                continue
            fx, fy = int(x[EXTENT_FLAG_BYTE]) & EXTENT_FLAG_BIT, int(y[EXTENT_FLAG_BYTE]) & EXTENT_FLAG_BIT
            if fx and not fy:
                bad.append(f"group {g} {d.name} (mma shape {shape}): the extent flag is set on the device, "
                           "clear in the host encoding (a template larger than the group's tensor)")
            x[EXTENT_FLAG_BYTE] &= ~EXTENT_FLAG_BIT & 0xFF
            y[EXTENT_FLAG_BYTE] &= ~EXTENT_FLAG_BIT & 0xFF
            if not torch.equal(x, y):
                diff = (x != y).nonzero().flatten().tolist()
                bad.append(f"group {g} {d.name} (mma shape {shape}): bytes {diff} differ; "
                           f"device {x[diff].tolist()} host {y[diff].tolist()}")
    return bad


def cases():
    """(config, shapes) to check: every sm_100a grouped config CI compiles, each on every
    leaderboard grouped test and benchmark shape (the kernel takes shapes at run time) and on 16
    groups with M = 1 + 7 g (the limits)."""
    import configs

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from test_sm100_group_compile import CASES

    shapes = configs.GROUP_TESTS + configs.GROUP_BENCHMARKS + [tuple((1 + 7 * g, 256, 256) for g in range(16))]
    out = []
    for cfg, _s in CASES:
        for s in shapes:
            try:
                gg.Sm100GroupedGemmKernel.can_implement(cfg, s)
            except ValueError:
                continue
            out.append((cfg, tuple(s)))
    return out


def main() -> int:
    import reference as R

    failed = 0
    for cfg, shapes in cases():
        ms, ns, ks = zip(*shapes)
        data = R.generate_input(list(ms), list(ns), list(ks), len(shapes), 5501, device="cuda")
        bad = descriptor_mismatches(cfg, data)
        moved = ([tuple(t.clone() for t in grp) for grp in data[0]], data[1],
                 [tuple(t.clone() for t in grp) for grp in data[2]], data[3])
        bad += [f"writer path: {line}" for line in writer_path_mismatches(cfg, data, moved)]
        print(f"{cfg.short():40} {len(shapes):2} groups {str(shapes[0]):20} "
              f"{'ok' if not bad else f'{len(bad)} mismatches'}", flush=True)
        for line in bad[:8]:
            print("   ", line)
        failed += bool(bad)
    print("all equal" if not failed else f"{failed} cases differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
