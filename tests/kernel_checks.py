"""Checks shared by the sm_100a compile tests (dual and grouped GEMM): which configs to
compile, and what their PTX and ptxas report must show.  Imported by
tests/test_sm100_dual_compile.py and tests/test_sm100_group_compile.py; the sm_90a skinny
config sets (`SM90_SKINNY`, `SM90_GROUP_SKINNY`) by tests/test_sm90_compile.py and
tests/test_gpu_kernels.py."""

import re

import configs
from nvfp4gemm import harness

SMEM_LIMIT = 232448  # 227 KB per CTA on sm_100a

# The sm_90a skinny (mma.sync) dual kernel for M <= 16: the rule's configs plus the other
# tile shapes, warp counts and ring depths it accepts; compiled on CPU, run on a GPU.
SM90_SKINNY = sorted({configs.select_config("dual", "sm_90a", (m, n, k, 1)) for m in (1, 16)
                      # (exp. 159: 2 warps, 2 stages at 529-1056 CTAs; exp. 164: 4 warps, 4 stages
                      # for 16 A rows at <= 132 CTAs)
                      # (exp. 165: 2-CTA clusters splitting K at <= 66 CTAs from K 5120)
                      for n in (512, 1024, 4096, 14336)
                      for k in (2048, 7168)}  # (exp. 156: 2 warps at K <= 4096 with 16 A rows)
                     | {c for t in ((16, 8), (16, 16), (32, 8), (32, 16)) for w, s in ((1, 2), (8, 3), (2, 6))
                        for c in [configs.KernelConfig("dual", "sm_90a", t, skinny=True, k_warps=w, ab_stages=s)]
                        if not configs.check_config(c)}
                     # (exp. 170: NVFP4_STATIC_B's programmatic dependent launch, plain and K split)
                     # ("loop": 64 CTAs, and a K split; "sums": 256 CTAs)
                     | {configs.sm90_dual_skinny(s, static_b=True)
                        for s in ((16, 1024, 4096, 1), (1, 512, 14336, 1), (16, 4096, 7168, 1))},
                     key=lambda c: c.short())
# The sm_90a skinny grouped kernel (every M_g <= 16): the rule's configs (16 / 32 rows x 8 / 16 A
# rows, 64 x 16 for many CTAs at short K) plus other warp counts, ring depths and K splits.
SM90_GROUP_SKINNY = sorted({configs.sm90_group_skinny(((m, n, k),) * g) for m in (1, 16) for n in (256, 8192)
                            for k in (2048, 7168)  # (exp. 154: the rule's 1-warp CTAs at K <= 2048)
                            for g in (1, 8)}  # (exp. 155: 8 x 8192 rows make 64-row CTAs at 16 A rows)
                           | {configs.KernelConfig("group", "sm_90a", t, skinny=True, k_warps=w, ab_stages=s)
                              for t in ((16, 8), (32, 16)) for w, s in ((1, 2), (8, 3), (2, 6))}
                           | {configs.KernelConfig("group", "sm_90a", (64, 8), skinny=True, k_warps=2, ab_stages=3)}
                           # (the rule's 32 x 8 two-warp CTAs at 8 A rows, found by session 58's sweep)
                           | {configs.sm90_group_skinny(((8, 4224, 2048),) * 2)}
                           # (exp. 168: clusters of 2 or 4 CTAs splitting K)
                           | {configs.KernelConfig("group", "sm_90a", t, skinny=True, k_warps=w, ab_stages=s, k_split=ks)
                              for t, w, s, ks in (((16, 16), 4, 3, 2), ((32, 8), 1, 2, 4), ((64, 16), 1, 2, 2))},
                           key=lambda c: c.short())

# Shapes whose sm_90a rule picks no leaderboard or hand-listed shape reached (session 58's sweep,
# tests/test_sm90_compile.py::test_sweep_reaches_only_compiled_configs): CI compiles those
# configs from these shapes and the GPU tests run them on them.  Dual: the stored-decode 128 x 64
# tiles whole and split (N % 128 == 64), the swap kernel with MMA N 64, the three-warpgroup
# mixed form stream-K; grouped: the stored-decode 128 x 64 split, and the mixed-input single
# forms stream-K (128 x 160 / 176 / 208 / 224 -- the 224-row A tile in no other config -- and
# 256 x 128).
SM90_RULE_GAP_SHAPES = [
    ("dual", (7871, 9792, 256, 2)), ("dual", (3552, 2752, 7680, 1)), ("dual", (40, 12928, 8192, 1)),
    ("dual", (896, 2112, 14848, 1)),
    ("group", ((328, 4736, 256), (201, 320, 256))), ("group", ((150, 12416, 4864),)),
    ("group", ((176, 7680, 2304),) * 2), ("group", ((208, 2688, 6144),)), ("group", ((215, 6016, 6144),)),
    ("group", ((63, 5632, 6912), (118, 12032, 6912), (8, 12032, 6912), (377, 12032, 6912))),
]

# MaskedGroupedGemm buffer sets (capacities, N, K, expected_m, small): tests/test_sm90_compile.py
# compiles their picks (configs.sm90_group_masked_picks) and tests/test_gpu_masked.py runs them.
SM90_MASKED_CASES = (
    # exp. 146: one group, the masked skinny kernel (at capacity 256 the mixed form beside it)
    [([m], n, 7168, None, True) for m in (1, 16, 256) for n in (256, 8192)]
    # exp. 153: the wide table (more than 16 groups in one launch); K 2048: the 1-warp CTAs, 64 rows
    # at 16 A rows (exps. 154-155)
    + [([m] * 40, n, k, None, None) for m in (1, 16) for n in (256, 8192) for k in (2048, 7168)]
    # exp. 168: the skinny form split over 2-CTA clusters (its early return is uniform over a cluster)
    + [([16], 512, 7168, None, True)]
    # the device-scheduled (256, 128) mixed form beside the skinny kernel (session 58: compiled, never
    # run before)
    + [([256] * 8, 7168, 2048, None, True)]
    # session 58's sweep: masked skinny configs no case above reached -- tiles 16 x 8 / 16 x 16 /
    # 32 x 8 / 32 x 16 / 64 x 16 with 1, 2 or 4 warps and 2 or 3 stages
    + [([10], 1472, 6144, None, None), ([8], 2688, 2304, None, None), ([256, 256], 10624, 1024, (16, 88), True),
       ([32], 10752, 2560, None, True), ([8, 8], 11392, 1024, None, None), ([1], 13312, 512, None, None),
       ([8], 10816, 8192, None, None), ([558, 1024], 13184, 1792, None, True)])


def sm90_masked_picks(case) -> tuple:
    """The configs MaskedGroupedGemm picks for one SM90_MASKED_CASES entry."""
    caps, n, k, expected_m, small = case
    return configs.sm90_group_masked_picks(tuple((m, n, k) for m in caps), expected_m, small)


def sm100_cases(problem: str, extra_shapes) -> list:
    """(config, shape) per distinct sm_100a config of `problem`, the first shape that selects
    it: every CONFIG_MAP entry, then `select_config` of each test and benchmark shape and of
    `extra_shapes`.  The kernels take shapes at run time, so one compile per config."""
    seen = {}
    for (arch, prob, shape), cfg in configs.CONFIG_MAP.items():
        if arch == "sm_100a" and prob == problem:
            seen.setdefault(cfg, shape)
    if problem == "dual":
        shapes = configs.DUAL_TESTS + configs.DUAL_BENCHMARKS
    else:
        shapes = configs.GROUP_TESTS + configs.GROUP_BENCHMARKS
    for shape in shapes + list(extra_shapes):
        seen.setdefault(configs.select_config(problem, "sm_100a", shape), shape)
    return list(seen.items())


def compile_with_ptx(problem: str, cfg, shape, dump_dir: str):
    """Compile for sm_100a keeping the PTX; (compiled kernel, PTX text)."""
    ck = harness.compile_kernel(problem, "sm_100a", cfg, shape, dump_dir=dump_dir)
    assert ck.ptx_path, "no PTX dumped"
    return ck, harness.read_ptx(ck.ptx_path)


def check_nvfp4_block_scaled_mma(ptx: str, cta_group: int) -> None:
    """The PTX issues NVFP4 block-scaled tcgen05.mma (kind::mxf4nvf4) of the config's CTA
    group, with 16-element scale blocks."""
    mmas = set(re.findall(r"tcgen05\.mma\.cta_group::(\d)\.kind::(\w+)\.block_scale([\w:.]*)", ptx))
    assert mmas, "no block-scaled tcgen05.mma in the PTX"
    for group, kind, suffix in mmas:
        assert int(group) == cta_group, mmas
        assert kind == "mxf4nvf4", mmas
        # 16-element scale blocks: PTX 8.8 spells it .scale_vec::4X, newer PTX .block16.
        assert (".scale_vec::4X" in suffix or ".block16" in suffix), mmas
        assert "scale_vec::2X" not in suffix and "block32" not in suffix, mmas


def check_mma_issue(ptx: str, gemms: int) -> None:
    """The MMA warp's k-block body, unrolled once: per GEMM (the dual's two share A and SFA) one
    tcgen05.mma per 64-wide MMA k-step of the 256-wide k-block; and tcgen05.cp copies that
    split evenly over the scale operands (SFA and each GEMM's SFB)."""
    from nvfp4gemm.sm100.common import MMA_INST_PER_KBLOCK

    mmas = len(re.findall(r"^\s*tcgen05\.mma\.", ptx, re.M))
    assert mmas == gemms * MMA_INST_PER_KBLOCK, f"{mmas} tcgen05.mma, expected {gemms} x {MMA_INST_PER_KBLOCK}"
    cps = len(re.findall(r"^\s*tcgen05\.cp\.", ptx, re.M))
    assert cps and cps % (1 + gemms) == 0, f"{cps} tcgen05.cp for {1 + gemms} scale operands"


# PTX instructions whose first operand is not a register they define.
_NO_DEST = re.compile(r"^(st|cp|red|bar|bra|prefetch|fence|tensormap|"
                      r"tcgen05\.(commit|cp|mma|dealloc|relinquish|wait|fence)|"
                      r"mbarrier\.(init|expect_tx)|griddepcontrol|stmatrix|ret|trap|elect)\b")
_REG = re.compile(r"%[a-z_]+[0-9]*(?:\.[xyz])?")


def _rank_dependent_regs(ptx: str) -> set:
    """Registers whose value depends, through any chain of definitions, on the CTA's rank in its
    cluster (%cluster_ctarank).  A register defined more than once (loops) depends on every
    definition's sources: conservative in the direction of finding a dependence."""
    srcs = {}
    for line in ptx.splitlines():
        line = line.split("//")[0].strip()
        if not line or line.endswith(":") or line.startswith((".", "{", "}")):
            continue
        line = re.sub(r"^@!?%p[0-9]+\s+", "", line)
        op, _, rest = line.replace("\t", " ").partition(" ")
        if _NO_DEST.match(op):
            continue
        regs = _REG.findall(rest)
        if len(regs) < 2:
            continue
        dst = regs[0].split("|")[0]
        srcs.setdefault(dst, set()).update(regs[1:])
    dep = {"%cluster_ctarank"}
    grew = True
    while grew:
        grew = False
        for r, ss in srcs.items():
            if r not in dep and ss & dep:
                dep.add(r)
                grew = True
    return dep


def check_multicast_loads_split(ptx: str, at_least: int) -> None:
    """Every multicast TMA load is one CTA's share of a box that several CTAs load together and
    multicast to each other (A/SFA over a cluster row, B over a column, SFB over a 2-CTA pair
    even when the cluster is just the pair): its smem destination or coordinates must depend on
    the CTA's rank in the cluster.  A load that does not fetches the same share in every CTA and
    leaves the rest of the box unwritten -- session 54's grouped SFB bug, which balanced its
    transaction bytes and so would not even hang.  `at_least`: how many multicast loads the
    config must have (with cta_group 2, one per SFB operand at least)."""
    dep = _rank_dependent_regs(ptx)
    # (smem destination, coordinates) of each multicast TMA load
    loads = re.findall(r"^\s*cp\.async\.bulk\.tensor\.\S*multicast::cluster\S*\s+"
                       r"(\[[^\]]*\]),\s*\[[^,]*,\s*\{([^}]*)\}\]", ptx, re.M)
    for dst, coords in loads:
        regs = set(_REG.findall(dst)) | set(_REG.findall(coords))
        assert regs & dep, f"a multicast TMA load ({dst} {{{coords}}}) does not depend on the CTA's cluster rank"
    assert len(loads) >= at_least, f"{len(loads)} multicast TMA loads, expected at least {at_least}"


# ---- TMEM operands of the MMA warp: which columns each tcgen05.cp writes and each tcgen05.mma reads
_SYM_DEF = re.compile(r"^(?:@!?%p\d+\s+)?[a-z][\w.:]*\s+(%r\d+)[,|]")


def _ptx_linear_values(ptx: str) -> tuple:
    """Each 32-bit register's value as a linear form {term: coefficient} over the TMEM base "T"
    (the value tcgen05.alloc writes to shared memory, read back with ld.shared.u32), the shared
    memory base "S" and opaque registers.  Only registers defined once are followed (a register
    a loop redefines stays opaque, so a stage or tile index shows as its own term).  Returns
    (values, lin): lin(token) is a token's linear form."""
    lines = [ln.split("//")[0].strip() for ln in ptx.splitlines()]
    defs = {}
    for ln in lines:
        m = _SYM_DEF.match(ln)
        if m:
            defs[m.group(1)] = defs.get(m.group(1), 0) + 1
    vals = {}

    def lin(tok):  # a register, an immediate, the smem base, or "base+offset" (an address)
        tok = tok.strip().strip("[]")
        if "+" in tok:
            base, _, off = tok.partition("+")
            return add(lin(base), {"1": int(off)})
        if re.fullmatch(r"-?\d+", tok):
            return {"1": int(tok)}
        if tok == "__dynamic_shmem__0":
            return {"S": 1}
        return dict(vals.get(tok, {tok: 1}))

    def add(*forms, sign=(1, 1)):
        out = {}
        for f, sg in zip(forms, sign):
            for k, v in f.items():
                out[k] = out.get(k, 0) + sg * v
        return {k: v for k, v in out.items() if v}

    def evaluate(slot):
        for ln in lines:
            m = re.match(r"tcgen05\.alloc\S*\s+(\[[^\]]+\])", ln)
            if m:
                yield lin(m.group(1))
            m = re.match(r"ld\.shared\.u32\s+(%r\d+),\s*(\[[^\]]+\]);", ln)
            if m and slot is not None and defs.get(m.group(1)) == 1 and lin(m.group(2)) == slot:
                vals[m.group(1)] = {"T": 1}
                continue
            m = re.match(r"(add|sub)\.[su]32\s+(%r\d+),\s*([^,]+),\s*([^;]+);", ln)
            if m and defs.get(m.group(2)) == 1:
                vals[m.group(2)] = add(lin(m.group(3)), lin(m.group(4)), sign=(1, 1 if m.group(1) == "add" else -1))
                continue
            m = re.match(r"shl\.b32\s+(%r\d+),\s*([^,]+),\s*(\d+);", ln)
            if m and defs.get(m.group(1)) == 1:
                vals[m.group(1)] = {k: v << int(m.group(3)) for k, v in lin(m.group(2)).items()}
                continue
            m = re.match(r"mov\.[ub]32\s+(%r\d+),\s*([^;]+);", ln)
            if m and defs.get(m.group(1)) == 1:
                vals[m.group(1)] = lin(m.group(2))

    # The MMA warp's code comes before the allocating warp's in the PTX: find the slot first.
    slots = list(evaluate(None))
    assert len(set(map(lambda f: tuple(sorted(f.items())), slots))) == 1, f"tcgen05.alloc slots {slots}"
    vals.clear()
    for _ in evaluate(slots[0]):
        pass
    return vals, lin


def check_tmem_operands(ptx: str, cfg) -> None:
    """The MMA warp's TMEM columns, followed from the allocated base T through the PTX's
    integer arithmetic, against the kernels' layout ([accumulators of every stage][SFA][SFB per
    GEMM], nvfp4gemm/sm100/common.py; sized by `configs.sm100_tmem_columns`):
    - the tcgen05.cp of a k-block write the scale-factor columns in turn (SFA, then each GEMM's
      SFB: the order of their sources), 4 per 64-wide MMA k-step per operand;
    - GEMM g's MMA at k-step j accumulates into T + g * N (+ a stage index x GEMMs * N when there
      are several accumulator stages) and reads SFA at T + ACC + 4j and its own SFB at
      T + ACC + SFA + g * SFB + 4j, plus 2 x (a tile-parity term) for 64-wide N tiles, whose
      128-row SFB atom holds two tiles' scales (NVIDIA's example shifts the same way);
    - every (GEMM, k-step) pair is issued once per k-block; the scale columns end at the model's
      count.  The stage index's range is not visible in the PTX (the kernels' trace-time asserts
      tie the allocation to the model).
    A wrong SFB operand (B2's scales on B1's MMA), k-step slice or accumulator offset compiles and
    passes every count check; this fails on it."""
    from nvfp4gemm.sm100.common import MMA_INST_PER_KBLOCK

    vals, lin = _ptx_linear_values(ptx)
    cta_m, n = cfg.cta_tile_mn
    gemms = cfg.gemms
    acc_cols = gemms * n * cfg.acc_stages
    sfa_cols = (cta_m // 32) * 4
    sfb_cols = (configs.round_up(n, 128) // 32) * 4
    assert acc_cols + sfa_cols + gemms * sfb_cols == configs.sm100_tmem_columns(cfg)

    def split(form, what):
        assert form.get("T") == 1, f"{what} {form} is not an offset from the TMEM base"
        rest = {k: v for k, v in form.items() if k not in ("T", "1")}
        return form.get("1", 0), rest

    cps = [split(lin(r), "tcgen05.cp destination")
           for r in re.findall(r"^\s*tcgen05\.cp\S*\s+\[(%r\d+)\]", ptx, re.M)]
    assert all(not rest for _, rest in cps), f"tcgen05.cp destinations not constant offsets: {cps}"
    # In issue order: the kernels copy SFA's k-steps, then each GEMM's SFB's (`s2t_copies`, whose
    # smem sources come in the same order), so a copy into another operand's columns shows here.
    want_cps = [acc_cols + 4 * i for i in range((sfa_cols + gemms * sfb_cols) // 4)]
    assert [c for c, _ in cps] == want_cps, (
        f"tcgen05.cp writes columns {[c for c, _ in cps]} in turn, the layout's scale factors are {want_cps}")

    mmas = re.findall(r"^\s*tcgen05\.mma\S*\s+\[(%r\d+)\],\s*%rd\d+,\s*%rd\d+,\s*%r\d+,"
                      r"\s*\[(%r\d+)\],\s*\[(%r\d+)\]", ptx, re.M)
    assert len(mmas) == gemms * MMA_INST_PER_KBLOCK, f"{len(mmas)} block-scaled MMAs parsed"
    seen = set()
    for acc_r, sfa_r, sfb_r in mmas:
        acc, acc_rest = split(lin(acc_r), "accumulator")
        sfa, sfa_rest = split(lin(sfa_r), "SFA operand")
        sfb, sfb_rest = split(lin(sfb_r), "SFB operand")
        assert acc % n == 0 and 0 <= acc // n < gemms, f"accumulator at column {acc}, not a GEMM's N offset"
        g = acc // n
        if cfg.acc_stages > 1:
            assert list(acc_rest.values()) == [gemms * n], f"accumulator stage stride {acc_rest}, expected {gemms * n}"
        else:
            assert not acc_rest, f"accumulator of one stage has a variable offset {acc_rest}"
        assert not sfa_rest, f"SFA operand has a variable column {sfa_rest}"
        j, r = divmod(sfa - acc_cols, 4)
        assert r == 0 and 0 <= j < MMA_INST_PER_KBLOCK, f"SFA at column {sfa}, not a k-step of the SFA columns"
        want_sfb = acc_cols + sfa_cols + g * sfb_cols + 4 * j
        assert sfb == want_sfb, f"GEMM {g} k-step {j} reads SFB at column {sfb}, its scales are at {want_sfb}"
        if n == 64:
            assert sfb_rest and {abs(v) for v in sfb_rest.values()} == {2}, (
                f"64-wide N tile: SFB shift {sfb_rest}, expected 2 x (the tile's parity)")
        else:
            assert not sfb_rest, f"SFB operand has a variable column {sfb_rest}"
        assert (g, j) not in seen, f"GEMM {g} k-step {j} issued twice in one k-block"
        seen.add((g, j))


def check_barrier_inits(ptx: str, cfg) -> None:
    """Every mbarrier's arrival count in the PTX, in shared-memory order (SharedStorage in
    nvfp4gemm/sm100/common.py: ab, acc, tile-ring barriers, full then empty, then the 2-CTA TMEM
    dealloc barrier), against counts derived here from the config alone.  A count above the
    arrivals made hangs the first wait on it; one below lets a stage be reused early.  The ab
    stage's empty barrier: one commit from each leader MMA that reads data this CTA loaded --
    the pairs of its cluster row (A multicast along N), those of its column (B multicast along
    M), its own pair once."""
    from nvfp4gemm.sm100.common import EPI_WARPS
    from nvfp4gemm.scheduler import TileInfoPipeline

    cl_m, cl_n = cfg.cluster_mn
    ab_empty = cl_n + cl_m // cfg.cta_group - 1
    ring = TileInfoPipeline.stages_for(cfg.acc_stages)
    want = ([("ab full", 1)] * cfg.ab_stages + [("ab empty", ab_empty)] * cfg.ab_stages
            + [("acc full", 1)] * cfg.acc_stages
            # every epilogue warp of both CTAs of a pair releases the leader's accumulator
            + [("acc empty", len(EPI_WARPS) * cfg.cta_group)] * cfg.acc_stages
            # the scheduler's entries, read by the MMA warp and each epilogue warp
            + [("tile-ring full", 1)] * ring + [("tile-ring empty", 1 + len(EPI_WARPS))] * ring
            # the pair's TMEM dealloc handshake: the peer's allocator warp, 32 threads
            + ([("TMEM dealloc", 32)] if cfg.cta_group == 2 else []))
    _, lin = _ptx_linear_values(ptx)
    got = []
    for a, c in re.findall(r"^\s*mbarrier\.init\S*\s+\[([^\]]+)\],\s*(%r\d+|\d+);", ptx, re.M):
        addr, count = lin(a), lin(c)  # a: "%r7" or "__dynamic_shmem__0+48"
        assert set(addr) <= {"S", "1"} and addr.get("S") == 1, f"mbarrier at {addr}: not a shared-memory offset"
        assert set(count) <= {"1"}, f"mbarrier count {count} is not a constant"
        got.append((addr.get("1", 0), count.get("1", 0)))
    got.sort()
    assert [o for o, _ in got] == [8 * i for i in range(len(got))], f"mbarrier offsets {[o for o, _ in got]}"
    bad = [(8 * i, name, n, c) for i, ((name, n), (_, c)) in enumerate(zip(want, got)) if n != c]
    assert len(got) == len(want) and not bad, (
        f"{len(got)} mbarriers, expected {len(want)}; (offset, barrier, expected, initialised) that differ: {bad}")
    assert "fence.mbarrier_init" in ptx or cfg.cluster_mn == (1, 1), "no fence.mbarrier_init before cluster use"


def check_resources(ck) -> None:
    """ptxas: no spills, no stack frame, no performance advisory; shared memory fits one CTA
    per SM."""
    assert ck.spill_bytes == 0, f"{ck.spill_bytes} bytes of spills"
    assert ck.stack_bytes == 0, f"{ck.stack_bytes} bytes of stack frame"
    assert not ck.perf_warnings, f"ptxas performance advisories {ck.perf_warnings}"
    assert ck.smem_bytes <= SMEM_LIMIT, f"shared memory {ck.smem_bytes} B > {SMEM_LIMIT} B"
