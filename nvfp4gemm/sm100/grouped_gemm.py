"""sm_100a (B200) NVFP4 grouped GEMM:  C_g = A_g @ B_g^T for g < G <= 16, one persistent launch.

Per group: A (M x K) and B (N x K) K-major e2m1 (two per byte), one e4m3 scale per 16 K
elements (NVFP4) in the tcgen05 block-scaling layout, fp32 accumulation in TMEM, C (M x N)
fp16 row-major.  M, N, K differ per group.  Modelled on NVIDIA's CuTe DSL example
`blackwell/grouped_blockscaled_gemm.py` (cutlass v4.3.5); departures in notes/sm100_group.md.

TMA descriptors.  The example rebuilds A/B/SFA/SFB/C descriptors inside every CTA whenever
the CTA's group changes (tensormap.replace in shared memory, copy back to a per-SM global
workspace, fences) - before any math.  Here a setup kernel (one 32-thread CTA per group)
writes each group's five descriptors once into a global workspace; the main kernel only
reads them (TMA with a descriptor pointer; `fence.proxy.tensormap` acquire and
`prefetch.tensormap` once per group change, never in the mainloop).  The setup kernel is a
separate compiled function (`Sm100GroupedGemmKernel(config, setup_only=True)`, same
arguments) that `runtime_args` launches on the caller's stream, before returning, only when
its cache (keyed by shapes and data pointers, see `workspace_lookup`) misses; the argument
tuple it returns drives the main kernel alone, so the dispatcher may reuse it verbatim.

swap_ab (config): the MMA computes C^T = B A^T, i.e. the operand fed as the MMA's A is the
group's B (N rows) and C is written through an (N, M) column-major view; the large N then
fills the 128/256-row MMA M side and the small M the MMA N side.  "MMA coordinates" below:
mm = rows of the MMA's A operand, nn = rows of its B operand.

Warp roles (6 warps, 192 threads per CTA):
  warps 0-3  epilogue: TMEM -> registers -> fp16 -> shared memory -> TMA store through the
             group's C descriptor (clipped to the group's M x N).  Warp 0 also allocates and
             frees TMEM and issues the TMA stores.
  warp 4     MMA: per k-block, tcgen05.cp of SFA/SFB shared -> TMEM, then 4 tcgen05.mma
             kind::mxf4nvf4 (only the leader CTA of a 2-CTA pair issues).
  warp 5     scheduler + TMA: walks this cluster's contiguous share of the linear tile space
             (group by prefix sums of per-group tile counts), publishes each tile
             (m, n, group) in the tile ring, then per k-block loads A, B, SFA, SFB.
Pipelines: ab (TMA -> MMA, ab_stages), acc (MMA -> epilogue, acc_stages TMEM
accumulators), tile ring (scheduler -> MMA + epilogue), C stores (epi_stages smem buffers).

Constraints (see `can_implement`): 1 <= G <= 16; per group M >= 1, N % 64 == 0,
K % 256 == 0; the tile side over N must divide every N (MMA N tile without swap_ab, MMA M
tile with it); cluster = (cta_group, 1); MMA N tile in {64, 128, 256}.  The side over M is
ragged: TMA loads zero-fill rows past M, TMA stores are clipped at M.
"""

from __future__ import annotations

import collections
import enum
from dataclasses import dataclass

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.blockscaled_layout as blockscaled_utils
from cutlass.cute.nvgpu import cpasync
from cutlass.pipeline import pipeline_init_wait

import configs
from configs import K_BLOCK, SF_VEC, KernelConfig
from nvfp4gemm.cache import in_capture, lru_lookup, refuse_in_capture, stream_mark, stream_wait
from nvfp4gemm.scheduler import (
    blocked_tile_range, group_and_rank, grouped_mma_tiles, grouped_tile_offsets, linear_to_mnl,
)
from nvfp4gemm.sm100 import common
from nvfp4gemm.sm100.common import Warp, device_max_active_clusters, max_active_clusters

MAX_GROUPS = configs.GROUPS_PER_LAUNCH  # (groups of TMA descriptors per launch: one source, configs)


class Desc(enum.IntEnum):
    """Per-group descriptor (and data pointer) slots, in MMA roles."""

    A = 0  # operand fed as the MMA's A (group's A, or B with swap_ab)
    B = 1
    SFA = 2
    SFB = 3
    C = 4


NUM_DESC = len(Desc)
SHAPE_FIELDS = 8  # Int32 per group: mm, nn, k, tiles_mm, tiles_nn, 0, 0, 0


# Shape-row fields
SH_MM, SH_NN, SH_K, SH_TILES_M, SH_TILES_N = range(5)


# Global workspace, one per (shapes, pointers) cache entry (byte offsets).
WS_DESC = 0  # (MAX_GROUPS, NUM_DESC, 16) Int64: the TMA descriptors (128 B each)
WS_PTRS = WS_DESC + MAX_GROUPS * NUM_DESC * common.TENSORMAP_BYTES  # (MAX_GROUPS, NUM_DESC) Int64
WS_SHAPES = WS_PTRS + MAX_GROUPS * NUM_DESC * 8  # (MAX_GROUPS, SHAPE_FIELDS) Int32
WS_OFFSETS = WS_SHAPES + MAX_GROUPS * SHAPE_FIELDS * 4  # (32,) Int32 tile prefix sums, padded
WS_BYTES = WS_OFFSETS + 32 * 4
OFFSETS_USED = MAX_GROUPS + 1


class Sm100GroupedGemmKernel(common.Sm100BlockScaledKernel):
    PROBLEM = "group"
    # TMEM columns: [acc s0 | acc s1 ...][SFA][SFB]
    NUM_SFB = 1

    def __init__(self, config: KernelConfig, setup_only: bool = False):
        """setup_only: the compiled function launches only the descriptor setup kernel
        (same arguments as the main function)."""
        # C as the MMA sees it: (mm, nn) is (M, N) row-major, or (N, M) M-contiguous.
        super().__init__(config, utils.LayoutEnum.COL_MAJOR if config.swap_ab
                         else utils.LayoutEnum.ROW_MAJOR)
        self.setup_only = setup_only
        self.swap_ab = config.swap_ab

    # ------------------------------------------------------------------ host-side checks

    @staticmethod
    def can_implement(config: KernelConfig, shapes) -> None:
        """Raise ValueError naming every broken constraint (config or shapes)."""
        if config.arch != "sm_100a" or config.problem != "group":
            raise ValueError(f"config is {config.arch}/{config.problem}, need sm_100a/group")
        shapes = configs.shape_key("group", shapes)
        errs = configs.check_config(config) + configs.check_shape("group", shapes)
        tm, tn = config.mma_tile_mn
        if tn not in (64, 128, 256):
            errs.append(f"MMA tile N {tn} must be 64, 128 or 256 (scale-factor atoms of 128 rows)")
        if tuple(config.cluster_mn) != (config.cta_group, 1):
            errs.append(f"cluster {config.cluster_mn} must be (cta_group, 1) = ({config.cta_group}, 1): "
                        "no multicast beyond the 2-CTA pair")
        if config.occupancy != 1:
            errs.append("occupancy must be 1 (TMEM and smem are sized for one CTA per SM)")
        if config.epi_tile_mn[0] != 128:
            errs.append(f"epilogue tile M {config.epi_tile_mn[0]} must be 128 (4 warps x 32 TMEM lanes)")
        for g, (m, n, k) in enumerate(shapes):
            # check_shape accepts 0 for N and K (0 % 64 == 0): a TMA descriptor cannot have
            # an empty dimension, and K = 0 would store uninitialised TMEM.
            errs += [f"group {g}: {name}={v} must be >= 1" for name, v in (("N", n), ("K", k)) if v < 1]
            if config.swap_ab and n % tm:
                errs.append(f"group {g}: N={n} must be a multiple of the MMA tile M {tm} (swap_ab)")
            if not config.swap_ab and n % tn:
                errs.append(f"group {g}: N={n} must be a multiple of the MMA tile N {tn}")
        if errs:
            raise ValueError("; ".join(errs))

    # ------------------------------------------------------------------ trace-time setup

    def _setup_attributes(self):
        super()._setup_attributes()
        assert self.num_mcast_ctas_a == 1 and self.num_mcast_ctas_b == 1, "cluster = the MMA pair"

    def _expected_tx_bytes(self) -> int:
        """Bytes one k-block stage brings into a CTA pair's leader barrier, from the tile
        shapes alone: A, B and their scales (full boxes: rows past M are zero-filled but
        still counted by the TMA)."""
        cta_m, n = self.cfg.cta_tile_mn
        per_cta = (
            cta_m * K_BLOCK // 2  # A
            + (n // self.cfg.cta_group) * K_BLOCK // 2  # B
            + cta_m * K_BLOCK // SF_VEC  # SFA
            + configs.round_up(n, 128) * K_BLOCK // SF_VEC  # SFB
        )
        return per_cta * self.cfg.cta_group

    def _problem_tensors(self, ptrs, mm, nn, k):
        """One group's global tensors in MMA coordinates.  The same code builds the TMA
        templates (host) and every group's real tensors (setup kernel), so the descriptor
        updates see tensors of one type.  ptrs: Int64 addresses in `Desc` order."""
        k = cute.assume(k, divby=K_BLOCK)
        if cutlass.const_expr(self.swap_ab):
            mm = cute.assume(mm, divby=64)  # the group's N
        else:
            nn = cute.assume(nn, divby=64)

        def ptr(dtype, i):
            return cute.make_ptr(dtype, ptrs[i], cute.AddressSpace.gmem, assumed_align=16)

        one = cutlass.Int32(1)
        # (MM, K, 1) e2m1, K-major
        mA = cute.make_tensor(ptr(self.a_dtype, int(Desc.A)),
                              cute.make_layout((mm, k, one), stride=(k, 1, mm * k)))
        # (NN, K, 1) e2m1, K-major
        mB = cute.make_tensor(ptr(self.a_dtype, int(Desc.B)),
                              cute.make_layout((nn, k, one), stride=(k, 1, nn * k)))
        # ((32x4, RestMM), (16x4, RestK), 1) e4m3: the tcgen05 block-scaling layout
        mSFA = cute.make_tensor(ptr(self.sf_dtype, int(Desc.SFA)),
                                blockscaled_utils.tile_atom_to_shape_SF(mA.shape, SF_VEC))
        # ((32x4, RestNN), (16x4, RestK), 1) e4m3
        mSFB = cute.make_tensor(ptr(self.sf_dtype, int(Desc.SFB)),
                                blockscaled_utils.tile_atom_to_shape_SF(mB.shape, SF_VEC))
        if cutlass.const_expr(self.swap_ab):
            # (MM=N, NN=M, 1) fp16: C^T, i.e. C row-major seen with N contiguous
            c_layout = cute.make_layout((mm, nn, one), stride=(1, mm, mm * nn))
        else:
            # (MM=M, NN=N, 1) fp16 row-major
            c_layout = cute.make_layout((mm, nn, one), stride=(nn, 1, mm * nn))
        mC = cute.make_tensor(ptr(self.c_dtype, int(Desc.C)), c_layout)
        return mA, mB, mSFA, mSFB, mC

    def _tma_atoms(self, mA, mB, mSFA, mSFB, mC):
        """((TMA atom, its TMA tensor), ...) of one group's tensors in `Desc` order: the A, B,
        SFA, SFB loads and the C store (host side: their descriptors are encoded from these
        tensors).  Sets `num_tma_load_bytes`, what the four loads land per stage."""
        a, (b,), sfa, (sfb,) = self._load_atoms(mA, [mB], mSFA, [mSFB])
        return a, b, sfa, sfb, common.make_c_store_atom(mC, self.c_smem_layout_staged, self.epi_tile)

    # ------------------------------------------------------------------ host entry

    @cute.jit
    def __call__(
        self,
        desc_ptr: cute.Pointer,
        ptrs_ptr: cute.Pointer,
        shapes_ptr: cute.Pointer,
        offsets_ptr: cute.Pointer,
        tmpl_mm: cutlass.Int32,
        tmpl_nn: cutlass.Int32,
        tmpl_k: cutlass.Int32,
        num_groups: cutlass.Int32,
        num_tiles: cutlass.Int32,
        num_clusters: cutlass.Int32,
        stream: cuda.CUstream,
    ):
        """desc_ptr..offsets_ptr: the workspace (see WS_*); tmpl_*: the MMA-coordinate sizes of
        the TMA template descriptors (`template_shape`: no larger than any group's); num_groups:
        setup grid; num_tiles: MMA tiles of all groups; num_clusters: persistent grid.  Launches
        the setup kernel (setup_only) or the GEMM."""
        self._setup_attributes()

        # (MAX_GROUPS, NUM_DESC, 16) Int64: 128-byte TMA descriptors per group
        descs = cute.make_tensor(desc_ptr, cute.make_layout((MAX_GROUPS, NUM_DESC, 16),
                                                            stride=(NUM_DESC * 16, 16, 1)))
        # (MAX_GROUPS, NUM_DESC) Int64 data pointers
        ptrs = cute.make_tensor(ptrs_ptr, cute.make_layout((MAX_GROUPS, NUM_DESC),
                                                           stride=(NUM_DESC, 1)))
        # (MAX_GROUPS, SHAPE_FIELDS) Int32
        shapes = cute.make_tensor(shapes_ptr, cute.make_layout((MAX_GROUPS, SHAPE_FIELDS),
                                                               stride=(SHAPE_FIELDS, 1)))
        # (OFFSETS_USED,) Int32 prefix sums of per-group tile counts, padded with num_tiles
        offsets = cute.make_tensor(offsets_ptr, cute.make_layout(OFFSETS_USED))

        # Templates: dtype, box, swizzle and rank of every descriptor; their address, shape
        # and strides are replaced per group by the setup kernel.  The workspace address
        # stands in for the data (never dereferenced through a template).
        tmpl_addr = desc_ptr.toint()
        (tma_atom_a, tma_a), (tma_atom_b, tma_b), (tma_atom_sfa, tma_sfa), \
            (tma_atom_sfb, tma_sfb), (tma_atom_c, tma_c) = self._tma_atoms(
                *self._problem_tensors((tmpl_addr,) * NUM_DESC, tmpl_mm, tmpl_nn, tmpl_k))
        tiled_mma = self.tiled_mma

        # Operand buffers after the common head (barriers, tile ring, sC).
        self.shared_storage = common.make_shared_storage(
            self.cfg, self.tile_ring_stages, self.c_dtype, self.c_smem_layout_staged,
            (("sA", self.a_dtype, cute.cosize(self.a_smem_layout_staged.outer)),
             ("sB", self.a_dtype, cute.cosize(self.b_smem_layout_staged.outer)),
             ("sSFA", self.sf_dtype, cute.cosize(self.sfa_smem_layout_staged)),
             ("sSFB", self.sf_dtype, cute.cosize(self.sfb_smem_layout_staged))))

        @cute.struct
        class SetupStorage:
            # (NUM_DESC, 16) Int64: descriptors being edited
            descs: cute.struct.Align[cute.struct.MemRange[cutlass.Int64, NUM_DESC * 16],
                                     common.TENSORMAP_BYTES]

        self.setup_storage = SetupStorage

        if cutlass.const_expr(self.setup_only):
            self.setup_kernel(
                tma_atom_a, tma_atom_b, tma_atom_sfa, tma_atom_sfb, tma_atom_c,
                descs, ptrs, shapes,
            ).launch(grid=(num_groups, 1, 1), block=[32, 1, 1], stream=stream)
        else:
            common.launch_persistent(self.kernel(
                tiled_mma, self.tiled_mma_sfb,
                tma_atom_a, tma_a, tma_atom_b, tma_b, tma_atom_sfa, tma_sfa, tma_atom_sfb, tma_sfb,
                tma_atom_c, tma_c,
                self.cluster_layout_vmnk, self.cluster_layout_sfb_vmnk,
                self.a_smem_layout_staged, self.b_smem_layout_staged,
                self.sfa_smem_layout_staged, self.sfb_smem_layout_staged,
                self.c_smem_layout_staged, self.epi_tile,
                descs, shapes, offsets, num_tiles,
            ), self.cluster_shape_mn, num_clusters, stream)

    # ------------------------------------------------------------------ descriptor setup

    @cute.kernel
    def setup_kernel(
        self,
        tma_atom_a: cute.CopyAtom,
        tma_atom_b: cute.CopyAtom,
        tma_atom_sfa: cute.CopyAtom,
        tma_atom_sfb: cute.CopyAtom,
        tma_atom_c: cute.CopyAtom,
        descs: cute.Tensor,
        ptrs: cute.Tensor,
        shapes: cute.Tensor,
    ):
        """One warp per group: copy each template descriptor to shared memory, replace its
        address, shape and strides with the group's (tensormap.replace), and publish it to
        the group's global slot with a release fence for the tensormap proxy."""
        g, _, _ = cute.arch.block_idx()
        smem = utils.SmemAllocator()
        storage = smem.allocate(self.setup_storage)
        smem_base = storage.descs.data_ptr()

        mm = shapes[g, SH_MM]
        nn = shapes[g, SH_NN]
        k = shapes[g, SH_K]
        addrs = tuple(ptrs[g, i] for i in range(NUM_DESC))
        # group g's (MM, K, 1) A, (NN, K, 1) B, their block-scaling-layout scales and the
        # (MM, NN, 1) C view, all in MMA coordinates (see _problem_tensors)
        mA, mB, mSFA, mSFB, mC = self._problem_tensors(addrs, mm, nn, k)
        atoms = (tma_atom_a, tma_atom_b, tma_atom_sfa, tma_atom_sfb, tma_atom_c)
        tensors = (mA, mB, mSFA, mSFB, mC)  # Desc order

        with cute.arch.elect_one():
            for i in cutlass.range_constexpr(NUM_DESC):
                cpasync.copy_tensormap(atoms[i], smem_base + i * 16)
        cute.arch.sync_warp()
        for i in cutlass.range_constexpr(NUM_DESC):
            cpasync.update_tma_descriptor(atoms[i], tensors[i], smem_base + i * 16)
        cute.arch.sync_warp()
        for i in cutlass.range_constexpr(NUM_DESC):
            gmem = common.tensormap_ptr(descs[(g, i, None)].iterator)
            cpasync.cp_fence_tma_desc_release(gmem, smem_base + i * 16)

    # ------------------------------------------------------------------ device kernel

    @cute.kernel
    def kernel(
        self,
        tiled_mma: cute.TiledMma,
        tiled_mma_sfb: cute.TiledMma,
        tma_atom_a: cute.CopyAtom,
        mA_mkl: cute.Tensor,
        tma_atom_b: cute.CopyAtom,
        mB_nkl: cute.Tensor,
        tma_atom_sfa: cute.CopyAtom,
        mSFA_mkl: cute.Tensor,
        tma_atom_sfb: cute.CopyAtom,
        mSFB_nkl: cute.Tensor,
        tma_atom_c: cute.CopyAtom,
        mC_mnl: cute.Tensor,
        cluster_layout_vmnk: cute.Layout,
        cluster_layout_sfb_vmnk: cute.Layout,
        a_smem_layout_staged: cute.ComposedLayout,
        b_smem_layout_staged: cute.ComposedLayout,
        sfa_smem_layout_staged: cute.Layout,
        sfb_smem_layout_staged: cute.Layout,
        c_smem_layout_staged: cute.ComposedLayout,
        epi_tile: cute.Tile,
        descs: cute.Tensor,
        shapes: cute.Tensor,
        offsets: cute.Tensor,
        num_tiles: cutlass.Int32,
    ):
        # The mA_mkl .. mC_mnl tensors are TMA coordinate tensors of the template shapes;
        # tile coordinates index them for any group (coordinates do not depend on the
        # extents), and the group's descriptor supplies address and bounds.
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())

        bidx, _, _ = cute.arch.block_idx()
        mma_tile_coord_v = bidx % cute.size(tiled_mma.thr_id.shape)
        is_leader_cta = mma_tile_coord_v == 0

        smem = utils.SmemAllocator()
        storage = smem.allocate(self.shared_storage)

        # --- pipelines (barrier init by warp 0; cluster-wide sync below) ---
        # One TMA producer per stage barrier: no multicast beyond the CTA pair.
        ab_pipeline, acc_pipeline, tile_ring, tmem = common.make_pipelines(
            storage, self.cfg, self.tile_ring_stages, self.num_tma_load_bytes, 1,
            cluster_layout_vmnk, self.tmem_alloc_barrier)

        # (EPI_M, EPI_N, STAGE)
        sC = common.swizzled_smem_tensor(storage.sC, c_smem_layout_staged)
        # (MMA, MMA_M, MMA_K, STAGE)
        sA = common.swizzled_smem_tensor(storage.sA, a_smem_layout_staged)
        # (MMA, MMA_N, MMA_K, STAGE)
        sB = common.swizzled_smem_tensor(storage.sB, b_smem_layout_staged)
        # (MMA, MMA_M, MMA_K, STAGE)
        sSFA = storage.sSFA.get_tensor(sfa_smem_layout_staged)
        # (MMA, MMA_N, MMA_K, STAGE)
        sSFB = storage.sSFB.get_tensor(sfb_smem_layout_staged)

        # (MMA, MMA_M, MMA_N, ACC_STAGE); (MMA, MMA_M, MMA_N, RestM, RestN, RestL) this CTA's
        # part of C per MMA tile
        tCtAcc_fake, tCgC = common.acc_and_c_partitions(
            tiled_mma, self.mma_tiler, self.num_acc_stage, mC_mnl, mma_tile_coord_v)

        pipeline_init_wait(cluster_shape_mn=self.cluster_shape_mn)

        if warp_idx == Warp.LOAD:
            self.load(
                tile_ring, ab_pipeline, tiled_mma, tiled_mma_sfb, mma_tile_coord_v,
                cluster_layout_vmnk, cluster_layout_sfb_vmnk, tma_atom_a, mA_mkl, tma_atom_b, mB_nkl, tma_atom_sfa, mSFA_mkl,
                tma_atom_sfb, mSFB_nkl, sA, sB, sSFA, sSFB, descs, shapes, offsets, num_tiles,
            )
        if warp_idx == Warp.MMA:
            self.mma(
                tile_ring, ab_pipeline, acc_pipeline, tmem, tiled_mma, is_leader_cta,
                tCtAcc_fake, sA, sB, sSFA, sSFB, sfa_smem_layout_staged, sfb_smem_layout_staged,
                shapes,
            )
        if warp_idx < Warp.MMA:
            self.epilogue(tile_ring, acc_pipeline, tmem, tCtAcc_fake, tCgC, sC, tma_atom_c,
                          epi_tile, descs)

    # ------------------------------------------------------------------ scheduler + TMA warp

    @cute.jit
    def load(
        self, tile_ring, ab_pipeline, tiled_mma, tiled_mma_sfb, mma_tile_coord_v,
        cluster_layout_vmnk, cluster_layout_sfb_vmnk, tma_atom_a, mA_mkl, tma_atom_b, mB_nkl, tma_atom_sfa, mSFA_mkl, tma_atom_sfb, mSFB_nkl,
        sA, sB, sSFA, sSFB, descs, shapes, offsets, num_tiles,
    ):
        """Walk this cluster's contiguous share of tiles: find each tile's group, publish
        the tile in the ring, then TMA its k-blocks through the group's descriptors."""
        # With the 2-CTA MMA the pair's A/B halves land in both CTAs (leader's barrier).
        a_mcast = b_mcast = sfb_mcast = None
        cta_rank = cute.arch.make_warp_uniform(cute.arch.block_idx_in_cluster())
        coord_vmnk = cluster_layout_vmnk.get_flat_coord(cta_rank)
        coord_sfb_vmnk = cluster_layout_sfb_vmnk.get_flat_coord(cta_rank)
        if cutlass.const_expr(self.use_2cta):
            a_mcast = cpasync.create_tma_multicast_mask(
                cluster_layout_vmnk, coord_vmnk, mcast_mode=2)
            b_mcast = cpasync.create_tma_multicast_mask(
                cluster_layout_vmnk, coord_vmnk, mcast_mode=1)
            sfb_mcast = cpasync.create_tma_multicast_mask(
                cluster_layout_sfb_vmnk, coord_sfb_vmnk, mcast_mode=1)

        thr_mma = tiled_mma.get_slice(mma_tile_coord_v)
        thr_mma_sfb = tiled_mma_sfb.get_slice(mma_tile_coord_v)
        # ((atom_v, rest_v), STAGE) / ((atom_v, rest_v), RestM|N, RestK, RestL) per operand; the
        # cluster is the MMA pair, so A, B and SFA are one CTA's each, SFB's box split over the pair
        (tAsA, tAgA), ((tBsB, tBgB),), (tAsSFA, tAgSFA), ((tBsSFB, tBgSFB),) = self._load_partitions(
            thr_mma, thr_mma_sfb, (cluster_layout_vmnk, cluster_layout_sfb_vmnk),
            (coord_vmnk, coord_sfb_vmnk), (tma_atom_a, mA_mkl, sA), [(tma_atom_b, mB_nkl, sB)],
            (tma_atom_sfa, mSFA_mkl, sSFA), [(tma_atom_sfb, mSFB_nkl, sSFB)])

        # (OFFSETS_USED,) tile prefix sums in registers (static indices only)
        offs = cute.make_rmem_tensor(cute.make_layout(OFFSETS_USED), cutlass.Int32)
        for i in cutlass.range_constexpr(OFFSETS_USED):
            offs[i] = offsets[i]

        _, _, cluster = cute.arch.block_idx()
        _, _, num_clusters = cute.arch.grid_dim()
        linear, end = blocked_tile_range(cutlass.Int32(cluster), cutlass.Int32(num_clusters), num_tiles)
        ring_state = pipeline.make_pipeline_state(
            pipeline.PipelineUserType.Producer, self.tile_ring_stages)
        ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_ab_stage)

        last_group = cutlass.Int32(-1)
        tiles_m = cutlass.Int32(1)
        tiles_n = cutlass.Int32(1)
        k_tile_cnt = cutlass.Int32(0)
        is_valid = linear < end
        while is_valid:
            group, rank = group_and_rank(linear, offs, OFFSETS_USED)
            # The group's descriptors (generic addresses of global memory).
            gen = cute.AddressSpace.generic
            da = common.tensormap_ptr(descs[(group, int(Desc.A), None)].iterator, gen)
            db = common.tensormap_ptr(descs[(group, int(Desc.B), None)].iterator, gen)
            dsfa = common.tensormap_ptr(descs[(group, int(Desc.SFA), None)].iterator, gen)
            dsfb = common.tensormap_ptr(descs[(group, int(Desc.SFB), None)].iterator, gen)
            if group != last_group:
                # New group: its tile grid and K, and its descriptors (written by the setup
                # kernel: acquire for the tensormap proxy, then prefetch).  Never inside the
                # k-loop, and at most once per group this CTA touches.
                tiles_m = shapes[group, SH_TILES_M]
                tiles_n = shapes[group, SH_TILES_N]
                k_tile_cnt = shapes[group, SH_K] // K_BLOCK
                for d in (da, db, dsfa, dsfb):
                    cpasync.fence_tma_desc_acquire(d)
                    common.prefetch_tensormap(d)
                last_group = group
            tile_m, tile_n, _ = linear_to_mnl(rank, tiles_m, tiles_n, self.cfg.raster == "m")
            ring_state = tile_ring.publish(ring_state, tile_m, tile_n, group, is_valid)

            # ((atom_v, rest_v), RestK)
            tAgA_k = tAgA[(None, tile_m, None, 0)]
            tBgB_k = tBgB[(None, tile_n, None, 0)]
            tAgSFA_k = tAgSFA[(None, tile_m, None, 0)]
            sfb_n = common.sfb_tile_coord(tile_n, self.cta_tile_n)
            tBgSFB_k = tBgSFB[(None, sfb_n, None, 0)]

            # A, B and their scales per k-block, through the group's descriptors.
            ab_state = common.tma_load_kblocks(ab_pipeline, ab_state, k_tile_cnt, (
                (tma_atom_a, tAgA_k, tAsA, a_mcast, da),
                (tma_atom_b, tBgB_k, tBsB, b_mcast, db),
                (tma_atom_sfa, tAgSFA_k, tAsSFA, a_mcast, dsfa),
                (tma_atom_sfb, tBgSFB_k, tBsSFB, sfb_mcast, dsfb),
            ))

            linear += 1
            is_valid = linear < end

        # Sentinel: tells the MMA and epilogue warps there is no more work.
        ring_state = common.finish_schedule(tile_ring, ring_state, ab_pipeline, ab_state, is_valid)

    # ------------------------------------------------------------------ MMA warp

    @cute.jit
    def mma(
        self, tile_ring, ab_pipeline, acc_pipeline, tmem, tiled_mma, is_leader_cta,
        tCtAcc_fake, sA, sB, sSFA, sSFB, sfa_smem_layout_staged, sfb_smem_layout_staged, shapes,
    ):
        """Leader CTA: per k-block copy the scales to TMEM and issue the 4 MMAs."""
        # (MMA, MMA_M, MMA_N, ACC_STAGE)
        acc_tmem_ptr, tCtAcc_base = common.tmem_acc(tmem, self.acc_dtype, tCtAcc_fake)
        sfa_layout, sfb_layout, sf_cols = self._tmem_sf_layouts(
            tCtAcc_fake, sfa_smem_layout_staged, sfb_smem_layout_staged)
        # (MMA, MMA_M, MMA_K) SFA in TMEM
        tCtSFA = common.tmem_sf(acc_tmem_ptr, sf_cols[0], sfa_layout, self.sf_dtype)
        # (MMA, MMA_N, MMA_K) SFB in TMEM (N rounded up to 128 rows)
        tCtSFB = common.tmem_sf(acc_tmem_ptr, sf_cols[1], sfb_layout, self.sf_dtype)
        s2t_sfa, tCsSFA_s2t, tCtSFA_s2t = common.s2t_copy_and_partition(
            sSFA, tCtSFA, self.cta_group, self.sf_dtype)
        s2t_sfb, tCsSFB_s2t, tCtSFB_s2t = common.s2t_copy_and_partition(
            sSFB, tCtSFB, self.cta_group, self.sf_dtype)
        s2t_copies = [(s2t_sfa, tCsSFA_s2t, tCtSFA_s2t), (s2t_sfb, tCsSFB_s2t, tCtSFB_s2t)]
        # (MMA, MMA_M, MMA_K, STAGE)
        tCrA = tiled_mma.make_fragment_A(sA)
        # (MMA, MMA_N, MMA_K, STAGE)
        tCrB = tiled_mma.make_fragment_B(sB)
        num_kblocks = cute.size(tCrA, mode=[2])

        ring_state = pipeline.make_pipeline_state(
            pipeline.PipelineUserType.Consumer, self.tile_ring_stages)
        ab_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_ab_stage)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.num_acc_stage)

        last_group = cutlass.Int32(-1)
        k_tile_cnt = cutlass.Int32(0)
        ring_state, tile_m, tile_n, group, is_valid = tile_ring.fetch(ring_state)
        while is_valid:
            if group != last_group:
                k_tile_cnt = shapes[group, SH_K] // K_BLOCK
                last_group = group
            if is_leader_cta:
                # (MMA, MMA_M, MMA_N) accumulator of this stage
                tCtAcc = tCtAcc_base[(None, None, None, acc_state.index)]
                tCtSFB_mma = tCtSFB
                if cutlass.const_expr(self.cta_tile_n == 64):
                    tCtSFB_mma = common.sfb_tmem_for_odd_tile(
                        acc_tmem_ptr, sf_cols[1], sfb_layout, self.sf_dtype, tile_n)

                ab_state = common.mma_kblocks(
                    tiled_mma, ab_pipeline, ab_state, acc_pipeline, acc_state, k_tile_cnt,
                    num_kblocks, tCrA, tCtSFA, s2t_copies, [(tCtAcc, tCrB, tCtSFB_mma)])
                acc_state.advance()
            ring_state, tile_m, tile_n, group, is_valid = tile_ring.fetch(ring_state)

        if is_leader_cta:
            acc_pipeline.producer_tail(acc_state)

    # ------------------------------------------------------------------ epilogue warps

    @cute.jit
    def epilogue(self, tile_ring, acc_pipeline, tmem, tCtAcc_fake, tCgC, sC, tma_atom_c, epi_tile,
                 descs):
        """TMEM -> registers -> fp16 smem -> TMA store (group's C descriptor), per subtile."""
        _used, alloc_cols = self.tmem_columns(tCtAcc_fake)
        # (MMA, MMA_M, MMA_N, ACC_STAGE)
        acc_tmem_ptr, tCtAcc_base = common.tmem_allocate(
            tmem, alloc_cols, self.acc_dtype, tCtAcc_fake)

        tidx, _, _ = cute.arch.thread_idx()
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        tiled_t2r, tTR_tAcc_base, tTR_rAcc = common.t2r_copy_and_partition(
            tidx, tCtAcc_base, tCgC, epi_tile, self.cta_tile_shape_mnk, self.c_layout,
            self.c_dtype, self.acc_dtype, self.use_2cta)
        # (T2R, T2R_M, T2R_N) fp16
        tTR_rC = cute.make_rmem_tensor(tTR_rAcc.shape, self.c_dtype)
        tiled_r2s, tRS_sC, tRS_rC = common.epilogue_smem_store(
            tidx, tiled_t2r, tTR_rC, sC, self.c_layout, self.c_dtype, self.acc_dtype)
        bSG_sC, bSG_gC_all = common.epilogue_tma_partition(tma_atom_c, sC, tCgC, epi_tile)
        c_pipeline = common.make_c_store_pipeline(self.num_c_stage)
        ring_state = pipeline.make_pipeline_state(
            pipeline.PipelineUserType.Consumer, self.tile_ring_stages)
        acc_state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.num_acc_stage)
        c_buffer = cutlass.Int32(0)
        last_group = cutlass.Int32(-1)

        ring_state, tile_m, tile_n, group, is_valid = tile_ring.fetch(ring_state)
        while is_valid:
            # The group's C descriptor (generic address of global memory).
            dc = common.tensormap_ptr(descs[(group, int(Desc.C), None)].iterator,
                                      cute.AddressSpace.generic)
            if group != last_group:
                if warp_idx == Warp.EPI0:
                    cpasync.fence_tma_desc_acquire(dc)
                    common.prefetch_tensormap(dc)
                last_group = group
            # ((ATOM_V, REST_V), EPI_M * EPI_N)
            bSG_gC = cute.group_modes(bSG_gC_all[(None, None, None, tile_m, tile_n, 0)], 1, 3)
            # (T2R, T2R_M, T2R_N, EPI_M * EPI_N) of this stage
            tTR_tAcc = cute.group_modes(
                tTR_tAcc_base[(None, None, None, None, None, acc_state.index)], 3, 5)
            acc_pipeline.consumer_wait(acc_state)

            subtile_cnt = cute.size(tTR_tAcc.shape, mode=[3])
            for sub in cutlass.range(subtile_cnt):
                cute.copy(tiled_t2r, tTR_tAcc[(None, None, None, sub)], tTR_rAcc)
                if sub == subtile_cnt - 1:
                    # Last TMEM read of this stage
                    common.release_acc_stage(acc_pipeline, acc_state)
                tRS_rC.store(tiled_r2s.retile(tTR_rAcc).load().to(self.c_dtype))
                # C through the group's descriptor
                c_buffer = common.store_c_subtile(
                    tiled_r2s, tRS_rC, tRS_sC, c_buffer, self.epi_barrier, warp_idx, tma_atom_c,
                    bSG_sC, bSG_gC, sub, c_pipeline, self.num_c_stage, dc)
            acc_state.advance()
            ring_state, tile_m, tile_n, group, is_valid = tile_ring.fetch(ring_state)

        common.epilogue_teardown(tmem, self.epi_barrier, acc_tmem_ptr, c_pipeline)


# ---------------------------------------------------------------------------- host helpers


def shared_storage_bytes(config: KernelConfig) -> int:
    """Bytes of the main kernel's SharedStorage (the kernel asserts it equals this model)."""
    return configs.sm100_smem_bytes(config)


def mma_shapes(config: KernelConfig, shapes) -> list[tuple[int, int, int]]:
    """Per group (mm, nn, k) in MMA coordinates (swap_ab exchanges M and N)."""
    return [((n, m, k) if config.swap_ab else (m, n, k)) for m, n, k in shapes]


def template_shape(config: KernelConfig, shapes) -> tuple[int, int, int]:
    """(mm, nn, k) of the TMA template tensors: the elementwise minimum over the groups' MMA
    shapes, so each template tensor is no larger than any group's.  The setup kernel replaces a
    template's address, sizes and strides, but the host encoder also sets a flag from a tensor's
    extent (byte 10 bit 5: set iff it spans >= 128 KiB, exp. 179) that tensormap.replace leaves
    as the template had it.  With group 0's sizes a template could carry it set into a smaller
    group's descriptor, where the host encoding clears it; with these a template has it set only
    where every group's encoding does.  NVIDIA's templates are as small or smaller (the DSL
    example: the smallest group's tensor per operand; CUTLASS C++: one tile's sizes, so the flag is
    always clear there)."""
    mm, nn, k = zip(*mma_shapes(config, shapes))
    return min(mm), min(nn), min(k)


def host_tables(config: KernelConfig, shapes):
    """(shape rows, offsets, num_tiles): the Int32 tables the kernel reads, as lists."""
    tiles = grouped_mma_tiles(config, shapes)
    offs = grouped_tile_offsets(config, shapes)
    total = offs[-1]
    rows = []
    for (mm, nn, k), (tm, tn) in zip(mma_shapes(config, shapes), tiles):
        rows.append([mm, nn, k, tm, tn, 0, 0, 0])
    rows += [[0] * SHAPE_FIELDS] * (MAX_GROUPS - len(rows))
    offsets = offs + [total] * (32 - len(offs))
    return rows, offsets, total


def compile_args(config: KernelConfig, shapes) -> tuple:
    """Arguments for `cute.compile(Sm100GroupedGemmKernel(config), *args, options=...)` with
    fake device pointers (CPU compile).  Only the config is compiled in: group count,
    shapes and pointers are run-time values (one compile serves every shape)."""
    from cutlass.cute.runtime import make_fake_stream

    base = 1 << 20
    mm, nn, k = template_shape(config, shapes)
    _rows, _offs, total = host_tables(config, shapes)
    return _workspace_args(config, base, mm, nn, k, len(shapes), total,
                           min(total, max_active_clusters(config))) + (make_fake_stream(),)


def _workspace_args(config, ws_addr, mm, nn, k, groups, total, clusters) -> tuple:
    return _workspace_ptrs(ws_addr) + (
        cutlass.Int32(mm), cutlass.Int32(nn), cutlass.Int32(k),
        cutlass.Int32(groups), cutlass.Int32(total), cutlass.Int32(max(1, clusters)),
    )


def _workspace_ptrs(ws_addr) -> tuple:
    """The four workspace pointers that head the kernel's arguments (`_workspace_pairs`' order)."""
    from cutlass.cute.runtime import make_ptr

    gmem = cute.AddressSpace.gmem
    return (
        make_ptr(cutlass.Int64, ws_addr + WS_DESC, gmem, assumed_align=128),
        make_ptr(cutlass.Int64, ws_addr + WS_PTRS, gmem, assumed_align=16),
        make_ptr(cutlass.Int32, ws_addr + WS_SHAPES, gmem, assumed_align=16),
        make_ptr(cutlass.Int32, ws_addr + WS_OFFSETS, gmem, assumed_align=16),
    )


# ---------------------------------------------------------------- workspace / descriptor cache


def table_entries(data, config: KernelConfig) -> tuple:
    """The workspace's pointer rows of a grouped input, flattened without the zero rows: per
    group the NUM_DESC addresses in Desc order (swap_ab: the MMA's A is the group's B).  The one
    definition: `_build_workspace` uploads them, nvfp4gemm/table_writer.py writes them."""
    abc, _sf, sf_perm, _sizes = data
    vals = ()
    for (a, b, c), (sfa, sfb) in zip(abc, sf_perm):
        if config.swap_ab:
            vals += (b.data_ptr(), a.data_ptr(), sfb.data_ptr(), sfa.data_ptr(), c.data_ptr())
        else:
            vals += (a.data_ptr(), b.data_ptr(), sfa.data_ptr(), sfb.data_ptr(), c.data_ptr())
    return vals


@dataclass
class Workspace:
    """One device workspace: descriptors + tables for one (config, shapes, pointers) -- cached,
    or private to a dispatcher template that rewrites its pointers (`writer_target`)."""

    buffer: object  # torch uint8 tensor of WS_BYTES on the data's device (keeps it alive)
    args: tuple  # launch arguments before the stream (main and setup functions alike)
    setup_done: bool = False  # the setup kernel has been launched for these descriptors
    # The uploaded workspace this one's shape and tile rows were copied from on the device
    # (`_workspace_like`; None: uploaded itself).  Later copies read that one: a copy recorded in
    # a CUDA-graph capture lands only when the graph replays.
    rows_src: object = None
    # (stream handle, event) after its upload and setup (`cache.stream_mark`): a cache hit from
    # another stream waits on it (`_workspace_for`)
    ready: object = None


# Entries must outlive the launches that point into them: the dispatcher's template holds the
# workspace it points at now (pointer_args), eager launches are ordered on their stream before
# any reuse of an evicted buffer, so only a launch captured in a CUDA graph needs the entry
# (nvfp4gemm/cache.py).
_CACHE_ENTRIES = 64
_WORKSPACES: "collections.OrderedDict[tuple, Workspace]" = collections.OrderedDict()


def cache_key(config: KernelConfig, data) -> tuple:
    """(config, shapes, data pointers) of a grouped input: what the descriptors encode."""
    abc, _sf, sf_perm, sizes = data
    ptrs = []
    for (a, b, c), (sfa, sfb) in zip(abc, sf_perm):
        ptrs += (a.data_ptr(), b.data_ptr(), c.data_ptr(), sfa.data_ptr(), sfb.data_ptr())
    return (config, tuple(tuple(s) for s in sizes), tuple(ptrs))


def workspace_lookup(cache, key, build, max_entries: int = _CACHE_ENTRIES):
    """The cache decision, a pure function of (cache, key): (workspace, needs_setup).

    Hit whose descriptors were written: (ws, False) - no allocation, no copy, no setup
    kernel.  Miss: `build(key)` makes a workspace (allocation + one host-to-device copy of
    the tables), caches it (least recently used evicted) and returns (ws, True); the caller
    launches the setup kernel and then sets ws.setup_done.  Any changed pointer or shape
    changes the key, so stale descriptors are never served."""
    ws, _built = lru_lookup(cache, key, lambda: build(key), max_entries)
    return ws, not ws.setup_done


def _build_workspace(config: KernelConfig, data, key) -> Workspace:
    import torch

    abc, _sf, sf_perm, sizes = data
    shapes = [(int(m), int(n), int(k)) for m, n, k, _l in sizes]
    Sm100GroupedGemmKernel.can_implement(config, shapes)
    device = abc[0][0].device
    rows, offsets, total = host_tables(config, shapes)
    ptr_rows = table_entries(data, config)
    ptr_rows += (0,) * (MAX_GROUPS * NUM_DESC - len(ptr_rows))
    host = torch.cat([
        torch.tensor(ptr_rows, dtype=torch.int64).view(torch.uint8).flatten(),
        torch.tensor(rows, dtype=torch.int32).view(torch.uint8).flatten(),
        torch.tensor(offsets, dtype=torch.int32).view(torch.uint8).flatten(),
    ])
    assert host.numel() == WS_BYTES - WS_PTRS
    buf = _workspace_buffer(device)
    if device.type == "cuda":
        refuse_in_capture()
        # Pinned staging: the copy is asynchronous on the current stream (the caching host
        # allocator keeps the staging buffer alive until the copy has run).
        host = host.pin_memory()
    buf[WS_PTRS:].copy_(host, non_blocking=True)  # the only host-to-device copy per entry
    if device.type == "cuda":
        clusters = device_max_active_clusters(config, device.index or 0)
    else:  # CPU stand-in (host-time measurements, tests)
        clusters = max_active_clusters(config)
    mm, nn, k = template_shape(config, shapes)
    args = _workspace_args(config, buf.data_ptr(), mm, nn, k, len(shapes), total,
                           min(total, clusters))
    return Workspace(buf, args)


_SETUP_FNS: dict[tuple, object] = {}


def compile_setup(config: KernelConfig, dump_dir: str | None = None):
    """The compiled setup-only function for `config` (cached; ~0.5 s once per config).
    Compile-only (`--gpu-arch sm_100a`) when this machine has no sm_100 GPU."""
    from nvfp4gemm import harness

    runnable = harness.device_arch() == "sm_100a"
    key = (config, runnable, dump_dir)
    fn = _SETUP_FNS.get(key)
    if fn is None:
        opts = [] if runnable else ["--gpu-arch sm_100a"]
        if dump_dir:
            opts += ["--keep-ptx", "--keep-cubin", f"--dump-dir {dump_dir}"]
        shapes = ((128, 1024, K_BLOCK),)  # any legal shape: all of it is run-time
        fn = cute.compile(Sm100GroupedGemmKernel(config, setup_only=True),
                          *compile_args(config, shapes), options=" ".join(opts))
        _SETUP_FNS[key] = fn
    return fn


def _launch_setup(config: KernelConfig, ws: Workspace, stream) -> None:
    """Write ws's descriptors on `stream` (ordered before the main kernel the caller
    launches on the same stream).  No-op for CPU stand-in data."""
    if ws.buffer.device.type == "cuda":
        compile_setup(config)(*ws.args, stream)


def _packed_setup(config: KernelConfig, ws: Workspace, stream):
    """ws's setup launch with its arguments packed once (dispatch.PackedLaunch), for a template
    that relaunches it after every rewrite of the pointer rows; None for CPU stand-in data."""
    if ws.buffer.device.type != "cuda":
        return None
    from nvfp4gemm.dispatch import PackedLaunch

    return PackedLaunch(compile_setup(config), (*ws.args, stream))


def _workspace_for(data, config: KernelConfig, stream) -> Workspace:
    """The workspace of this input's addresses: cache hit (same config, shapes and pointers as an
    earlier call): no allocation, no copy, no launch; miss: builds it and launches the setup
    kernel on `stream` (before the main kernel the caller launches there)."""
    key = cache_key(config, data)
    ws, needs_setup = workspace_lookup(_WORKSPACES, key, lambda k: _build_workspace(config, data, k))
    if needs_setup:
        _launch_setup(config, ws, stream)
        ws.setup_done = True
        ws.ready = stream_mark(ws.buffer.device, stream)
    else:  # (uploaded and set up on another stream, maybe: NVFP4_TABLE_WRITER=0's pointer_args)
        stream_wait(ws.ready, ws.buffer, stream)
    return ws


def runtime_args(data, config: KernelConfig, stream=None, keep=None) -> tuple:
    """The main kernel's argument tuple for a grouped input (abc, sfasfb, sfasfb_perm,
    problem_sizes) (`_workspace_for`; `keep`, a list: gets the workspace).  The tuple stays
    valid while the same tensors come back."""
    if stream is None:
        import torch

        stream = cuda.CUstream(torch.cuda.current_stream().cuda_stream)
    ws = _workspace_for(data, config, stream)
    if keep is not None:
        keep.append(ws)
    return (*ws.args, stream)


def writer_target(data, config: KernelConfig, stream, like=None):
    """A workspace private to a dispatcher template (never in the address-keyed cache): without
    `like` built from this input (the template's own, which captured launches rewrite); with
    `like` (a Target of this function) a copy of its size-dependent rows for one more address
    set (`_workspace_like`).  Its pointer rows are written by nvfp4gemm/table_writer.py, then
    the setup kernel (packed once per workspace) builds the descriptors from them.  The main
    kernel acquires each descriptor (fence.proxy.tensormap) at every group change, so a
    workspace rewritten between launches on one stream is safe."""
    from nvfp4gemm import table_writer

    # A template made inside a caller's capture (on the capture's own stream, after eager calls on
    # another) may not upload (`refuse_in_capture`), but its `runtime_args` has just found this
    # input's workspace, uploaded eagerly: its size rows are copied from there.
    uploaded = _WORKSPACES.get(cache_key(config, data)) if like is None and in_capture() else None
    if like is not None:
        ws = _workspace_like(like.owner)
    elif uploaded is not None:
        ws = _workspace_like(uploaded)
    else:
        ws = _build_workspace(config, data, None)
    base = ws.buffer.data_ptr()
    # (made inside a capture, its size rows are a copy recorded there, which lands only when that
    # graph replays; every capture that writes this workspace -- a later capture of this stream's
    # template for addresses no eager call bound -- records the copy again, so its graph does not
    # depend on another graph having run: session 55's review)
    before = (lambda: _copy_rows(ws)) if uploaded is not None else None
    return table_writer.Target(ws, base + WS_PTRS, MAX_GROUPS * NUM_DESC, _workspace_pairs(base),
                               _packed_setup(config, ws, stream), before)


def _workspace_buffer(device):
    """WS_BYTES of uninitialized device memory, 128-byte aligned (descriptors need it; the CUDA
    allocator gives 256, a CPU one may not)."""
    import torch

    buf = torch.empty(WS_BYTES + 128, dtype=torch.uint8, device=device)
    pad = -buf.data_ptr() % 128
    return buf[pad:pad + WS_BYTES]


def _workspace_like(base: Workspace) -> Workspace:
    """A new workspace for the same sizes as `base`: its shape and tile rows copied from base on
    the device (on torch's current stream, which must be the stream the writer and the setup
    kernel then run on: the dispatcher makes a side stream current for its calls; no host
    staging); its pointer rows (all of them) left for the writer and its descriptors for the
    setup kernel."""
    src = base.rows_src or base
    buf = _workspace_buffer(src.buffer.device)
    stream_wait(src.ready, src.buffer)  # (src may be another stream's)
    ws = Workspace(buf, _workspace_ptrs(buf.data_ptr()) + tuple(src.args[4:]), rows_src=src)
    _copy_rows(ws)
    return ws


def _copy_rows(ws: Workspace) -> None:
    """ws's shape and tile rows copied from its source's on the device (torch's current stream)."""
    ws.buffer[WS_SHAPES:].copy_(ws.rows_src.buffer[WS_SHAPES:], non_blocking=True)


def _workspace_pairs(base: int) -> tuple:
    """((argument index, address), ...) of the four workspace pointers at the head of the
    kernel's arguments (`_workspace_args`: descriptors, pointer rows, shape rows, tile offsets)."""
    return ((0, base + WS_DESC), (1, base + WS_PTRS), (2, base + WS_SHAPES), (3, base + WS_OFFSETS))


def pointer_args(data, config: KernelConfig, stream_handle=None) -> tuple:
    """(((argument index, address), ...), the workspace) for the arguments that change with the
    input's addresses: the four workspace pointers of `_workspace_for` (descriptors, pointer
    rows, shape rows, tile offsets; the scalars after them depend on the sizes only), for a
    dispatcher launch template (dispatch._Template, which holds the workspace while it points
    there)."""
    if stream_handle is None:
        import torch

        stream_handle = torch.cuda.current_stream().cuda_stream
    ws = _workspace_for(data, config, cuda.CUstream(stream_handle))
    return _workspace_pairs(ws.buffer.data_ptr()), ws
