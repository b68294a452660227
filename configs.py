"""Kernel configurations: one frozen `KernelConfig` per (problem, arch, shape).

`CONFIG_MAP` pins a config for each leaderboard benchmark case on each architecture;
`default_config` derives one by rule for every other legal shape; `select_config` picks
between them.  `check_config` is the per-architecture validity check (divisibility, shared
memory within the SM's limit, TMEM columns on sm_100a, accumulator registers on sm_90a)
that tests run on every entry.

This module is pure Python (no CuTe DSL, no torch) so that it can be imported and tested
anywhere and inlined into the single-file leaderboard submission.

Shapes: dual problems are keyed by (m, n, k, l); grouped problems by a tuple of per-group
(m, n, k) triples (l is always 1 on the leaderboard).
"""

from __future__ import annotations

import functools
import itertools
import math
import os
from dataclasses import dataclass, replace

# K elements per pipeline stage (one "k-block"): 4 NVFP4 MMA instructions of K=64 on
# sm_100a; 128 bytes of packed e2m1 per row, i.e. one 128-byte swizzle atom.
K_BLOCK = 256
# Groups of one grouped launch: every grouped kernel's table (sm_90a: 16 rows of pointers and
# sizes, written from one launch's parameters; sm_100a: 16 groups of TMA descriptors) and its
# group search (an unrolled scan) are sized for this.  An input of more groups runs as several
# launches of at most this many (`group_chunks`; exp. 152), except where one launch of the
# masked skinny kernel with a wide table takes them (`table_groups`, exp. 153).
GROUPS_PER_LAUNCH = 16
# Exp. 153: the masked grouped skinny kernel's wide table (MaskedGroupedGemm, every capacity <= 16
# rows): up to this many groups in one launch, its table uploaded once (not written from launch
# parameters) and each CTA's group read from a per-CTA map (no scan over the groups).
WIDE_TABLE_GROUPS = 256
SF_VEC = 16  # e2m1 elements per e4m3 scale factor (NVFP4)

ARCHS = ("sm_100a", "sm_90a")
PROBLEMS = ("dual", "group")

# Hardware limits used by the resource models.
SMEM_LIMIT = {"sm_100a": 232448, "sm_90a": 232448}  # 227 KB usable per CTA on both
TMEM_COLUMNS = 512  # sm_100a: 128 lanes x 512 columns of 32 bit per SM
SM90_MAX_ACC_REGS = 128  # fp32 accumulator registers per consumer thread we allow
SM90_A16_STAGES = 8  # fp16 A sub-blocks (tile N x 64) in flight in the mixed-input kernels
# ... with 256 A rows per tile (32 KB a sub-block, 8 would not fit): waited for in pairs
SM90_A16_STAGES_WIDE = 5
SM90_A16_STAGES_MID = 6  # ... with 144-224 A rows (up to 28 KB a sub-block; the grouped (128, 192) form, exp. 108)
# The most A rows with SM90_A16_STAGES_MID stages (exp. 117: 208 and 224 rows had 5 before, which
# fit in 187 / 198 KB; 6 fit in 214 / 226 KB; H100, g8 N7168 K2048 0.922, two check shapes
# 0.980 / 0.996); 240 rows with 6 would pass the 227 KB of shared memory.
SM90_A16_MID_MAX_ROWS = 224
SM_COUNT = {"sm_100a": 148, "sm_90a": 132}


@dataclass(frozen=True)
class KernelConfig:
    problem: str  # "dual" | "group"
    arch: str  # "sm_100a" | "sm_90a"
    # Output tile of one MMA; with cta_group == 2 it is the CTA pair's tile (e.g. 256x128).
    mma_tile_mn: tuple[int, int]
    cta_group: int = 1  # 1 or 2 CTAs per MMA (2 only on sm_100a)
    cluster_mn: tuple[int, int] = (1, 1)
    ab_stages: int = 4  # shared-memory stages of k-blocks (A, B[, B2] and their scales)
    acc_stages: int = 1  # accumulator buffers (TMEM on sm_100a), >1 overlaps the epilogue
    epi_tile_mn: tuple[int, int] = (128, 32)  # subtile of C written per epilogue step
    epi_stages: int = 2  # shared-memory C buffers in flight to TMA stores
    occupancy: int = 1  # CTAs per SM
    raster: str = "m"  # "m": consecutive tile indices walk M first; "n": N first
    swap_ab: bool = False  # compute C^T = B A^T so the large N feeds the MMA's M side
    mma_warpgroups: int = 2  # sm_90a: consumer warpgroups splitting the tile's M
    dec_stages: int = 2  # sm_90a: decoded fp16 sub-block buffers (3 lets wgmma run 2 deep)
    rs_a: bool = False  # sm_90a: A decoded into registers (wgmma RS), only B tiles in smem
    # sm_90a: compile the split-K work items (split_plan) in; off, every tile runs whole
    # (H200, notes/sm90.md exp. 26: the dual kernel runs 1-2% faster without them where it
    # never splits, the grouped kernel 2-9% slower, so the rules differ)
    split_k: bool = False
    # sm_90a decode-sized M (nvfp4gemm/sm90/skinny.py: dual_skinny.py, grouped_skinny.py):
    # mma.sync warps decode B rows (dual: B1 and B2) and the few A rows straight into
    # registers; mma_tile_mn = (B rows per CTA: 16 or 32, grouped also 64; A rows held: 8 or 16), k_warps
    # warps per CTA split K
    skinny: bool = False
    k_warps: int = 8
    # sm_90a skinny (dual and grouped): CTAs of one cluster (along the grid's z) splitting K, each
    # with k_warps warps; their partial sums meet in rank 0's shared memory (distributed shared
    # memory) for its epilogue -- for grids of fewer CTAs than SMs (exps. 165, 168)
    k_split: int = 1
    # sm_90a skinny dual, for callers whose B1 / B2 and their scales no earlier kernel of the stream
    # writes (NVFP4_STATIC_B=1): programmatic dependent launch, B's first cp.async stages loaded
    # before griddepcontrol.wait, so a chain of such calls overlaps each launch and first loads with
    # the previous call's tail; the value says where the next kernel is let in: "loop" after the
    # main loop, "sums" after the partial sums; "" off (exp. 170)
    pdl: str = ""
    # sm_90a mixed-input form (nvfp4gemm/sm90/dual_mixed.py, grouped_mixed.py): a pre-pass
    # decodes A once to fp16, the main kernel TMA-loads it as the wgmma shared-memory operand
    # and decodes B1 / B2 (B_g) straight into wgmma registers (C^T tiles: swap_ab)
    a_prepass: bool = False
    # sm_90a grouped mixed-input kernel with several tile forms side by side in one launch
    # (exps. 99, 108, 112): the tiles of its forms in CTA order (2 to MAX_FORMS of FORM_TILES, in
    # `form_order`), each group run by one of them (`form_groups`), each form on its own CTAs
    # (`form_parts`, `mixed_group_forms_plan`); () for one form.  mma_tile_mn is the first
    # form's tile
    forms: tuple = ()
    # sm_90a grouped mixed-input kernel, one form: each CTA computes its whole tiles and stream-K
    # segments from the group table's sizes (no host-made schedule), so one launch template
    # serves every M_g (NVFP4_DYNAMIC_M callers; `sm90_group_mixed_dynamic`, exps. 136-137)
    device_schedule: bool = False
    # with device_schedule: M_g = min(max(counts[g], 0), the group table's M_g), counts an int32
    # device tensor in the launch's (otherwise unused) row-offset argument: the per-call counts
    # of `nvfp4gemm.masked.MaskedGroupedGemm`, whose table holds the capacities (exp. 145); with
    # skinny (grouped): the same counts as an extra launch argument (exp. 146)
    masked: bool = False
    # with masked and device_schedule: groups whose count is at most this many rows get none
    # (MaskedGroupedGemm launches the masked skinny kernel, whose tile holds this many A rows,
    # beside it for them; it skips the others: exps. 147-150); 0 = every group
    masked_above: int = 0
    # rows of the group table one launch reads (GROUPS_PER_LAUNCH); WIDE_TABLE_GROUPS: the masked
    # grouped skinny kernel's wide table (exp. 153), its CTAs' groups from a per-CTA map
    table_groups: int = GROUPS_PER_LAUNCH

    @property
    def gemms(self) -> int:
        """GEMMs sharing one A tile: 2 for the dual problem, 1 for grouped and for the sm_90a
        dual swap_ab kernel (B1 stacked on B2 is one 256-row register operand)."""
        return 2 if self.problem == "dual" and not self.swap_ab else 1

    @property
    def cta_tile_mn(self) -> tuple[int, int]:
        return (self.mma_tile_mn[0] // self.cta_group, self.mma_tile_mn[1])

    def short(self) -> str:
        m, n = self.mma_tile_mn
        s = f"{m}x{n} cg{self.cta_group} cl{self.cluster_mn[0]}x{self.cluster_mn[1]} ab{self.ab_stages} acc{self.acc_stages}"
        if self.skinny:
            return f"skinny {m}x{n} kw{self.k_warps} ab{self.ab_stages}" + (f" ks{self.k_split}" if self.k_split > 1 else "") + \
                (f" pdl-{self.pdl}" if self.pdl else "") + (" masked" if self.masked else "") + \
                (f" g{self.table_groups}" if self.table_groups != GROUPS_PER_LAUNCH else "")
        if self.a_prepass:
            form = {(128, 128): " narrow", (192, 128): " wg3", (128, 256): " wide", (128, 192): " wide192"} \
                if self.problem == "dual" else {}
            mode = form.get(tuple(self.mma_tile_mn), "") + \
                (" pairs" if self.cluster_mn == (2, 1) else " streamK" if self.split_k else "")
            if self.device_schedule:
                mode += " devsched" + (" masked" if self.masked else "") + \
                    (f">{self.masked_above}" if self.masked_above else "")
            if self.forms:
                return "mixed " + "+".join(f"{a}x{b}" for a, b in self.forms) + f" ab{self.ab_stages}" + mode
            return f"mixed {m}x{n} ab{self.ab_stages} a16x{mixed_a16_stages(self)}" + mode
        if self.swap_ab:
            s += " swapAB"
        if self.arch == "sm_90a":
            s += f" wg{self.mma_warpgroups}"
            if self.split_k:
                s += " splitK"
            if self.dec_stages != 2:
                s += f" dec{self.dec_stages}"
        return s


def ceil_div(a: int, b: int) -> int:
    return (a + b - 1) // b


def round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


# ----------------------------------------------------------------------------------------
# Resource models.  Each kernel asserts at trace time that what it really allocates matches
# these, so a drift between model and kernel fails the compile tests.
# ----------------------------------------------------------------------------------------


def sm100_tmem_columns(cfg: KernelConfig) -> int:
    """TMEM columns used: fp32 accumulators for every GEMM and stage, plus the scale factors
    (SFA for the CTA's rows, SFB for each GEMM's N tile rounded up to 128), 4 columns per 32
    rows per k-block of 4 MMA instructions."""
    cta_m, n = cfg.cta_tile_mn
    acc = cfg.gemms * n * cfg.acc_stages
    sfa = (cta_m // 32) * 4
    sfb = cfg.gemms * (round_up(n, 128) // 32) * 4
    return acc + sfa + sfb


def tmem_alloc_columns(used: int) -> int:
    """The TMEM allocator hands out powers of two >= 32 columns."""
    return max(32, 1 << math.ceil(math.log2(used)))


def sm100_smem_bytes(cfg: KernelConfig) -> int:
    cta_m, n = cfg.cta_tile_mn
    kb = K_BLOCK // 2  # bytes of packed e2m1 per row per k-block
    sf_per_row = K_BLOCK // SF_VEC  # one e4m3 byte per 16 elements
    a = cta_m * kb
    b = cfg.gemms * (n // cfg.cta_group) * kb
    sfa = round_up(cta_m, 128) * sf_per_row
    sfb = cfg.gemms * round_up(n, 128) * sf_per_row
    stage = a + b + sfa + sfb
    c = cfg.epi_stages * cfg.epi_tile_mn[0] * cfg.epi_tile_mn[1] * 2
    # mbarriers, TMEM pointer and tile-info ring (< 1 KB) padded to the 1 KB alignment of
    # the first buffer; every buffer above is a multiple of 1 KB.
    barriers = 1024
    return cfg.ab_stages * stage + c + barriers


def mixed_c_stage_bytes(cfg: KernelConfig) -> int:
    """The mixed-input kernels' C staging buffer (`Sm90Common.store_c_t_staged`): dual, 64
    rows of C x the tile's tile_m / 2 fp16 columns (16 KB; 8 KB in the narrow form); grouped,
    16 KB (32 rows of a 256-column tile, 64 of a 128-column one; exp. 83; 12 KB, 32 rows, for
    192 columns) -- except the grouped split-K pairs, which store C^T straight from the
    accumulators (`store_c_t`)."""
    if cfg.problem == "dual":
        return 64 * cfg.mma_tile_mn[0]
    if cfg.cluster_mn == (2, 1):
        return 0
    # 192 columns (three warpgroups, exp. 107): 32 rows of 384 bytes
    return 32 * 2 * cfg.mma_tile_mn[0] if cfg.mma_tile_mn[0] == 192 else 16384


def sm90_smem_bytes(cfg: KernelConfig) -> int:
    """Packed operands and scales per stage, plus `dec_stages` decoded fp16 64-code
    sub-blocks of every B (the wgmma reads B from shared memory; A is decoded into its
    registers, rs_a), plus the C staging buffers."""
    tm, tn = cfg.mma_tile_mn
    if cfg.forms:  # each form allocates its own buffers in its CTAs' branch
        return max(sm90_smem_bytes(part) for part in form_parts(cfg))
    if cfg.a_prepass:  # packed register-operand rows (tm: B1 + B2, or B_g) and their scale atoms per
        # stage (dual: B1's and B2's; grouped: tm / 128); fp16 A ring; C staging
        atoms = 2 * mixed_dual_sf_atoms(tm) if cfg.problem == "dual" else mixed_group_sf_atoms(tm)
        return cfg.ab_stages * (tm * (K_BLOCK // 2) + atoms * 128 * (K_BLOCK // SF_VEC)) \
            + mixed_a16_stages(cfg) * tn * 64 * 2 + mixed_c_stage_bytes(cfg) + 1024
    if cfg.skinny:  # per warp: ab_stages cp.async stages + its fp32 partial sums (skinny.py)
        lane_rows = cfg.gemms * tm // 8 + tn // 8  # rows of every B and of A a lane loads per chunk
        # (the partial sums: every warp of the cluster's k_split CTAs, exp. 165)
        return cfg.k_warps * (cfg.ab_stages * lane_rows * 32 * 20 + cfg.k_split * cfg.gemms * tn * tm * 4)
    rows = tm + cfg.gemms * tn  # A rows + rows of every B
    # scales are TMA'd as whole 128-row atoms of the permuted layout (2 KB per k-block); a
    # B tile whose N does not divide 128 (96) can straddle two atoms, so it loads two
    sf_rows = round_up(tm, 128) + cfg.gemms * 128 * sm90_sfb_atoms(tn)
    packed = rows * (K_BLOCK // 2) + sf_rows * (K_BLOCK // SF_VEC)
    decoded = cfg.gemms * tn * 64 * 2 * cfg.dec_stages  # fp16 sub-blocks of 64 K-elements
    c = cfg.epi_stages * cfg.epi_tile_mn[0] * cfg.epi_tile_mn[1] * 2
    return cfg.ab_stages * packed + decoded + c + 1024


def mixed_a16_stages(cfg: KernelConfig) -> int:
    """fp16 A sub-block stages of a mixed-input config: 8 (two k-blocks, each waited for
    whole) up to tile N 128, 6 up to 224 (28 KB a sub-block; exp. 117) and 5 beyond (the wide
    form's 256: 32 KB), the last two waited for two sub-blocks at a time."""
    tn = cfg.mma_tile_mn[1]
    return SM90_A16_STAGES if tn <= 128 else SM90_A16_STAGES_MID if tn <= SM90_A16_MID_MAX_ROWS \
        else SM90_A16_STAGES_WIDE


def mixed_ragged_n(cfg: KernelConfig) -> bool:
    """Whether the config's last tile over N may be partial: the three-warpgroup mixed dual
    form (96 columns) takes any N % 64 == 0, its last tile 32 or 64 columns (exp. 88)."""
    return cfg.a_prepass and cfg.problem == "dual" and tuple(cfg.mma_tile_mn) == (192, 128)


def mixed_dual_sf_atoms(tm: int) -> int:
    """128-row scale atoms per B (B1, B2) per stage of the mixed-input dual kernel with
    register rows tm (tm / 2 columns of C): 2 where a tile's rows can straddle two atoms
    (the three-warpgroup form, 96 columns), else 1."""
    return 1 if 128 % (tm // 2) == 0 else 2


def mixed_group_sf_atoms(tm: int) -> int:
    """128-row scale atoms of B_g per stage of the grouped mixed-input kernel with tm register
    rows: tm / 128, or 2 for the three-warpgroup form's 192 rows, which start at row 0 or 64
    of an atom and so always span two (exp. 107)."""
    return -(-tm // 128)


def sm90_sfb_atoms(tn: int) -> int:
    """128-row scale atoms loaded per B operand per k-block for tile N = tn (2 when a tile
    can straddle two atoms, N 48 / 96, or spans two, N 256)."""
    return 1 if 128 % tn == 0 else 2


def sm90_acc_registers(cfg: KernelConfig) -> int:
    """fp32 accumulator registers per consumer thread (128 threads per warpgroup)."""
    tm, tn = cfg.mma_tile_mn
    return cfg.gemms * (tm // cfg.mma_warpgroups) * tn // 128


def smem_bytes(cfg: KernelConfig) -> int:
    return sm100_smem_bytes(cfg) if cfg.arch == "sm_100a" else sm90_smem_bytes(cfg)


# ----------------------------------------------------------------------------------------
# Validity
# ----------------------------------------------------------------------------------------


def check_config(cfg: KernelConfig) -> list[str]:
    """Everything wrong with `cfg` on its architecture, independent of the problem shape."""
    errs: list[str] = []
    if cfg.arch not in ARCHS:
        return [f"arch {cfg.arch!r} is not one of {ARCHS}"]
    if cfg.problem not in PROBLEMS:
        return [f"problem {cfg.problem!r} is not one of {PROBLEMS}"]
    tm, tn = cfg.mma_tile_mn
    if cfg.raster not in ("m", "n"):
        errs.append(f"raster {cfg.raster!r} must be 'm' or 'n'")
    if min(cfg.ab_stages, cfg.acc_stages, cfg.epi_stages, cfg.occupancy) < 1:
        errs.append("stage counts and occupancy must be >= 1")
    if cfg.masked and not (cfg.arch == "sm_90a" and cfg.problem == "group" and (cfg.device_schedule or cfg.skinny)):
        errs.append("masked (M_g read from a counts tensor) needs the sm_90a grouped device schedule "
                    "(device_schedule) or skinny kernel")
    if cfg.table_groups != GROUPS_PER_LAUNCH and not (cfg.table_groups == WIDE_TABLE_GROUPS and cfg.skinny
                                                     and cfg.masked and cfg.arch == "sm_90a"):
        errs.append(f"table_groups {cfg.table_groups}: {GROUPS_PER_LAUNCH}, or {WIDE_TABLE_GROUPS} for the sm_90a "
                    "masked grouped skinny kernel (its wide table)")
    if cfg.pdl not in PDL_POINTS:
        errs.append(f"pdl {cfg.pdl!r} must be one of {PDL_POINTS}")
    if cfg.pdl and not (cfg.arch == "sm_90a" and cfg.skinny and cfg.problem == "dual"):
        errs.append("pdl (B loaded before griddepcontrol.wait: NVFP4_STATIC_B) is an sm_90a skinny dual option")
    if cfg.k_split != 1 and not (cfg.arch == "sm_90a" and cfg.skinny):
        errs.append(f"k_split {cfg.k_split}: CTAs splitting K are a skinny (sm_90a) option")
    if cfg.masked_above and not (cfg.masked and cfg.device_schedule and 0 < cfg.masked_above <= SKINNY_MAX_M):
        errs.append(f"masked_above {cfg.masked_above}: the masked device schedule's small groups, 1 to "
                    f"SKINNY_MAX_M ({SKINNY_MAX_M}) rows, left to the masked skinny kernel")
    if cfg.arch == "sm_100a":
        if cfg.cta_group not in (1, 2):
            errs.append(f"cta_group {cfg.cta_group} must be 1 or 2")
        if tm != 128 * cfg.cta_group:
            errs.append(f"MMA tile M {tm} must be 128 x cta_group ({128 * cfg.cta_group})")
        if tn % 64 or not 64 <= tn <= 256:
            errs.append(f"MMA tile N {tn} must be a multiple of 64 in [64, 256]")
        if cfg.cluster_mn[0] % cfg.cta_group:
            errs.append(f"cluster M {cfg.cluster_mn[0]} must be a multiple of cta_group {cfg.cta_group}")
        if cfg.cluster_mn[0] * cfg.cluster_mn[1] > 16:
            errs.append("cluster larger than 16 CTAs")
        if cfg.split_k or cfg.skinny or cfg.a_prepass:
            errs.append("split_k, skinny and a_prepass are sm_90a options")
        used = sm100_tmem_columns(cfg)
        if used * cfg.occupancy > TMEM_COLUMNS:
            errs.append(f"TMEM: {used} columns x occupancy {cfg.occupancy} > {TMEM_COLUMNS}")
    elif cfg.skinny:
        if tm not in ((16, 32, 64) if cfg.problem == "group" else (16, 32)) or tn not in (8, 16):
            errs.append(f"skinny tile {cfg.mma_tile_mn}: B rows 16 or 32 (grouped: also 64), A rows 8 or 16")
        if not 1 <= cfg.k_warps <= 16:
            errs.append(f"k_warps {cfg.k_warps} must be in [1, 16]")
        if not 2 <= cfg.ab_stages <= 8:
            errs.append(f"ab_stages {cfg.ab_stages}: the skinny cp.async ring needs 2 to 8")
        if cfg.swap_ab or cfg.split_k or cfg.cluster_mn != (1, 1):
            errs.append("skinny takes no swap_ab, split_k or cluster")
        if cfg.k_split not in (1, 2, 4, 8):
            errs.append(f"k_split {cfg.k_split}: 1, 2, 4 or 8 CTAs per cluster")
        if cfg.k_split > 1 and cfg.table_groups > GROUPS_PER_LAUNCH:
            # (more than 16 groups of N_g % 64 == 0 make more than the 66 16-row CTAs the split is
            # for (exp. 168): no rule picks it, and it has never run)
            errs.append(f"k_split {cfg.k_split}: not with the wide table ({cfg.table_groups} groups)")
    else:
        if cfg.a_prepass and cfg.problem == "group" and cfg != sm90_group_mixed(True) \
                and not (tuple(cfg.mma_tile_mn) in GROUP_MIXED_TILES and cfg == sm90_group_mixed(tile=cfg.mma_tile_mn)) \
                and not (tuple(cfg.mma_tile_mn) in DEVICE_SCHEDULE_TILES
                         and cfg == sm90_group_mixed_dynamic(tile=cfg.mma_tile_mn, masked=cfg.masked,
                                                             masked_above=cfg.masked_above)) \
                and not (cfg.forms and cfg == sm90_group_mixed_forms(cfg.forms)):
            errs.append("a_prepass (mixed-input grouped kernel) needs tile (256, 128), swap_ab, ab_stages 2, "
                        "split_k, cluster (1, 1) (stream-K segments) or (2, 1) (split-K pairs); or another tile of "
                        "GROUP_MIXED_TILES (256 B rows x 64-128 A rows, 128 x 128-256, 192 x 128 on three consumer "
                        "warpgroups), stream-K; or one of DEVICE_SCHEDULE_TILES with device_schedule (whole "
                        "tiles or stream-K, by a plan each CTA computes); or "
                        f"several forms side by side (forms: 2 to {MAX_FORMS} tiles of FORM_TILES in their order)")
        if cfg.forms and not (2 <= len(cfg.forms) <= MAX_FORMS and all(t in FORM_TILES for t in cfg.forms)
                              and list(cfg.forms) == sorted(set(cfg.forms), key=form_order)):
            errs.append(f"forms {cfg.forms}: 2 to {MAX_FORMS} distinct tiles of FORM_TILES (two consumer "
                        "warpgroups), 256-row tiles first, each kind by ascending A rows")
        if cfg.a_prepass and cfg.problem == "dual" and (
                (tm, tn) != (256, 128) or not cfg.swap_ab or cfg.ab_stages != 2
                or cfg.cluster_mn not in ((1, 1), (2, 1))) and not _mixed_narrow_ok(cfg):
            errs.append("a_prepass (mixed-input dual kernel) needs problem dual, tile (256, 128), swap_ab, "
                        "ab_stages 2, cluster (1, 1) or (2, 1) (split-K pairs); or the narrow form: tile "
                        "(128, 128), two consumer warpgroups, no cluster (whole tiles or stream-K); the wide form: "
                        "tile (128, 256), two consumer warpgroups, cluster (1, 1) or (2, 1); or the three-warpgroup "
                        "form: tile (192, 128), three consumer warpgroups, cluster (1, 1) or (2, 1)")
        if cfg.cta_group != 1:
            errs.append("sm_90a has no 2-CTA MMA: cta_group must be 1")
        if not cfg.rs_a or cfg.dec_stages not in (2, 3):
            errs.append("sm_90a decodes A into wgmma registers: rs_a=True with dec_stages 2 or 3")
        if cfg.cluster_mn == (2, 1) and not cfg.split_k:
            errs.append("sm_90a cluster (2, 1) means split-K pairs: split_k must be True")
        if tm % (64 * cfg.mma_warpgroups):
            errs.append(f"tile M {tm} must be a multiple of 64 x mma_warpgroups ({cfg.mma_warpgroups})")
        if tn % 8 or not 8 <= tn <= 256:
            errs.append(f"tile N {tn} must be a multiple of 8 in [8, 256] (wgmma N)")
        regs = sm90_acc_registers(cfg)
        if regs > SM90_MAX_ACC_REGS:
            errs.append(f"accumulators need {regs} registers per thread > {SM90_MAX_ACC_REGS}")
    em, en = cfg.epi_tile_mn
    if not cfg.skinny and (cfg.cta_tile_mn[0] % em or tn % en):  # (skinny: no C staging tile)
        errs.append(f"epilogue tile {cfg.epi_tile_mn} must divide the CTA tile {cfg.cta_tile_mn}")
    smem = smem_bytes(cfg) * cfg.occupancy
    if smem > SMEM_LIMIT[cfg.arch]:
        errs.append(f"shared memory {smem} B > {SMEM_LIMIT[cfg.arch]} B")
    return errs


def _mixed_narrow_ok(cfg: KernelConfig) -> bool:
    """The interleaved mixed-input forms: each consumer warpgroup one m64 register operand
    whose rows interleave 32 rows of B1 with the same rows of B2 (rows r and r + 8 of each
    16-row warp slab) x 128 A rows.  Narrow (exp. 76): two warpgroups, 64 columns of C per
    tile; three-warpgroup (exp. 86): 96 columns; wide (exp. 91): two warpgroups, 64 columns
    of C x 256 A rows (m64 x n256 wgmmas)."""
    form = (tuple(cfg.mma_tile_mn), cfg.mma_warpgroups)
    return (cfg.problem == "dual" and form in (((128, 128), 2), ((192, 128), 3), ((128, 256), 2), ((128, 192), 2))
            and cfg.swap_ab
            and cfg.ab_stages >= 2
            and (cfg.cluster_mn == (1, 1) or (form in (((192, 128), 3), ((128, 256), 2)) and cfg.cluster_mn == (2, 1))))


def group_chunks(groups: int, align: int = 1, per_launch: int = GROUPS_PER_LAUNCH) -> list[tuple[int, int]]:
    """[lo, hi) ranges of consecutive groups, each of at most `per_launch`, as few as that
    allows and as even in size as `align` (which divides `per_launch`) lets them be: every
    boundary but the last is a multiple of `align` (MaskedGroupedGemm: 4 int32 counts = 16
    bytes, so each range's counts stay 16-byte aligned)."""
    if groups < 1 or per_launch % align:
        raise ValueError(f"group_chunks({groups}, align={align}, per_launch={per_launch})")
    units = -(-groups // align)
    per = per_launch // align
    n = -(-units // per)
    return [(units * i // n * align, min(units * (i + 1) // n * align, groups)) for i in range(n)]


def _layout_size_errs(m: int, n: int, k: int, b: str, where: str, per: str) -> list[str]:
    """A (M x K), B (N x K) and C (M x N) of one batch or group must each stay below 2^31
    elements: the kernels build their layouts with 32-bit extents and strides (the sm_100a
    kernels count A and B in e2m1 elements, C in fp16 ones, as does the sm_90a dual kernel's C)."""
    return [f"{where}{name} = {v} elements{per}: must be below 2^31 (32-bit strides)"
            for name, v in (("A (M x K)", m * k), (f"{b} (N x K)", n * k), ("C (M x N)", m * n)) if v >= 2**31]


def check_shape(problem: str, shape, arch: str | None = None, launch: bool = True,
                max_groups: int = GROUPS_PER_LAUNCH) -> list[str]:
    """Shape constraints the kernels rely on: those of both architectures (arch None, what
    `validate` checks before the GPU is known), plus the named arch's own.  Dual M is ragged
    on sm_90a (TMA zero-fills A rows past M and clips C's; rows never mix); the sm_100a
    dual kernel has only run as far as the compiler (no B200), and keeps the leaderboard's
    M % 128 == 0.  Grouped: at most `max_groups` groups where `launch` (one kernel's:
    GROUPS_PER_LAUNCH, or the config's table_groups); an input (launch False) may have any
    number, run in chunks."""
    errs = []
    if problem == "dual":
        m, n, k, l = shape
        for name, v in (("M", m), ("N", n), ("K", k)):
            if v < 1:
                errs.append(f"{name}={v} must be >= 1")
        if arch == "sm_100a" and m % 128:
            errs.append(f"M={m} must be a multiple of 128 for the sm_100a dual kernel (sm_90a takes any M)")
        if n % 64:
            errs.append(f"N={n} must be a multiple of 64")
        if k % K_BLOCK:
            errs.append(f"K={k} must be a multiple of {K_BLOCK}")
        if l < 1:
            errs.append(f"L={l} must be >= 1")
        errs += _layout_size_errs(m, n, k, "B1, B2", "", " per batch")
    else:
        if len(shape) < 1 or (launch and len(shape) > max_groups):
            errs.append(f"{len(shape)} groups: 1 to {max_groups} per launch supported"
                        if launch else f"{len(shape)} groups: at least 1 needed")
        for g, (m, n, k) in enumerate(shape):
            for name, v in (("M", m), ("N", n), ("K", k)):
                if v < 1:
                    errs.append(f"group {g}: {name}={v} must be >= 1")
            if n % 64:
                errs.append(f"group {g}: N={n} must be a multiple of 64")
            if k % K_BLOCK:
                errs.append(f"group {g}: K={k} must be a multiple of {K_BLOCK}")
            errs += _layout_size_errs(m, n, k, "B", f"group {g}: ", "")
    return errs


def dual_tiles(cfg: KernelConfig, shape) -> int:
    """Output tiles of a dual shape: ceil(M / tile M) x N / tile N x L (sm_90a: a partial
    last row of tiles when M is ragged); swap_ab: N / 128 x ceil(M / tile N)."""
    m, n, _, l = shape
    tm, tn = cfg.mma_tile_mn
    if cfg.skinny:  # CTAs: tm rows of B1 / B2 each, all of M, one batch
        return (n // tm) * l
    if cfg.swap_ab:  # tm register rows: tm / 2 of B1 on the same rows of B2 (a ragged last
        # 32 / 64 columns in the three-warpgroup form, `mixed_ragged_n`)
        return -(-n // (tm // 2)) * -(-m // tn) * l
    return -(-m // tm) * (n // tn) * l


def fits(cfg: KernelConfig, shape) -> bool:
    """Whether the config's tiles divide the shape where the kernel needs them to."""
    tm, tn = cfg.mma_tile_mn
    if cfg.problem == "dual":
        m, n, _, l = shape
        if cfg.skinny:
            return m <= tn and n % tm == 0
        if cfg.swap_ab:  # sm_90a: a tile covers tm / 2 columns of B1 and of B2 (128; 64 narrow); one batch
            return n % (64 if mixed_ragged_n(cfg) else tm // 2) == 0 and l == 1
        # sm_90a: the last row of tiles may be partial (TMA bounds)
        return (cfg.arch == "sm_90a" or m % tm == 0) and n % tn == 0
    # grouped: M is ragged (bounded loads/stores); N must be whole tiles
    if cfg.forms:  # groups for every form, each group's N whole tiles of its form's B rows
        parts = form_groups(shape, cfg.forms)
        return all(parts) and all(shape[g][1] % t[0] == 0 for t, gs in zip(cfg.forms, parts) for g in gs)
    if cfg.skinny:
        return all(m <= tn and n % tm == 0 for m, n, _ in shape)
    if cfg.swap_ab:
        return all(n % tm == 0 for _, n, _ in shape)
    return all(n % tn == 0 for _, n, _ in shape)


# ----------------------------------------------------------------------------------------
# Defaults by rule, and the per-case map
# ----------------------------------------------------------------------------------------


# ----------------------------------------------------------------------------------------
# Split-K work plan (sm_90a kernels; host side, re-exported by nvfp4gemm.scheduler)
# ----------------------------------------------------------------------------------------
# (sm_90a dual and grouped.)  Work items: the first `full_tiles` linear tiles run whole, each
# remaining tile is split into `splits` ranges of its k-blocks; CTA c takes items c, c + G,
# ...  (Device side: `Sm90Common.unit_of`.)

MAX_SPLITS = 8


def tail_splits(total: int, ctas: int, k_blocks) -> int:
    """K splits of each tail tile (the tiles past the last whole wave of `ctas`): the most
    (up to 8 and the smallest k-block count) that still give every CTA at most one tail
    unit; 1 without a partial wave.  (Two units per CTA measured slower than whole tail
    tiles for 128x128 g8 N=7168 K=2048 and barely faster for g8 N=4096 K=7168, H200
    2026-11-21, notes/sm90.md experiment 21.)"""
    tail = total % ctas
    if tail == 0 or total < ctas:
        return 1
    return max(1, min(MAX_SPLITS, min(k_blocks), ctas // tail))


def split_plan(total: int, sms: int, k_blocks) -> tuple[int, int, int]:
    """(ctas, full_tiles, splits) for `total` output tiles on `sms` SMs whose K loops have
    `k_blocks` (an int, or one per group: the smallest bounds the split).

    At most half as many tiles as SMs: split every tile over K, as many ways as keep one
    unit per CTA (64 tiles on 132 SMs -> 128 units of half the K loop), so an under-filled
    wave runs shorter units on more SMs.  Otherwise split only the partial last wave (`tail_splits`).
    """
    kb = [k_blocks] if isinstance(k_blocks, int) else list(k_blocks)
    if total < sms:
        s = max(1, min(MAX_SPLITS, min(kb), sms // total))
        return (total * s, 0, s) if s > 1 else (total, total, 1)
    ctas = sms
    s = tail_splits(total, ctas, kb)
    return ctas, total - (total % ctas if s > 1 else 0), s


def split_units(total: int, full_tiles: int, splits: int) -> int:
    """Work items of a split plan."""
    return full_tiles + (total - full_tiles) * splits


# Cost of one extra stream-K segment of a tile, in k-blocks of the mixed-input kernel's
# 256 x 128 tile (~2.6 us each on an H200): the writer's 128 KB fp32 partial, its fence and
# flag, and the finisher's read measured 5.6-5.9 us per partial (notes/sm90.md exp. 66).
# Used to decide *whether* to split (stream_k_plan) and by the grouped plan's greedy fill.
STREAM_K_SEGMENT_KB = 2.0
# The finer per-CTA model that picks *how many* CTAs a stream-K plan uses
# (stream_k_makespan), in the same k-block units, from %globaltimer stamps of the H100
# (notes/sm90.md exp. 81; ~2.85 us per k-block): writing a partial (stores + gpu fence +
# flag) ~3.5 us, reading one (flag, fence, cp.async, add) ~3.3 us, the tile's epilogue ~2 us.
# Exp. 82 then took the per-thread fences out of both; the CTA counts this model picks for
# the measured shapes stay the same for write costs 0.6-1.2 and read costs 0.8-1.2 k-blocks.
STREAM_K_WRITE_KB = 1.2
STREAM_K_READ_KB = 1.2
STREAM_K_EPILOGUE_KB = 0.7


def stream_k_makespan(tiles: int, k_blocks: int, ctas: int) -> float:
    """The busiest CTA's time (k-blocks) of the all-stream-K schedule of scheduler.py with
    `ctas` CTAs: each CTA runs its contiguous range of (tile, k-block) units; a segment that
    is not its tile's k-block-0 one is its CTA's first and ends with a partial write; the
    k-block-0 segment (the CTA's last) waits for the tile's other partials, reads each and
    runs the epilogue; a whole tile runs its epilogue.  Why not just the range length: with
    132 CTAs, 96 tiles x 28 k-blocks cut into ranges of 20-21 that do not align with the
    tiles, so some tiles have 3 segments and their finishers read 2 partials; 128 CTAs
    (21 each, 3 tiles per 4 CTAs) cut every tile in two (H100: 3.2% faster, exp. 81)."""
    units = tiles * k_blocks
    end = [0.0] * ctas
    ready: dict[int, float] = {}
    finishers = []
    for c in range(ctas):
        u, u1 = c * units // ctas, (c + 1) * units // ctas
        t = 0.0
        while u < u1:
            tile = u // k_blocks
            e = min(u1, (tile + 1) * k_blocks)
            t += e - u
            first = ((tile * k_blocks + 1) * ctas - 1) // units  # scheduler.stream_k_owners
            last = ((tile + 1) * k_blocks * ctas - 1) // units
            if first == last:
                t += STREAM_K_EPILOGUE_KB
            elif c > first:
                t += STREAM_K_WRITE_KB
                ready[tile] = max(ready.get(tile, 0.0), t)
            else:
                finishers.append((c, tile, last - first))
            u = e
        end[c] = t
    for c, tile, partials in finishers:
        end[c] = max(end[c], ready[tile]) + STREAM_K_READ_KB * partials + STREAM_K_EPILOGUE_KB
    return max(end)


@functools.lru_cache(maxsize=256)  # the makespan search is ~10 ms: once per shape, not per call
def stream_k_plan(tiles: int, k_blocks: int, sms: int, by_makespan: bool = False) -> tuple[int, int]:
    """(ctas, dp_tiles) of a stream-K schedule (the mixed-input dual kernel, scheduler.py):
    the first dp_tiles tiles run whole, strided over the CTAs, and the k-blocks of the rest
    are cut into `ctas` equal contiguous ranges.  Plans here are either all whole tiles
    (dp_tiles == tiles) or, under two waves of tiles, all stream-K (dp_tiles == 0) where
    that shortens the busiest CTA's k-loop by more than the extra segments cost
    (STREAM_K_SEGMENT_KB each; ranges of at least one k-block).  The CTA count of a
    stream-K plan is then the one with the shortest `stream_k_makespan` (ties: more CTAs).
    Whole waves followed by a stream-K tail (which the kernels would run) measured slower
    on 2048x14336x4096 (H200, exp. 66).  512x4096x7168 (128 tiles x 28 k-blocks on 132
    SMs) needs 28 per CTA either way: whole tiles.
    `by_makespan` (the narrow form, exp. 85): split iff the best stream-K makespan beats the
    whole tiles' (busiest CTA's k-blocks + an epilogue) -- checked on 4 shapes there (H100:
    it splits 256x3072x4096, 256x2048x7168, 384x2048x7168 and not 300x2048x2048, each as
    measured); the (256, 128) form keeps the segment-cost test above, under which its rule
    was fitted (the makespan test would flip ~100 shapes of the grid there, unmeasured)."""
    whole_plan = (max(1, min(tiles, sms)), tiles)
    if tiles <= 0 or tiles >= 2 * sms:
        return whole_plan
    sk_units = tiles * k_blocks
    whole = ceil_div(tiles, sms) * k_blocks  # the busiest CTA's k-blocks, whole tiles

    def cost(ctas):
        shortest = sk_units // ctas
        return ceil_div(sk_units, ctas) + STREAM_K_SEGMENT_KB * ceil_div(k_blocks, shortest)

    cands = range(1, min(sms, sk_units) + 1)
    if not by_makespan and min(cost(c) for c in cands) >= whole:
        return whole_plan
    best = min(cands, key=lambda c: (stream_k_makespan(tiles, k_blocks, c), -c))
    if by_makespan and stream_k_makespan(tiles, k_blocks, best) >= whole + STREAM_K_EPILOGUE_KB:
        return whole_plan
    assert sk_units * best < 2**31, "stream-K unit arithmetic is 32-bit"
    return best, 0


# sm_90a grouped cost model, used only to rank candidate tiles in `default_config`: us per
# k-block of one tile, us per tile (epilogue and restart: the kernels do not overlap them
# with the next tile), and us per split unit (partials written and reduced).  Refitted after
# the staged C stores (notes/sm90.md, experiment 32): least squares over 24 kernel-only
# timings (3 tiles x 4 benchmark cases, split and unsplit plans; H200, 2026-11-21), every
# one within 3% of the model plus a common 6.8 us; it ranks the four cases as measured.
_SM90_GROUP_COST = {((128, 256), False): (3.29, 3.33), ((128, 128), False): (2.03, 2.22),
                    ((256, 64), True): (2.59, 2.81)}
_SM90_SPLIT_US = 6.6


def grouped_mma_tiles(cfg: KernelConfig, shapes) -> list[tuple[int, int]]:
    """Per group (tiles along the MMA's M, tiles along the MMA's N) of cfg.mma_tile_mn."""
    tm, tn = cfg.mma_tile_mn
    out = []
    for m, n, _k in shapes:
        mm, nn = (n, m) if cfg.swap_ab or cfg.skinny else (m, n)
        # (a skinny CTA holds all of its group's <= tn A rows: one tile along N, also for the
        # masked form's capacities above tn, whose counts above tn it skips: exp. 147)
        out.append((ceil_div(mm, tm), 1 if cfg.skinny else ceil_div(nn, tn)))
    return out


def grouped_tile_offsets(cfg: KernelConfig, shapes) -> list[int]:
    """Prefix sums of per-group MMA-tile counts (len(shapes) + 1 entries)."""
    offs = [0]
    for tm, tn in grouped_mma_tiles(cfg, shapes):
        offs.append(offs[-1] + tm * tn)
    return offs


def sm90_group_cost(cfg: KernelConfig, shape, sms: int | None = None) -> float:
    """Estimated us of the busiest CTA for grouped `shape` ((m, n, k) per group), as if
    split-K were compiled in (cfg.split_k is set from the same plan)."""
    b, e = _SM90_GROUP_COST[(tuple(cfg.mma_tile_mn), cfg.swap_ab)]
    total = grouped_tile_offsets(cfg, shape)[-1]
    kbs = [k // K_BLOCK for _, _, k in shape]
    ctas, full, splits = split_plan(total, sms or SM_COUNT["sm_90a"], kbs)
    cost = ceil_div(full, ctas) * (e + b * max(kbs))
    if splits > 1:
        cost += e + b * ceil_div(max(kbs), splits) + _SM90_SPLIT_US
    return cost


def _fill_stages(cfg: KernelConfig, cap: int) -> KernelConfig:
    """The most AB stages (up to `cap`, enough to hide TMA latency) that fit shared memory."""
    best = replace(cfg, ab_stages=1)
    for s in range(1, cap + 1):
        c = replace(cfg, ab_stages=s)
        if smem_bytes(c) * c.occupancy <= SMEM_LIMIT[c.arch]:
            best = c
    return best


def _sm90_fill(cfg: KernelConfig, cap: int) -> KernelConfig:
    """sm_90a stages: 3 decoded B buffers (the wgmmas of two sub-blocks queue on the tensor
    cores, no drain at each sub-block barrier) when that still leaves 2 AB stages, else 2;
    then the most AB stages up to `cap`.  H200, 2026-11-21, same process (notes/sm90.md
    experiment 29): dual 64.2 -> 61.5 / 108.8 -> 106.3 / 35.3 (ab3) -> 34.4 / 87.1 (ab3) ->
    85.9 us, grouped 128x128 1-2% faster, 128x256 unchanged."""
    three = _fill_stages(replace(cfg, dec_stages=3), cap)
    return three if three.ab_stages >= 2 else _fill_stages(replace(cfg, dec_stages=2), cap)


def _sm100_acc_stages(cfg: KernelConfig) -> KernelConfig:
    """Two accumulator buffers (epilogue overlaps the next mainloop) when TMEM allows."""
    two = replace(cfg, acc_stages=2)
    return two if sm100_tmem_columns(two) <= TMEM_COLUMNS else replace(cfg, acc_stages=1)


def _sm100_group_swap_ab() -> KernelConfig:
    """sm_100a grouped GEMM computing C^T = B A^T: the 2-CTA MMA's 256-row M side runs over
    N (large, N % 256 == 0 on every benchmark), its 128-wide N side over the small ragged M
    (40..384), so little of the MMA is padding and each CTA loads 128 rows of B and 64 of A
    per k-block (28 KB with scales).  Raster "n" (MMA coordinates) walks a group's M tiles
    first: consecutive tiles of a CTA share one B block (L2 hit).  2 accumulator stages
    (288 TMEM columns -> 512 allocated), 6 AB stages (189 KB shared memory)."""
    cfg = KernelConfig("group", "sm_100a", (256, 128), cta_group=2, cluster_mn=(2, 1),
                       swap_ab=True, raster="n", epi_tile_mn=(128, 32))
    return _fill_stages(_sm100_acc_stages(cfg), cap=6)


def _sm90_swap_ab(problem: str, tn: int = 64) -> KernelConfig:
    """sm_90a C^T = B A^T tile, grouped or dual (dual_swap.py): the tile's 256-row MMA M side
    (2 x 64 rows per consumer warpgroup, decoded straight into wgmma registers; dual: 128
    rows of B1 on the same rows of B2) runs over N, its tn-wide MMA N side (16, 32 or 64)
    over the ragged M, so only tn rows of A are decoded into shared memory per sub-block
    (64: half the stores of a 128x128 tile for the same MACs) and M pads to tn, not 128.
    Raster "n" walks a group's M tiles first, so CTAs running at the same time share one B
    block in L2.  Up to 4 AB stages (217 KB at tn 64)."""
    cfg = KernelConfig(problem, "sm_90a", (256, tn), mma_warpgroups=2, epi_tile_mn=(128, 32 if tn % 32 == 0 else 16),
                       rs_a=True, swap_ab=True, raster="n")
    return _fill_stages(cfg, cap=4)


def sm90_dual_tile_rule(shape) -> KernelConfig:
    """The sm_90a dual kernel's own rule (dual_gemm.py; `default_config` sends small M to the
    swap_ab kernel first): 128 x 128 tiles (64 where N needs it), split-K / cluster pairs by
    the plan."""
    def rule(tn):
        return _sm90_dual_pairs(_sm90_fill(KernelConfig(
            "dual", "sm_90a", (128, tn), mma_warpgroups=2, epi_tile_mn=(128, 32), rs_a=True), cap=4), shape)

    cfg = rule(128 if shape[1] % 128 == 0 else 64)
    # Under a third of a wave of 128-wide tiles (small M: every tile split 3+ ways through
    # the global workspace): 64-wide tiles halve the splits (pairs where that makes 2).
    # H200, 2026-11-21, same process: 16x4096x7168 46.5 -> 40.1 us, 64x4096x7168 47.3 ->
    # 40.6 (notes/sm90.md experiment 39).
    plan = split_plan(dual_tiles(cfg, shape), SM_COUNT["sm_90a"], shape[2] // K_BLOCK)
    if cfg.mma_tile_mn[1] == 128 and plan[1] == 0 and plan[2] > 2:
        cfg = rule(64)
    return cfg


def sm90_dual_swap_ab(shape, tn: int | None = None) -> KernelConfig:
    """sm_90a dual GEMM for small M (nvfp4gemm/sm90/dual_swap.py): C^T = silu(B1 A^T) *
    (B2 A^T) on `_sm90_swap_ab` tiles, MMA N `swap_mma_n(M)` unless given; split-K as the
    plan says."""
    cfg = _sm90_swap_ab("dual", tn or swap_mma_n(shape[0]))
    return _sm90_split(cfg, dual_tiles(cfg, shape), shape[2] // K_BLOCK)


# The mixed-input dual kernel when its 128 x 128 C tiles fill at least this much of a wave
# (H200, 2026-11-21, notes/sm90.md exp. 65, pre-pass + main kernel vs the 128 x 128 rule:
# 512x4096x7168, 128 tiles, 0.91; 2048x14336x4096, 1792 tiles, 0.83; slower with 96 tiles
# (512x3072x7168, 1.08 vs the 128x96 tiles) and 64 (256x4096x7168, 1.8)) -- or, stream-K
# scheduled (exp. 66), at least MIXED_SK_MIN_WAVE of a wave with M > MIXED_SK_MIN_M: same
# run, 512x3072x7168 80.6 vs 83.2 us (the pinned 128x96 tiles), 384x4096x7168 79.1 vs 97.8,
# 512x3072x5376 66.1 vs 77.9; but with 256 rows 55.6 vs 56.0 (256x4096x7168), 40.5 vs 33.0
# (256x3072x4096, the 2-CTA pairs), and with 48 tiles (1536x512x7168) 66.0 vs 55.3: a tile
# cut into 3+ segments pays 2+ partial reductions.  N >= MIXED_MIN_N: the pre-pass writes
# all of A as fp16, whose cost per MAC grows as N shrinks (4608x384x7168, 108 tiles: 127.6
# stream-K, 130.1 whole, vs 99.0; but 4096x768x512: 25.4 vs 28.5, same H200, exp. 66).
MIXED_MIN_WAVE = 0.9
MIXED_SK_MIN_WAVE = 0.5
MIXED_SK_MIN_M = 256
MIXED_MIN_N = 512


def sm90_dual_mixed(shape=None) -> KernelConfig:
    """sm_90a dual GEMM in the mixed-input form (nvfp4gemm/sm90/dual_mixed.py): A decoded
    once to fp16 by a pre-pass, B1 / B2 decoded into wgmma registers, no decoded tile ever
    stored by a thread.  Tile: 128 rows of B1 on the same rows of B2 (256-row register
    operand) x 128 rows of A; 2 packed-B stages + 8 fp16 A sub-blocks (205 KB).  With a
    shape: split_k (stream-K) where `mixed_dual_stream_k_plan` splits it on 132 SMs."""
    cfg = KernelConfig("dual", "sm_90a", (256, 128), mma_warpgroups=2, epi_tile_mn=(128, 32),
                       rs_a=True, swap_ab=True, a_prepass=True, ab_stages=2)
    return cfg if shape is None else _with_stream_k(cfg, shape)


def mixed_dual_stream_k_plan(cfg: KernelConfig, shape, sms: int) -> tuple[int, int]:
    """(ctas, dp_tiles) of the mixed-input dual kernel's stream-K plan for this tile and shape
    on `sms` SMs: the narrow and three-warpgroup forms decide whether to split by the makespan
    model alone (exps. 85, 86), the (256, 128) form by its segment-cost test (`stream_k_plan`)."""
    return stream_k_plan(dual_tiles(cfg, shape), shape[2] // K_BLOCK, sms, cfg.mma_tile_mn[0] != 256)


def _with_stream_k(cfg: KernelConfig, shape) -> KernelConfig:
    """cfg with split_k where its stream-K plan on 132 SMs splits any tile."""
    return replace(cfg, split_k=mixed_dual_stream_k_plan(cfg, shape, SM_COUNT["sm_90a"])[1] < dual_tiles(cfg, shape))


# Split-K pairs of the mixed-input kernel (one 2-CTA cluster per tile, each rank half the
# k-blocks, reduce-scatter through distributed shared memory, exp. 72) where 2 x tiles fill
# [MIXED_PAIRS_MIN_WAVE, 1] of a wave, N >= MIXED_PAIRS_MIN_N and K > MIXED_PAIRS_MAX_SHORT_K.
# H100, 2026-11-24, A/B against the rules before (new / base): 256x4096x7168 (128 CTAs) 51.0
# vs 56.9 us (0.897), 384x2048x7168 (96) 0.902; a tie on 256x3072x4096 (96 CTAs, 16 k-blocks:
# the ~10 us of pre-pass, fill and exchange weigh more on short K; 1.007 vs the pinned 128x96
# pairs); losses on 1536x512x7168 (96 CTAs, 1.031: the pre-pass writes all of A for a narrow
# N) and with 64 CTAs (128x4096x7168 and 256x2048x7168, 1.25-1.27 vs the 128x64 pairs).
MIXED_PAIRS_MIN_WAVE = 0.7
MIXED_PAIRS_MIN_N = 2048
MIXED_PAIRS_MAX_SHORT_K = 4096


def sm90_dual_mixed_narrow(shape=None, ab_stages: int = 2) -> KernelConfig:
    """The mixed-input dual kernel's narrow form (exp. 76): tiles of 64 columns of C (64 rows
    of B1 and the same rows of B2, interleaved in the two consumer warpgroups' m64 register
    operands) x 128 A rows: twice the tiles of the (256, 128) form.  With a shape: split_k
    (stream-K, exp. 85) where `mixed_dual_stream_k_plan` splits it on 132 SMs."""
    cfg = KernelConfig("dual", "sm_90a", (128, 128), mma_warpgroups=2, epi_tile_mn=(128, 32),
                       rs_a=True, swap_ab=True, a_prepass=True, ab_stages=ab_stages)
    return cfg if shape is None else _with_stream_k(cfg, shape)


def sm90_dual_mixed_wide(shape=None) -> KernelConfig:
    """The mixed-input dual kernel's wide form (exp. 91): tiles of 64 columns of C (interleaved
    as in the narrow form) x 256 A rows, one m64 x n256 wgmma per k16 and consumer warpgroup:
    the same MACs and accumulators per CTA as the (256, 128) form with half the B rows decoded
    per MAC.  5 A16 stages of 32 KB (`mixed_a16_stages`).  With a shape: split_k where the
    makespan model splits it on 132 SMs."""
    cfg = KernelConfig("dual", "sm_90a", (128, 256), mma_warpgroups=2, epi_tile_mn=(128, 32),
                       rs_a=True, swap_ab=True, a_prepass=True, ab_stages=2)
    return cfg if shape is None else _with_stream_k(cfg, shape)


def sm90_dual_mixed_wide192(shape=None) -> KernelConfig:
    """The wide form with 192 A rows per tile (m64 x n192 wgmmas, exp. 108's grouped (128, 192)
    form on the dual kernel), whole tiles or stream-K; no split-K pairs (a pair rank's 96 rows
    of C are not whole 64-row store passes)."""
    cfg = replace(sm90_dual_mixed_wide(), mma_tile_mn=(128, 192))
    return cfg if shape is None else _with_stream_k(cfg, shape)


def sm90_dual_mixed_wide_pairs() -> KernelConfig:
    """The wide form as split-K pairs (cluster (2, 1): one 256-row tile per 2-CTA cluster, each
    rank half the k-blocks, then 64 KB each way through distributed shared memory, each rank
    storing its 128 rows of C)."""
    return replace(sm90_dual_mixed_wide(), cluster_mn=(2, 1), split_k=True)


def sm90_dual_mixed_wg3(shape=None) -> KernelConfig:
    """The mixed-input dual kernel with three consumer warpgroups (exp. 86): tiles of 96
    columns of C (96 rows of B1 on the same rows of B2, interleaved as in the narrow form,
    one m64 register operand per warpgroup) x 128 A rows; any N % 64 == 0, the last tile
    over N 32 or 64 columns (exp. 88).  With a shape: split_k where the makespan model splits
    it on 132 SMs."""
    # (epi_tile_mn is not used by the mixed-input kernels: store_c_t_staged; it must divide the tile)
    cfg = KernelConfig("dual", "sm_90a", (192, 128), mma_warpgroups=3, epi_tile_mn=(64, 32),
                       rs_a=True, swap_ab=True, a_prepass=True, ab_stages=2)
    return cfg if shape is None else _with_stream_k(cfg, shape)


def sm90_dual_mixed_wg3_pairs() -> KernelConfig:
    """The three-warpgroup form as split-K pairs (cluster (2, 1): one 96-column tile per
    2-CTA cluster, each rank half the k-blocks, reduce-scatter through distributed shared
    memory, `Sm90MixedCommon.pair_exchange`)."""
    return replace(sm90_dual_mixed_wg3(), cluster_mn=(2, 1), split_k=True)


def sm90_dual_mixed_pairs() -> KernelConfig:
    """The mixed-input dual kernel as split-K pairs (cluster (2, 1), dual_mixed.py
    `pair_exchange`)."""
    return replace(sm90_dual_mixed(), cluster_mn=(2, 1), split_k=True)


# The narrow form (stream-K where the makespan model splits it) where its tiles fill
# [MIXED_NARROW_MIN_WAVE, MIXED_NARROW_MAX_WAVE) of a wave, unless N <= MIXED_NARROW_SHORT_N
# and K <= MIXED_NARROW_SHORT_K (exp. 85, H100, 2026-11-25, one process, 3-4 rounds x 20,
# narrow / the rule before).  Fitted on 256x3072x4096 0.958 (stream-K; narrow whole tiles
# pinned before), 256x2048x7168 0.899 (128x64 split-K pairs), 384x2048x7168 0.901 (mixed
# split-K pairs), 300x2048x2048 0.840 (whole; 128x128 split-K pairs).  Then checked on 13
# shapes not used to fit it: 10 wins (0.80-0.95: 1536x512x7168, 96x4096x7168, 192x3072x2048,
# 256x2048x1024, 300x1536x4096, 640x1536x7168, 768x1024x4096, 96x5120x1024, 384x1536x2048,
# 256x3072x7168), 3 losses: 512x1024x2048 1.119 and 1024x512x1024 1.138 (the pre-pass writes
# all of A whatever N is, and short K leaves little work to hide it: the N / K cut below,
# fitted on these two; it also leaves out 640x1024x2048, measured 0.893 afterwards), and
# 128x7168x7168 1.021 / 1.028 (two runs) against the mixed pairs (kept: one shape).  Boundary
# check afterwards: 65x4096x7168 0.958, 512x1536x1024 0.850, 200x3072x1024 0.815,
# 448x1536x4096 0.940; also two wins the rule leaves out: 384x1024x4096 0.963 (48 narrow
# tiles) and 640x1024x2048 0.893.
# At a whole wave of narrow tiles (256x4096x7168: 128) they only tie the mixed pairs (exp. 76).
MIXED_NARROW_MIN_WAVE = 0.48
MIXED_NARROW_MAX_WAVE = 0.95
MIXED_NARROW_SHORT_N = 1024
MIXED_NARROW_SHORT_K = 2048
# Also under half a wave of narrow tiles, from a quarter wave, where K >= MIXED_NARROW_LOW_MIN_K
# (exp. 85, same method).  Fitted on 7 shapes with 32-60 narrow tiles: K 7168 0.834-0.860
# (128x3072x7168, 384x1024x7168, 256x1024x7168), K 4096 0.864-1.009 (256x1536x4096 0.950,
# 128x2048x4096, 320x1280x4096 1.009), K 2048 1.054 (200x1792x2048).  Checked on 9 others:
# the 7 it picks 0.816-0.930 (192x1536x7168, 128x2560x4096, 256x1280x7168, 448x768x5120,
# 128x3584x4096, 320x1024x5376, 96x2048x14336); of the 2 it leaves out, 256x1536x2048 1.038
# (right) and 128x3072x3072 0.946 (a missed win: the K bound is conservative).
MIXED_NARROW_LOW_WAVE = 0.24
MIXED_NARROW_LOW_MIN_K = 4096


# The three-warpgroup form (exp. 86: tiles of 96 columns of C) where the cost model below puts
# it more than 4% (MIXED_WG3_MARGIN) under the form the rules above pick -- any N % 64 == 0, a
# last tile of 32 or 64 columns counted whole (exp. 88) -- or where they pick no mixed form,
# N % 192 == 0 and its tiles fill half a wave (MIXED_NARROW_MIN_WAVE); not with the narrow
# form's short N and K, nor instead of the split-K pairs (not modelled).  H100, 2026-11-25, one process, 3 rounds x 20, new / old:
# fitted on 26 shapes (switches: 512x3072x7168 0.890, 384x3072x7168 0.935, 1024x1536x7168 0.905,
# 768x1536x4096 0.899, 640x2304x4096 0.855, 1024x3072x4096 0.947, 512x6144x2048 0.905,
# 3072x1536x1536 0.818, 256x3072x4096 0.976, 96x6144x4096 0.962; over the stored-decode
# kernels 0.61-0.87 on 6 shapes; kept: 2048x3072x2048, 4096x1536x1024, 7168x2304x2048 (the
# (256, 128) form 2-5% faster), the narrow form's 48-tile shapes (4-5% faster), 192x9216x4096
# (the (256, 128) form 5% faster: the margin is set to keep it).  Checked on 24 shapes not used
# to fit it: 14 switches all win 0.80-0.98 (448x2304x7168, 896x1536x4096, 576x2304x7168,
# 1024x1152x4096, 320x3072x5376, 1536x768x4096, 256x9216x2048, 160x4608x4096, 384x4608x2048,
# and K 256-512: 300x3072x256, 1024x1536x256, 1536x3072x512, 2048x1536x256, 384x6144x512);
# of the 7 kept, 1024x2304x7168 was a missed 0.988; the 3 stored-decode shapes under half a
# wave (16-32 tiles) lost 1.08-1.22 before the fill bound was added (which they now fail).
# Where two CTAs per three-warpgroup tile fill [MIXED_PAIRS_MIN_WAVE, 1] of the SMs it runs as
# split-K pairs (exp. 87: a ~48 KB DSMEM exchange instead of a 96 KB partial written and read
# back).  H100, new / the form's stream-K plan: fitted on 256x3072x4096 0.923, 256x3072x7168
# 0.945, 96x6144x4096 0.933, 192x3072x5376 0.957, 128x6144x7168 0.958; checked on 448x1536x4096
# 0.940, 512x1536x7168 0.951, 1024x768x5376 0.944, 200x3072x14336 0.973, 192x3072x7168 0.953.
# Exp. 88 (ragged N), H100, new / the exp. 87 rule, 12 shapes picked by the model before any was
# timed: 640x7168x7168 0.748, 768x14336x4096 0.866, 1536x7168x2048 0.894, 1024x1280x4096
# 0.905, 300x4096x7168 0.911, 384x2048x7168 (pairs) 0.912, 2048x1280x1024 0.919, 640x4096x1024
# 0.922, 512x14336x4096 0.924, 768x1024x7168 (pairs) 0.931, 96x4096x14336 0.992, 128x7168x7168
# 0.995; the leaderboard's N 4096 shapes keep their configs (0.997-0.999).
MIXED_WG3_MARGIN = 0.96
# Cost model of the mixed-input dual forms (exp. 86): fixed + per (M x K) of the pre-pass + the
# busiest CTA's k-blocks (plan makespan: whole waves + an epilogue each, or stream_k_makespan)
# times the form's k-block time.  Least squares over 46 timings of 26 shapes (H100, 2026-11-25,
# one process, medians of 3 rounds); within 5% on 39, worst 10% (the narrow form's 48-tile
# shapes, over-predicted).  Per tile rep of 64 B rows: 0.72 us (256, 128), 0.73 (192, 128),
# 0.87 (128, 128) -- three warpgroups of one rep keep the tensor cores as busy as two of two.
MIXED_MODEL_FIXED_US = 5.33
MIXED_MODEL_PREPASS_US = 0.429e-6  # per element of A
MIXED_MODEL_KB_US = {(256, 128): 2.878, (192, 128): 2.205, (128, 128): 1.731, (128, 256): 2.50, (128, 192): 2.0}


# The wide form (exp. 91: tiles of 64 columns of C x 256 A rows, m64 x n256 wgmmas, half the B
# decode per MAC) in place of the (256, 128) form -- whole tiles or stream-K, not its split-K
# pairs -- where the model puts it MIXED_WIDE_MARGIN under.  Its k-block time (2.50 us) is the
# mean over 6 whole-tile shapes (H100, 2026-11-25, one process, 3 rounds x 20: 2.46-2.55); the
# model under-predicts its stream-K shapes by up to 9% (short K: a partial costs more wide
# k-blocks), hence the margin.  Not in place of the narrow / three-warpgroup forms, whose
# model over-predicts them (wide lost 5% to the three-warpgroup form on three shapes).
MIXED_WIDE_MARGIN = 0.95


def mixed_dual_model_us(cfg: KernelConfig, shape) -> float:
    """Modelled time (us, H100) of a mixed-input dual config (not split-K pairs) on a shape."""
    m, n, k, _l = shape
    tiles, kb = dual_tiles(cfg, shape), k // K_BLOCK
    ctas, dp = mixed_dual_stream_k_plan(cfg, shape, SM_COUNT["sm_90a"])
    busiest = (ceil_div(tiles, SM_COUNT["sm_90a"]) * (kb + STREAM_K_EPILOGUE_KB) if dp >= tiles
               else stream_k_makespan(tiles, kb, ctas))
    return MIXED_MODEL_FIXED_US + MIXED_MODEL_PREPASS_US * m * k + MIXED_MODEL_KB_US[tuple(cfg.mma_tile_mn)] * busiest


def _sm90_mixed_rule(shape) -> KernelConfig | None:
    """The mixed-input config where the rules above pick it, else None."""
    pick = _sm90_mixed_rule_wg3(shape)
    if pick is None or tuple(pick.mma_tile_mn) != (256, 128):
        return pick
    if pick.cluster_mn == (2, 1):  # split-K pairs: the wide form's where it has as many tiles
        wide = sm90_dual_mixed_wide_pairs()
        return wide if dual_tiles(wide, shape) == dual_tiles(pick, shape) else pick
    wide = sm90_dual_mixed_wide(shape)
    if mixed_dual_model_us(wide, shape) < MIXED_WIDE_MARGIN * mixed_dual_model_us(pick, shape):
        return wide  # exp. 91
    return pick


# The wide form also where the rules above pick no mixed form and the stored-decode rule runs
# whole tiles (no split-K, no cluster pairs), if its tiles fill half a wave
# (MIXED_NARROW_MIN_WAVE) and pad A to no more rows than 128-row tiles do (exp. 94).  H100,
# 2026-11-25, one process, 3 rounds, wide / stored-decode 128 x 128: declared before measuring,
# then 7 of 7 such shapes won -- 192x5120x2048 0.814, 192x7168x7168 0.777, 256x5120x4096 0.703,
# 256x7168x1024 0.860, 768x2048x2048 0.862, 1536x1024x2048 0.884, 3072x512x1024 0.976 (and
# 256x7168x7168 0.778, exp. 91).  Where the stored-decode kernel runs as split-K cluster pairs
# (half-wave fills) wide lost on 4 of 5 (256x4096x2048 1.020, 512x2048x1024 1.037,
# 1024x1024x4096 1.010, 2048x512x4096 1.103; 448x2048x4096 0.956): excluded, fitted on them.
def _sm90_wide_over_stored(shape) -> bool:
    m, n, _k, l = shape
    wide = sm90_dual_mixed_wide()
    return (l == 1 and m > 64 and n % 64 == 0 and n >= MIXED_MIN_N and ceil_div(m, 256) * 256 == ceil_div(m, 128) * 128
            and dual_tiles(wide, shape) >= MIXED_NARROW_MIN_WAVE * SM_COUNT["sm_90a"])


# The wide form's split-K pairs where the stored-decode rule picks its own cluster split-K pairs
# on as many tiles (exp. 106), i.e. 256-row tiles pad A no further than 128-row ones, N >= 1024
# and K >= 1024.  H100, 2026-11-25, one process, 3 rounds, wide pairs / stored-decode 128 x 128
# pairs: fitted on 256x4096x1536 0.907, 256x4096x2048 0.886, 512x2048x1024 0.946,
# 1024x1024x4096 0.924, 448x2048x4096 0.858 and 2048x512x4096 1.009 (hence N >= 1024); K 512
# (one k-block per rank) not measured.
WIDE_PAIRS_OVER_STORED_MIN_N = 1024
WIDE_PAIRS_OVER_STORED_MIN_K = 1024


def _sm90_wide_pairs_over_stored_pairs(shape, stored: KernelConfig) -> bool:
    m, n, k, l = shape
    wide = sm90_dual_mixed_wide_pairs()
    return (l == 1 and m > 64 and n % 64 == 0 and n >= WIDE_PAIRS_OVER_STORED_MIN_N
            and k >= WIDE_PAIRS_OVER_STORED_MIN_K and ceil_div(m, 256) * 256 == ceil_div(m, 128) * 128
            and dual_tiles(wide, shape) == dual_tiles(stored, shape))


def _sm90_mixed_rule_wg3(shape) -> KernelConfig | None:
    """The mixed-input config where the rules before exp. 91 pick it, else None."""
    cur = _sm90_mixed_rule_128(shape)
    m, n, k, l = shape
    if (l != 1 or m <= 64 or n < MIXED_MIN_N or (n <= MIXED_NARROW_SHORT_N and k <= MIXED_NARROW_SHORT_K)
            or (cur is not None and cur.cluster_mn == (2, 1)) or (cur is None and n % 192)):
        return cur
    wg3 = sm90_dual_mixed_wg3(shape)
    fill = dual_tiles(wg3, shape) / SM_COUNT["sm_90a"]
    if cur is None:
        # no mixed form picked (the stored-decode kernels run it): from about half a wave of tiles
        pick = wg3 if fill >= MIXED_NARROW_MIN_WAVE else None
    else:
        pick = wg3 if mixed_dual_model_us(wg3, shape) < MIXED_WG3_MARGIN * mixed_dual_model_us(cur, shape) else cur
    if pick is wg3 and k >= 2 * K_BLOCK and MIXED_PAIRS_MIN_WAVE <= 2 * fill <= 1:
        return sm90_dual_mixed_wg3_pairs()  # exp. 87
    return pick


def _sm90_mixed_rule_128(shape) -> KernelConfig | None:
    """The (256, 128) / narrow / pairs mixed-input config where the rules above pick it, else None."""
    m, n, k, l = shape
    if n % 128 or l != 1 or m <= 64 or n < MIXED_MIN_N:
        return None
    narrow_fill = dual_tiles(sm90_dual_mixed_narrow(), shape) / SM_COUNT["sm_90a"]
    if ((MIXED_NARROW_MIN_WAVE <= narrow_fill < MIXED_NARROW_MAX_WAVE
         and (n > MIXED_NARROW_SHORT_N or k > MIXED_NARROW_SHORT_K))
            or (MIXED_NARROW_LOW_WAVE <= narrow_fill < MIXED_NARROW_MIN_WAVE and k >= MIXED_NARROW_LOW_MIN_K)):
        return sm90_dual_mixed_narrow(shape)
    cfg = sm90_dual_mixed(shape)
    fill = dual_tiles(cfg, shape) / SM_COUNT["sm_90a"]
    if k > MIXED_PAIRS_MAX_SHORT_K and n >= MIXED_PAIRS_MIN_N and MIXED_PAIRS_MIN_WAVE <= 2 * fill <= 1:
        return sm90_dual_mixed_pairs()
    if fill >= MIXED_MIN_WAVE or (cfg.split_k and m > MIXED_SK_MIN_M and fill >= MIXED_SK_MIN_WAVE):
        return cfg
    return None


# Tiles of the grouped mixed-input kernel (B_g rows, A_g rows): 256 rows of B_g (two m64 reps
# per consumer warpgroup) x 64-128 A rows, 128 x 128-256 (one rep), 192 x 128 (three consumer
# warpgroups).  The A widths between the powers of two (m64 x n80 ... n240 wgmmas, exp. 112) pad
# a group's M_g to a multiple of 16 rather than of 64 or 128; their C staging runs 8-32 row
# passes (`Sm90Common.store_c_t_staged`).
GROUP_MIXED_TILES = frozenset([(256, n) for n in range(64, 129, 16)] + [(128, n) for n in range(128, 257, 16)]
                              + [(192, 128)])


def sm90_group_mixed(pairs: bool = False, tile=(256, 128)) -> KernelConfig:
    """sm_90a grouped GEMM in the mixed-input form (nvfp4gemm/sm90/grouped_mixed.py, exps. 69
    and 78): every group's A decoded once to fp16 by a pre-pass, B_g decoded into wgmma
    registers.  Tile: tile[0] rows of B_g (the register operand: 256, or 128 as in exp. 80) x
    tile[1] rows of A_g (128, or 64 for M_g <= 64, exp. 90: one m64 x n64 wgmma width, each
    group's A16 rows padded to 64; or 256 with 128 B_g rows, the dual wide form's m64 x n256
    wgmmas, exp. 93; or 192 B_g rows x 128 on three consumer warpgroups, one m64 rep each, as
    the dual three-warpgroup form, exp. 107; or any tile of GROUP_MIXED_TILES, exp. 112); stream-K
    segments made on the host (`mixed_group_plan`),
    or with `pairs` (256-row tiles only) one tile per 2-CTA cluster, each rank half its
    k-blocks (cluster (2, 1), exp. 79)."""
    return KernelConfig("group", "sm_90a", tuple(tile), mma_warpgroups=3 if tile[0] == 192 else 2,
                        epi_tile_mn=(64, 32) if tile[0] == 192 else (128, 32 if tile[1] % 32 == 0 else 16),
                        rs_a=True, swap_ab=True,
                        a_prepass=True, ab_stages=2, split_k=True, cluster_mn=(2, 1) if pairs else (1, 1))


# Tiles of the device-scheduled grouped mixed-input form (`sm90_group_mixed_dynamic`): those of
# GROUP_MIXED_TILES on two consumer warpgroups (the three-warpgroup form's tiles start inside a
# scale atom, which its host-made segments account for).
DEVICE_SCHEDULE_TILES = frozenset(t for t in GROUP_MIXED_TILES if t[0] != 192)


def sm90_group_mixed_dynamic(tile=(256, 128), masked: bool = False, masked_above: int = 0) -> KernelConfig:
    """The grouped mixed-input kernel with its schedule made on the device (exps. 136-137): one
    form; each CTA reads the M_g, N_g, K_g of the group table and walks its work items --
    whole tiles t = blockIdx, + gridDim, ... (`scheduler.device_tile`), or under two waves
    with one K for every group, stream-K segments when the cost test of `stream_k_plan` says so
    (`scheduler.device_plan`, `device_segment`); the pre-pass finds each half's group the same
    way.  No launch table depends on M_g, so one launch template serves inputs whose M_g change
    every call (NVFP4_DYNAMIC_M).  `masked`: M_g read from a counts tensor, each clamped to the
    table's M_g (MaskedGroupedGemm, exp. 145); `masked_above`: counts of at most this many rows
    taken as 0 (exp. 147)."""
    return replace(sm90_group_mixed(tile=tile), device_schedule=True, masked=masked, masked_above=masked_above)


# Split-K pairs of the grouped mixed-input kernel (cluster (2, 1), exp. 79) where the cost
# ranking below picks a stored-decode tile that is not swap (M_g large enough that the swap
# kernel's 64-row padding does not win), every N_g >= MIXED_GROUP_MIN_N (the pre-pass writes
# A16 for every group: its cost per MAC grows as N shrinks, as for the dual kernel's
# MIXED_MIN_N), and, as for the dual pairs (MIXED_PAIRS_*), 2 x its 256 x 128 tiles fill
# [MIXED_PAIRS_MIN_WAVE, 1] of a wave and every K_g > MIXED_PAIRS_MAX_SHORT_K.  H100,
# 2026-11-25, pairs / the rule before: fitted on g4 M64-128 N4096 K7168 0.927; then on shapes
# not used to fit it g2 M256 N4096 K7168 0.927, g3 M100-128 N5120 K14336 0.933, g2 M64-128
# N7168 K7168 0.916.  Outside it: leaderboard g2 N3072 K4096 1.004 (K 4096), g2 N4096 K1536
# 1.19 (3 k-blocks per rank), N 2048 with 48-64 CTAs 1.23-1.32, 144-256 CTAs (clusters in two
# waves) 1.13-1.42.
# The stream-K form is no rule, only the two pins in CONFIG_MAP: beside the leaderboard's 8-
# group cases (0.938, 0.969) it won 1-3% on four shapes (prefill g8 M384-640 N14336 K4096
# 0.973, N4096 K14336 0.984, g8 M128 N4096 K7168 0.982, g4 M64-256 N7168 K2048 0.992) and lost
# 9% on g8 M200-300 N4096 K7168 (1.088, 246 vs 226 us, cause not found), 5-6% with N 2048.
MIXED_GROUP_MIN_N = 4096


# Every M_g <= 64 and some > 32 (MoE decode), where the cost ranking picks the swap_ab tile
# (MMA N 64): the grouped mixed-input kernel with 64-row A tiles instead, nothing decoded
# stored (exp. 90; H100, 2026-11-25, explicit configs, one process, 3 alternating rounds,
# mixed / swap 256 x 64): fitted on 5 shapes, g8 M64 / M17-64 N4096 K7168 0.956 / 0.961, g8 M48
# N7168 K2048 0.891, g4 M64 N7168 K7168 0.940, g16 M17-64 N2048 K4096 1.000; then 6 shapes
# not used to fit it, 0.866-0.985 (geomean 0.944): g8 M33-64 N7168 K4096 0.866, g8 M48
# N2048 K7168 0.985, g6 M20-64 N5120 K3072 0.942, g8 M40 N4096 K1024 0.984, g2 M64 N14336
# K4096 0.944, g16 M33-64 N4096 K7168 0.950.  Outside it: every M_g <= 32 (the swap kernel's
# MMA N 32) 1.031 / 1.032; the ranking's non-swap pick on g4 M40-64 N4096 K2048 1.020 (kept).
# N_g < 2048 and K_g < 1024 were not measured, so they stay on the swap kernel.
MIXED64_MIN_N = 2048
MIXED64_MIN_K = 1024


def _sm90_group_mixed_rule(shape) -> KernelConfig | None:
    """The grouped mixed-input split-K pairs where the rule above picks them, else None;
    called where the stored-decode cost ranking picked a non-swap tile."""
    tm, tn = sm90_group_mixed().mma_tile_mn
    if not all(n >= MIXED_GROUP_MIN_N and n % tm == 0 and k > MIXED_PAIRS_MAX_SHORT_K for _m, n, k in shape):
        return None
    tiles = sum((n // tm) * ceil_div(m, tn) for m, n, _k in shape)
    sms = SM_COUNT["sm_90a"]
    return sm90_group_mixed(pairs=True) if MIXED_PAIRS_MIN_WAVE * sms <= 2 * tiles <= sms else None


# The grouped mixed-input kernel with 256-row A tiles (exp. 93: the dual wide form's m64 x n256
# wgmmas, 128 B_g rows per tile) where that pads no group's A rows beyond the 128-row tiles of
# the other kernels, i.e. every M_g has an even number of 128-row blocks (M_g in (128, 256],
# (384, 512], ...), and every N_g is a multiple of 128.  H100, 2026-11-25, one process, 3
# rounds, against the rule's pick (stored-decode 128 x 256): fitted on g4 M256 N7168 K4096
# 0.818, g8 M200-256 N4096 K7168 0.879, g2 M512 N4096 K7168 0.874, g2 M768/512 N2048 K2048
# 0.937; g8 M384-640 N14336 K4096 (4608 padded rows against 4224) lost 1.056, and the
# leaderboard cases (M_g 40-384: 1.5-2x the rows) 1.09-1.29.  Checked on 8 shapes not used to
# fit it: 6 won 0.835-0.946 (N_g 2048-8192, K_g 2048-7168, 1-8 groups), 2 with N_g 1024 lost
# (g16 M150-240 K2048 1.083, g4 M256 K1024 1.401: few B tiles, the pre-pass and fixed costs
# weigh more), so N_g >= MIXED_WIDE_GROUP_MIN_N -- fitted on those two, not validated.
MIXED_WIDE_GROUP_MIN_N = 2048


# Exp. 106: with K_g < 4096 the wide form also needs half a wave of tiles.  H100, 2026-11-25,
# against the stored-decode pick without it: g2 M256 / 256 N4096 K1536 and g2 M180 / 230 N4096
# K2048 (64 tiles each) lost 1.19x / 1.14x to the 128 x 128 split-K kernel, while 72-128 tiles
# with K 1024-1536 won 0.91-0.98 on five shapes (a sixth tied) and exp. 93's g1 M256 N8192 K4096
# (64 tiles) won 0.946; checked on 5 shapes not used to set it, each on the side it predicts.
MIXED_WIDE_GROUP_SHORT_K = 4096


def _sm90_group_wide_ok(shape) -> bool:
    rows = lambda t: sum(ceil_div(m, t) * t for m, _n, _k in shape)  # noqa: E731
    tiles = sum((n // 128) * ceil_div(m, 256) for m, n, _k in shape)
    return all(n % 128 == 0 and n >= MIXED_WIDE_GROUP_MIN_N for _m, n, _k in shape) and rows(256) == rows(128) \
        and (2 * tiles >= SM_COUNT["sm_90a"] or all(k >= MIXED_WIDE_GROUP_SHORT_K for _m, _n, k in shape))


def sm90_group_mixed_forms(tiles) -> KernelConfig:
    """The grouped mixed-input kernel with several tile forms in one launch (exps. 99, 108):
    each group runs in the form `form_groups` gives it, each form on its own CTAs
    (`mixed_group_forms_plan`).  One pre-pass, one PDL launch; each form is exactly its
    single-form kernel, branched on the CTA index."""
    return replace(sm90_group_mixed(tile=tiles[0]), forms=tuple(tuple(t) for t in tiles))


def sm90_group_mixed_two_forms() -> KernelConfig:
    """Exp. 99's two forms: CTAs [0, P) run the (256, 128) form over the groups whose M_g has
    an odd number of 128-row blocks, CTAs [P, ...) the wide (128, 256) form over the others,
    which it pads no further."""
    return sm90_group_mixed_forms(TWO_FORMS_TILES)


def sm90_group_mixed_three_forms() -> KernelConfig:
    """Exp. 108's three forms: the two of exp. 99 and (128, 192) (m64 x n192 wgmmas), which
    takes the groups with 128 < M_g <= 192 (and 256 < M_g <= 384) from the wide form."""
    return sm90_group_mixed_forms(MULTI_FORM_TILES)


def form_parts(cfg: KernelConfig) -> tuple[KernelConfig, ...]:
    """The single-form configs a multi-form config runs, in CTA order."""
    assert cfg.forms
    return tuple(sm90_group_mixed(tile=t) for t in cfg.forms)


# The forms of exps. 99 and 108, in CTA order: the (256, 128) form, (128, 192) (exp. 108) and
# the wide (128, 256) form.
TWO_FORMS_TILES = ((256, 128), (128, 256))
MULTI_FORM_TILES = ((256, 128), (128, 192), (128, 256))
# The tiles a multi-form kernel may hold (two consumer warpgroups: not the 192-row form, which
# launches 512 threads) and at most how many (`Sm90GroupedMixedFormsKernel`'s slots).  Forms
# run in CTA order `form_order`: 256-row tiles first, then 128-row ones, each by A rows.
FORM_TILES = tuple(sorted((t for t in GROUP_MIXED_TILES if t[0] != 192), key=lambda t: (-t[0], t[1])))
MAX_FORMS = 8


def form_order(tile) -> tuple:
    """Sort key of a multi-form config's tiles (their CTA order)."""
    return (-tile[0], tile[1])

# Weights of a k-block of each form in the split points' balance: the splits minimize the
# largest of the forms' busiest CTAs (k-blocks + stream-K charges, `plan_cta_loads`) times
# these.  (256, 128) and (128, 256) set by hand from the best of 3-5 split points measured on 8
# shapes (H100, exp. 99: g4-16, N_g 2048-14336, K_g 2048-7168): the plan's P lands within 4
# CTAs of it on all 8, on it for few (a least-squares fit of the same model was too flat to
# place P); the window is searched around the work-proportional split.  (128, 192): 0.80 of
# the wide form's, its time ratio on the same plans (exp. 108: 0.793-0.815 on 5 shapes).
# The A widths between (exp. 112): each form's time relative to (256, 128) / (128, 192) / (128,
# 256) on the same plans (g8 M_g = the width, N4096 K7168, H100): (256, 64) 0.824, (256, 80)
# 0.853, (256, 96) 0.905, (256, 112) 0.936; (128, 144) 0.900, (128, 160) 0.931, (128, 176) 0.954
# of (128, 192); (128, 240) 0.959 of (128, 256); (128, 208) and (128, 224) interpolated; (128, 128)
# MIXED_MODEL_KB_US's.
FORM_KB_US = {(256, 64): 2.39, (256, 80): 2.47, (256, 96): 2.62, (256, 112): 2.71, (256, 128): 2.9,
              (128, 128): 1.73, (128, 144): 1.91, (128, 160): 1.97, (128, 176): 2.02, (128, 192): 2.12, (128, 208): 2.26,
              (128, 224): 2.40, (128, 240): 2.54, (128, 256): 2.65}
TWO_FORMS_P_WINDOW = 12
THREE_FORMS_WINDOW = 8


def _form_group_k_blocks(shape, tile) -> int:
    """k-blocks of one group's tiles in a form."""
    m, n, k = shape
    return (n // tile[0]) * ceil_div(m, tile[1]) * (k // K_BLOCK)


def _form_group_cost(shape, tile) -> float:
    """Modelled time of one group's tiles in a form (FORM_KB_US per k-block)."""
    return FORM_KB_US[tuple(tile)] * _form_group_k_blocks(shape, tile)


def form_groups(shapes, tiles) -> list[list[int]]:
    """The groups of each form of a multi-form kernel, in the forms' order.  Between the
    (256, 128) and wide forms a group goes wide where its M_g has an even number of 128-row
    blocks (256-row tiles pad it no further: exp. 99); another form takes it where that
    costs less (`_form_group_cost`: the (128, 192) form where 128 < M_g <= 192 or
    256 < M_g <= 384) and its N_g is whole tiles of the form's B rows."""
    tiles = [tuple(t) for t in tiles]
    parts = [[] for _ in tiles]
    for g, (m, n, k) in enumerate(shapes):
        parity = (256, 128) if ceil_div(m, 128) % 2 else (128, 256)
        if parity in tiles:
            best = parity
        else:
            best = (256, 128) if (256, 128) in tiles else (128, 256) if (128, 256) in tiles else tiles[0]
        for t in tiles:
            if t not in ((256, 128), (128, 256)) and n % t[0] == 0 and \
                    _form_group_cost((m, n, k), t) < _form_group_cost((m, n, k), best):
                best = t
        parts[tiles.index(best)].append(g)
    return parts


def two_forms_groups(shapes) -> tuple[list[int], list[int]]:
    """(groups of the (256, 128) form, groups of the wide form) of exp. 99's two-form kernel."""
    return tuple(form_groups(shapes, TWO_FORMS_TILES))


def plan_cta_loads(plan: dict) -> list[float]:
    """k-blocks each CTA of a `mixed_group_plan` runs, plus STREAM_K_SEGMENT_KB per partial
    it writes or adds (the plan's own charges)."""
    segs, offs = plan["segs"], plan["seg_offs"]
    loads = []
    for c in range(plan["ctas"]):
        load = 0.0
        for _g, _nb, _m0, kb0, kb1, s, ns in segs[offs[c]:offs[c + 1]]:
            load += segment_load(kb1 - kb0, s, ns)
        loads.append(load)
    return loads


def segment_load(kbs: int, s: int, ns: int) -> float:
    """Modelled k-blocks of segment s of a tile cut into ns: its own kbs plus STREAM_K_SEGMENT_KB
    per partial -- one written (s > 0), or ns - 1 read by the finisher (s == 0)."""
    return kbs + (STREAM_K_SEGMENT_KB * (1 if s > 0 else ns - 1) if ns > 1 else 0)


_PLAN_CACHE: dict = {}
_PLAN_CACHE_MAX = 4096


def _frozen(x):
    return tuple(_frozen(v) for v in x) if isinstance(x, (list, tuple)) else x


def _cached_plan(fn):
    """Memoize a host plan by its arguments (the rule's models and the launch plan the same
    shapes again, and a multi-form search plans each form at many CTA counts; the plans are
    pure functions of these arguments and the module's constants).  Callers must not mutate
    the returned dict; a script that patches a plan constant clears `_PLAN_CACHE` first."""
    @functools.wraps(fn)
    def wrapped(shapes, sms, *args, **kw):
        key = (fn.__name__, _frozen(shapes), sms, _frozen(args), _frozen(sorted(kw.items())))
        hit = _PLAN_CACHE.get(key)
        if hit is None:
            if len(_PLAN_CACHE) >= _PLAN_CACHE_MAX:
                _PLAN_CACHE.clear()
            hit = _PLAN_CACHE[key] = fn(shapes, sms, *args, **kw)
        return hit
    return wrapped


@_cached_plan
def mixed_group_forms_plan(shapes, sms: int, tiles, given=None) -> dict:
    """Host schedule of the multi-form grouped mixed-input kernel: `mixed_group_plan` of each
    form's groups (`form_groups`) on its own CTAs, forms in `tiles` order, one segment table
    (group indices global).  A16 holds the forms' groups by descending A rows per tile (the
    wide form's first), each group padded to its form's A rows and each form's first row a
    multiple of them (a form TMA-loads whole blocks of its A rows).
    `given` (an int, or one per form but the last) is the CTAs offered to the first forms;
    chosen here where None, to balance the forms' busiest CTAs under FORM_KB_US: two forms,
    every split within TWO_FORMS_P_WINDOW of the work-proportional one; three, every pair
    within THREE_FORMS_WINDOW -- the split whose busiest CTAs, sorted largest first, are least
    (exp. 113: of equal makespans, the one with the least busy next form; and the window search
    in place of the water fill for three forms of any tiles) --; more forms (exp. 112) by
    `_water_fill_ctas`.  A form's plan may use fewer CTAs than it is offered; the
    last form gets all the others.
    Returns mixed_group_plan's dict plus splits (the first CTA of each form but the first)
    and narrow_ctas (the first of them)."""
    tiles = [tuple(t) for t in tiles]
    parts = form_groups(shapes, tiles)
    if not all(parts):
        raise ValueError(f"the multi-form kernel needs groups of every form {tiles}")
    f_shapes = [tuple(tuple(shapes[g]) for g in gs) for gs in parts]
    kb = [FORM_KB_US[t] for t in tiles]
    stats = {}  # (form, CTAs) -> (CTAs its plan uses, its busiest CTA x FORM_KB_US): no plan built

    def form_stats(f, c):
        st = stats.get((f, c))
        if st is None:
            used, load = mixed_group_plan_stats(f_shapes[f], c, tiles[f])
            st = stats[(f, c)] = (used, kb[f] * load)
        return st

    def counts_of(offered):  # (the last form gets every CTA the others' plans leave)
        left = sms - sum(form_stats(f, c)[0] for f, c in enumerate(offered))
        return None if left < 1 else list(offered) + [left]

    def spans(offered):
        """The forms' modelled busiest CTAs, the largest first ((inf,) where the last form gets
        no CTA): splits compare by it, so of splits with equal makespans the one whose next
        busiest form is least busy wins (slack where the model is short: exp. 113)."""
        counts = counts_of(offered)
        if counts is None:
            return (math.inf,)
        return tuple(sorted((form_stats(f, c)[1] for f, c in enumerate(counts)), reverse=True))

    def busiest_at(f, c):
        return form_stats(f, c)[1]

    def plans(offered):
        counts = counts_of(offered)
        return None if counts is None else [mixed_group_plan(f_shapes[f], c, tiles[f]) for f, c in enumerate(counts)]

    work = [w * sum(_form_group_k_blocks(sh, t) for sh in fs) for w, t, fs in zip(kb, tiles, f_shapes)]
    if given is None and len(tiles) > 3:
        given = _water_fill_ctas(len(tiles), sms, work, busiest_at)[:-1]
    if given is None:
        p0 = [round(sms * w / sum(work)) for w in work[:-1]]
        win = TWO_FORMS_P_WINDOW if len(tiles) == 2 else THREE_FORMS_WINDOW
        ranges = [range(max(1, p - win), min(sms - 1, p + win) + 1) for p in p0]
        cands = [(c,) for c in ranges[0]] if len(tiles) == 2 else \
            [(a, b) for a in ranges[0] for b in ranges[1] if a + b < sms]
        given = _least_span(cands, p0, work, spans, busiest_at)
    given = (given,) if isinstance(given, int) else tuple(given)
    if len(given) != len(tiles) - 1 or not all(1 <= c < sms for c in given) or sum(given) >= sms:
        raise ValueError(f"CTAs offered to the first forms {given}: one per form but the last, each "
                         f">= 1, together < {sms}")
    ps = plans(given)
    if ps is None:
        raise ValueError(f"CTAs offered to the first forms {given} leave none for the last")
    row0 = [0] * len(shapes)
    base = 0
    for f in sorted(range(len(tiles)), key=lambda f: -tiles[f][1]):
        base = round_up(base, tiles[f][1])
        for i, g in enumerate(parts[f]):
            row0[g] = base + ps[f]["row0"][i]
        base += ps[f]["a16_rows"]
    segs, offs, splits = [], [0], []
    for f, p in enumerate(ps):
        if f:
            splits.append(len(offs) - 1)
        offs += [o + len(segs) for o in p["seg_offs"][1:]]
        segs += [(parts[f][g], *rest) for g, *rest in p["segs"]]
    return {"segs": segs, "seg_offs": offs, "row0": row0, "a16_rows": base, "ctas": len(offs) - 1,
            "splits": splits, "narrow_ctas": splits[0]}


def _least_span(cands, p0, work, spans, busiest_at):
    """`min(cands, key=spans)` (the first of equal spans in `cands` order), with fewer plans:
    candidates nearest the work-proportional split `p0` first, and one whose first forms alone
    are already busier than the best span so far -- by their work over their CTAs (`work`, a
    bound no plan beats), else by their plans -- is skipped (its span starts with at least
    that much), which leaves most CTA counts unplanned."""
    order = sorted(range(len(cands)), key=lambda i: (sum(abs(c - p) for c, p in zip(cands[i], p0)), i))
    best = None  # (span, index)
    for i in order:
        # (the work bound with slack: work / c can round an ulp above an equal span, a tie)
        if best is not None and (max(w / c for w, c in zip(work, cands[i])) > best[0][0] * (1 + 1e-9) or
                                 max(busiest_at(f, c) for f, c in enumerate(cands[i])) > best[0][0]):
            continue
        key = (spans(cands[i]), i)
        if best is None or key < best:
            best = key
    return cands[best[1]]


def _water_fill_ctas(forms: int, sms: int, work, busiest) -> list[int]:
    """CTAs per form (summing to sms) that minimize the largest `busiest(f, c)` (form f's
    modelled busiest CTA on c CTAs, non-increasing in c up to plan quirks): the
    work-proportional counts rounded down, then each CTA left to the form that is then busiest,
    then single CTAs moved from one form to the busiest while that lowers the largest."""
    c = [max(1, int(sms * w / sum(work))) for w in work]
    while sum(c) > sms:
        f = min((f for f in range(forms) if c[f] > 1), key=lambda f: busiest(f, c[f] - 1))
        c[f] -= 1
    while sum(c) < sms:
        f = max(range(forms), key=lambda f: busiest(f, c[f]))
        c[f] += 1
    for _ in range(4 * forms):
        top = max(range(forms), key=lambda f: busiest(f, c[f]))
        now = busiest(top, c[top])
        best = None
        for g in range(forms):
            if g == top or c[g] == 1:
                continue
            after = max([busiest(top, c[top] + 1), busiest(g, c[g] - 1)]
                        + [busiest(h, c[h]) for h in range(forms) if h not in (top, g)])
            if after < now and (best is None or after < best[0]):
                best = (after, g)
        if best is None:
            break
        c[top] += 1
        c[best[1]] -= 1
    return c


def mixed_group_two_forms_plan(shapes, sms: int, narrow_ctas: int | None = None) -> dict:
    """`mixed_group_forms_plan` of exp. 99's two forms: the (256, 128) form's groups on CTAs
    [0, P) (`narrow_ctas` offered, or chosen), the wide form's on the others; A16 holds the
    wide groups first, each padded to 256 rows, then the others padded to 128."""
    return mixed_group_forms_plan(shapes, sms, TWO_FORMS_TILES, narrow_ctas)


# The two-form kernel (exp. 99) where the stored-decode ranking picks a non-swap tile and it
# fits (groups of both forms, N_g whole tiles of each), every N_g and K_g >= TWO_FORMS_MIN_NK,
# and its tiles hold >= TWO_FORMS_MIN_KB k-blocks (~15 per SM).  H100, 2026-11-25, one process,
# 3 rounds, against the rule's pick before (stored-decode 128 x 256 unless pinned):
# - split weights fitted on 8 shapes (g4-16, N 2048-14336, K 2048-7168): 0.79-0.93 at the
#   best split measured; the leaderboard's g8 N7168 K2048 0.922 against its pinned (256, 128)
#   form; its g8 N4096 K7168 1.001-1.033 (pinned to that form: kept);
# - then 6 shapes not used to fit it, the plan's split: 0.829-0.913, one tie (g12 M42-214 N2048
#   K4096, 1920 k-blocks: 0.991);
# - with 2-3 groups: g2 M200/300 N14336 K4096 0.824, g3 M90-250 N7168 K7168 0.777 (3920-4480
#   k-blocks); losses with few k-blocks, g2 M192/320 N3072 K4096 1.052 (960; the leaderboard case,
#   pinned to the 128 x 128 mixed tiles) and g3 M60-200 N4096 K2048 1.088 (640; the ranking picks
#   swap there), on which TWO_FORMS_MIN_KB is set -- not validated beyond these.
TWO_FORMS_MIN_NK = 2048
TWO_FORMS_MIN_KB = 2048


def two_forms_k_blocks(shape) -> int:
    """k-blocks of every tile of the two-form kernel: (256, 128) tiles of its groups with an odd
    number of 128-row blocks, (128, 256) tiles of the others."""
    narrow, wide = two_forms_groups(shape)
    return sum((shape[g][1] // 256) * ceil_div(shape[g][0], 128) * (shape[g][2] // K_BLOCK) for g in narrow) \
        + sum((shape[g][1] // 128) * ceil_div(shape[g][0], 256) * (shape[g][2] // K_BLOCK) for g in wide)


# Below this share of wide MACs the (256, 128) form alone (exp. 100) was as fast or faster:
# two-form / (256, 128) form at shares 0.22-0.55 ran 0.93-0.98 on four shapes, 1.00-1.01 on two
# (one the leaderboard's g8 N4096 K7168), 1.13 (g8 M20-200 N4096 K7168) and 1.38 (g8 M200-300
# N4096 K7168: 324 against 235 us, the plan's loads balanced; cause not found); at 0.6-0.86,
# 0.91-1.00 on 13 shapes (H100, exps. 99-100)
TWO_FORMS_MIN_WIDE_SHARE = 0.6


def two_forms_wide_share(shape) -> float:
    """Share of the MACs (padded rows x N_g) that the two-form kernel runs in the wide form."""
    narrow, wide = two_forms_groups(shape)
    rows = lambda gs, t: sum(ceil_div(shape[g][0], t) * t * shape[g][1] for g in gs)  # noqa: E731
    return rows(wide, 256) / max(1, rows(wide, 256) + rows(narrow, 128))


# Largest A16 (fp16 A of every group, padded, x K_max) among the shapes it won on: 25.7 MB
# (g8 M60-240 N4096 K7168 and g8 M50-200 N2048 K7168).  The (256, 128) form alone lost 16%
# beyond its own bound (MIXED_GROUP_MAX_A16_BYTES), so larger ones keep the previous pick.
TWO_FORMS_MAX_A16_BYTES = 26 << 20


def group_wave_plan_applies(shape) -> bool:
    """Whether the grouped mixed kernel's (256, 128) tiles of `shape` get the wave plan on
    sm_90a (exp. 102: every K_g equal, at least a wave of tiles)."""
    return len({k for _m, _n, k in shape}) == 1 and \
        sum((n // 256) * ceil_div(m, 128) for m, n, _k in shape) >= SM_COUNT["sm_90a"]


# Exp. 102: where the wave plan applies, the wide-share bound goes and the A16 bound rises to
# the largest A16 measured (36.8 MB).  Both were set on losses of the stream-K plan, which
# re-read B_g from DRAM; with the wave plan (H100, 2026-11-25, one process, 3 rounds) the
# two-form kernel ran 0.95-1.006 of the (256, 128) form on 8 shapes (A16 6.5-36.8 MB), at wide
# shares 0.22 (g8 M20-200 N4096 K7168, 1.128 before), 0.29-0.40 (g8 M200-300 N4096 K7168, 1.38
# before) and 0.55 (the leaderboard's g8 N4096 K7168, 0.964), and 0.878-0.908 of the
# stored-decode pick on g8 M200-300 N4096 / N7168 K7168 (35 MB).
WAVE_PLAN_MAX_A16_BYTES = 37 << 20


def _sm90_group_two_forms_ok(shape) -> bool:
    if not fits(sm90_group_mixed_two_forms(), shape):
        return False
    narrow, wide = two_forms_groups(shape)
    a16 = (sum(ceil_div(shape[g][0], 128) * 128 for g in narrow) + sum(ceil_div(shape[g][0], 256) * 256 for g in wide)) \
        * max(k for _m, _n, k in shape) * 2
    if group_wave_plan_applies(shape):
        bounded = a16 <= WAVE_PLAN_MAX_A16_BYTES
    else:
        bounded = a16 <= TWO_FORMS_MAX_A16_BYTES and two_forms_wide_share(shape) >= TWO_FORMS_MIN_WIDE_SHARE
    return two_forms_k_blocks(shape) >= TWO_FORMS_MIN_KB and bounded \
        and all(n >= TWO_FORMS_MIN_NK and k >= TWO_FORMS_MIN_NK for _m, n, k in shape)


# The (256, 128) mixed-input form, stream-K, where the ranking picks a non-swap stored-decode
# tile and none of the mixed rules above does, every N_g % 256 == 0, N_g >= MIXED_GROUP_RULE_MIN_N,
# K_g >= 2048, and its tiles hold >= MIXED_GROUP_MIN_KB k-blocks (exp. 100).  Declared (with N_g
# >= 2048) from exp. 99's measurements: on all 18 shapes timed there (g2-16, N 2048-14336, K
# 2048-7168) it ran 0.84-0.99 of the stored-decode pick (the losses session 22 recorded, 1.088 on
# g8 M200-300 N4096 K7168 and 5-6% with N 2048, predate exps. 82-83).  Checked on 8 more (H100,
# 2026-11-25): 0.885-0.950 on 5 of 6 where the stored-decode kernels ran (g16 M70-128 N2048 K4096
# 1.024: so N_g >= 3072, set on that point and exp. 99's N 2048 ties 0.979 / 0.990); then on
# g8 M200-300 against the pre-session pick: N4096 K4096 0.976, N4096 K7168 0.982, but N7168
# K7168 **1.161** (461 vs 397 us; session 22 saw 1.088 on a like shape) -- so A16 (every M_g
# padded to 128 rows x K_max fp16) <= MIXED_GROUP_MAX_A16_BYTES, set between the wins (<= 16.5
# MB) and that loss (36.7 MB), not validated (cause not measured; L2 holds 50 MB).  Exp. 102
# found it (the stream-K plan re-read B_g from DRAM) and, where the wave plan applies, raises
# the bound to WAVE_PLAN_MAX_A16_BYTES: there the form ran 0.914 (g8 M200-300 N7168 K7168, 35
# MB) and 0.932 (N4096 K7168) of the stored-decode pick.
MIXED_GROUP_MIN_KB = 2048
MIXED_GROUP_RULE_MIN_N = 3072
MIXED_GROUP_MAX_A16_BYTES = 20 << 20


def _sm90_group_mixed256_ok(shape) -> bool:
    kbs = sum((n // 256) * ceil_div(m, 128) * (k // K_BLOCK) for m, n, k in shape)
    a16 = sum(ceil_div(m, 128) * 128 for m, _n, _k in shape) * max(k for _m, _n, k in shape) * 2
    return all(n % 256 == 0 and n >= MIXED_GROUP_RULE_MIN_N and k >= TWO_FORMS_MIN_NK for _m, n, k in shape) \
        and kbs >= MIXED_GROUP_MIN_KB \
        and a16 <= (WAVE_PLAN_MAX_A16_BYTES if group_wave_plan_applies(shape) else MIXED_GROUP_MAX_A16_BYTES)


def _stream_k_fill_at(tile_kbs, sms: int, budget_t: float):
    """Per-CTA segment lists [(tile, kb0, kb1)] of the greedy fill under the per-CTA budget
    budget_t, or None where it needs more than sms CTAs (`stream_k_fill`)."""
    pen = STREAM_K_SEGMENT_KB
    ctas, i, u = [], 0, 0
    while i < len(tile_kbs):
        if len(ctas) == sms:
            return None
        budget, segs = budget_t, []
        while i < len(tile_kbs):
            kbs = tile_kbs[i]
            rest = (kbs - u) + (pen if u > 0 else 0)  # a writer pays for its partial
            if rest <= budget:
                segs.append((i, u, kbs))
                budget -= rest
                i, u = i + 1, 0
                continue
            # a part: a writer (u > 0, the CTA's first segment) or the tile's finisher
            # (u == 0, its last), charged for the partials it will add
            parts = 1 if u > 0 else max(1, math.ceil(kbs / budget_t) - 1)
            take = min(int(budget - pen * parts), kbs - u - 1)
            if take >= 1 and (u > 0 or not segs or take >= 2):
                segs.append((i, u, u + take))
                u += take
            break
        if not segs:
            return None
        ctas.append(segs)
    return ctas


def stream_k_fill_piece(sizes, budget_t: float) -> tuple:
    """The budgets on which `_stream_k_fill_at` is one function: it depends only on
    floor(budget_t) and on ceil(kbs / budget_t) for each distinct tile size kbs in `sizes` (k-blocks and
    STREAM_K_SEGMENT_KB are whole numbers, so the budget left drops by whole numbers from
    budget_t, exactly, and each comparison and int() in the fill sees only its integer part)."""
    return (math.floor(budget_t), *(math.ceil(k / budget_t) for k in sizes))


def stream_k_fill(tile_kbs, sms: int, memo: bool = True) -> list:
    """Stream-K cut of tiles with `tile_kbs` k-blocks each, in order, into contiguous CTA ranges:
    the smallest per-CTA budget under which a greedy fill needs at most `sms` CTAs.  A split
    tile's k-block-0 segment is its CTA's last work (the finisher, charged
    STREAM_K_SEGMENT_KB k-blocks per partial it adds), every other segment its CTA's first (a
    writer, charged one partial).  Returns per-CTA lists [(tile index, kb0, kb1)].
    `memo`: fill each `stream_k_fill_piece` once (the binary search's late steps stay in two
    pieces); the search and its result are those of filling at every step (memo=False), at
    ~1/4 of the fills (a new grouped shape's `select_config` 2x faster, session 34)."""
    sizes = sorted(set(tile_kbs))
    if memo and len(sizes) == 1:  # a wave plan's tail: a pure function of three ints, shared by shapes
        return _stream_k_fill_equal(sizes[0], len(tile_kbs), sms)
    return _stream_k_fill_search(tile_kbs, sms, memo)


@functools.lru_cache(maxsize=2048)
def _stream_k_fill_equal(kbs: int, tiles: int, sms: int) -> list:
    """`stream_k_fill` of `tiles` tiles of `kbs` k-blocks each (cached: callers only read it)."""
    return _stream_k_fill_search([kbs] * tiles, sms, True)


def _stream_k_fill_search(tile_kbs, sms: int, memo: bool) -> list:
    pieces: dict = {}
    sizes = sorted(set(tile_kbs))

    def fill(budget_t):
        if not memo:
            return _stream_k_fill_at(tile_kbs, sms, budget_t)
        key = stream_k_fill_piece(sizes, budget_t)
        if key not in pieces:
            pieces[key] = _stream_k_fill_at(tile_kbs, sms, budget_t)
        return pieces[key]

    total = sum(tile_kbs)
    lo, hi = total / sms, 2 * total / sms + 4 * max(tile_kbs)
    best = fill(hi)
    while best is None:
        hi *= 2
        best = fill(hi)
    for _ in range(40):  # binary search on the budget
        if hi - lo < 1e-7:
            # (fill changes only where the budget crosses an integer or a tile's k-blocks / n,
            # n <= its k-blocks: points >= 1e-4 apart, so this is the same piece as 40 steps)
            break
        mid = (lo + hi) / 2
        f = fill(mid)
        if f is None:
            lo = mid
        else:
            hi, best = mid, f
    return best


def _fill_rows(tiles, tile_kbs, sms: int) -> list:
    """`stream_k_fill` of tiles (g, nb, m0) as per-CTA segment rows (g, nb, m0, kb0, kb1, s,
    ns): segment s of a split tile on CTA c + s."""
    best = stream_k_fill(tile_kbs, sms)
    owners: dict[int, list] = {}  # tile -> [CTA of each segment], in k order
    for c, segs in enumerate(best):
        for i, _kb0, _kb1 in segs:
            owners.setdefault(i, []).append(c)
    return [[(*tiles[i], kb0, kb1, owners[i].index(c), len(owners[i])) for i, kb0, kb1 in segs]
            for c, segs in enumerate(best)]


def _group_tiles(shapes, tile) -> tuple[list, list, int]:
    """The grouped mixed-input kernel's tiles (g, nb, m0) in (g, nb, m0) order -- B_g's rows in
    blocks of tile[0] x A_g's rows in blocks of tile[1] --, each group's A16 row 0 (groups padded
    to tile[1] rows) and the A16 rows in all."""
    tm, tn = tile
    tiles, row0, r = [], [], 0
    for g, (m, n, _k) in enumerate(shapes):
        row0.append(r)
        r += ceil_div(m, tn) * tn
        tiles += [(g, nb, m0) for nb in range(n // tm) for m0 in range(0, m, tn)]
    return tiles, row0, r


@functools.lru_cache(maxsize=4096)  # (callers only read the cuts)
def _tail_cuts(kbs: int, most: int) -> tuple[int, list[int]]:
    """(s, k-block cuts) of a wave plan's tail tile split over s <= `most` CTAs: the finisher
    (k-blocks [0, cuts[1])) gets STREAM_K_WRITE_KB more than each writer, since it waits for
    their partials anyway, and s minimizes the finisher's end: its k-blocks or the slowest
    writer's (plus the write), whichever is later, plus STREAM_K_READ_KB per partial it adds
    (exp. 103)."""
    best = None
    for s in range(1, most + 1):
        w = (kbs - STREAM_K_WRITE_KB) / s if s > 1 else kbs
        cuts = [0] + [kbs - round(w * (s - q)) for q in range(1, s)] + [kbs]
        if any(a >= b for a, b in zip(cuts, cuts[1:])):
            continue
        slowest_writer = max((b - a for a, b in zip(cuts[1:], cuts[2:])), default=0) + STREAM_K_WRITE_KB
        end = max(cuts[1], slowest_writer) + STREAM_K_READ_KB * (s - 1)
        if best is None or end < best[0]:
            best = (end, s, cuts)
    return best[1], best[2]


def mixed_group_wave_plan(shapes, sms: int, tile=(256, 128)) -> dict | None:
    """Whole waves, then a stream-K tail (exp. 102) -- or None where it does not apply (K_g not
    all equal, or fewer tiles than a wave).

    Why: the stream-K plan's contiguous CTA ranges hold ~tiles / sms consecutive tiles each, so
    the A_g blocks that share a B_g block (same g, nb) mostly run one after another on one CTA,
    and B_g, read once per A_g block, comes from DRAM again (Nsight Compute, g8 N4096 K7168:
    252 MB of DRAM reads for 117 MB of B).  Here they run at the same time.

    Same tiles, order and A16 rows as `mixed_group_plan`.  W = tiles // sms whole waves: CTA c
    runs tiles c, c + sms, .. (a wave's CTAs hold consecutive tiles, so the A_g blocks that share
    a B_g block read it at the same time).  The T = tiles % sms left over: where T <= sms / 2,
    each is split over s <= sms // T CTAs (tail tile j on CTAs s j .. s j + s - 1) at the same
    k-block boundaries (`_tail_cuts`), so tail tiles that share B_g also read it in step; the
    finisher (s = 0, k-block 0) gets STREAM_K_WRITE_KB more than each writer, as it must wait
    for their partials anyway (exp. 103: on g8 N4096 K7168 10 / 9 / 9 k-blocks ran 1.7% faster
    than 8 / 10 / 10, and 12 / 8 / 8 1.9% slower); else the stream-K fill of `stream_k_fill`
    over them on all sms CTAs.  Every split segment follows only whole tiles or (fill) is its
    CTA's first tail segment, and every finisher is its CTA's last work, so a finisher waits
    only for writers that never wait (no deadlock), and each CTA writes at most one partial."""
    tiles, row0, r = _group_tiles(shapes, tile)
    waves, tail = divmod(len(tiles), sms)
    if len({k for _m, _n, k in shapes}) != 1 or waves == 0:
        return None
    kbs = shapes[0][2] // K_BLOCK
    per_cta = [[(*tiles[w * sms + c], 0, kbs, 0, 1) for w in range(waves)] for c in range(sms)]
    if tail and sms // tail < 2:
        # more than half a wave left: stream-K over it (B_g blocks shared out of step)
        for c, segs in enumerate(_fill_rows(tiles[waves * sms:], [kbs] * tail, sms)):
            per_cta[c] += segs
    elif tail:
        s, cuts = _tail_cuts(kbs, min(sms // tail, kbs))
        for j in range(tail):
            g, nb, m0 = tiles[waves * sms + j]
            for q in range(s):
                per_cta[s * j + q].append((g, nb, m0, cuts[q], cuts[q + 1], q, s))
    rows, offs = [], [0]
    for segs in per_cta:
        rows += segs
        offs.append(len(rows))
    return {"segs": rows, "seg_offs": offs, "row0": row0, "a16_rows": r, "ctas": sms}


def _fill_stats(fill) -> tuple[int, float]:
    """(CTAs, busiest CTA's `plan_cta_loads`) of a `stream_k_fill` result."""
    parts: dict[int, int] = {}
    for segs in fill:
        for i, _kb0, _kb1 in segs:
            parts[i] = parts.get(i, 0) + 1
    # (a fill's segment s == 0 is the one from k-block 0, its tile's finisher)
    most = max(sum(segment_load(kb1 - kb0, kb0 > 0, parts[i]) for i, kb0, kb1 in segs) for segs in fill)
    return len(fill), float(most)


@functools.lru_cache(maxsize=4096)
def _fill_stats_equal(kbs: int, tiles: int, sms: int) -> tuple[int, float]:
    return _fill_stats(stream_k_fill([kbs] * tiles, sms))


@functools.lru_cache(maxsize=1 << 14)
def mixed_group_plan_stats(shapes, sms: int, tile=(256, 128)) -> tuple[int, float]:
    """(ctas, max(plan_cta_loads(plan))) of `plan = mixed_group_plan(shapes, sms, tile)`, from
    counts alone where the wave plan applies (its whole waves, then the tail's cuts or the
    cached stream-K fill of its equal tiles): the multi-form split search needs only these for
    each form at each CTA count, and builds the plan of the split it picks (session 36)."""
    tm, tn = tile
    n_tiles = sum((n // tm) * ceil_div(m, tn) for m, n, _k in shapes)
    if len({k for _m, _n, k in shapes}) != 1:
        return _fill_stats(stream_k_fill([k // K_BLOCK for m, n, k in shapes
                                          for _ in range((n // tm) * ceil_div(m, tn))], sms))
    kbs = shapes[0][2] // K_BLOCK
    waves, tail = divmod(n_tiles, sms)
    if waves == 0:
        return _fill_stats_equal(kbs, n_tiles, sms)
    if not tail:
        return sms, float(waves * kbs)
    if sms // tail < 2:
        return sms, waves * kbs + _fill_stats_equal(kbs, tail, sms)[1]
    s, cuts = _tail_cuts(kbs, min(sms // tail, kbs))
    return sms, float(waves * kbs + max(segment_load(cuts[q + 1] - cuts[q], q, s) for q in range(s)))


@_cached_plan
def mixed_group_plan(shapes, sms: int, tile=(256, 128), pairs: bool = False, waves: bool = True) -> dict:
    """Host schedule of the grouped mixed-input kernel (one persistent CTA per SM):
    `mixed_group_wave_plan` where it applies and `waves` (exp. 102), else the stream-K plan
    below.

    Tiles: per group g, B_g's rows in blocks of tile[0] (nb) x A_g's rows in blocks of
    tile[1] (m0; the last one ragged), ordered (g, nb, m0) so that CTAs running at one time
    share B_g blocks and A_g in L2.  Work: the tiles' k-blocks in that order, cut into
    contiguous CTA ranges (stream-K) by the smallest per-CTA budget under which a greedy
    fill needs at most `sms` CTAs.  A split tile's k-block-0 segment is its CTA's last work
    (the finisher, charged STREAM_K_SEGMENT_KB k-blocks per partial it adds), every other
    segment is its CTA's first (a writer, charged one partial); segment s of a tile lies on
    CTA c + s, so writers never wait (mixed.py).

    `pairs` (split-K pairs, cluster (2, 1)): tile t on CTAs 2t (k-blocks [0, KB / 2), s = 0)
    and 2t + 1 ([KB / 2, KB), s = 1), ns = 2, any number of CTAs.

    Returns dict: segs (rows g, nb, m0, kb0, kb1, s, ns), seg_offs (ctas + 1: CTA c runs
    segs[seg_offs[c]:seg_offs[c + 1]]), row0 (A16 row of each group's row 0: groups padded
    to tile[1] rows), a16_rows, ctas."""
    tiles, row0, r = _group_tiles(shapes, tile)
    kbs_of = [shapes[g][2] // K_BLOCK for g, _nb, _m0 in tiles]
    if pairs:
        rows = [(g, nb, m0, s * kbs // 2, (s + 1) * kbs // 2, s, 2) for (g, nb, m0), kbs in zip(tiles, kbs_of)
                for s in (0, 1)]
        return {"segs": rows, "seg_offs": list(range(len(rows) + 1)), "row0": row0, "a16_rows": r,
                "ctas": len(rows)}

    plan = mixed_group_wave_plan(shapes, sms, tile) if waves else None
    if plan is not None:
        return plan
    rows, offs = [], [0]
    for segs in _fill_rows(tiles, kbs_of, sms):
        rows += segs
        offs.append(len(rows))
    return {"segs": rows, "seg_offs": offs, "row0": row0, "a16_rows": r, "ctas": len(offs) - 1}


SKINNY_MAX_M = 16  # dual M / grouped max M_g up to this: the mma.sync kernels on sm_90a (skinny.py)


def sm90_dual_skinny(shape, static_b: bool | None = None) -> KernelConfig:
    """The rule's skinny dual config (`_sm90_dual_skinny_rule`); with `static_b` (None:
    STATIC_B, NVFP4_STATIC_B=1) the same config with `pdl`: the next kernel let in after the main
    loop ("loop") where the launch has at most SKINNY_PDL_LOOP_MAX_CTAS CTAs or splits K over
    clusters, after the partial sums ("sums") where it has more than SKINNY_PDL_SUMS_MIN_CTAS;
    in between, no pdl (exp. 170)."""
    cfg = _sm90_dual_skinny_rule(shape)
    _m, n, _k, l = shape
    if STATIC_B if static_b is None else static_b:
        ctas = (n // cfg.mma_tile_mn[0]) * l
        if cfg.k_split > 1 or ctas <= SKINNY_PDL_LOOP_MAX_CTAS:
            cfg = replace(cfg, pdl="loop")
        elif ctas > SKINNY_PDL_SUMS_MIN_CTAS:
            cfg = replace(cfg, pdl="sums")
    return cfg


def _sm90_dual_skinny_rule(shape) -> KernelConfig:
    """sm_90a dual GEMM for M <= 16 (nvfp4gemm/sm90/dual_skinny.py): 16 rows of B1 / B2 per
    CTA, 4 warps splitting K (2 for 16 A rows at K <= 4096 or 529-1056 CTAs: exps. 156, 159;
    4 with 3 stages for 16 A rows in one wave of at most one CTA per SM from K 2048: exp. 164;
    clusters of 2 CTAs splitting K where even that is at most one CTA per SM, from K 5120:
    exp. 165),
    A rows held 8 (M <= 8) or 16.  Exp. 42 (before the word decode): best or within 2% of best of
    the skinny variants timed (16 / 32 rows, 2 / 4 / 8 warps, 2-6 stages) on every shape;
    against the swap_ab kernel (H200, 2026-11-21, kernel-only, notes/sm90.md exp. 42):
    1x4096x7168 26.4 -> 19.8 us, 8x1024x4096 17.1 -> 9.8, 1x28672x8192 138.8 -> 99.4,
    1x14336x4096 40.8 -> 35.7, 16x4096x7168 26.5 -> 23.2, 16x28672x8192 139.6 -> 117.1.
    Stages: 3 cp.async stages for 8 A rows, 2 for 16 (more shared memory per CTA costs
    resident CTAs; ab2 measured 3-6% faster than ab3 for the 16-row tile).  Exp. 156 (H100,
    2026-11-26, 23 shapes re-swept after the word decode): with 16 A rows and K <= 4096, 2
    warps and 3 stages -- 0.874-1.009x on 11 shapes of N 2048-28672, K 1024-4096 (e.g.
    16x12288x3072 34.4 -> 30.1 us, 16x7168x2048 18.1 -> 16.1); at K 7168-8192 it ran
    0.97-1.09x, and with 8 A rows 1.05-1.25x, so those keep 4 warps; not run on an H200.
    Exp. 159 (H100, 2026-11-26): with 16 A rows, where the 4-warp CTAs (4 per SM: 123
    registers) would need a second wave and 2-warp ones with 2 stages (8 per SM) fit in one
    -- 528 < N / 16 x L <= 1056 -- 2 warps and 2 stages, at any K: 0.85-0.95x exp. 156's rule on 13 shapes
    (16x14336x4096 45.0 -> 39.6 us, 16x12288x8192 68.5 -> 58.1); at 512 and 528 CTAs it lost
    (1.013-1.068x).  Exp. 164 (H100, 2026-11-26): with 16 A rows, at most one CTA per SM
    (N / 16 x L <= 132: one wave of few warps, each with a long serial chain of chunks; exp.
    161 found these shapes load-latency-bound) and K >= 2048, 4 warps and 3 stages -- 0.76-0.95x
    the picks before on 17 shapes of N 512-2048, K 2048-8192, M 9-16 (16x512x4096 13.1 -> 10.0
    us, 16x896x4096 13.3 -> 10.1, 16x2048x7168 18.3 -> 16.2), 8 of them new shapes that checked
    the term; 3 stages ran 0.92-1.02x 4 stages (faster on 15 of 17); at K 1536 4 warps lost
    1.01-1.02x; with 8 A rows 4 stages lost on 7 of 9 one-wave shapes, so 8 A rows keep the rule.
    Exp. 165 (H100, 2026-11-26): where even two CTAs per (bx, l) fill at most one per SM (N / 16
    x L <= 66) and K >= 5120, a cluster of 2 CTAs splits K (k_split 2, 4 warps, 3 stages each,
    partial sums in rank 0's shared memory): 0.73-0.955x on 17 of 18 shapes of 8-64 CTAs, K
    5120-16384, 1.023x on 8x1024x5120 (1x896x14336 18.5 -> 15.4 us, 16x640x8192 14.5 -> 12.7,
    1x512x16384 19.1 -> 14.0); at K 4096 it gained 1-4.5% at 16-32 CTAs and lost 4-5.5% at 64;
    at K 2048 it lost everywhere, as did 2 CTAs per cluster at 128 CTAs (1.05-1.45x); 4 and 8 CTAs
    per cluster won on three tiny grids only and lost up to 10x on large ones."""
    m, n, k, l = shape
    tn = 8 if m <= 8 else 16
    ctas = (n // 16) * l
    if 2 * ctas <= SM_COUNT["sm_90a"] and k >= SKINNY_K_SPLIT_MIN_K:
        return KernelConfig("dual", "sm_90a", (16, tn), skinny=True, k_warps=4, ab_stages=3, k_split=2)
    if tn == 16:
        if ctas <= SM_COUNT["sm_90a"] and k >= SKINNY_DUAL_ONE_WAVE_MIN_K:
            return KernelConfig("dual", "sm_90a", (16, tn), skinny=True, k_warps=4, ab_stages=3)
        if SKINNY_DUAL_CTAS_PER_SM[4] * SM_COUNT["sm_90a"] < ctas <= SKINNY_DUAL_CTAS_PER_SM[2] * SM_COUNT["sm_90a"]:
            return KernelConfig("dual", "sm_90a", (16, tn), skinny=True, k_warps=2, ab_stages=2)
        if k <= SKINNY_DUAL_TWO_WARP_MAX_K:
            return KernelConfig("dual", "sm_90a", (16, tn), skinny=True, k_warps=2, ab_stages=3)
    return KernelConfig("dual", "sm_90a", (16, tn), skinny=True, k_warps=4, ab_stages=3 if tn == 8 else 2)


# Exp. 170 (H100, 2026-11-27): callers that promise no earlier kernel of the stream writes B1 / B2 or
# their scales (a model's weights) -- NVFP4_STATIC_B=1 -- get the skinny dual kernel with programmatic
# dependent launch: B's first ring stages load before griddepcontrol.wait.  In CUDA graphs of 16 such
# calls back to back, letting the next kernel in after the main loop ran 0.83-0.89x the plain launch
# per call at <= 66 CTAs and on every K-split launch (64-128 CTAs), but 1.03-1.24x at 80-256 CTAs of
# 4 warps (the next grid's CTAs land beside the last ones of this grid); letting it in after the
# partial sums ran 0.95-1.0x on every launch of more than 132 CTAs measured (160-896, H100 and
# H200), 0.91-0.94x at 80-112 CTAs, but anywhere from 0.93 to 1.30x at 128 CTAs of 4 warps (two
# GPUs, runs disagreeing): so "loop" up to SKINNY_PDL_LOOP_MAX_CTAS CTAs or with a K split, "sums"
# above SKINNY_PDL_SUMS_MIN_CTAS, and the plain launch in between.
_STATIC_B_ENV = os.environ.get("NVFP4_STATIC_B", "0").strip() or "0"
if _STATIC_B_ENV not in ("0", "1"):
    raise ValueError(f"NVFP4_STATIC_B must be 0 or 1, got {_STATIC_B_ENV!r}")
STATIC_B = _STATIC_B_ENV == "1"
SKINNY_PDL_LOOP_MAX_CTAS = SM_COUNT["sm_90a"] // 2
SKINNY_PDL_SUMS_MIN_CTAS = SM_COUNT["sm_90a"]
PDL_POINTS = ("", "loop", "sums")

# exp. 164: the dual skinny rule's one-wave term (16 A rows, <= one CTA per SM: 4 warps, 3 stages)
# from this K (at K 1536, 3 chunks per warp, 4 warps lost 1.01-1.02x)
SKINNY_DUAL_ONE_WAVE_MIN_K = 2048
# exp. 165 (dual) and 168 (grouped, every K_g): the skinny rules' K split over 2-CTA clusters (<= 66
# CTAs before the split) from this K
SKINNY_K_SPLIT_MIN_K = 5120
SKINNY_DUAL_TWO_WARP_MAX_K = 4096  # exp. 156: the dual skinny rule's 2-warp CTAs (16 A rows) up to this K
# Exp. 159: resident 16x16 dual skinny CTAs per SM by warps per CTA (2 stages; ptxas: 123 registers,
# so 4 CTAs of 128 threads or 8 of 64 fill the 64K-register file)
SKINNY_DUAL_CTAS_PER_SM = {4: 4, 2: 8}


def group_skinny_ok(shape) -> bool:
    """Whether the sm_90a rule runs a grouped shape on the skinny kernel (every M_g <= SKINNY_MAX_M,
    every N_g % 16 == 0): `default_config` and the dispatcher's `any_m_tile` alike."""
    return max(m for m, _n, _k in shape) <= SKINNY_MAX_M and all(n % 16 == 0 for _m, n, _k in shape)


def sm90_group_skinny(shape) -> KernelConfig:
    """sm_90a grouped GEMM with every M_g <= 16 (MoE decode; nvfp4gemm/sm90/grouped_skinny.py):
    32 rows of B_g per CTA (two m16 row groups: the per-warp work of the dual kernel's 16 rows
    of B1 and B2) when that still gives 2 CTAs per SM (exp. 168f), else 16, and 64 at short K with many CTAs
    (exp. 155); 2 warps (32 rows, exp. 151; 1 at K_g <= 2048, exp. 154) or 4
    (16 rows) splitting K; A rows held 8 (every M_g <= 8) or 16; 3 cp.async stages, 2 for the
    32 x 16 tile.  H200 (4 warps),
    2026-11-21, kernel-only (notes/sm90.md exp. 43): g8 x M 1, N 4096, K 7168 55.8 us (16
    rows 63.5; the grouped swap kernel 66.3); g1 x M 1, N 256, K 7168 10.0 (32 rows 12.4,
    swap 19.3); with the word decode, g8 x M 16 59.6 (32x16 ab2; ab3 66.7, 16 rows 73.2),
    M 3 / 16, N 1024, K 7168 12.7 (16x16 ab3; ab2 15.3, 32 rows 14.1).  Exp. 151 (H100,
    2026-11-26, MaskedGroupedGemm at capacity 8 / 16, 13 shapes): 2 warps instead of 4 for the
    32-row tiles, 0.84-0.96x at K 1024-3072, 0.97x at K 4096, 0.99-1.0x at K 7168, 1.02x on
    one small launch (g4 N2048 K2048, 8.7 us); not run on an H200.  Exp. 154 (H100, 2026-11-26,
    MaskedGroupedGemm at capacity 8 / 16, counts from 1, 12 cases of 8-256 groups): 1 warp and 2
    stages for the 32-row tiles where every K_g <= 2048 -- 0.83-0.975x at K 768-2048 (e.g. 256
    experts of N 2048 K 768: 128 -> 106 us; g8 N7168 K2048 38.0 -> 34.5), while at K 7168 it ran
    1.007-1.03x (K 4096 not measured: 2 warps kept); not run on an H200.  Exp. 155 (H100,
    2026-11-26, the same benchmark): 64 B rows per 1-warp CTA where the A tile has 16 rows, every
    K_g <= 2048 and there are >= 3 such CTAs per SM -- the A rows' decode, a third of the 32-row
    CTA's, is shared by twice the B rows: 0.92-0.985x on 8 cases (256 experts of N 2048 K 768:
    107 -> 98 us); with 8 A rows 1.03-1.05x, at K 4096-7168 0.99-1.12x, and with 1.9 CTAs per
    SM (g8 N2048 K2048) 1.33x, so those keep 32 rows; not run on an H200.  Exp. 168 (H100,
    2026-11-27, the kernel alone on 1-16 groups, M_g 1 / 16): (1) the 1-warp CTAs only from 8
    32-row CTAs per SM (sum N_g / 32 >= 1056), or 4 where every K_g <= 1024; below, down to (3)'s
    bound, 2 warps and 2 stages (these numbers include pairs of 132-263 CTAs that (3) now takes): 0.77-1.0x on 27 (shape, M_g) pairs of 256-1024 32-row CTAs (e.g. 4 x N 2048 K 2048 16.1 -> 12.3
    us), 0.98-1.0x at 1280 (left to 1 warp), 1.05-1.12x at 1792-2048; the check on 14 new
    (shape, M_g) pairs ran 0.75-0.95x on 12, but 1.02-1.07x at K 512-1024 with 672-864 CTAs
    (hence the short-K bound; its check: notes/sm90.md exp. 168); (2) 16-row CTAs (sum N_g / 16 <= 66) at
    every K_g >= 5120 split K over 2-CTA clusters (the dual rule's, exp. 165): 0.74-0.94x on 17
    of 18 shapes (1 x N 512 K 16384 16.4 -> 12.1 us), 0.998x on one, and 0.80-0.95x on 11 of 12
    check pairs (1.002x on one); at K 4096 0.955-1.024x, at 128-256 CTAs 0.98-1.35x; (3, exp.
    168f) with 1-2 32-row CTAs per SM (132 <= sum N_g / 32 < 264), 16-row CTAs of 4 warps and 2
    stages instead: 0.77-1.04x on 16 fit pairs (geomean 0.887), 0.735-1.002x on 16 check pairs
    (geomean 0.893; 2 x N 2560 K 7168 M_g 16 27.6 -> 20.3 us).  Not run on an H200."""
    sms = SM_COUNT["sm_90a"]
    tn = 8 if max(m for m, _, _ in shape) <= 8 else 16
    ctas32 = sum(n // 32 for _, n, _ in shape)  # (32-row CTAs the launch would have)
    if ctas32 < sms:
        # 16-row CTAs; <= one 2-CTA cluster per SM at long K splits K (exp. 168, the dual rule's
        # exp. 165)
        split = 2 * sum(n // 16 for _, n, _ in shape) <= sms and min(k for _, _, k in shape) >= SKINNY_K_SPLIT_MIN_K
        return KernelConfig("group", "sm_90a", (16, tn), skinny=True, k_warps=4, ab_stages=3,
                            k_split=2 if split else 1)
    if ctas32 < SKINNY_32_ROWS_MIN_CTAS_PER_SM * sms:
        # (exp. 168f: 1-2 32-row CTAs per SM -- twice as many 16-row ones of 4 warps, 2 stages)
        return KernelConfig("group", "sm_90a", (16, tn), skinny=True, k_warps=4, ab_stages=2)
    if max(k for _, _, k in shape) <= SKINNY_ONE_WARP_MAX_K:
        if tn == 16 and sum(n // 64 for _, n, _ in shape) >= SKINNY_64_ROWS_MIN_CTAS_PER_SM * sms:
            # (exp. 155: one A decode per 64 B rows; N_g % 64 == 0 is a shape rule)
            return KernelConfig("group", "sm_90a", (64, tn), skinny=True, k_warps=1, ab_stages=2)
        short_k = max(k for _, _, k in shape) <= SKINNY_SHORT_K
        if ctas32 >= (SKINNY_ONE_WARP_MIN_CTAS_PER_SM_SHORT_K if short_k else SKINNY_ONE_WARP_MIN_CTAS_PER_SM) * sms:
            return KernelConfig("group", "sm_90a", (32, tn), skinny=True, k_warps=1, ab_stages=2)
        # (exp. 168: fewer 1-warp CTAs per SM keep too few loads in flight)
        return KernelConfig("group", "sm_90a", (32, tn), skinny=True, k_warps=2, ab_stages=2)
    return KernelConfig("group", "sm_90a", (32, tn), skinny=True, k_warps=2, ab_stages=2 if tn == 16 else 3)


# Exp. 168f: the grouped skinny rule's 32-row CTAs from this many per SM (H100: at 1-2 per SM, 16-row
# CTAs of 4 warps and 2 stages ran 0.74-1.04x; below 1 per SM the rule already takes 16 rows)
SKINNY_32_ROWS_MIN_CTAS_PER_SM = 2
SKINNY_ONE_WARP_MAX_K = 2048  # exp. 154: the grouped skinny rule's 1-warp CTAs up to this K_g
# Exp. 168: ... and from this many 32-row CTAs per SM (H100: below, 2-warp CTAs ran 0.75-1.0x), or
# from 4 per SM where every K_g <= SKINNY_SHORT_K (at 5-6.5 per SM and K 512-1024, 2 warps lost
# 1.02-1.07x)
SKINNY_ONE_WARP_MIN_CTAS_PER_SM = 8
SKINNY_ONE_WARP_MIN_CTAS_PER_SM_SHORT_K = 4
SKINNY_SHORT_K = 1024
# Exp. 155: 64 B rows per 1-warp CTA (16 A rows) where there are at least this many such CTAs
# per SM (H100: 3.9 per SM gained 3-3.5%, 1.9 lost 1.33x)
SKINNY_64_ROWS_MIN_CTAS_PER_SM = 3


def swap_mma_n(m: int) -> int:
    """MMA N (rows of A per tile) of an sm_90a swap_ab tile for M rows: the narrowest of 16,
    32, 64 that holds them (the wgmma on padding rows is on the critical path: doubling it
    added ~0.9 us per k-block, notes/sm90.md experiment 41), 64 beyond."""
    return 16 if m <= 16 else 32 if m <= 32 else 64


def _sm90_split(cfg: KernelConfig, tiles: int, k_blocks) -> KernelConfig:
    """split_k on when scheduler's plan splits these tiles on an H100/H200 (132 SMs)."""
    return replace(cfg, split_k=tiles > 0 and split_plan(tiles, SM_COUNT["sm_90a"], k_blocks)[2] > 1)


def _sm90_dual_pairs(cfg: KernelConfig, shape) -> KernelConfig:
    """sm_90a dual: when the split plan would split every tile exactly 2 ways (between a
    third and a half of a wave of tiles), run each tile's two units as a 2-CTA cluster that
    reduces through distributed shared memory instead of global memory (cluster_mn (2, 1);
    H200, 2026-11-21: 256x4096x7168 66.9 -> 63.7 us, 256x3072x4096 38.0 -> 35.3)."""
    k = shape[2]
    tiles = dual_tiles(cfg, shape)
    if tiles and split_plan(tiles, SM_COUNT["sm_90a"], k // K_BLOCK)[1:] == (0, 2):
        return replace(cfg, cluster_mn=(2, 1), split_k=True)
    return _sm90_split(cfg, tiles, k // K_BLOCK)


def sm90_group_ranked(shape) -> KernelConfig | None:
    """The sm_90a grouped stored-decode tile the cost model ranks first (128 x 256, 128 x 128,
    swap 256 x 64; None where N allows none of them), before the mixed-input rules."""
    cands = []
    if all(n % 256 == 0 for _, n, _ in shape):
        cands.append(_sm90_fill(KernelConfig("group", "sm_90a", (128, 256), mma_warpgroups=2,
                                             epi_tile_mn=(128, 32), rs_a=True), cap=4))
    if all(n % 128 == 0 for _, n, _ in shape):
        cands.append(_sm90_fill(KernelConfig("group", "sm_90a", (128, 128), mma_warpgroups=2,
                                             epi_tile_mn=(128, 32), rs_a=True), cap=4))
    if all(n % 256 == 0 for _, n, _ in shape):
        cands.append(_sm90_swap_ab("group"))
    return min(cands, key=lambda c: sm90_group_cost(c, shape)) if cands else None


def _sm90_group_pick(problem: str, shape, best: KernelConfig, dynamic_m: bool = False) -> KernelConfig:
    """The sm_90a grouped rule before exp. 107, given the cost ranking's stored-decode tile
    (`dynamic_m`: without exp. 99's two forms, whose split is searched per shape)."""
    # split_k compiled in even where the plan does not split: without it the grouped
    # kernel measured 2-9% slower on the three unsplit benchmark cases (H200, same run;
    # the dual kernel the other way round, 1-2% faster: notes/sm90.md experiment 26)
    mixed = None if best.swap_ab else _sm90_group_mixed_rule(shape)
    if mixed is not None:
        return mixed
    if not best.swap_ab and _sm90_group_wide_ok(shape):
        return sm90_group_mixed(tile=(128, 256))  # exp. 93
    if not best.swap_ab and not dynamic_m and _sm90_group_two_forms_ok(shape):
        return sm90_group_mixed_two_forms()  # exp. 99
    if not best.swap_ab and _sm90_group_mixed256_ok(shape):
        return sm90_group_mixed()  # exp. 100
    if best.swap_ab:
        max_m = max(m for m, _, _ in shape)
        mma_n = swap_mma_n(max_m)
        if 32 < max_m <= 64 and all(n >= MIXED64_MIN_N and k >= MIXED64_MIN_K for _, n, k in shape):
            return sm90_group_mixed(tile=(256, 64))
        # every group's M fits 16 / 32 rows: narrow the MMA N side (same tile count, so
        # the cost ranking holds; H200: g8 x M 8, N 4096, K 7168 81.0 -> 66.9 us, exp. 41)
        best = _sm90_swap_ab(problem, mma_n)
    return replace(best, split_k=True)


# The grouped mixed-input kernel's three-warpgroup form (exp. 107: 192 B_g rows x 128 A rows,
# one m64 rep per warpgroup, as the dual's exp. 86) where every N_g is a multiple of 192 (>=
# 3072), K_g >= 2048 and some M_g > 64 (the measured range), the pick before it is neither the two-form
# kernel, split-K pairs nor the 64-row form, and its modelled busiest CTA
# (`mixed_group_model_us`) is MIXED192_MARGIN under every other single-form mixed tile's.  The
# model's order of the four forms matched the measured one on all 9 shapes of the fit (H100,
# 2026-11-25, one process, 3 rounds: 192 / the pick before, 0.774-0.969 where it picks 192).
MIXED192_MARGIN = 0.95
MIXED192_MIN_N = 3072
MIXED192_MIN_K = 2048


def mixed_group_model_us(shape, tile) -> float:
    """The grouped mixed-input plan's busiest CTA (k-blocks with its stream-K charges,
    `plan_cta_loads`) times the form's k-block time (MIXED_MODEL_KB_US, fitted on the dual
    kernel: the grouped loop is the same)."""
    return MIXED_MODEL_KB_US[tuple(tile)] * mixed_group_plan_stats(_frozen(shape), SM_COUNT["sm_90a"], tuple(tile))[1]


# Exp. 108: the (128, 192) form (m64 x n192 wgmmas) takes the groups it runs for less
# (`form_groups`: 128 < M_g <= 192, 256 < M_g <= 384) from a pick made of the (256, 128) and
# wide (128, 256) forms -- alone or side by side --, alone where it takes every group, else
# beside the forms that keep theirs, wherever the forms' modelled busiest CTA
# (`forms_model_us`) is under the pick's.  Measured, H100, 2026-11-25: the (128, 192) form ran
# 0.793-0.815 of the wide form's time on the same plans (5 shapes, g6-8, N 4096-7168, K
# 2048-7168).
N192_PICKS = ((256, 128), (128, 256))


def forms_model_us(shape, tiles) -> float:
    """Modelled busiest CTA of the grouped mixed-input kernel in one form (tiles of one tile)
    or several side by side: the largest of each form's busiest CTA (`plan_cta_loads`) times
    its FORM_KB_US."""
    if len(tiles) == 1:
        return FORM_KB_US[tuple(tiles[0])] * mixed_group_plan_stats(_frozen(shape), SM_COUNT["sm_90a"], tuple(tiles[0]))[1]
    plan = mixed_group_forms_plan(shape, SM_COUNT["sm_90a"], tiles)
    bounds = [0] + plan["splits"] + [plan["ctas"]]
    loads = plan_cta_loads(plan)
    return max(FORM_KB_US[tuple(t)] * max(loads[a:b]) for t, a, b in zip(tiles, bounds, bounds[1:]))


def _sm90_group_n192_forms(shape, pick: KernelConfig) -> KernelConfig | None:
    pick_tiles = pick.forms or (tuple(pick.mma_tile_mn),)
    if not pick.a_prepass or pick.cluster_mn != (1, 1) or not set(pick_tiles) <= set(N192_PICKS):
        return None
    parts = form_groups(shape, MULTI_FORM_TILES)
    used = tuple(t for t, gs in zip(MULTI_FORM_TILES, parts) if gs)
    if (128, 192) not in used:
        return None
    cfg = sm90_group_mixed(tile=used[0]) if len(used) == 1 else sm90_group_mixed_forms(used)
    if not fits(cfg, shape):
        return None
    if forms_model_us(shape, used) >= forms_model_us(shape, pick_tiles):
        return None
    return cfg


WIDTH_FORMS = 3  # the most A widths `width_forms` takes (more lost: exp. 112)


def width_forms(shape) -> tuple:
    """Exp. 112: up to WIDTH_FORMS tiles of FORM_TILES that pad the groups least: the set with the
    lowest total `_form_group_cost` of every group in its cheapest tile of the set (N_g whole
    tiles of its B rows), fewer forms on ties, in `form_order`; () where some group fits none.
    (Each group's own cheapest tile rounds M_g up to a multiple of 16; measured, more forms than
    three cost more than their padding saves: g8 N7168 K2048 with five forms 1.023 of the
    three-form pick before, with the best three 0.945.)"""
    best = []
    for m, n, k in shape:
        fit = [t for t in FORM_TILES if n % t[0] == 0]
        if not fit:
            return ()
        best.append(min(fit, key=lambda t: (_form_group_cost((m, n, k), t), form_order(t))))
    cands = sorted(set(best), key=form_order)

    def total(tiles):
        costs = [min((_form_group_cost(sh, t) for t in tiles if sh[1] % t[0] == 0), default=None) for sh in shape]
        return None if None in costs else sum(costs)

    pick = None
    for size in range(1, min(WIDTH_FORMS, len(cands)) + 1):
        for tiles in itertools.combinations(cands, size):
            c = total(tiles)
            if c is not None and (pick is None or c < pick[0] * (1 - 1e-9)):
                pick = (c, tiles)
    return pick[1] if pick else ()


# Exp. 112: the grouped mixed-input kernel in the forms `width_forms` gives (A tiles 64-256 rows
# in steps of 16, up to WIDTH_FORMS forms side by side) in place of a mixed-input pick of the
# other rules, where the forms' modelled busiest CTA (`forms_model_us`) is WIDTHS_MARGIN under
# the pick's.  Since exp. 113 three widths are split by the window search (the water fill
# before): 42 of 604 grid shapes change pick, g8 N4096 K7168 among them (0.917 of its two
# forms, H100); of 5 check picks 4 at 0.862-0.996 and one 1.062 (model 0.970, at the margin).
# A margin of 0.95 would drop 33 of exp. 112's picks (measured 0.81-0.98 there): kept at 0.97.
WIDTHS_MARGIN = 0.97

# Callers whose grouped M_g change from call to call (an MoE layer) set NVFP4_DYNAMIC_M=1 before
# importing: the rule then stops before exp. 112's A widths, whose forms follow every M_g -- 200
# random g8 N4096 K7168 shapes (M_g 1-256) picked 86 distinct configs, each its own compile (~13 s
# on the CPU of CI), against 6 without them (3-6 for N 2048-14336; session 35).  Since session 36
# (exp. 119) it also skips the multi-form kernels (exps. 99 and 108), whose CTA split is searched
# per shape on the host: a custom_kernel call with new M_g then costs 1.3-1.9 ms of host time on
# H100 machines, not 5.0-5.4, for kernels 1.088x slower (geomean; 0.99-1.22 on 12 random g4-16
# shapes) -- the right trade where every call is a new shape.  CONFIG_MAP's entries (the
# leaderboard shapes) are the full rule's either way.
# NVFP4_DYNAMIC_M: "1" plans every grouped shape this way (DYNAMIC_M); "0" never; unset or "auto"
# (DYNAMIC_M_AUTO, exp. 139): the dispatcher plans a shape this way once its (N_g, K_g) structure
# has been planned for DYNAMIC_M_AFTER other M_g sets (`dispatch._m_churns`), as torch.compile
# marks a dim dynamic once it has changed.
_DYNAMIC_M_ENV = os.environ.get("NVFP4_DYNAMIC_M", "auto").strip().lower() or "auto"
if _DYNAMIC_M_ENV not in ("0", "1", "auto"):
    raise ValueError(f"NVFP4_DYNAMIC_M must be 0, 1 or auto, got {_DYNAMIC_M_ENV!r}")
DYNAMIC_M = _DYNAMIC_M_ENV == "1"
DYNAMIC_M_AUTO = _DYNAMIC_M_ENV == "auto"


def _sm90_group_widths(shape, pick: KernelConfig) -> KernelConfig | None:
    pick_tiles = pick.forms or (tuple(pick.mma_tile_mn),)
    if not pick.a_prepass or pick.cluster_mn != (1, 1) or not set(pick_tiles) <= set(FORM_KB_US):
        return None
    tiles = width_forms(shape)
    if not tiles or tiles == tuple(pick_tiles):
        return None
    cfg = sm90_group_mixed(tile=tiles[0]) if len(tiles) == 1 else sm90_group_mixed_forms(tiles)
    if not fits(cfg, shape) or not all(form_groups(shape, tiles)):
        return None
    if forms_model_us(shape, tiles) >= WIDTHS_MARGIN * forms_model_us(shape, pick_tiles):
        return None
    return cfg


def _sm90_group_mixed192_ok(shape, pick: KernelConfig) -> bool:
    if pick.forms or pick.cluster_mn == (2, 1) or (pick.a_prepass and pick.mma_tile_mn[1] == 64):
        return False
    if not all(n % 192 == 0 and n >= MIXED192_MIN_N and k >= MIXED192_MIN_K for _m, n, k in shape) \
            or max(m for m, _n, _k in shape) <= 64:  # (M_g <= 64: 128-row A tiles pad them 2x or more)
        return False
    others = [t for t in ((128, 128), (256, 128), (128, 256)) if all(n % t[0] == 0 for _m, n, _k in shape)]
    m192 = mixed_group_model_us(shape, (192, 128))
    return all(m192 < MIXED192_MARGIN * mixed_group_model_us(shape, t) for t in others)


def _sm90_dual_pick(shape) -> KernelConfig:
    """The sm_90a dual rule before exp. 111 for M > 64 (past the skinny and swap_ab rules)."""
    mixed = _sm90_mixed_rule(shape)
    if mixed is not None:
        return mixed
    stored = sm90_dual_tile_rule(shape)
    if stored.cluster_mn == (1, 1) and not stored.split_k and _sm90_wide_over_stored(shape):
        return sm90_dual_mixed_wide(shape)  # exp. 94
    if stored.cluster_mn == (2, 1) and _sm90_wide_pairs_over_stored_pairs(shape, stored):
        return sm90_dual_mixed_wide_pairs()  # exp. 106
    return stored


# Exp. 111: the dual mixed-input kernel's wide form with 192 A rows per tile (m64 x n192
# wgmmas), whole tiles or stream-K by its own plan, (a) in place of the wide form (whole, stream-K
# or split-K pairs) where 192-row tiles pad M less than 256-row ones (128 < M <= 192, ...), and (b)
# in place of another mixed-input form that is no split-K pair where its modelled time
# (`mixed_dual_model_us`) is MIXED_WIDE192_MARGIN under the pick's -- not over the narrow form's
# whole tiles.  H100, 2026-11-25, one process, 3 rounds, all correct: fit, (a) 0.789-0.843 on 7
# shapes (M 130-192, N 4096-14336, K 2048-7168; 2 of them against the wide pairs), (b)
# 192x2048x7168 0.937 (narrow stream-K before; modelled 0.87), 384x4096x7168 0.947 (wg3;
# 0.915); the three-warpgroup pairs of 160x3072x4096 kept (1.007).  Check, 19 grid shapes not
# used to fit (2 per kind of change): 17 at 0.819-0.984, and the two over the narrow form's
# whole tiles 1.014 / 1.028 (1152x768x4096, 576x1536x4096), which the rule then excluded.
MIXED_WIDE192_MARGIN = 0.95


def _sm90_dual_wide192(shape, pick: KernelConfig) -> KernelConfig | None:
    m, n, _k, l = shape
    if not pick.a_prepass or l != 1 or n % 64 or n < MIXED_MIN_N or m <= 128:
        return None
    w192 = sm90_dual_mixed_wide192(shape)
    if tuple(pick.mma_tile_mn) == (128, 256):
        return w192 if round_up(m, 192) < round_up(m, 256) else None
    if pick.cluster_mn != (1, 1) or (tuple(pick.mma_tile_mn) == (128, 128) and not pick.split_k):
        return None
    return w192 if mixed_dual_model_us(w192, shape) < MIXED_WIDE192_MARGIN * mixed_dual_model_us(pick, shape) else None


# Exp. 136: DYNAMIC_M's grouped pick past the skinny kernel, the device-scheduled mixed-input
# form (`sm90_group_mixed_dynamic`), whose one launch template serves every M_g.  None where no
# tile divides N_g (the host-planned rules then).  Exp. 140: its tile is the one of
# DEVICE_SCHEDULE_PICKS (256 B_g rows only where every N_g allows) with the least modelled time:
# FORM_KB_US per k-block x the busiest CTA's k-blocks as the device plan models them
# (`scheduler.device_busiest_kb`: whole tiles or its stream-K cuts).  H100, 36 random shapes (g
# 2-16, N 2048-14336, K 2048-7168, M_g up to 48-512), each timed in all three tiles: 1.008x the
# best tile (geomean, max 1.12; 32 best) against 1.019x (max 1.21; 29 best) for exp. 136's rule
# (waves x tile area, a guessed 1.1 weight on 128-row tiles, (256, 64) only where every M_g <= 64).
# Check on 30 other shapes: 1.005x the best (29 best, one loss of 1.165) against 1.036x (21 best);
# the new picks 0.970x the old ones' time (0.815-1.165, 10 of 30 changed).
DEVICE_SCHEDULE_PICKS = ((256, 128), (256, 64), (128, 128))
DEVICE_SCHEDULE_NARROW = tuple(t for t in DEVICE_SCHEDULE_PICKS if t[0] == 128)  # (some N_g not 256-row tiles)


def device_schedule_tile(shape) -> tuple | None:
    """The device-scheduled form's tile for a grouped shape, or None (module comment; the
    dispatcher's path for inputs with new M_g calls it on every such call)."""
    wide = True
    for _m, n, _k in shape:
        if n % 128:
            return None
        wide = wide and n % 256 == 0
    from nvfp4gemm.scheduler import device_busiest_kb  # (imports cutlass: not at module load)

    tiles = DEVICE_SCHEDULE_PICKS if wide else DEVICE_SCHEDULE_NARROW
    costs = device_busiest_kb(shape, tiles, K_BLOCK, SM_COUNT["sm_90a"])
    return tiles[min(range(len(tiles)), key=lambda i: FORM_KB_US[tiles[i]] * costs[i])]


def any_m_tile(shape) -> tuple | None:
    """The tile of the config NVFP4_DYNAMIC_M runs a grouped shape with, where that config's
    launch serves any M_g of its (N_g, K_g) (the dispatcher's family key, exps. 136, 138): the
    skinny kernel's (every M_g <= SKINNY_MAX_M; its CTAs cover N_g only and read M_g from the
    group table), else `device_schedule_tile`; None otherwise.  Cheap: called on every such call."""
    if group_skinny_ok(shape):
        return tuple(sm90_group_skinny(shape).mma_tile_mn)
    return device_schedule_tile(shape)


def launch_serves_any_m(cfg: KernelConfig) -> bool:
    """Whether an sm_90a grouped config's launch (its tables and grid) is independent of M_g,
    within its tile: the device-scheduled mixed form (exp. 136) and the skinny kernel (exp. 138)."""
    return cfg.arch == "sm_90a" and cfg.problem == "group" and (cfg.device_schedule or cfg.skinny)


def sm90_group_masked_picks(shape, expected_m=None, small=None) -> tuple:
    """The configs of a grouped call whose M_g are read on the GPU (nvfp4gemm/masked.py, exps.
    144-150; two run side by side), for buffers of `shape`'s M_g rows (the capacities); () where
    none serves.  Every capacity <= SKINNY_MAX_M: the skinny kernel's masked form (its launch
    covers N_g only; exp. 146).  Else the device-scheduled mixed form reading the counts itself
    (`masked`, exp. 145) with `device_schedule_tile` of the expected M_g (each within 1..its
    capacity; the capacities where None: the tile rule cannot see the device's M_g); and with
    `small` (exp. 147) the masked skinny kernel (first in the tuple) for the groups whose count is
    <= 16 rows at call time, the mixed form (`masked_above`) for the rest.  `small` None: on where every
    expected M_g is <= SKINNY_MAX_M (MoE decode steps in buffers sized for more), else off.
    H100 (exps. 147-148, the skinny launch on a side stream beside the mixed form), capacity 256:
    counts 1-16 / 0-8 run 0.66-0.79x the mixed form alone's GPU time, half of them <= 16
    0.88-1.05x, counts 1-256 1.03-1.06x and 17-256 1.02-1.04x (the skinny CTAs take SMs first);
    after exp. 149's pre-pass, counts 1-16 0.73-0.76x, 1-64 1.11-1.16x, 1-256 1.01-1.08x; with
    the mixed form on the side stream instead (exp. 150), counts <= 16 0.63-0.75x, 1-64
    1.08-1.16x, 1-256 1.03-1.04x, 17-256 1.01-1.04x."""
    if group_skinny_ok(shape):
        # (more groups than one launch's table: the wide table, up to WIDE_TABLE_GROUPS; exp. 153)
        wide = WIDE_TABLE_GROUPS if len(shape) > GROUPS_PER_LAUNCH else GROUPS_PER_LAUNCH
        return (replace(sm90_group_skinny(shape), masked=True, table_groups=wide),)
    shape_m = shape
    if expected_m is not None:
        if len(expected_m) != len(shape):
            raise ValueError(f"expected_m has {len(expected_m)} values for {len(shape)} groups")
        if small is None:
            small = all(int(e) <= SKINNY_MAX_M for e in expected_m)
        # (with the skinny launch, the mixed form sees only counts above SKINNY_MAX_M)
        low = SKINNY_MAX_M + 1 if small else 1
        shape_m = tuple((min(max(int(e), low), m), n, k) for e, (m, n, k) in zip(expected_m, shape))
    tile = device_schedule_tile(shape_m)
    if tile is None:
        return ()
    if small:
        # (the skinny tile for SKINNY_MAX_M-row groups: N_g % 128 == 0 here, so its B rows divide N_g)
        skinny = replace(sm90_group_skinny(tuple((SKINNY_MAX_M, n, k) for _m, n, k in shape)), masked=True)
        return skinny, sm90_group_mixed_dynamic(tile, masked=True, masked_above=skinny.mma_tile_mn[1])
    return (sm90_group_mixed_dynamic(tile, masked=True),)


def sm90_group_dynamic_pick(shape) -> KernelConfig | None:
    """DYNAMIC_M's device-scheduled config for a grouped shape, or None (module comment)."""
    tile = device_schedule_tile(shape)
    return None if tile is None else sm90_group_mixed_dynamic(tile)


def default_config(problem: str, arch: str, shape, dynamic_m: bool = False) -> KernelConfig:
    """The rule's config for a shape; `dynamic_m` (DYNAMIC_M, by `select_config`): grouped shapes
    past the skinny kernel run the device-scheduled form where a tile divides every N_g (exp.
    136), else the rule without exp. 112's A widths and the multi-form kernels (exp. 119)."""
    if arch == "sm_100a":
        if problem == "dual":
            m, n, _, _ = shape
            # 2-CTA MMA when M allows: each CTA loads half of every B tile.
            cg = 2 if m % 256 == 0 else 1
            tn = 128 if n % 128 == 0 else 64
            cfg = KernelConfig(problem, arch, (128 * cg, tn), cta_group=cg, cluster_mn=(cg, 1),
                               epi_tile_mn=(128, 32))
            cfg = _sm100_acc_stages(cfg)
            if cfg.acc_stages == 1 and tn == 128:
                # The dual GEMM's two 128-column accumulators leave no room for a second
                # buffer: halve N so the epilogue overlaps the next tile's mainloop.
                cfg = _sm100_acc_stages(replace(cfg, mma_tile_mn=(128 * cg, 64)))
            return _fill_stages(cfg, cap=6)
        # grouped (notes/sm100_group.md): C^T = B A^T on the 2-CTA MMA when every N allows
        # it; otherwise 128 x tn tiles over (M, N), 1-CTA.  Ragged M either way.
        if all(n % 256 == 0 for _, n, _ in shape):
            return _sm100_group_swap_ab()
        tn = 128 if all(n % 128 == 0 for _, n, _ in shape) else 64
        cfg = KernelConfig(problem, arch, (128, tn), epi_tile_mn=(128, 32))
        return _fill_stages(_sm100_acc_stages(cfg), cap=6)
    # sm_90a
    if problem == "dual":
        m, n, k, l = shape
        if m <= SKINNY_MAX_M and n % 16 == 0:
            return sm90_dual_skinny(shape)
        if m <= 64 and n % 128 == 0 and l == 1:
            # Decode-sized M: the swap_ab kernel (B1 / B2 in wgmma registers, the few A rows
            # on the MMA N side, 16 / 32 / 64 wide).  With N 16 or 32 it beat the 128x64 rule
            # on every shape measured (H200, 2026-11-21, notes/sm90.md experiments 40-41:
            # 16x4096x7168 40.2 -> 27.0 us, 16x28672x8192 234.5 -> 141.3, 32x2048x2048 20.7
            # -> 17.5, 16x512x7168 26.6 -> 20.7); with N 64 only where its work units run at
            # least 4 k-blocks (shorter ones lost 1-9%: fixed costs and split-K reduction).
            sw = sm90_dual_swap_ab(shape)
            if sw.mma_tile_mn[1] < 64 or \
                    k // K_BLOCK >= 4 * split_plan(dual_tiles(sw, shape), SM_COUNT[arch], k // K_BLOCK)[2]:
                return sw
        pick = _sm90_dual_pick(shape)
        return _sm90_dual_wide192(shape, pick) or pick  # exp. 111
    # grouped: decode-sized M_g (MoE decode) on the mma.sync kernel (faster than the swap_ab
    # kernel on 12 of 13 shapes timed, a tie on M_g 1..16 N 7168 K 2048; notes/sm90.md
    # experiments 43, 45); otherwise rank the legal tiles
    # by the cost model (128 x 256, 128 x 128, swap 256 x 64), 128 x 64 when N only allows that
    if group_skinny_ok(shape):
        return sm90_group_skinny(shape)
    if dynamic_m:
        dyn = sm90_group_dynamic_pick(shape)
        if dyn is not None:
            return dyn
    best = sm90_group_ranked(shape)
    if best is not None:
        pick = _sm90_group_pick(problem, shape, best, dynamic_m)
        if _sm90_group_mixed192_ok(shape, pick):
            return sm90_group_mixed(tile=(192, 128))  # exp. 107
        if dynamic_m:
            return pick
        pick = _sm90_group_n192_forms(shape, pick) or pick  # exp. 108
        return _sm90_group_widths(shape, pick) or pick  # exp. 112
    cfg = KernelConfig(problem, arch, (128, 64), mma_warpgroups=2, epi_tile_mn=(128, 32), rs_a=True,
                       split_k=True)
    return _sm90_fill(cfg, cap=4)


def shape_key(problem: str, shape):
    if problem == "dual":
        return tuple(int(x) for x in shape)
    return tuple((int(m), int(n), int(k)) for m, n, k in shape)


# The leaderboard benchmark cases.
DUAL_BENCHMARKS = [(256, 4096, 7168, 1), (512, 4096, 7168, 1), (256, 3072, 4096, 1), (512, 3072, 7168, 1)]
GROUP_BENCHMARKS = [
    tuple(zip([80, 176, 128, 72, 64, 248, 96, 160], [4096] * 8, [7168] * 8)),
    tuple(zip([40, 76, 168, 72, 164, 148, 196, 160], [7168] * 8, [2048] * 8)),
    tuple(zip([192, 320], [3072] * 2, [4096] * 2)),
    tuple(zip([128, 384], [4096] * 2, [1536] * 2)),
]
# The leaderboard test cases (correctness shapes).
DUAL_TESTS = [(1536, 512, 7168, 1), (256, 512, 256, 1), (3072, 1024, 1536, 1), (7168, 1024, 256, 1),
              (7168, 2304, 2048, 1), (4608, 384, 7168, 1), (7168, 384, 2304, 1), (512, 768, 7168, 1),
              (4096, 768, 512, 1)]
GROUP_TESTS = [tuple(zip(m, n, k)) for m, n, k in [
    ([96, 128], [128, 256], [256, 512]),
    ([256, 72], [512, 384], [256, 256]),
    ([128, 128], [128, 256], [512, 256]),
    ([80, 128, 256], [384, 256, 128], [256, 512, 256]),
    ([64, 72, 96], [128, 384, 512], [512, 512, 256]),
    ([64, 256, 128], [768, 128, 256], [512, 256, 512]),
    ([128, 128, 64], [256, 512, 512], [768, 256, 768]),
    ([128] * 4, [128] * 4, [512, 256, 512, 256]),
    ([40, 56, 384, 512], [512, 384, 256, 128], [256] * 4),
    ([512, 384, 256, 128], [256] * 4, [512, 768, 512, 768]),
]]

_D = {s: i for i, s in enumerate(DUAL_BENCHMARKS)}
_G = {s: i for i, s in enumerate(GROUP_BENCHMARKS)}

# One entry per (arch, problem, benchmark case).  Each line says why it departs from
# `default_config` (or that it does not).
CONFIG_MAP: dict[tuple[str, str, tuple], KernelConfig] = {
    # --- sm_100a dual --------------------------------------------------------------------
    # M=256: one 2-CTA pair covers all of M, so B1/B2 (the bulk of the HBM bytes) are read
    # once; N=64 keeps two TMEM accumulator stages and gives 64 pairs (128 CTAs) on 148 SMs.
    # Every pair re-reads the same A from L2 (16 of the ~30 KB a CTA loads per k-block):
    # cluster (2,2) multicasts A/SFA to two N-neighbours, ~21 KB per CTA per k-block.
    ("sm_100a", "dual", DUAL_BENCHMARKS[0]): replace(
        default_config("dual", "sm_100a", DUAL_BENCHMARKS[0]), cluster_mn=(2, 2)),
    # M=512: 2 M-pairs x 64 N-tiles = 128 pairs would be 1.7 waves; N=128 tiles give
    # 64 pairs (one wave) at the price of a single accumulator stage.  Cluster (4,1): both
    # M-pairs of an N column share one cluster, so B1/B2/SFB (2/3 of the k-block bytes) are
    # multicast: ~27 KB instead of ~36 KB read from L2 per CTA per k-block (notes/sm100_dual.md).
    ("sm_100a", "dual", DUAL_BENCHMARKS[1]): _fill_stages(KernelConfig(
        "dual", "sm_100a", (256, 128), cta_group=2, cluster_mn=(4, 1), acc_stages=1), cap=6),
    # 256x3072x4096: same reasoning as the first case (48 pairs in 24 clusters).
    ("sm_100a", "dual", DUAL_BENCHMARKS[2]): replace(
        default_config("dual", "sm_100a", DUAL_BENCHMARKS[2]), cluster_mn=(2, 2)),
    # 512x3072: 2 x 24 = 48 pairs of 256x128 (one partial wave) beats 96 of 256x64 (1.3
    # waves); cluster (4,1) multicasts B as above.
    ("sm_100a", "dual", DUAL_BENCHMARKS[3]): _fill_stages(KernelConfig(
        "dual", "sm_100a", (256, 128), cta_group=2, cluster_mn=(4, 1), acc_stages=1), cap=6),
    # --- sm_100a grouped: swap_ab on the 2-CTA MMA, 256 (over N) x 128 (over M) --------
    # One config for all four cases, so one compile serves them (shapes are run-time).
    # Pair tiles / 74 clusters (148 SMs) and padding of M (notes/sm100_group.md):
    # N=4096 K=7168 g=8: 16 N-blocks x 11 M-tiles = 176 tiles, 2.4 per cluster; HBM-bound
    #   on B (117 MB); 1-CTA 128x128 without swap needs 36 KB instead of 28 KB per CTA per
    #   k-block for the same 2.4 tiles per SM.
    ("sm_100a", "group", GROUP_BENCHMARKS[0]): _sm100_group_swap_ab(),
    # N=7168 K=2048 g=8: 28 x 13 = 364 tiles, 4.9 per cluster; M padding 1024 -> 1664 rows.
    ("sm_100a", "group", GROUP_BENCHMARKS[1]): _sm100_group_swap_ab(),
    # N=3072 K=4096 g=2 (M 192, 320): 12 x 5 = 60 tiles = 120 CTAs in one wave; M padded
    #   512 -> 640 (vs 768 for 256-row tiles over M without swap).
    ("sm_100a", "group", GROUP_BENCHMARKS[2]): _sm100_group_swap_ab(),
    # N=4096 K=1536 g=2 (M 128, 384): 16 x 4 = 64 tiles = 128 CTAs, no M padding.
    ("sm_100a", "group", GROUP_BENCHMARKS[3]): _sm100_group_swap_ab(),
    # --- sm_90a dual (default rule: 128x128, two consumer warpgroups) --------------------
    # M=256 x N=4096: the rule's 128x128 gives 64 tiles on 132 SMs; split-K halves each tile
    # (scheduler.split_plan: 128 units).  H200, 2026-11-21, kernel-only, same run: 67.3 us
    # vs 73.8 for 128 tiles of 128x64 and 109.9 unsplit (notes/sm90.md, experiment 22);
    # 63.7 with the pairs reduced in a 2-CTA cluster (the rule's cluster_mn (2, 1), exp. 24).
    # Then the rule gave it to the mixed-input kernel as split-K pairs: H100, 2026-11-24,
    # 51.0 vs 56.9 us for the 128x128 pairs (exp. 72); now to the wide form's pairs (64 tiles
    # of 64 columns x 256 A rows): 51.4 -> 46.9 us (H100, 2026-11-25, exp. 91).  512x4096 runs
    # the wide form whole (128 tiles, one wave): 87.1 -> 77.5 us against the (256, 128) form.
    **{("sm_90a", "dual", s): default_config("dual", "sm_90a", s) for s in DUAL_BENCHMARKS},
    # 256x3072x4096 (the rule's pick above): 128x96 (fused wgmma n = 192, two scale atoms
    # per B stage) gave 64 tiles split 2 ways over K: 37.5 us vs 41.3 for 128 tiles of 128x48
    # and 44.3 for 128x128 split (H200, 2026-11-21, exp. 22); 35.3 as 2-CTA cluster pairs
    # (exp. 24); the mixed-input split-K pairs tied it (H100, 2026-11-24, exp. 72); the narrow
    # form's 96 whole tiles 0.975 (exp. 76, pinned here then); the rule's narrow form
    # stream-K on 128 CTAs (the makespan model's pick), 0.958 of the whole tiles (exp. 85);
    # now the three-warpgroup form as split-K pairs (64 tiles of 96 columns, 64 clusters of 2
    # CTAs): 0.907 of the narrow form through custom_kernel (H100, 2026-11-25, exps. 86-87;
    # the same form stream-K 0.977).
    # 512x3072: the rule's mixed-input kernel, stream-K (96 tiles x 28 k-blocks in 132
    # ranges of 20-21): 80.6 us vs 83.2 for the 128x96 tiles pinned here before (128 tiles,
    # one wave; B in 16-code quarter tasks), H200, 2026-11-21, same run (exp. 66); now the
    # three-warpgroup form, 128 whole tiles of 96 columns: 0.880 of the stream-K (256, 128)
    # kernel through custom_kernel (H100, 74.7 -> 65.8 us, exp. 86).
    # --- sm_90a grouped: the rule ranks 128x256 / 128x128 / swap 256x64 by `sm90_group_cost`
    # (where the swap tile wins with every M_g in 33-64 it runs the mixed 256x64 form, exp. 90)
    # Kernel-only, H200, 2026-11-21, one run (notes/sm90.md, experiment 23), 128x256 /
    # 128x128 / swap: g8 N=4096 K=7168 155.9 / 193.8 / 185.8 us (128x256: one wave + 44
    # tail tiles split 3 ways); g8 N=7168 K=2048 105.8 / 125.4 / 116.3; g2 N=3072 K=4096
    # 45.9 (split 2) / 43.9 / 50.0; g2 N=4096 K=1536 29.5 (split 2) / 23.7 / 24.9.
    **{("sm_90a", "group", s): default_config("group", "sm_90a", s) for s in GROUP_BENCHMARKS},
    # The two 8-group cases take the rule's pick, the two-form grouped mixed-input kernel (A
    # decoded once by a pre-pass, B_g into wgmma registers, (256, 128) and (128, 256) tiles
    # side by side, host-made segments; exps. 69, 78, 99, 102).  History: both were pinned to
    # the (256, 128) form (H100, 2026-11-25, 0.938 / 0.969 of the 128x256 stored-decode kernel
    # the ranking picks); g8 N7168 K2048 moved to the two-form kernel (exp. 99: 0.923-0.944 of
    # that pin), g8 N4096 K7168 once the wave plan was in (exp. 102: 0.955-0.964 of it, where
    # under the stream-K plan it had run 1.009-1.095).
    # g2 N3072 K4096: the mixed-input kernel with 128-row tiles (120 tiles of 128 B_g rows x
    # 128 A rows, stream-K over 132 SMs; exp. 80).  H100, 2026-11-25, explicit configs, one
    # process, 3 rounds: 37.8-37.9 vs 38.6-38.7 us for the 128x128 stored-decode kernel
    # (0.981); ab_compare through custom_kernel (3 rounds x 30): 39.0-39.1 -> 38.2-38.4 us
    # (0.982).  Not a rule: three more shapes only (notes/sm90.md exp. 80).  Now exp. 112's A
    # widths (`width_forms`): M 320 as two 160-row tiles beside the 192-row one, 0.915 / 0.923 of
    # the 128 x 128 pin in two runs (H100, 2026-11-26; their model ties, so no rule picks them).
    ("sm_90a", "group", GROUP_BENCHMARKS[2]): sm90_group_mixed_forms(width_forms(GROUP_BENCHMARKS[2])),
}


def select_config(problem: str, arch: str, shape, dynamic_m: bool | None = None) -> KernelConfig:
    """The config for this shape: the CONFIG_MAP entry if there is one, else the rule
    (`dynamic_m`: for M_g that change every call; None: DYNAMIC_M)."""
    key = (arch, problem, shape_key(problem, shape))
    cfg = CONFIG_MAP.get(key)
    if cfg is None or not fits(cfg, key[2]):
        cfg = default_config(problem, arch, key[2], dynamic_m=DYNAMIC_M if dynamic_m is None else dynamic_m)
    return cfg
