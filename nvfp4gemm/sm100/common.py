"""Pieces shared by the sm_100a kernels (dual GEMM and grouped GEMM), as free functions.

Both kernels have the same warp roles, pipelines, shared-memory prologue, TMEM handshake,
scale-factor path and C store path; what differs (two GEMMs vs one, per-group descriptors,
swap_ab, multicast) stays in the kernel modules, which call these with what they need and get
back what they use (pipeline states included).  Nothing here reads a kernel's `self`.
Plus the device-side tensormap helpers the grouped kernel needs (descriptor pointers in
global memory, prefetch) and the persistent-grid sizes.
"""

from __future__ import annotations

import enum
import math

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.blackwell_helpers as sm100_utils
import cutlass.utils.blockscaled_layout as blockscaled_utils
from cutlass._mlir.dialects import llvm
from cutlass.cute.nvgpu import cpasync, tcgen05
from cutlass.cutlass_dsl import dsl_user_op
from cutlass.pipeline import pipeline_init_arrive

import configs
from configs import K_BLOCK, SF_VEC
from nvfp4gemm.scheduler import TileInfoPipeline

TENSORMAP_BYTES = 128  # one CUtensorMap

MMA_INST_PER_KBLOCK = 4  # tcgen05.mma kind::mxf4nvf4 has K = 64; a k-block is 256
SF_ATOM_MN = 32  # rows per TMEM scale-factor column group
SMEM_ALIGN = 1024  # alignment of every shared-memory operand buffer (128B-swizzle atoms)


class Warp(enum.IntEnum):
    """Warp roles of both kernels (6 warps, 192 threads per CTA)."""

    EPI0 = 0
    EPI1 = 1
    EPI2 = 2
    EPI3 = 3
    MMA = 4
    LOAD = 5


EPI_WARPS = (Warp.EPI0, Warp.EPI1, Warp.EPI2, Warp.EPI3)
THREADS_PER_CTA = 32 * len(Warp)


class Barrier(enum.IntEnum):
    """Named-barrier ids (0 is __syncthreads)."""

    EPILOGUE = 1  # the 4 epilogue warps, around each C store
    TMEM_ALLOC = 2  # epilogue + MMA warps, waiting for the TMEM pointer


# A/B e2m1 (two per byte), e4m3 scale factors, fp16 C, fp32 accumulators
AB_DTYPE = cutlass.Float4E2M1FN
SF_DTYPE = cutlass.Float8E4M3FN
C_DTYPE = cutlass.Float16
ACC_DTYPE = cutlass.Float32


def named_barriers():
    """(epilogue barrier, TMEM-allocation barrier): the same warp roles sync the same way."""
    epi = pipeline.NamedBarrier(barrier_id=int(Barrier.EPILOGUE), num_threads=32 * len(EPI_WARPS))
    tmem_alloc = pipeline.NamedBarrier(
        barrier_id=int(Barrier.TMEM_ALLOC), num_threads=32 * (len(EPI_WARPS) + 1))
    return epi, tmem_alloc


def sfb_mma_shape(config) -> tuple[int, int]:
    """MMA shape that SFB is loaded with: one CTA's M by N rounded up to the 128-row
    scale-factor atom (SFB is loaded per CTA, not per pair)."""
    return (config.mma_tile_mn[0] // config.cta_group, configs.round_up(config.mma_tile_mn[1], 128))


# ---------------------------------------------------------------- trace-time setup


def make_tiled_mmas(a_dtype, sf_dtype, cta_group, mma_inst_shape_mn, mma_inst_shape_mn_sfb,
                    cta_tile_mn):
    """(tiled_mma, tiled_mma_sfb, mma_tiler, mma_tiler_sfb, cta_tile_shape_mnk) of the
    K-major NVFP4 block-scaled MMA; the SFB one is 1-CTA (SFB loads per CTA)."""
    k_major = tcgen05.OperandMajorMode.K
    tiled_mma = sm100_utils.make_blockscaled_trivial_tiled_mma(
        a_dtype, k_major, k_major, sf_dtype, SF_VEC, cta_group, mma_inst_shape_mn)
    tiled_mma_sfb = sm100_utils.make_blockscaled_trivial_tiled_mma(
        a_dtype, k_major, k_major, sf_dtype, SF_VEC, tcgen05.CtaGroup.ONE, mma_inst_shape_mn_sfb)
    mma_inst_k = cute.size(tiled_mma.shape_mnk, mode=[2])
    assert mma_inst_k * MMA_INST_PER_KBLOCK == K_BLOCK, "k-block must be 4 MMAs"
    mma_tiler = (*mma_inst_shape_mn, K_BLOCK)
    mma_tiler_sfb = (*mma_inst_shape_mn_sfb, K_BLOCK)
    atom_thr = cute.size(tiled_mma.thr_id.shape)
    cta_tile_shape_mnk = (mma_tiler[0] // atom_thr, mma_tiler[1], K_BLOCK)
    assert cta_tile_shape_mnk[:2] == tuple(cta_tile_mn)
    return tiled_mma, tiled_mma_sfb, mma_tiler, mma_tiler_sfb, cta_tile_shape_mnk


def make_cluster_layouts(cluster_shape_mn, tiled_mma, tiled_mma_sfb):
    """(V, M, N, K) CTA coordinates inside the cluster (V = CTA within the MMA pair), for
    the MMA and for the 1-CTA SFB MMA."""
    vmnk = cute.tiled_divide(cute.make_layout((*cluster_shape_mn, 1)), (tiled_mma.thr_id.shape,))
    sfb_vmnk = cute.tiled_divide(
        cute.make_layout((*cluster_shape_mn, 1)), (tiled_mma_sfb.thr_id.shape,))
    return vmnk, sfb_vmnk


def make_staged_smem_layouts(tiled_mma, mma_tiler, a_dtype, c_dtype, c_layout, epi_tile,
                             num_ab_stage, num_c_stage):
    """Staged smem layouts (A, B, SFA, SFB, C) of one operand each; a kernel with two B
    operands uses the B and SFB layouts twice."""
    # (MMA, MMA_M, MMA_K, STAGE) swizzled e2m1 tiles
    a = sm100_utils.make_smem_layout_a(tiled_mma, mma_tiler, a_dtype, num_ab_stage)
    # (MMA, MMA_N, MMA_K, STAGE)
    b = sm100_utils.make_smem_layout_b(tiled_mma, mma_tiler, a_dtype, num_ab_stage)
    # (((32x4, RestM), (16x4, RestK)), MMA_M, MMA_K, STAGE)
    sfa = blockscaled_utils.make_smem_layout_sfa(tiled_mma, mma_tiler, SF_VEC, num_ab_stage)
    # (((32x4, RestN), (16x4, RestK)), MMA_N, MMA_K, STAGE)
    sfb = blockscaled_utils.make_smem_layout_sfb(tiled_mma, mma_tiler, SF_VEC, num_ab_stage)
    # (EPI_M, EPI_N, STAGE) fp16
    c = sm100_utils.make_smem_layout_epi(c_dtype, c_layout, epi_tile, num_c_stage)
    return a, b, sfa, sfb, c


def sf_tmem_columns(cta_tile_m, sfb_rows) -> tuple[int, int]:
    """TMEM columns of one SFA and one SFB copy (4 MMAs per k-block, 32 rows per column group)."""
    return ((cta_tile_m // SF_ATOM_MN) * MMA_INST_PER_KBLOCK,
            (sfb_rows // SF_ATOM_MN) * MMA_INST_PER_KBLOCK)


def tmem_alloc_columns(used, config) -> int:
    """Columns to allocate for `used` TMEM columns (a power of two >= 32), checked against
    the configs model so host-side fit checks and the kernel agree."""
    alloc = max(32, 1 << math.ceil(math.log2(used)))
    assert used == configs.sm100_tmem_columns(config), (
        f"TMEM columns {used} != configs model {configs.sm100_tmem_columns(config)}")
    assert alloc == configs.tmem_alloc_columns(used), (
        f"TMEM alloc {alloc} != configs model {configs.tmem_alloc_columns(used)}")
    assert alloc <= configs.TMEM_COLUMNS, f"TMEM {alloc} columns > {configs.TMEM_COLUMNS}"
    return alloc


# ---------------------------------------------------------------- host entry (__call__)


def tma_load_atom(make_atom, op, gmem, smem_layout_staged, tiler, tiled_mma, cluster_layout,
                  internal_type=None):
    """TMA load atom + coordinate tensor for one operand, and the bytes one stage lands."""
    smem_layout = cute.slice_(smem_layout_staged, (None, None, None, 0))
    kwargs = {} if internal_type is None else {"internal_type": internal_type}
    atom, tensor = make_atom(op, gmem, smem_layout, tiler, tiled_mma, cluster_layout.shape, **kwargs)
    return atom, tensor, cute.size_in_bytes(gmem.element_type, smem_layout)


def tma_load_ops(cluster_shape_mn, tiled_mma):
    """TMA load ops for A and SFA, B, SFB: multicast / 2-CTA variants from the cluster."""
    thr_id = tiled_mma.thr_id
    return (sm100_utils.cluster_shape_to_tma_atom_A(cluster_shape_mn, thr_id),
            sm100_utils.cluster_shape_to_tma_atom_B(cluster_shape_mn, thr_id),
            sm100_utils.cluster_shape_to_tma_atom_SFB(cluster_shape_mn, thr_id))


def tma_tx_bytes(stage_bytes, tiled_mma, expected) -> int:
    """Transaction bytes per stage at the leader's barrier (both CTAs of a pair signal it),
    checked against the tile-shape model: a wrong count hangs the pipeline."""
    tx = stage_bytes * cute.size(tiled_mma.thr_id.shape)
    assert tx == expected, f"tx bytes {tx} != TMA box bytes {expected}"
    return tx


def make_c_store_atom(mC, c_smem_layout_staged, epi_tile):
    """(EPI_M, EPI_N) TMA store of C: atom and coordinate tensor."""
    epi_smem_layout = cute.slice_(c_smem_layout_staged, (None, None, 0))
    return cpasync.make_tiled_tma_atom(
        cpasync.CopyBulkTensorTileS2GOp(), mC, epi_smem_layout, epi_tile)


def make_shared_storage(config, tile_ring_stages, c_dtype, c_smem_layout_staged, operands):
    """The kernel's SharedStorage struct: barriers, TMEM handle, tile ring and C buffers,
    then `operands` ((name, dtype, cosize) per staged operand buffer, in order), each
    SMEM_ALIGN-aligned.  Its size is asserted equal to the configs model."""
    align, mem = cute.struct.Align, cute.struct.MemRange
    fields = {
        "ab_mbar": mem[cutlass.Int64, 2 * config.ab_stages],
        "acc_mbar": mem[cutlass.Int64, 2 * config.acc_stages],
        "tile_mbar": mem[cutlass.Int64, 2 * tile_ring_stages],
        "tmem_dealloc_mbar": cutlass.Int64,
        "tmem_holding_buf": cutlass.Int32,
        # (TILE_INFO, RING) Int32 work-tile ring
        "tile_info": mem[cutlass.Int32, TileInfoPipeline.FIELDS * tile_ring_stages],
        # (EPI_M, EPI_N, STAGE)
        "sC": align[mem[c_dtype, cute.cosize(c_smem_layout_staged.outer)], SMEM_ALIGN],
    }
    for name, dtype, cosize in operands:
        fields[name] = align[mem[dtype, cosize], SMEM_ALIGN]
    storage = cute.struct(type("SharedStorage", (), {"__annotations__": fields}))
    model = configs.sm100_smem_bytes(config)
    assert storage.size_in_bytes() == model, (
        f"SharedStorage {storage.size_in_bytes()} B != configs model {model} B")
    return storage


def launch_persistent(kernel, cluster_shape_mn, num_clusters, stream):
    """Launch a persistent grid: (cluster M, cluster N, clusters) CTAs of THREADS_PER_CTA,
    one CTA per SM (TMEM and smem are sized for that)."""
    cl_m, cl_n = cluster_shape_mn
    kernel.launch(
        grid=(cl_m, cl_n, num_clusters),
        block=[THREADS_PER_CTA, 1, 1],
        cluster=(cl_m, cl_n, 1),
        stream=stream,
        min_blocks_per_mp=1,
    )


# ---------------------------------------------------------------- kernel prologue


def make_pipelines(storage, config, tile_ring_stages, tx_bytes, num_tma_producer,
                   cluster_layout_vmnk, tmem_alloc_barrier):
    """ab (TMA -> MMA), acc (MMA -> epilogue) and tile-ring (scheduler -> MMA + epilogue)
    pipelines and the TMEM allocator, barriers initialised by warp 0 and not yet synced:
    the caller must `pipeline_init_wait` before any warp uses them."""
    ab_pipeline = pipeline.PipelineTmaUmma.create(
        barrier_storage=storage.ab_mbar.data_ptr(),
        num_stages=config.ab_stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, num_tma_producer),
        tx_count=tx_bytes,
        cta_layout_vmnk=cluster_layout_vmnk,
        defer_sync=True,
    )
    # Each epilogue warp of both CTAs of a pair releases the leader's accumulator.
    acc_pipeline = pipeline.PipelineUmmaAsync.create(
        barrier_storage=storage.acc_mbar.data_ptr(),
        num_stages=config.acc_stages,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
        consumer_group=pipeline.CooperativeGroup(
            pipeline.Agent.Thread, len(EPI_WARPS) * config.cta_group),
        cta_layout_vmnk=cluster_layout_vmnk,
        defer_sync=True,
    )
    # Tile ring: the scheduler warp publishes, the MMA warp and 4 epilogue warps read.
    tile_ring = TileInfoPipeline.create(
        storage.tile_mbar.data_ptr(),
        storage.tile_info.get_tensor(cute.make_layout((TileInfoPipeline.FIELDS, tile_ring_stages))),
        num_stages=tile_ring_stages,
        num_consumer_warps=1 + len(EPI_WARPS),
    )
    tmem = utils.TmemAllocator(
        storage.tmem_holding_buf,
        barrier_for_retrieve=tmem_alloc_barrier,
        allocator_warp_id=int(Warp.EPI0),
        is_two_cta=config.cta_group == 2,
        two_cta_tmem_dealloc_mbar_ptr=storage.tmem_dealloc_mbar,
    )
    pipeline_init_arrive(cluster_shape_mn=tuple(config.cluster_mn), is_relaxed=True)
    return ab_pipeline, acc_pipeline, tile_ring, tmem


def swizzled_smem_tensor(field, composed_layout):
    """A staged e2m1 / fp16 buffer of SharedStorage with its swizzle."""
    return field.get_tensor(composed_layout.outer, swizzle=composed_layout.inner)


def acc_and_c_partitions(tiled_mma, mma_tiler, num_acc_buffers, mC_mnl, mma_tile_coord_v):
    """(tCtAcc_fake, tCgC): the TMEM accumulator layout (MMA, MMA_M, MMA_N, num_acc_buffers)
    on a null pointer, and this CTA's part of C per MMA tile
    (MMA, MMA_M, MMA_N, RestM, RestN, RestL)."""
    acc_shape = tiled_mma.partition_shape_C(mma_tiler[:2])
    tCtAcc_fake = tiled_mma.make_fragment_C(cute.append(acc_shape, num_acc_buffers))
    gC_mnl = cute.local_tile(mC_mnl, cute.slice_(mma_tiler, (None, None, 0)), (None, None, None))
    tCgC = tiled_mma.get_slice(mma_tile_coord_v).partition_C(gC_mnl)
    return tCtAcc_fake, tCgC


# ---------------------------------------------------------------- scheduler + TMA warp


def gmem_partition_a(thr_mma, mX_mkl, mma_tiler):
    """(MMA, MMA_M, MMA_K, RestM, RestK, RestL): an A-side operand (A or SFA) per MMA tile."""
    tiler = cute.slice_(mma_tiler, (None, 0, None))
    return thr_mma.partition_A(cute.local_tile(mX_mkl, tiler, (None, None, None)))


def gmem_partition_b(thr_mma, mX_nkl, mma_tiler):
    """(MMA, MMA_N, MMA_K, RestN, RestK, RestL): a B-side operand (B or SFB) per MMA tile."""
    tiler = cute.slice_(mma_tiler, (0, None, None))
    return thr_mma.partition_B(cute.local_tile(mX_nkl, tiler, (None, None, None)))


def multicast_places(cluster_layout_vmnk, cluster_layout_sfb_vmnk, cta_coord_vmnk, cta_coord_sfb_vmnk):
    """This CTA's (coordinate, layout) among the CTAs that split each multicast TMA box, for
    `tma_partition`: ((A and SFA: the CTAs of its cluster row, same M), (B: its cluster column),
    (SFB: its column of the SFB cluster layout)).  SFB's TMA atom is made for a 1-CTA MMA, so
    with cta_group 2 its column counts both CTAs of the pair even when the cluster is just the
    pair: each CTA loads half of every SFB box and multicasts it to both.  (A CTA partitioned
    as coordinate 0 of a 1-CTA layout would load the first half only, into both CTAs, and the
    second half of each SFB stage would never be written: the grouped kernel's bug found in
    session 54's review.)"""
    a = (cta_coord_vmnk[2], cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, 0, None, 0)).shape))
    b = (cta_coord_vmnk[1], cute.make_layout(cute.slice_(cluster_layout_vmnk, (0, None, 0, 0)).shape))
    sfb = (cta_coord_sfb_vmnk[1], cute.make_layout(cute.slice_(cluster_layout_sfb_vmnk, (0, None, 0, 0)).shape))
    return a, b, sfb


def tma_partition(tma_atom, cta_coord, cta_layout, sX, tCgX):
    """((atom_v, rest_v), STAGE) smem / ((atom_v, rest_v), RestMN, RestK, RestL) gmem."""
    return cpasync.tma_partition(
        tma_atom, cta_coord, cta_layout, cute.group_modes(sX, 0, 3), cute.group_modes(tCgX, 0, 3))


def tma_partition_sf(tma_atom, cta_coord, cta_layout, sSF, tCgSF):
    """`tma_partition` of a scale-factor operand, zero strides dropped (the SF atom
    broadcasts along K)."""
    s, g = tma_partition(tma_atom, cta_coord, cta_layout, sSF, tCgSF)
    return cute.filter_zeros(s), cute.filter_zeros(g)


@cute.jit
def tma_load_kblocks(ab_pipeline, ab_state, k_tile_cnt, loads):
    """Producer side of one tile's mainloop: per k-block acquire a stage (peeking at the
    next one), TMA every operand of `loads` into it, advance.  loads: per operand
    (atom, gmem ((atom_v, rest_v), RestK), smem ((atom_v, rest_v), STAGE), multicast mask
    or None, descriptor pointer or None).  Returns ab_state."""
    ab_state.reset_count()
    peek = cutlass.Boolean(1)
    if ab_state.count < k_tile_cnt:
        peek = ab_pipeline.producer_try_acquire(ab_state)
    for _k in cutlass.range(0, k_tile_cnt, 1, unroll=1):
        ab_pipeline.producer_acquire(ab_state, peek)
        bar = ab_pipeline.producer_get_barrier(ab_state)
        kc, stage = ab_state.count, ab_state.index
        for i in cutlass.range_constexpr(len(loads)):
            atom, gX, sX, mcast, desc = loads[i]
            cute.copy(atom, gX[(None, kc)], sX[(None, stage)],
                      tma_bar_ptr=bar, mcast_mask=mcast, tma_desc_ptr=desc)
        ab_state.advance()
        peek = cutlass.Boolean(1)
        if ab_state.count < k_tile_cnt:
            peek = ab_pipeline.producer_try_acquire(ab_state)
    return ab_state


def sfb_tile_coord(tile_n, cta_tile_n):
    """SFB's tile index along N: one 128-row SFB block serves two N=64 tiles."""
    return tile_n // 2 if cta_tile_n == 64 else tile_n


def finish_schedule(tile_ring, ring_state, ab_pipeline, ab_state, is_valid):
    """Publish the sentinel (is_valid False: no more work for the MMA and epilogue warps),
    then wait until the MMA warp has released every ab stage."""
    ring_state = tile_ring.publish(
        ring_state, cutlass.Int32(0), cutlass.Int32(0), cutlass.Int32(0), is_valid)
    ab_pipeline.producer_tail(ab_state)
    return ring_state


class Sm100BlockScaledKernel:
    """Static choices and trace-time setup shared by the sm_100a dual and grouped kernels
    (one tcgen05 NVFP4 MMA path: the dual issues it for B1 and B2, the grouped kernel per
    group).  Subclasses set PROBLEM ("dual" / "group"), NUM_SFB (scale-factor copies of B in
    TMEM: 2 for the dual's SFB1 / SFB2) and pass C's layout as the MMA sees it."""

    PROBLEM = ""
    NUM_SFB = 1

    def __init__(self, config, c_layout):
        if config.arch != "sm_100a" or config.problem != self.PROBLEM:
            raise ValueError(f"not an sm_100a {self.PROBLEM} config: {config}")
        self.cfg = config
        self.a_dtype, self.sf_dtype = AB_DTYPE, SF_DTYPE
        self.c_dtype, self.acc_dtype = C_DTYPE, ACC_DTYPE
        self.c_layout = c_layout
        self.use_2cta = config.cta_group == 2
        self.cta_group = tcgen05.CtaGroup.TWO if self.use_2cta else tcgen05.CtaGroup.ONE
        self.cluster_shape_mn = tuple(config.cluster_mn)
        # MMA tile (the CTA pair's with cta_group 2) and, for SFB, one CTA's M by N rounded
        # up to the 128-row scale-factor atom.
        self.mma_inst_shape_mn = tuple(config.mma_tile_mn)
        self.mma_inst_shape_mn_sfb = sfb_mma_shape(config)
        self.cta_tile_n = config.mma_tile_mn[1]
        self.num_ab_stage = config.ab_stages
        self.num_acc_stage = config.acc_stages
        self.num_c_stage = config.epi_stages
        self.tile_ring_stages = TileInfoPipeline.stages_for(config.acc_stages)
        self.epi_barrier, self.tmem_alloc_barrier = named_barriers()

    def _setup_attributes(self):
        """Tiled MMAs, tile shapes, cluster layouts and smem layouts (needs a jit context)."""
        (self.tiled_mma, self.tiled_mma_sfb, self.mma_tiler, self.mma_tiler_sfb,
         self.cta_tile_shape_mnk) = make_tiled_mmas(
            self.a_dtype, self.sf_dtype, self.cta_group, self.mma_inst_shape_mn,
            self.mma_inst_shape_mn_sfb, self.cfg.cta_tile_mn)
        self.cluster_layout_vmnk, self.cluster_layout_sfb_vmnk = make_cluster_layouts(
            self.cluster_shape_mn, self.tiled_mma, self.tiled_mma_sfb)
        self.num_mcast_ctas_a = cute.size(self.cluster_layout_vmnk.shape[2])
        self.num_mcast_ctas_b = cute.size(self.cluster_layout_vmnk.shape[1])

        em, en = self.cfg.epi_tile_mn
        self.epi_tile = (cute.make_layout(em), cute.make_layout(en))

        # One B and SFB layout serves every B operand (the dual's B1 and B2).
        (self.a_smem_layout_staged, self.b_smem_layout_staged, self.sfa_smem_layout_staged,
         self.sfb_smem_layout_staged, self.c_smem_layout_staged) = make_staged_smem_layouts(
            self.tiled_mma, self.mma_tiler, self.a_dtype, self.c_dtype, self.c_layout,
            self.epi_tile, self.num_ab_stage, self.num_c_stage)

        # TMEM columns: [accumulators of every stage][SFA][SFB] x NUM_SFB
        self.num_sfa_tmem_cols, self.num_sfb_tmem_cols = sf_tmem_columns(
            self.cta_tile_shape_mnk[0], self.mma_inst_shape_mn_sfb[1])

    def _tmem_sf_layouts(self, tCtAcc_fake, sfa_smem_layout_staged, sfb_smem_layout_staged):
        """TMEM layouts of SFA and SFB, and the columns where SFA and each SFB copy start
        (after the accumulators)."""
        acc_cols = tcgen05.find_tmem_tensor_col_offset(tCtAcc_fake)
        sfa_layout, sfb_layout = tmem_sf_layouts(
            self.tiled_mma, self.mma_tiler, sfa_smem_layout_staged, sfb_smem_layout_staged)
        cols = (acc_cols,) + tuple(acc_cols + self.num_sfa_tmem_cols + i * self.num_sfb_tmem_cols
                                   for i in range(self.NUM_SFB))
        # The layouts' own column extents match the per-operand counts used above.
        base = tCtAcc_fake.iterator
        for layout, ncols in ((sfa_layout, self.num_sfa_tmem_cols),
                              (sfb_layout, self.num_sfb_tmem_cols)):
            extent = tcgen05.find_tmem_tensor_col_offset(tmem_sf(base, 0, layout, self.sf_dtype))
            assert extent == ncols, f"scale-factor TMEM extent {extent} != {ncols} columns"
        return sfa_layout, sfb_layout, cols

    def tmem_columns(self, tCtAcc_fake) -> tuple[int, int]:
        """(columns used, columns allocated) of TMEM; checked against the configs model."""
        used = (tcgen05.find_tmem_tensor_col_offset(tCtAcc_fake)
                + self.num_sfa_tmem_cols + self.NUM_SFB * self.num_sfb_tmem_cols)
        return used, tmem_alloc_columns(used, self.cfg)

    def _load_atoms(self, mA, mBs, mSFA, mSFBs):
        """TMA load atoms of one GEMM's operands, each an (atom, TMA tensor): A's, one per B tensor
        (the dual's B1 and B2, the grouped kernel's B), SFA's, one per SFB tensor; built in that
        order, on the host (their descriptors are encoded from these tensors).  Sets
        `num_tma_load_bytes`, what all of them land in shared memory per stage."""
        tiled_mma = self.tiled_mma
        a_op, b_op, sfb_op = tma_load_ops(self.cluster_shape_mn, tiled_mma)
        make_a, make_b = cute.nvgpu.make_tiled_tma_atom_A, cute.nvgpu.make_tiled_tma_atom_B
        vmnk, sfb_vmnk = self.cluster_layout_vmnk, self.cluster_layout_sfb_vmnk
        a = tma_load_atom(make_a, a_op, mA, self.a_smem_layout_staged, self.mma_tiler, tiled_mma, vmnk)
        bs = [tma_load_atom(make_b, b_op, mB, self.b_smem_layout_staged, self.mma_tiler, tiled_mma, vmnk)
              for mB in mBs]
        sfa = tma_load_atom(make_a, a_op, mSFA, self.sfa_smem_layout_staged, self.mma_tiler, tiled_mma,
                            vmnk, internal_type=cutlass.Int16)
        sfbs = [tma_load_atom(make_b, sfb_op, mSFB, self.sfb_smem_layout_staged, self.mma_tiler_sfb,
                              self.tiled_mma_sfb, sfb_vmnk, internal_type=cutlass.Int16) for mSFB in mSFBs]
        stage_bytes = sum(nbytes for _atom, _tensor, nbytes in (a, *bs, sfa, *sfbs))
        self.num_tma_load_bytes = tma_tx_bytes(stage_bytes, tiled_mma, self._expected_tx_bytes())
        return a[:2], [b[:2] for b in bs], sfa[:2], [f[:2] for f in sfbs]

    def _load_partitions(self, thr_mma, thr_mma_sfb, cluster_layouts, cta_coords, a, bs, sfa, sfbs):
        """This CTA's TMA load partitions of one GEMM's operands, each (smem ((atom_v, rest_v),
        STAGE), gmem ((atom_v, rest_v), RestM|N, RestK, RestL)): A's, one per B, SFA's, one per SFB.
        a, sfa and each of bs, sfbs: (TMA atom, global tensor, shared tensor).  cluster_layouts:
        (vmnk, sfb vmnk); cta_coords: this CTA's coordinates in them (`multicast_places`)."""
        # (MMA, MMA_M|N, MMA_K, RestM|N, RestK, RestL) per operand; SFB's N rounded to 128
        tCgA = gmem_partition_a(thr_mma, a[1], self.mma_tiler)
        tCgBs = [gmem_partition_b(thr_mma, b[1], self.mma_tiler) for b in bs]
        tCgSFA = gmem_partition_a(thr_mma, sfa[1], self.mma_tiler)
        tCgSFBs = [gmem_partition_b(thr_mma_sfb, f[1], self.mma_tiler_sfb) for f in sfbs]
        # Multicast: this CTA's place among the CTAs that share its A (cluster row), B or SFB
        # (with the 2-CTA MMA, SFB's box is split over the pair).
        a_place, b_place, sfb_place = multicast_places(*cluster_layouts, *cta_coords)
        return (tma_partition(a[0], *a_place, a[2], tCgA),
                [tma_partition(b[0], *b_place, b[2], g) for b, g in zip(bs, tCgBs)],
                tma_partition_sf(sfa[0], *a_place, sfa[2], tCgSFA),
                [tma_partition_sf(f[0], *sfb_place, f[2], g) for f, g in zip(sfbs, tCgSFBs)])


# ---------------------------------------------------------------- MMA warp: TMEM and scale factors


def tmem_acc(tmem, acc_dtype, tCtAcc_fake):
    """Wait for the TMEM allocation; (base pointer, accumulator tensor on it)."""
    tmem.wait_for_alloc()
    acc_tmem_ptr = tmem.retrieve_ptr(acc_dtype)
    return acc_tmem_ptr, cute.make_tensor(acc_tmem_ptr, tCtAcc_fake.layout)


def sfb_tmem_for_odd_tile(acc_tmem_ptr, col, sfb_layout, sf_dtype, tile_n):
    """SFB (at TMEM column `col`) as an N=64 tile's MMA reads it: SFB holds 128 rows, odd
    N=64 tiles use its upper half (2 columns on)."""
    shift = cutlass.Int32((tile_n % 2) * 2)
    return tmem_sf(acc_tmem_ptr, col + shift, sfb_layout, sf_dtype)


def tmem_sf_layouts(tiled_mma, mma_tiler, sfa_smem_layout_staged, sfb_smem_layout_staged):
    """TMEM layouts of one SFA and one SFB copy (from one stage of their smem layouts)."""
    sfa_layout = blockscaled_utils.make_tmem_layout_sfa(
        tiled_mma, mma_tiler, SF_VEC, cute.slice_(sfa_smem_layout_staged, (None, None, None, 0)))
    sfb_layout = blockscaled_utils.make_tmem_layout_sfb(
        tiled_mma, mma_tiler, SF_VEC, cute.slice_(sfb_smem_layout_staged, (None, None, None, 0)))
    return sfa_layout, sfb_layout


def s2t_copy_and_partition(sSF, tSF, cta_group, sf_dtype):
    """tcgen05.cp (4x32x128b) of one scale-factor operand: smem source per stage, TMEM
    destination."""
    # (MMA, MMA_MN, MMA_K, STAGE)
    sSF_compact = cute.filter_zeros(sSF)
    # (MMA, MMA_MN, MMA_K)
    tSF_compact = cute.filter_zeros(tSF)
    atom = cute.make_copy_atom(tcgen05.Cp4x32x128bOp(cta_group), sf_dtype)
    tiled_copy = tcgen05.make_s2t_copy(atom, tSF_compact)
    thr_copy = tiled_copy.get_slice(0)
    # ((ATOM_V, REST_V), Rest_Tiler, MMA_MN, MMA_K, STAGE)
    src = tcgen05.get_s2t_smem_desc_tensor(tiled_copy, thr_copy.partition_S(sSF_compact))
    # ((ATOM_V, REST_V), Rest_Tiler, MMA_MN, MMA_K)
    dst = thr_copy.partition_D(tSF_compact)
    return tiled_copy, src, dst


def tmem_sf(acc_tmem_ptr, col, layout, sf_dtype):
    """A scale-factor tensor at TMEM column `col` (fp32 columns from the base)."""
    return cute.make_tensor(cute.recast_ptr(acc_tmem_ptr + col, dtype=sf_dtype), layout)


@cute.jit
def mma_kblocks(tiled_mma, ab_pipeline, ab_state, acc_pipeline, acc_state, k_tile_cnt, num_kblocks,
                tCrA, tCtSFA, s2t_copies, gemms):
    """MMA side of one tile's mainloop (leader CTA): acquire the accumulator stage, then per
    k-block wait for the ab stage (peeking at the next one), copy its scales smem -> TMEM,
    issue every GEMM of `gemms` per MMA k-block (they share A and SFA), release the stage;
    commit the accumulator.  s2t_copies: per scale operand (tcgen05.cp atom, smem source
    (..., STAGE), TMEM destination), SFA first.  gemms: per GEMM (accumulator (MMA, MMA_M,
    MMA_N), B fragment (MMA, MMA_N, MMA_K, STAGE), its SFB in TMEM (MMA, MMA_N, MMA_K)).
    Returns ab_state; the caller advances acc_state."""
    ab_state.reset_count()
    peek = cutlass.Boolean(1)
    if ab_state.count < k_tile_cnt:
        peek = ab_pipeline.consumer_try_wait(ab_state)
    acc_pipeline.producer_acquire(acc_state)
    tiled_mma.set(tcgen05.Field.ACCUMULATE, False)
    for _k in range(k_tile_cnt):
        ab_pipeline.consumer_wait(ab_state, peek)
        stage = ab_state.index
        s2t_coord = (None, None, None, None, stage)
        for i in cutlass.range_constexpr(len(s2t_copies)):
            atom, src, dst = s2t_copies[i]
            cute.copy(atom, src[s2t_coord], dst)
        for kb in cutlass.range(num_kblocks, unroll_full=True):
            kcoord = (None, None, kb, stage)
            sf_coord = (None, None, kb)
            tiled_mma.set(tcgen05.Field.SFA, tCtSFA[sf_coord].iterator)
            for g in cutlass.range_constexpr(len(gemms)):
                tCtAcc, tCrB, tCtSFB = gemms[g]
                tiled_mma.set(tcgen05.Field.SFB, tCtSFB[sf_coord].iterator)
                cute.gemm(tiled_mma, tCtAcc, tCrA[kcoord], tCrB[kcoord], tCtAcc)
            tiled_mma.set(tcgen05.Field.ACCUMULATE, True)
        ab_pipeline.consumer_release(ab_state)
        ab_state.advance()
        peek = cutlass.Boolean(1)
        if ab_state.count < k_tile_cnt:
            peek = ab_pipeline.consumer_try_wait(ab_state)
    acc_pipeline.producer_commit(acc_state)
    return ab_state


# ---------------------------------------------------------------- epilogue warps


def t2r_copy_and_partition(tidx, tCtAcc, tCgC, epi_tile, cta_tile_shape_mnk, c_layout, c_dtype,
                           acc_dtype, use_2cta):
    """tcgen05.ld tiled copy of one epilogue subtile, its TMEM source partition over all
    subtiles and stages, and the fp32 register fragment it fills."""
    atom = sm100_utils.get_tmem_load_op(
        cta_tile_shape_mnk, c_layout, c_dtype, acc_dtype, epi_tile, use_2cta)
    # (EPI_TILE_M, EPI_TILE_N, EPI_M, EPI_N, STAGE)
    tAcc_epi = cute.flat_divide(tCtAcc[((None, None), 0, 0, None)], epi_tile)
    tiled_t2r = tcgen05.make_tmem_copy(atom, tAcc_epi[(None, None, 0, 0, 0)])
    thr_t2r = tiled_t2r.get_slice(tidx)
    # (T2R, T2R_M, T2R_N, EPI_M, EPI_N, STAGE)
    tTR_tAcc = thr_t2r.partition_S(tAcc_epi)
    # (EPI_TILE_M, EPI_TILE_N, EPI_M, EPI_N, RestM, RestN, RestL)
    gC_epi = cute.flat_divide(tCgC[((None, None), 0, 0, None, None, None)], epi_tile)
    # (T2R, T2R_M, T2R_N, EPI_M, EPI_N, RestM, RestN, RestL)
    tTR_gC = thr_t2r.partition_D(gC_epi)
    # (T2R, T2R_M, T2R_N) fp32
    tTR_rAcc = cute.make_rmem_tensor(tTR_gC[(None, None, None, 0, 0, 0, 0, 0)].shape, acc_dtype)
    return tiled_t2r, tTR_tAcc, tTR_rAcc


def tmem_allocate(tmem, alloc_cols, acc_dtype, tCtAcc_fake):
    """Epilogue warps (warp EPI0 allocates): allocate `alloc_cols` TMEM columns and wait for
    the pointer; (base pointer, accumulator tensor on it)."""
    tmem.allocate(alloc_cols)
    return tmem_acc(tmem, acc_dtype, tCtAcc_fake)


def epilogue_smem_store(tidx, tiled_t2r, tTR_rC, sC, c_layout, c_dtype, acc_dtype):
    """(tiled_r2s, tRS_sC (R2S, R2S_M, R2S_N, STAGE), tRS_rC (R2S, R2S_M, R2S_N)): the
    fp16 registers of one subtile -> a C smem buffer, matched to the tcgen05.ld layout."""
    atom_r2s = sm100_utils.get_smem_store_op(c_layout, c_dtype, acc_dtype, tiled_t2r)
    tiled_r2s = cute.make_tiled_copy_D(atom_r2s, tiled_t2r)
    tRS_sC = tiled_r2s.get_slice(tidx).partition_D(sC)
    tRS_rC = tiled_r2s.retile(tTR_rC)
    return tiled_r2s, tRS_sC, tRS_rC


def epilogue_tma_partition(tma_atom_c, sC, tCgC, epi_tile):
    """(bSG_sC ((ATOM_V, REST_V), STAGE), bSG_gC_all ((ATOM_V, REST_V), EPI_M, EPI_N,
    RestM, RestN, RestL)): the C smem buffers and C's subtiles for the TMA store."""
    # (EPI_TILE_M, EPI_TILE_N, EPI_M, EPI_N, RestM, RestN, RestL)
    gC_epi = cute.flat_divide(tCgC[((None, None), 0, 0, None, None, None)], epi_tile)
    return cpasync.tma_partition(
        tma_atom_c, 0, cute.make_layout(1), cute.group_modes(sC, 0, 2), cute.group_modes(gC_epi, 0, 2))


def make_c_store_pipeline(num_c_stage):
    """Bulk-group pipeline of the C TMA stores (the 4 epilogue warps produce)."""
    return pipeline.PipelineTmaStore.create(
        num_stages=num_c_stage,
        producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 32 * len(EPI_WARPS)),
    )


def release_acc_stage(acc_pipeline, acc_state):
    """After a stage's last TMEM read: hand the accumulator back to the MMA warp (before
    the math and the store, so the next tile's MMAs overlap them)."""
    cute.arch.fence_view_async_tmem_load()
    with cute.arch.elect_one():
        acc_pipeline.consumer_release(acc_state)


@cute.jit
def store_c_subtile(tiled_r2s, tRS_rC, tRS_sC, c_buffer, epi_barrier, warp_idx, tma_atom_c,
                    bSG_sC, bSG_gC, sub, c_pipeline, num_c_stage, tma_desc_ptr):
    """fp16 registers -> smem buffer `c_buffer` -> TMA store of subtile `sub` (warp EPI0),
    at most num_c_stage stores in flight.  tma_desc_ptr: C descriptor in global memory, or
    None for the atom's own.  Returns the next buffer."""
    cute.copy(tiled_r2s, tRS_rC, tRS_sC[(None, None, None, c_buffer)])
    # Make the generic-proxy smem writes visible to the TMA (async proxy).
    cute.arch.fence_proxy(cute.arch.ProxyKind.async_shared, space=cute.arch.SharedSpace.shared_cta)
    epi_barrier.arrive_and_wait()
    if warp_idx == Warp.EPI0:
        cute.copy(tma_atom_c, bSG_sC[(None, c_buffer)], bSG_gC[(None, sub)],
                  tma_desc_ptr=tma_desc_ptr)
        c_pipeline.producer_commit()
        c_pipeline.producer_acquire()  # the next buffer's old store has read it
    epi_barrier.arrive_and_wait()
    return (c_buffer + 1) % num_c_stage


def epilogue_teardown(tmem, epi_barrier, acc_tmem_ptr, c_pipeline):
    """Free TMEM once every epilogue warp is past its last read, then drain the C stores."""
    tmem.relinquish_alloc_permit()
    epi_barrier.arrive_and_wait()
    tmem.free(acc_tmem_ptr)
    c_pipeline.producer_tail()


# ---------------------------------------------------------------- tensormaps in global memory

_TM = utils.TensorMapManager(utils.TensorMapUpdateMode.SMEM, TENSORMAP_BYTES)


def tensormap_ptr(i64_ptr, address_space=cute.AddressSpace.gmem):
    """A tensormap pointer (what `cute.copy(..., tma_desc_ptr=)` takes) for the 128-byte
    descriptor that the Int64 pointer `i64_ptr` points at."""
    return _TM.get_tensormap_ptr(i64_ptr, address_space)


@dsl_user_op
def prefetch_tensormap(tma_desc_ptr, *, loc=None, ip=None) -> None:
    """`prefetch.tensormap` of a descriptor in global memory (generic address)."""
    addr = tma_desc_ptr.toint(loc=loc, ip=ip).ir_value(loc=loc, ip=ip)
    llvm.inline_asm(
        None, [addr], "prefetch.tensormap [$0];", "l",
        has_side_effects=True, is_align_stack=False, asm_dialect=llvm.AsmDialect.AD_ATT,
    )


# ---------------------------------------------------------------- persistent grid size

SM_COUNT = configs.SM_COUNT["sm_100a"]  # B200 SMs


def max_active_clusters(config) -> int:
    """Clusters resident at once on a B200 (one CTA per SM), the compile-time stand-in."""
    return (SM_COUNT // (config.cluster_mn[0] * config.cluster_mn[1])) * config.occupancy


_ACTIVE_CLUSTERS: dict[tuple[int, int], int] = {}


def device_max_active_clusters(config, device: int) -> int:
    """What the driver reports for this cluster size on `device` (cached): a GPC whose SM
    count is odd cannot host as many 2-CTA clusters as SM_COUNT // 2."""
    size = config.cluster_mn[0] * config.cluster_mn[1]
    key = (device, size)
    if key not in _ACTIVE_CLUSTERS:
        _ACTIVE_CLUSTERS[key] = utils.HardwareInfo(device).get_max_active_clusters(size)
    return _ACTIVE_CLUSTERS[key] * config.occupancy
