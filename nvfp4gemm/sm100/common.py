"""Pieces shared by the sm_100a kernels, as free functions (no kernel `self`).

These are the grouped GEMM's versions of logic that `dual_gemm.py` holds as methods
(`_tma_load`, `_s2t_copy_and_partition`, `_t2r_copy_and_partition`, `_tmem_sf`); the dual
kernel should adopt them (notes/sm100_group.md).  Plus the device-side tensormap helpers
the grouped kernel needs (descriptor pointers in global memory, prefetch).
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.utils as utils
import cutlass.utils.blackwell_helpers as sm100_utils
from cutlass._mlir.dialects import llvm
from cutlass.cute.nvgpu import tcgen05
from cutlass.cutlass_dsl import dsl_user_op

import configs

TENSORMAP_BYTES = 128  # one CUtensorMap


def tma_load_atom(make_atom, op, gmem, smem_layout_staged, tiler, tiled_mma, cluster_layout,
                  internal_type=None):
    """TMA load atom + coordinate tensor for one operand, and the bytes one stage lands."""
    smem_layout = cute.slice_(smem_layout_staged, (None, None, None, 0))
    kwargs = {} if internal_type is None else {"internal_type": internal_type}
    atom, tensor = make_atom(op, gmem, smem_layout, tiler, tiled_mma, cluster_layout.shape, **kwargs)
    return atom, tensor, cute.size_in_bytes(gmem.element_type, smem_layout)


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
# (Same logic as dual_gemm.py's helpers; here so that a problem's bundled submission, which
# leaves out the other problem's kernel module, has them.)

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
