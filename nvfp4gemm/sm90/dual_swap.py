"""Hopper (sm_90a) fused NVFP4 dual GEMM for small M: C^T = silu(B1 A^T) * (B2 A^T).

The dual kernel (dual_gemm.py) runs 128-row wgmmas over M and decodes B1/B2 into shared
memory; with a decode-sized M (1..64 rows) almost all of that MMA is padding, and every B
row is stored once per tile.  This kernel swaps the operands, as the grouped swap_ab path
does, and is that kernel with three changes (it subclasses `Sm90GroupedGemmKernel`):

  - the register operand (the wgmma M side, 2 x 64 rows per consumer warpgroup) is 128
    rows of B1 stacked on the same 128 rows of B2, so a tile covers 128 columns of C and
    the accumulator rows r and r + 128 are x1 and x2 of one output (`reg_operand_sources`,
    `n_per_tile`);
  - the smem operand is tile_n = 16, 32 or 64 rows of A (`configs.swap_mma_n`: the
    narrowest that holds M, since the wgmma on padding rows is on the critical path; rows
    past M zero-filled by the cp.async producer, exactly as grouped);
  - the epilogue pairs rep 0 (x1) with rep 1 (x2) through the shared `silu_mul` and
    writes C[m, n] transposed from the accumulator (`store_c_t`), rows >= M skipped.

Split-K, the group-table plumbing (one "group": row 0 = A, B1, C, SFA, SFB1, M, N, K; row
1 holds B2 and SFB2 in the B and SFB fields and is never scheduled) and the mainloop are
the grouped kernel's.

Constraints (can_implement): configs.check_shape (N % 64, K % 256), N % 128 == 0, L == 1,
any M >= 1; config tile 256 x (16, 32 or 64), swap_ab, 2 consumer warpgroups, no cluster.
"""

from __future__ import annotations

import cutlass

from configs import K_BLOCK, KernelConfig, dual_tiles
from nvfp4gemm.sm90 import grouped_gemm as grouped
from nvfp4gemm.sm90.common import DualSiluPairs, Sm90Common

N_PER_TILE = 128  # columns of C per tile: 128 rows of B1 + the same 128 rows of B2


class Sm90DualSwapKernel(DualSiluPairs, grouped.Sm90GroupedGemmKernel):
    def __init__(self, config: KernelConfig):
        if config.problem != "dual" or not config.swap_ab:
            raise ValueError("Sm90DualSwapKernel needs a dual config with swap_ab")
        super().__init__(config)
        self.n_per_tile = N_PER_TILE

    @staticmethod
    def can_implement(config: KernelConfig, m: int, n: int, k: int, l: int) -> None:
        if config.problem != "dual" or not config.swap_ab:
            raise ValueError("Sm90DualSwapKernel needs a dual config with swap_ab")
        Sm90Common.check_problem(config, "dual", (m, n, k, l))

    def reg_operand_sources(self, meta, g, mb, m0, ra_g, sfa_g, sfa_atom, k64):
        """Rows 0..127 of the register operand from B1 row mb * 128, rows 128..255 from the
        same rows of B2 (table row 1); scale atom 0 of B1, atom 1 of B2, both atom mb."""
        r0 = mb * N_PER_TILE
        atom = cutlass.Int64(mb * k64)  # 128-row atom mb of each B, k-block 0
        return ([(ra_g, r0), (meta[(1, 1)], r0 - N_PER_TILE)],
                [(sfa_g, atom), (meta[(1, 4)], atom)])

    # Sm90Common.store_c_t writes the transposed tile, DualSiluPairs makes it silu(x1) * x2;
    # the tile's first column of C is n_base = mb * 128 = n0 / 2 (the caller passes mb * tile_m).
    def c_t_n0(self, n0):
        return n0 // 2


# ---------------------------------------------------------------------- host helpers


def shared_storage_bytes(config: KernelConfig) -> int:
    return Sm90Common.smem_bytes_of(config, 1)


def compile_args(config: KernelConfig, m: int, n: int, k: int, l: int) -> tuple:
    return grouped.compile_args(config, ((m, n, k),))


def _rows(data) -> list:
    """The 2-row group table: row 1 carries B2 and its scales."""
    a, b1, b2, _sfa, _sfb1, _sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    m, kh, _l = a.shape
    n, k = b1.shape[0], 2 * kh
    return [[a.data_ptr(), b1.data_ptr(), c.data_ptr(), sfa_p.data_ptr(), sfb1_p.data_ptr(), m, n, k],
            [0, b2.data_ptr(), 0, 0, sfb2_p.data_ptr(), 0, 0, 0]]


def table_entries(data, config=None) -> tuple:
    """The 2-row group table's entries (nvfp4gemm/table_writer.py)."""
    return tuple(v for r in _rows(data) for v in r)


def writer_target(data, config: KernelConfig, stream=None, like=None):
    """The dispatcher template's own group table (grouped_gemm.own_table_target)."""
    return grouped.own_table_target(data[-1].device)


def pointer_args(data, config: KernelConfig, stream_handle=None) -> tuple:
    """The group table (argument 0) of this input's addresses, and that table
    (grouped_gemm.pointer_args)."""
    table = grouped.pointer_table(data[-1].device, table_entries(data))
    return ((0, table.data_ptr()),), table


def runtime_args(data, config: KernelConfig, stream, keep=None) -> tuple:
    """The grouped kernel's arguments for one dual problem: a 2-row table (row 1 carries B2
    and its scales), tile prefix sums [0, tiles, never...], the split plan and its
    workspace; cached by the tensors' addresses and the shape (grouped.cached_launch_tables)."""
    a, b1, b2, _sfa, _sfb1, _sfb2, sfa_p, sfb1_p, sfb2_p, c = data
    m, kh, l = a.shape
    n, k = b1.shape[0], 2 * kh

    def build():
        rows = _rows(data)
        total = dual_tiles(config, (m, n, k, l))
        offs = [0, total] + [1 << 30] * (grouped.MAX_GROUPS - 1)
        return grouped.launch_tables(config, c.device, rows, offs, total, k // K_BLOCK)

    key = (config, m, n, k) + tuple(t.data_ptr() for t in (a, b1, b2, sfa_p, sfb1_p, sfb2_p, c))
    hit = grouped.cached_launch_tables(key, build)
    if keep is not None:
        keep.append(hit)
    return grouped.launch_args(hit, stream)
