"""Hopper (sm_90a) NVFP4 grouped GEMM in the mixed-input form: C_g^T = B_g A_g^T.

The mixed-input dual kernel (dual_mixed.py, notes/sm90.md exp. 65) applied to groups (exps.
69, 78).  The other grouped kernels decode B_g into shared memory every sub-block and meet at
a named barrier before the wgmma; here nothing decoded is stored by a thread:

  1. `prepass_kernel` (its own launch, one thread per 32-code half row of every group's A)
     decodes all A_g once into one fp16 buffer A16 (group g's rows from row0[g], each group
     padded to a multiple of tile_n rows, row stride K_max), in the pair-major K order that
     pairs with the register operand (mixed.py).  Each warp stages its 2 KB in shared memory
     and stores them back with 512-byte-contiguous instructions (exp. 78: the uncoalesced
     stores of exp. 69 ran at ~0.9 TB/s).  B is decoded only inside the main kernel.
  2. `kernel`, launched behind it with programmatic dependent launch (only its A16 loads wait
     for the pre-pass, griddepcontrol.wait), one CTA per SM, walks its host-made list of
     segments (configs.mixed_group_plan: where every K_g is equal, whole waves of tiles and a
     stream-K tail, so the A_g blocks that share a B_g block read it at the same time, exp.
     102; else stream-K over contiguous ranges): a segment is k-blocks kb0 .. kb1 - 1 of a tile =
     tile_m (256, or 128) rows of B_g (nb) x the A_g rows m0 .. m0 + tile_n - 1 (tile_n 128,
     or 64 for M_g <= 64, exp. 90, or 256 with 128 B_g rows: the dual wide form's m64 x n256
     wgmmas, exp. 93, or 192 with 128 B_g rows, m64 x n192, exp. 108; or any multiple of 16
     in 64-128 with 256 B_g rows and in 128-256 with 128, exp. 112, configs.GROUP_MIXED_TILES;
     ragged: A16's zero padding rows; their columns of C^T are not stored).
       WG0  producer: all 128 threads cp.async one k-block of packed B_g rows (128B-swizzled)
            and its tile_m / 128 scale atoms into a 2-stage ring (per-group addresses, no
            descriptors); warp 0 also TMA-loads the tile's A16 sub-blocks (tile_n rows x 64
            fp16) into an 8-stage ring (6 stages with 144-224-row tiles, exp. 117, 5 beyond:
            `configs.mixed_a16_stages`, both waited for two at a time; one descriptor over all
            groups).
       WG1, WG2  consumers (WG1-WG3 in the three-warpgroup form, 192 rows of B_g, exp. 107:
            one m64 rep each, 512 threads, consumers at 160 registers; its tiles start at row
            0 or 64 of a 128-row scale atom, so each stage holds two and the decode takes the
            thread's scale row, `decode_a(..., sf_row)`): each holds tile_m / 2 (or 64) rows
            of B_g as wgmma register operands
            (m64 reps, `Sm90Common.decode_a`), decoded straight from the packed stage, and
            issues m64 x n(tile_n) x k16 wgmmas against the A16 stage
            (`Sm90MixedCommon.mainloop_mixed`); the epilogue stages the transposed tile in a
            16 KB buffer, 32 rows of C at a time (64 with 128-row tiles), and stores whole rows
            with 16-byte stores, rows of C past M_g skipped (`Sm90Common.store_c_t_staged`,
            exp. 83; the split-K pairs store 32-bit words straight, `store_c_t`).
     Stream-K: a tile cut into segments reduces through an fp32 workspace (mixed.py
     `write_partial` / `add_partials`; the plan puts segment s on CTA c + s, each CTA writes
     at most one partial, a finisher is its CTA's last work and a writer follows only whole
     tiles).  It assumes every CTA of the grid is resident at once (one per SM, grid <= SMs).
     Split-K pairs (config cluster_mn (2, 1), tile 256 x 128, exp. 79): one tile per 2-CTA
     cluster, rank s runs k-blocks [s KB / 2, (s + 1) KB / 2), then the pair reduce-scatters
     through distributed shared memory (`pair_exchange`) and rank s stores C rows m0 + 64 s
     .. + 63 (`store_c_t(..., passes=1)`); any number of clusters.

Device schedule (config `device_schedule`, exps. 136-137; NVFP4_DYNAMIC_M's form): no host-made
table depends on M_g.  The pre-pass finds each half's group from the group table's M_g and K_g
(`scheduler.device_half`; its grid: the A16 buffer's capacity in halves, at most
DEVICE_PREPASS_CTAS CTAs, which stride over the call's halves: exp. 149); in the main kernel one
thread per CTA computes the CTA's plan into shared memory (`scheduler.device_totals`,
`device_plan`: whole tiles cta, cta + grid, ..., then, where every group with rows has one K,
stream-K segments of the tiles past the whole waves or past all but one, by a k-block model)
and every role maps work item i to its tile or segment (`scheduler.device_segment`,
`device_tile`); C stores and stream-K reduction as above.  One launch template serves any M_g
whose A16 rows fit its buffer (`device_fits`).  H100, 2026-11-26: host per call with new M_g
1.5-4.4 ms -> 121-199 us through the dispatcher; kernels 1.062x the host-planned picks (geomean,
12 shapes).  Its `masked` form (exp. 145, nvfp4gemm/masked.py) takes M_g = min(max(counts[g], 0),
the table's M_g) from a caller's int32 counts tensor passed in the row-offset argument (which the
device schedule does not use otherwise): the table then holds the buffers' capacities.

H100, 2026-11-25 (ab_compare against the stored-decode kernels the rule picks): stream-K
256 x 128 on g8 N4096 K7168 0.938 (141 -> 132 us), g8 N7168 K2048 0.969 (exp. 78); 128 x 128
on g2 N3072 K4096 0.982 (exp. 80); pairs 0.916-0.933 on 4 shapes with 64-66 tiles and long K
(exp. 79); 256 x 64 against the swap_ab 256 x 64 stored-decode kernel on M_g <= 64 (MoE
decode) 0.866-1.000 on 11 shapes (exp. 90); 128 x 256 against the stored-decode kernels where
every M_g has an even number of 128-row blocks and N_g >= 2048: 0.818-0.946 on 10 shapes
(exp. 93); 192 x 128 on three consumer warpgroups where every N_g % 192 == 0 and its modelled
busiest CTA is 5% under the other forms': 0.774-0.969 of the pick before on 6 fit shapes and
0.81-1.01 on 7 check shapes (exp. 107); 128 x 192 (m64 x n192 wgmmas) 0.79-0.82 of the wide
form's time on the same plans (5 shapes, exp. 108).  Both 256 x 128 and 128 x 256 tiles side by side in one launch
(`Sm90GroupedMixedFormsKernel`, exp. 99): 0.78-0.92 of the previous pick where >= 0.6 of the
MACs run wide (g8 N7168 K2048 84.3 -> 79.0 us), and the 256 x 128 form alone by rule on more
shapes (exp. 100, 0.89-0.95).  The wave plan (exp. 102): 0.66-1.007 of the stream-K plan on 14
(shape, form) pairs; both leaderboard 8-group cases now run the two-form kernel (126.0 / 76.9
us in bench.py); with the 128 x 192 form beside them or in place of one (exp. 108): 0.795-0.983
on 22 of 26 check shapes, 3 within 1.6%, one 1.013; g8 N7168 K2048 0.975.  Where each is selected: configs.CONFIG_MAP
pins, `_sm90_group_mixed_rule`, `_sm90_group_wide_ok`, `_sm90_group_two_forms_ok`, `_sm90_group_n192_forms`,
`_sm90_group_mixed256_ok`, `_sm90_group_mixed192_ok` and the MIXED64 rule in configs.default_config.

Constraints (can_implement): 1..16 groups, configs.check_shape (N_g % 64, K_g % 256), N_g a
multiple of tile_m (the tile's B rows), any M_g >= 1; pairs: K_g >= 512.  Workspaces (cached
per input buffers): A16 (sum of M_g padded to tile_n) x K_max fp16, and for stream-K a
128 KB fp32 partial slot (a 256 x 64 tile fills 64 KB of it, a 192 x 128 or 128 x 192 one 96 KB) plus a
flag per CTA.
"""

from __future__ import annotations

import os

import cuda.bindings.driver as cuda

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
from cutlass import Int32, Int64
from cutlass.cute.nvgpu import warpgroup

import configs
from configs import K_BLOCK, KernelConfig, check_shape, sm90_smem_bytes
from nvfp4gemm import scheduler
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90.common import SF_STAGE_BYTES, SUB_K, device_tables, sm_count
from nvfp4gemm.sm90.grouped_gemm import (META_FIELDS, MAX_GROUPS, cached_launch_tables, group_meta_tensor, group_of,
                                         group_table_rows)
from nvfp4gemm.sm90.mixed import PREPASS_THREADS, Sm90MixedCommon

SEG_FIELDS = 7  # g, nb, m0, kb0, kb1, s, ns (int32 each; configs.mixed_group_plan)

# Diagnostics only (session 34): with NVFP4_CTA_TRACE=1 in the environment when a kernel is
# compiled, consumer thread 0 of each CTA writes %globaltimer (ns) to TRACE_SLOT_BYTES per CTA
# after the stream-K workspace: [start, then per segment j < TRACE_SEGS: after its k-blocks,
# after its stream-K hand-off, after its store]; one more slot after them holds [the first
# pre-pass CTA's start, the last pre-pass CTA's end, the first and the last main-kernel CTA's
# start] (red.min / red.max; the pre-pass finds the slot in the unused group row
# MAX_GROUPS - 1 of the group table, so with 16 groups it stamps nothing).  The split-K pairs
# have no workspace and stamp nothing.  Off (the default), the cubins are unchanged.
CTA_TRACE = os.environ.get("NVFP4_CTA_TRACE") == "1"
# Exp. 149: the device schedule's pre-pass grid (its buffer's capacity in halves) capped at this
# many CTAs of PREPASS_THREADS (8 per SM of an H100 / H200: full occupancy), which stride over
# the halves of the call's M_g.  H100, MaskedGroupedGemm at capacity 256 (24 cases): 0.943x
# geomean, 0.77-1.003x where the capacity grid exceeds the cap (the most where the counts fill
# little of it), 0.996-1.010x where it does not bind; 16 x 132 gave 0.971x
DEVICE_PREPASS_CTAS = 8 * 132
TRACE_SLOT_BYTES = 128
TRACE_SEGS = 5


def launch_views(meta_ptr, pre_offs_ptr, row0_ptr, seg_ptr, seg_offs_ptr, a16_ptr, a16_rows, k_max) -> tuple:
    """The launch's tables as tensors (inside a @cute.jit __call__): (meta, pre_offs, row0,
    segs, seg_offs, mA16)."""
    meta = group_meta_tensor(meta_ptr)  # (16, 8) int64 group table
    # (17,) int32 prefix sums of per-group 32-code halves of A (unused groups: a huge value)
    pre_offs = cute.make_tensor(pre_offs_ptr, cute.make_layout(MAX_GROUPS + 1))
    # (16,) int32 A16 row of each group's row 0
    row0 = cute.make_tensor(row0_ptr, cute.make_layout(MAX_GROUPS))
    # (segments, 7) int32 schedule; (CTAs + 1,) int32 each CTA's first segment
    segs = cute.make_tensor(seg_ptr, cute.make_layout((1 << 24, SEG_FIELDS), stride=(SEG_FIELDS, 1)))
    seg_offs = cute.make_tensor(seg_offs_ptr, cute.make_layout(1 << 16))
    # (rows, K_max) fp16 A16 of every group, K-major
    mA16 = cute.make_tensor(a16_ptr, cute.make_layout((a16_rows, k_max), stride=(k_max, 1)))
    return meta, pre_offs, row0, segs, seg_offs, mA16


class Sm90GroupedMixedKernel(Sm90MixedCommon):
    num_gemms = 1

    def __init__(self, config: KernelConfig):
        super().__init__(config)  # (Sm90MixedCommon: the A16 ring)
        # cluster (2, 1), exp. 79: split-K pairs instead of stream-K -- one tile per 2-CTA
        # cluster, rank s runs half its k-blocks, then the pair reduce-scatters through
        # distributed shared memory (`pair_exchange`) and rank s stores its 64 rows
        self.cluster_pairs = config.cluster_mn == (2, 1)
        # exps. 136-137: work items computed from the group table (`device_plan`, `device_item`:
        # whole tiles, stream-K segments past the whole waves), no schedule, row offsets or
        # pre-pass prefix sums from the host
        self.device_schedule = config.device_schedule
        # exp. 145: the device schedule's M_g from a counts tensor (the row-offset argument, which
        # the device schedule does not use), each clamped to the table's M_g (`rows_column`)
        self.masked = config.masked
        # Sm90Common's setmaxnreg split (producer 40, consumers 232): the cp.async producer
        # fits it without spills in every form here (exp. 69's four-width 128-row form spilled)
        # scale atoms per stage: tile_m / 128, or 2 for 192 rows (they start at row 0 or 64 of
        # an atom, configs.mixed_group_sf_atoms)
        self.sfa_atoms = configs.mixed_group_sf_atoms(self.tile_m)
        if self.num_mma_wg == 3:
            # three-warpgroup form (exp. 107): 512 threads launch at 128 registers; the
            # producer gives back to 32, so the consumers can take 160 (128 x 32 + 384 x 160
            # = 65536; at 40 / 152, as the dual's form, the consumer spilled 32 bytes)
            self.load_regs = 32
            self.mma_regs = 160

    def sf_stage_bytes(self) -> int:
        return self.sfa_atoms * SF_STAGE_BYTES  # tile_m / 128 atoms of B_g rows

    @staticmethod
    def check_config(config: KernelConfig) -> None:
        if not config.a_prepass or config.arch != "sm_90a" or config.problem != "group":
            raise ValueError("Sm90GroupedMixedKernel runs sm_90a grouped configs with a_prepass=True")
        errs = configs.check_config(config)
        if errs:
            raise ValueError("; ".join(errs))

    @staticmethod
    def can_implement(config: KernelConfig, shapes) -> None:
        Sm90GroupedMixedKernel.check_config(config)
        errs = check_shape("group", shapes, "sm_90a")
        tm = config.mma_tile_mn[0]
        errs += [f"group {g}: N={n} must be a multiple of {tm} (the mixed-input tile's B rows)"
                 for g, (_m, n, _k) in enumerate(shapes) if n % tm]
        if config.cluster_mn == (2, 1):
            errs += [f"group {g}: K={k}: split-K pairs need at least 2 k-blocks (K >= {2 * K_BLOCK})"
                     for g, (_m, _n, k) in enumerate(shapes) if k < 2 * K_BLOCK]
        if sum(m * (k // 32) for m, _n, k in shapes) >= 2**31:
            errs.append("A has 2^31 or more 32-code halves (the pre-pass indexes them in 32 bits)")
        if errs:
            raise ValueError("; ".join(errs))

    # ------------------------------------------------------------------ trace-time setup
    def _make_layouts(self):
        f16_atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, cutlass.Float16)
        # (tile_n, 64, a16_stages) A16 sub-blocks, the wgmma's shared-memory operand
        self.a16_layout = cute.tile_to_shape(f16_atom, (self.tile_n, SUB_K, self.a16_stages), order=(0, 1, 2))

    def _make_storage(self):
        self.tx_a16 = self.a16_stage_bytes

        def buf(dtype, n):
            return cute.struct.Align[cute.struct.MemRange[dtype, n], 1024]

        fields = {"mbar": cute.struct.MemRange[cutlass.Int64, self.ab_stages * 2],
                  "mbar16": cute.struct.MemRange[cutlass.Int64, self.a16_stages * 2],
                  # the device plan (exp. 137; inside the first 1024 bytes with the barriers)
                  "plan": cute.struct.MemRange[cutlass.Int32, 8],
                  "sBp": buf(cutlass.Uint8, self.a_stage_bytes * self.ab_stages),  # tile_m rows x 128 B
                  "sSF": buf(cutlass.Int32, self.sfa_atoms * SF_STAGE_BYTES // 4 * self.ab_stages),
                  "sA16": buf(cutlass.Float16, cute.cosize(self.a16_layout))}
        if self.c_stage_bytes:  # C rows staged by the epilogue (store_c_t_staged; not the pairs)
            fields["sC"] = buf(cutlass.Uint8, self.c_stage_bytes)
        self.shared_storage = cute.struct(type("Storage", (), {"__annotations__": fields}))
        assert sm90_smem_bytes(self.config) == 1024 + self.ab_stages * (self.a_stage_bytes + self.sfa_atoms * SF_STAGE_BYTES) \
            + cute.cosize(self.a16_layout) * 2 + self.c_stage_bytes, "configs.sm90_smem_bytes disagrees with the buffers"

    @cute.jit
    def __call__(
        self,
        meta_ptr: cute.Pointer,
        pre_offs_ptr: cute.Pointer,
        row0_ptr: cute.Pointer,
        seg_ptr: cute.Pointer,
        seg_offs_ptr: cute.Pointer,
        a16_ptr: cute.Pointer,
        ws_ptr: cute.Pointer,
        flags_ptr: cute.Pointer,
        total_halves: Int32,
        k_max: Int32,
        a16_rows: Int32,
        num_ctas: Int32,
        stream: cuda.CUstream,
    ):
        meta, pre_offs, row0, segs, seg_offs, mA16 = launch_views(meta_ptr, pre_offs_ptr, row0_ptr, seg_ptr,
                                                                  seg_offs_ptr, a16_ptr, a16_rows, k_max)
        tma_a16, tA16 = self.setup_a16_tma(mA16)
        self.launch_prepass(meta, pre_offs, row0, a16_ptr, total_halves, k_max, stream)
        # programmatic dependent launch: B loads and decode start while the pre-pass drains;
        # only the A16 loads wait for it (griddepcontrol.wait)
        self.kernel(tma_a16, tA16, self.tiled_mma, meta, row0, segs, seg_offs, ws_ptr, flags_ptr).launch(
            grid=[num_ctas, 1, 1], block=[self.threads_per_cta, 1, 1], cluster=[2 if self.cluster_pairs else 1, 1, 1],
            min_blocks_per_mp=1, stream=stream, use_pdl=True)

    def setup_a16_tma(self, mA16):
        """This form's tiled MMA, layouts and storage (`_setup`), then the TMA atom and view of
        A16 in its (tile_n, 64) sub-blocks."""
        self._setup()
        return cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), mA16,
            cute.slice_(self.a16_layout, (None, None, 0)), (self.tile_n, SUB_K))

    def launch_prepass(self, meta, pre_offs, row0, a16_ptr, total_halves, k_max, stream):
        """The A pre-pass launch, one thread per 32-code half row of every group's A (the device
        schedule: at most DEVICE_PREPASS_CTAS CTAs, each thread taking halves t, t + grid threads,
        ... below this call's total: exp. 149)."""
        ctas = (total_halves + PREPASS_THREADS - 1) // PREPASS_THREADS
        if cutlass.const_expr(self.device_schedule):
            ctas = cutlass.min(ctas, DEVICE_PREPASS_CTAS)
        self.prepass_kernel(meta, pre_offs, row0, a16_ptr, total_halves, k_max).launch(
            grid=[ctas, 1, 1], block=[PREPASS_THREADS, 1, 1], stream=stream)

    @cute.kernel
    def prepass_kernel(self, meta: cute.Tensor, pre_offs: cute.Tensor, row0: cute.Tensor, a16_ptr: cute.Pointer,
                       total_halves: Int32, k_max: Int32):
        """Every group's A -> A16: thread t decodes 32-code half t of the concatenated groups
        (`Sm90MixedCommon.prepass_half`) into its warp's 2 KB of shared memory; then each
        16-byte store instruction of the warp writes chunk q = 32 i + lane (thread q // 4's
        chunk q % 4) to that thread's destination, taken by shuffle: 512 contiguous bytes
        wherever the warp's halves are contiguous in A16 (all but group and row-stride
        seams).  Group padding rows are never written (zero from the allocation)."""
        t, lane, base = self.prepass_begin()
        trace_slot = Int64(0)
        if cutlass.const_expr(CTA_TRACE):
            trace_slot = meta[(MAX_GROUPS - 1, 0)]
            if cute.arch.thread_idx()[0] == 0 and trace_slot != 0:
                decode.red_globaltimer(trace_slot, "min")
        dst = Int64(0)
        if cutlass.const_expr(self.device_schedule):
            # total_halves is the A16 buffer's capacity here; the halves of this call's M_g are
            # counted from the group table, and the CTAs (at most DEVICE_PREPASS_CTAS) stride
            # over them: a call whose M_g fill little of the buffer launches few rounds (exp. 149)
            # (round 0 gives the total with its half's group search, as before exp. 149)
            dst, total = self.prepass_device_half(meta, row0, a16_ptr, k_max, t, base + lane * 64)
            self.prepass_store(dst, t, lane, base, total)
            stride = cute.arch.grid_dim()[0] * PREPASS_THREADS
            for r in cutlass.range(1, (total + stride - 1) // stride, unroll=1):
                cute.arch.sync_warp()  # (the warp's stage is rewritten this round)
                tr = t + r * stride
                dst, _total = self.prepass_device_half(meta, row0, a16_ptr, k_max, tr, base + lane * 64)
                self.prepass_store(dst, tr, lane, base, total)
        else:
            if t < total_halves:
                g = group_of(t, pre_offs)
                local = t - pre_offs[g]
                kg = Int32(meta[(g, 7)])
                halves = kg // 32
                row = local // halves
                seg = local % halves
                self.prepass_half(meta[(g, 0)] + Int64(row) * (kg // 2), meta[(g, 3)], row, seg, kg, base + lane * 64)
                # A16 row row0[g] + row, bytes 64 seg .. 64 seg + 63 (sub-block seg // 2, half seg % 2)
                dst = a16_ptr.toint() + (Int64(row0[g] + row) * k_max + 32 * seg) * 2
            self.prepass_store(dst, t, lane, base, total_halves)
        if cutlass.const_expr(CTA_TRACE):
            cute.arch.sync_threads()
            if cute.arch.thread_idx()[0] == 0 and trace_slot != 0:
                decode.red_globaltimer(trace_slot + 8, "max")

    @cute.jit
    def prepass_store(self, dst: Int64, t: Int32, lane: Int32, base, total_halves: Int32):
        """The warp's 32 decoded halves (2 KB of shared memory at `base`) to their A16 addresses
        (`dst`, half t's): each 16-byte store instruction writes chunk q = 32 i + lane (thread
        q // 4's chunk q % 4) to that thread's destination, taken by shuffle (halves >= total_halves
        store nothing)."""
        cute.arch.sync_warp()
        dst_lo = Int32(dst & 0xFFFFFFFF)
        dst_hi = Int32(dst >> 32)
        for i in cutlass.range_constexpr(4):
            q = 32 * i + lane
            lo = cute.arch.shuffle_sync(dst_lo, q // 4)
            hi = cute.arch.shuffle_sync(dst_hi, q // 4)
            if t - lane + q // 4 < total_halves:
                v = decode.ld_shared_v4_u32(base + 16 * q)
                addr = (Int64(hi) << 32) | (Int64(lo) & 0xFFFFFFFF)
                decode.st_global_v4_u32(addr + 16 * (q % 4), v[0], v[1], v[2], v[3])

    @cute.kernel
    def kernel(self, tma_a16: cute.CopyAtom, mA16: cute.Tensor, tiled_mma: cute.TiledMma, meta: cute.Tensor,
               row0: cute.Tensor, segs: cute.Tensor, seg_offs: cute.Tensor, ws_ptr: cute.Pointer,
               flags_ptr: cute.Pointer):
        self.run_cta(tma_a16, mA16, tiled_mma, meta, row0, segs, seg_offs, ws_ptr, flags_ptr, None)

    @cute.jit
    def run_cta(self, tma_a16: cute.CopyAtom, mA16: cute.Tensor, tiled_mma: cute.TiledMma, meta: cute.Tensor,
                row0: cute.Tensor, segs: cute.Tensor, seg_offs: cute.Tensor, ws_ptr: cute.Pointer,
                flags_ptr: cute.Pointer, cta):
        """CTA `cta` (None: this CTA's index) of this form: its shared memory and pipelines, then
        its warpgroups' roles over segments segs[seg_offs[cta] : seg_offs[cta + 1]] (stream-K
        slot and flag `cta`)."""
        self._make_layouts()
        tidx, _, _ = cute.arch.thread_idx()
        if cutlass.const_expr(CTA_TRACE and not self.cluster_pairs):  # (pairs: no workspace)
            if tidx == 0:
                grid = Int64(cute.arch.grid_dim()[0])
                launch_slot = ws_ptr.toint() + grid * (self.PARTIAL_BYTES + TRACE_SLOT_BYTES)
                decode.red_globaltimer(launch_slot + 16, "min")
                decode.red_globaltimer(launch_slot + 24, "max")
        warp_idx = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        if warp_idx == 0:
            cute.nvgpu.cpasync.prefetch_descriptor(tma_a16)
        smem = utils.SmemAllocator()
        st = smem.allocate(self.shared_storage)
        b_pipe = pipeline.PipelineCpAsync.create(
            barrier_storage=st.mbar.data_ptr(), num_stages=self.ab_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 128),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.num_mma_threads))
        a_pipe = self._make_pipe(st.mbar16.data_ptr(), self.a16_stages, self.tx_a16, self.num_mma_threads)
        if cutlass.const_expr(cta is None):
            cta = cute.arch.block_idx()[0]
        # work items i0 .. i1 - 1: segments of the host's schedule, or of the device's
        # (`device_plan`: whole tiles, or stream-K segments, exp. 137)
        i0, i1, dplan = Int32(0), Int32(0), None
        if cutlass.const_expr(self.device_schedule):
            # one thread computes the CTA's plan, every role reads it from shared memory (each
            # item recomputing it from the table spilled 264-696 bytes)
            dplan = (cta, st.plan.get_tensor(cute.make_layout(8)))
            if tidx == 0:
                for j, v in enumerate(self.device_plan(meta, row0, cta)):
                    dplan[1][j] = v
        else:
            i0 = seg_offs[cta]
            i1 = seg_offs[cta + 1]
        cute.arch.sync_threads()
        if cutlass.const_expr(self.device_schedule):
            i1 = dplan[1][4]
        wg = cute.arch.make_warp_uniform(tidx // 128)
        if wg == 0:
            cute.arch.warpgroup_reg_dealloc(self.load_regs)
            self.producer(st, b_pipe, a_pipe, tma_a16, mA16, meta, row0, segs, i0, i1, dplan, tidx, warp_idx)
        else:
            cute.arch.warpgroup_reg_alloc(self.mma_regs)
            self.consumer(st, b_pipe, a_pipe, tiled_mma, meta, row0, segs, i0, i1, dplan, ws_ptr, flags_ptr, cta, tidx)

    @cute.jit
    def producer(self, st, b_pipe, a_pipe, tma_a16, mA16, meta, row0, segs, i0, i1, dplan, tidx, warp_idx):
        """Per k-block of a segment: the packed B_g stage (all 128 threads, cp.async), then
        its 4 A16 sub-blocks (warp 0, TMA), each into its own stage."""
        # (128, 64, RestM, RestK64) fp16 sub-blocks of A16 (group row 0s are multiples of 128)
        gA16 = cute.local_tile(mA16, (self.tile_n, SUB_K), (None, None))
        sA16 = st.sA16.get_tensor(self.a16_layout.outer, swizzle=self.a16_layout.inner)
        tA16s, tA16g = self.tma_part(tma_a16, sA16, gA16)
        b_s = st.sBp.data_ptr().toint()
        sf_s = st.sSF.data_ptr().toint()
        chunk = tidx % 8  # 16-byte chunk of a 128-byte row
        rq = tidx // 8  # 0..15
        bst = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.ab_stages)
        ast = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.a16_stages)
        for i in cutlass.range(i0, i1, unroll=1):
            kb0, kb1 = Int32(0), Int32(0)
            if cutlass.const_expr(self.device_schedule):
                g, nb, m0, r0g, kb0, kb1 = self.device_item(meta, row0, dplan, i)
                n0 = nb * self.tile_m
                mt = (r0g + m0) // self.tile_n
            else:
                g = segs[(i, 0)]
                n0 = segs[(i, 1)] * self.tile_m
                mt = (row0[g] + segs[(i, 2)]) // self.tile_n  # the tile's A16 row block
            b_g = meta[(g, 1)]
            sfb_g = meta[(g, 4)]
            kg = Int32(meta[(g, 7)])
            kh = Int64(kg // 2)
            step = kh * 16  # bytes between rows rq + 16 r
            sf_atom = Int64((n0 // 128) * (kg // SUB_K))
            if cutlass.const_expr(not self.device_schedule):
                kb0 = segs[(i, 3)]
                kb1 = segs[(i, 4)]
            for kb in cutlass.range(kb0, kb1, unroll=1):
                b_pipe.producer_acquire(bst)
                si = bst.index
                # rows rq + 16 r: the same chunk swizzle (row % 8), 2 KB apart in the stage
                src = b_g + Int64(n0 + rq) * kh + Int64(kb * (K_BLOCK // 2) + chunk * 16)
                dst = decode.swizzle128_chunk_addr(b_s + si * self.a_stage_bytes, rq, chunk)
                for r in cutlass.range_constexpr(self.tile_m // 16):
                    decode.cp_async_16(dst + r * 2048, src + r * step, Int32(16))
                # 2 KB of scales per 128-row atom: 4 consecutive 512-byte blocks (one k-block)
                for a in cutlass.range_constexpr(self.sfa_atoms):
                    decode.cp_async_16(sf_s + (si * self.sfa_atoms + a) * SF_STAGE_BYTES + tidx * 16,
                                       sfb_g + (sf_atom + a * (kg // SUB_K)) * 512 + Int64(kb * SF_STAGE_BYTES + tidx * 16),
                                       Int32(16))
                b_pipe.producer_commit(bst)
                bst.advance()
                if warp_idx == 0:
                    cute.arch.griddepcontrol_wait()  # the pre-pass's A16 (a no-op once it has completed)
                for j in cutlass.range_constexpr(K_BLOCK // SUB_K):
                    if warp_idx == 0:
                        a_pipe.producer_acquire(ast)
                        cute.copy(tma_a16, tA16g[(None, mt, 4 * kb + j)], tA16s[(None, ast.index)],
                                  tma_bar_ptr=a_pipe.producer_get_barrier(ast))
                        a_pipe.producer_commit(ast)
                    ast.advance()
        b_pipe.producer_tail(bst)
        if warp_idx == 0:
            a_pipe.producer_tail(ast)

    @cute.jit
    def consumer(self, st, b_pipe, a_pipe, tiled_mma, meta, row0, segs, i0, i1, dplan, ws_ptr, flags_ptr, cta, tidx):
        ct = tidx - 128  # consumer thread 0..255
        # tCcC: (tile_m, 128) coordinates; row r is column n0 + r of C_g, column c its row m0 + c
        tCrB, ra, tCcC, acc, b_p, sf_p, a16_p, bread, aread, afree = self.consumer_setup(st, tiled_mma, ct)
        # the epilogue's 16 KB C staging buffer (none for the split-K pairs)
        c_stage = Int32(0)
        if cutlass.const_expr(self.c_stage_bytes > 0):
            c_stage = st.sC.data_ptr().toint()
        trace = Int64(0)
        traced = CTA_TRACE and not self.cluster_pairs  # (the split-K pairs have no workspace)
        if cutlass.const_expr(traced):
            trace = ws_ptr.toint() + Int64(cute.arch.grid_dim()[0]) * self.PARTIAL_BYTES + Int64(cta) * TRACE_SLOT_BYTES
            if ct == 0:
                decode.st_globaltimer(trace)
        for i in cutlass.range(i0, i1, unroll=1):
            # device schedule: item i is k-blocks [kb0, kb1) of group g's tile (B block nb, A rows
            # m0 ..), part s of ns
            g, nb, m0, kb0, kb1, s, ns = Int32(0), Int32(0), Int32(0), Int32(0), Int32(0), Int32(0), Int32(1)
            if cutlass.const_expr(self.device_schedule):
                g, nb, m0, _r0g, kb0, kb1, s, ns = self.device_item(meta, row0, dplan, i, parts=True)
            acc.fill(0.0)
            tiled_mma.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)
            # three-warpgroup form: this thread's B row counted from the stage's first scale
            # atom (a 192-row tile starts at row 0 or 64 of it)
            sf_r0 = None
            if cutlass.const_expr(self.num_mma_wg == 3):
                sf_r0 = (segs[(i, 1)] * self.tile_m) % 128 + ra.r0
            if cutlass.const_expr(not self.device_schedule):
                kb0 = segs[(i, 3)]
                kb1 = segs[(i, 4)]
            bread, aread, afree = self.mainloop_mixed(b_pipe, a_pipe, bread, aread, afree, kb0, kb1,
                                                      tiled_mma, acc, ra, tCrB, b_p, sf_p, sf_r0)
            stamp = Int64(0)
            if cutlass.const_expr(traced):
                stamp = trace + Int64(8 + 24 * (i - i0))
                if ct == 0 and i - i0 < TRACE_SEGS:
                    decode.st_globaltimer(stamp)
            finish = Int32(1)
            if cutlass.const_expr(self.device_schedule):
                if ns > 1:
                    finish = self.stream_k_handoff(acc, ws_ptr.toint(), flags_ptr.toint(), cta, s, ns, a16_p, ct)
            elif cutlass.const_expr(self.cluster_pairs):
                # rank s keeps rows [64 s, 64 s + 64) of the tile's C rows, summed over the
                # pair, in its pass-0 accumulator positions, and stores only those
                s = segs[(i, 5)]
                self.pair_exchange(acc, s, a16_p)
                gp = segs[(i, 0)]
                self.store_c_t(acc, tCcC, meta[(gp, 2)], segs[(i, 1)] * self.tile_m, segs[(i, 2)] + 64 * s,
                               Int32(meta[(gp, 5)]), Int32(meta[(gp, 6)]), ct, passes=1)
                finish = Int32(0)
            else:
                s = segs[(i, 5)]
                ns = segs[(i, 6)]
                if ns > 1:
                    finish = self.stream_k_handoff(acc, ws_ptr.toint(), flags_ptr.toint(), cta, s, ns, a16_p, ct)
            if cutlass.const_expr(traced):
                if ct == 0 and i - i0 < TRACE_SEGS:
                    decode.st_globaltimer(stamp + 8)
            if cutlass.const_expr(self.device_schedule):
                if finish != 0:
                    self.store_c_t_staged(acc, tCcC, meta[(g, 2)], nb * self.tile_m, m0,
                                          self.rows_column(meta, row0)[g], Int32(meta[(g, 6)]), ct, c_stage)
            elif cutlass.const_expr(not self.cluster_pairs):  # (a pair rank stored its rows above)
                if finish != 0:
                    g = segs[(i, 0)]
                    self.store_c_t_staged(acc, tCcC, meta[(g, 2)], segs[(i, 1)] * self.tile_m, segs[(i, 2)],
                                          Int32(meta[(g, 5)]), Int32(meta[(g, 6)]), ct, c_stage)
            if cutlass.const_expr(traced):
                if ct == 0 and i - i0 < TRACE_SEGS:
                    decode.st_globaltimer(stamp + 16)

    # ------------------------------------------------------------------ device schedule (exp. 136)
    @cute.jit
    def device_plan(self, meta: cute.Tensor, counts: cute.Tensor, cta: Int32):
        """CTA cta's (dp, u0, end, n_dp, items, div, kb) from the group table
        (scheduler.device_totals, device_plan)."""
        total, kb = scheduler.device_totals(self.rows_column(meta, counts), _TableColumn(meta, 6), _TableColumn(meta, 7),
                                            self.tile_m, self.tile_n, K_BLOCK)
        return scheduler.device_plan(total, kb, cta, cute.arch.grid_dim()[0]) + (kb,)

    @cute.jit
    def device_item(self, meta: cute.Tensor, counts: cute.Tensor, dplan, i: Int32, parts: bool = False):
        """Work item i of this CTA under its device plan (`dplan`: the CTA and the plan in shared
        memory, run_cta): (g, nb, m0, r0g, kb0, kb1) and with `parts` its stream-K rank s of ns
        (scheduler.device_segment; a whole tile runs its group's k-blocks)."""
        cta, plan = dplan
        tile, kb0, kb1, s, ns, whole = scheduler.device_segment(i, cta, cute.arch.grid_dim()[0], plan[0], plan[1],
                                                                plan[2], plan[3], plan[6], plan[5])
        g, nb, m0, r0g, kbg, _ = self.device_tile(meta, counts, tile)
        kb1 = kb1 + whole * kbg
        if cutlass.const_expr(parts):
            return g, nb, m0, r0g, kb0, kb1, s, ns
        return g, nb, m0, r0g, kb0, kb1

    @cute.jit
    def device_tile(self, meta: cute.Tensor, counts: cute.Tensor, t: Int32):
        """(g, nb, m0, r0g, kb, total) of tile t of the device schedule from the group table
        (`scheduler.device_tile`)."""
        return scheduler.device_tile(t, self.rows_column(meta, counts), _TableColumn(meta, 6), _TableColumn(meta, 7),
                                     self.tile_m, self.tile_n, K_BLOCK)

    @cute.jit
    def prepass_device_half(self, meta: cute.Tensor, counts: cute.Tensor, a16_ptr: cute.Pointer, k_max: Int32, t: Int32,
                            stage):
        """The device schedule's pre-pass half t (`device_half`) decoded into `stage` as in the
        host-planned pre-pass: (its A16 address, 0 past the last half; the halves of all groups)."""
        g, first, r0g, total = self.device_half(meta, counts, t)
        dst = Int64(0)
        if t < total:
            kg = Int32(meta[(g, 7)])
            halves = kg // 32
            row = (t - first) // halves
            seg = (t - first) % halves
            self.prepass_half(meta[(g, 0)] + Int64(row) * (kg // 2), meta[(g, 3)], row, seg, kg, stage)
            dst = a16_ptr.toint() + (Int64(r0g + row) * k_max + 32 * seg) * 2
        return dst, total

    @cute.jit
    def device_half(self, meta: cute.Tensor, counts: cute.Tensor, t: Int32):
        """(g, first, r0g, total) of pre-pass half t from the group table (`scheduler.device_half`)."""
        return scheduler.device_half(t, self.rows_column(meta, counts), _TableColumn(meta, 7), self.tile_n)

    def rows_column(self, meta: cute.Tensor, counts: cute.Tensor):
        """The M_g the device schedule reads (trace time): the group table's, or under `masked`
        each group's count clamped to it (`_MaskedRows`)."""
        return _MaskedRows(meta, counts, self.config.masked_above) if self.masked else _TableColumn(meta, 5)


class _TableColumn:
    """Column `field` of the group table as the device schedule's size sequence: each entry is
    loaded where the schedule reads it (a list of all 48 loaded up front spilled 104 bytes in
    the consumer warpgroups)."""

    def __init__(self, meta, field: int):
        self.meta, self.field = meta, field

    def __len__(self) -> int:
        return MAX_GROUPS

    def __getitem__(self, h: int):
        return Int32(self.meta[(h, self.field)])


class _MaskedRows(_TableColumn):
    """M_g = min(max(counts[g], 0), the table's M_g) (exp. 145): the table holds the buffers'
    capacities, `counts` the caller's int32 counts, one per group.  A row past the groups has
    M_g 0 in the table and reads counts[0] (always there), clamped to 0: no load past the
    caller's tensor, no branch.  With `above` (config.masked_above, exp. 147) a count of at most
    that many rows is 0 here: the masked skinny kernel's group."""

    def __init__(self, meta, counts, above: int = 0):
        super().__init__(meta, 5)
        self.counts, self.above = counts, above

    def __getitem__(self, h):
        cap = Int32(self.meta[(h, 5)])
        c = self.counts[h * scheduler._flag(cap > 0)]
        c = c * scheduler._flag(c > self.above)
        return c + scheduler._flag(c > cap) * (cap - c)


class Sm90GroupedMixedFormsKernel:
    """Several grouped mixed-input tile forms in one launch (config `forms`, exps. 99, 108, 112).

    The (256, 128) form pads each M_g to 128 rows; the wide (128, 256) form costs ~9% less
    per k-block of 256-row-equivalent work (exp. 93) but pads to 256; the (128, 192) form
    (exp. 108) runs at 0.80 of the wide form's time and pads to 192.  Each group runs in the
    form `configs.form_groups` gives it, and each form on its own CTAs: CTAs [splits[f - 1],
    splits[f]) run form f (`configs.mixed_group_forms_plan`), each exactly its single-form
    kernel (`Sm90GroupedMixedKernel.run_cta`) in its own branch with its own shared memory
    carve-up, after one pre-pass (A16: the forms' groups by descending A rows per tile, each
    form's first row a multiple of its A rows).  Exp. 95 ran two forms as two launches on two
    streams; one launch saves the second pre-pass and launch.  Constraints: those of each
    form for its groups, and groups for every form; 2 to MAX_FORMS forms of configs.FORM_TILES
    (exp. 112: the forms' TMA atoms, A16 views, MMAs and first CTAs reach the kernel as tuples;
    `configs.width_forms` picks up to three A widths that pad the groups least)."""

    MAX_FORMS = configs.MAX_FORMS  # the kernel's form slots

    def __init__(self, config: KernelConfig):
        self.config = config
        self.parts = [Sm90GroupedMixedKernel(part) for part in configs.form_parts(config)]
        assert 2 <= len(self.parts) <= self.MAX_FORMS, f"{len(self.parts)} forms: the kernel has 2 to {self.MAX_FORMS}"

    @staticmethod
    def check_config(config: KernelConfig) -> None:
        if not config.forms:
            raise ValueError("Sm90GroupedMixedFormsKernel runs multi-form configs (config.forms)")
        Sm90GroupedMixedKernel.check_config(config)

    @staticmethod
    def can_implement(config: KernelConfig, shapes) -> None:
        Sm90GroupedMixedFormsKernel.check_config(config)
        parts = configs.form_groups(shapes, config.forms)
        if not all(parts):
            raise ValueError(f"the multi-form kernel needs groups for each of its forms {config.forms} "
                             "(configs.form_groups)")
        for part, groups in zip(configs.form_parts(config), parts):
            Sm90GroupedMixedKernel.can_implement(part, [shapes[g] for g in groups])

    @cute.jit
    def __call__(
        self,
        meta_ptr: cute.Pointer,
        pre_offs_ptr: cute.Pointer,
        row0_ptr: cute.Pointer,
        seg_ptr: cute.Pointer,
        seg_offs_ptr: cute.Pointer,
        a16_ptr: cute.Pointer,
        ws_ptr: cute.Pointer,
        flags_ptr: cute.Pointer,
        total_halves: Int32,
        k_max: Int32,
        a16_rows: Int32,
        num_ctas: Int32,
        firsts: tuple,
        stream: cuda.CUstream,
    ):
        # the single-form kernel's tables (group indices global, every form's segments), one
        # A16 TMA atom per form's row block, its pre-pass; `firsts`: the first CTA of each
        # form but the first
        meta, pre_offs, row0, segs, seg_offs, mA16 = launch_views(meta_ptr, pre_offs_ptr, row0_ptr, seg_ptr,
                                                                  seg_offs_ptr, a16_ptr, a16_rows, k_max)
        atoms = [form.setup_a16_tma(mA16) for form in self.parts]
        self.parts[0].launch_prepass(meta, pre_offs, row0, a16_ptr, total_halves, k_max, stream)
        self.kernel(tuple(a[0] for a in atoms), tuple(a[1] for a in atoms), tuple(f.tiled_mma for f in self.parts),
                    meta, row0, segs, seg_offs, ws_ptr, flags_ptr, firsts).launch(
            grid=[num_ctas, 1, 1], block=[self.parts[0].threads_per_cta, 1, 1],
            smem=sm90_smem_bytes(self.config), min_blocks_per_mp=1, stream=stream, use_pdl=True)

    @cute.kernel
    def kernel(self, tmas: tuple, mA16s: tuple, mmas: tuple, meta: cute.Tensor, row0: cute.Tensor,
               segs: cute.Tensor, seg_offs: cute.Tensor, ws_ptr: cute.Pointer, flags_ptr: cute.Pointer,
               firsts: tuple):
        """Form f on CTAs [firsts[f - 1], firsts[f]) (0 and the grid's end at the ends): each
        form's branch is its own single-form kernel."""
        cta = cute.arch.block_idx()[0]
        last = len(self.parts) - 1
        for f in cutlass.range_constexpr(len(self.parts)):
            if cutlass.const_expr(f == 0):
                if cta < firsts[0]:
                    self.parts[0].run_cta(tmas[0], mA16s[0], mmas[0], meta, row0, segs, seg_offs, ws_ptr, flags_ptr,
                                          cta)
            elif cutlass.const_expr(f == last):
                if cta >= firsts[last - 1]:
                    self.parts[f].run_cta(tmas[f], mA16s[f], mmas[f], meta, row0, segs, seg_offs, ws_ptr, flags_ptr,
                                          cta)
            else:
                if cta >= firsts[f - 1] and cta < firsts[f]:
                    self.parts[f].run_cta(tmas[f], mA16s[f], mmas[f], meta, row0, segs, seg_offs, ws_ptr, flags_ptr,
                                          cta)


# ---------------------------------------------------------------------- host helpers


def shared_storage_bytes(config: KernelConfig) -> int:
    return sm90_smem_bytes(config)


def static_shape_key(config: KernelConfig, shapes):
    return None  # one compile serves every grouped shape


def compile_args(config: KernelConfig, shapes) -> tuple:
    from cutlass.cute.runtime import make_fake_stream, make_ptr

    def p(dt, i):
        return make_ptr(dt, i << 20, cute.AddressSpace.gmem, assumed_align=16)

    return (p(cutlass.Int64, 1), p(cutlass.Int32, 2), p(cutlass.Int32, 3), p(cutlass.Int32, 4), p(cutlass.Int32, 5),
            p(cutlass.Float16, 6), p(cutlass.Float32, 7), p(cutlass.Int32, 8),
            Int32(1), Int32(256), Int32(128), Int32(1)) \
        + ((tuple(Int32(1) for _ in config.forms[1:]),) if config.forms else ()) + (make_fake_stream(),)


def launch_tables(config: KernelConfig, dev, rows, shapes, narrow_ctas=None) -> tuple:
    """Device tensors of one launch (built once per entry of `cached_launch_tables`): the
    group table, the pre-pass prefix sums, A16 row offsets, the schedule, the A16 buffer
    (zeroed once: group padding rows are never written) and the stream-K workspace and
    flags (zeroed once; each finisher resets the flags it consumed); then the scalars, and
    for a multi-form config a tuple of the first CTA of each form but the first (`narrow_ctas`:
    the CTAs offered to the first forms, an int or one per form but the last; the plan's
    choice if None)."""
    import torch

    if config.device_schedule:
        return device_launch_tables(config, dev, rows, shapes)
    pairs = config.cluster_mn == (2, 1)
    if config.forms:
        plan = configs.mixed_group_forms_plan(shapes, sm_count(dev), config.forms, narrow_ctas)
    else:
        plan = configs.mixed_group_plan(shapes, sm_count(dev), config.mma_tile_mn, pairs=pairs)
    ctas = plan["ctas"]
    meta = rows + [[0] * META_FIELDS] * (MAX_GROUPS - len(rows))
    ws_bytes = ctas * Sm90GroupedMixedKernel.PARTIAL_BYTES + CTA_TRACE * (ctas + 1) * TRACE_SLOT_BYTES
    ws = torch.empty(1 if pairs else ws_bytes // 4, dtype=torch.float32, device=dev)
    if CTA_TRACE and not pairs and len(rows) < MAX_GROUPS:  # the pre-pass's trace slot
        meta[MAX_GROUPS - 1] = [ws.data_ptr() + ws_bytes - TRACE_SLOT_BYTES] + [0] * (META_FIELDS - 1)
    halves = [0]
    for m, _n, k in shapes:
        halves.append(halves[-1] + m * (k // 32))
    halves += [1 << 30] * (MAX_GROUPS + 1 - len(halves))
    row0 = plan["row0"] + [0] * (MAX_GROUPS - len(shapes))
    k_max = max(k for _m, _n, k in shapes)

    i32 = torch.int32
    meta_t, halves_t, row0_t, segs_t, offs_t = device_tables(
        dev, (meta, torch.int64), (halves, i32), (row0, i32), (plan["segs"], i32), (plan["seg_offs"], i32))
    return (meta_t, halves_t, row0_t, segs_t, offs_t,
            torch.zeros((plan["a16_rows"], k_max), dtype=torch.float16, device=dev),
            ws,
            torch.zeros(ctas, dtype=torch.int32, device=dev),
            halves[len(shapes)], k_max, plan["a16_rows"], ctas) + ((tuple(plan["splits"]),) if config.forms else ())


def device_rows(config: KernelConfig, shapes) -> int:
    """A16 rows the device schedule needs for these shapes: each M_g rounded up to tile_n
    (`Sm90GroupedMixedKernel.device_tile`)."""
    tn = config.mma_tile_mn[1]
    return sum(-(-m // tn) * tn for m, _n, _k in shapes)


def device_launch_tables(config: KernelConfig, dev, rows, shapes) -> tuple:
    """`launch_tables` of the device schedule (exp. 136): the group table, an A16 buffer with
    room for DEVICE_ROWS_SLACK more rows than these shapes need (a launch template serves
    later M_g while `device_fits`), and one small unused buffer for the schedule's tables
    and the stream-K workspace.  Scalars: the pre-pass covers the buffer's capacity (its
    threads past this call's halves return), one CTA per SM."""
    import torch

    tn = config.mma_tile_mn[1]
    need = device_rows(config, shapes)
    cap = -(-int(need * DEVICE_ROWS_SLACK) // tn) * tn
    k_max = max(k for _m, _n, k in shapes)
    meta = rows + [[0] * META_FIELDS] * (MAX_GROUPS - len(rows))
    (meta_t,) = device_tables(dev, (meta, torch.int64))
    unused = torch.zeros(16, dtype=torch.int32, device=dev)
    ctas = sm_count(dev)
    return (meta_t, unused, unused, unused, unused, torch.zeros((cap, k_max), dtype=torch.float16, device=dev),
            torch.empty(ctas * Sm90GroupedMixedKernel.PARTIAL_BYTES // 4, dtype=torch.float32, device=dev),
            torch.zeros(ctas, dtype=torch.int32, device=dev), cap * (k_max // 32), k_max, cap, ctas)


# The device schedule's A16 buffer: this many times the rows of the input a template is built
# for (rounded up to the tile), so a template serves inputs with up to that many more rows.
DEVICE_ROWS_SLACK = 1.25


def device_fits(config: KernelConfig, args, data) -> bool:
    """Whether a launch built by `runtime_args` (`args`) can run the grouped input `data`:
    with the device schedule, its M_g must fit the A16 buffer and its K_g its row stride."""
    if not config.device_schedule:
        return True
    shapes = [(m, n, k) for m, n, k, _l in data[3]]
    return device_rows(config, shapes) <= int(args[10]) and max(k for _m, _n, k in shapes) == int(args[9])


def launch_table_key(config: KernelConfig, rows, narrow_ctas=None) -> tuple:
    """`cached_launch_tables` key of a launch: the config, every group's table row (addresses and
    sizes) and a multi-form split fixed by the caller."""
    return ("mixed", config) + tuple(tuple(r) for r in rows) + ((narrow_ctas,) if narrow_ctas is not None else ())


if not CTA_TRACE:  # (a traced launch's group table also holds its trace slot: no templates then)
    from nvfp4gemm.sm90.grouped_gemm import pointer_args, table_entries, writer_target  # noqa: F401  (the group table is argument 0)


def runtime_args(data, config: KernelConfig, stream, narrow_ctas=None, keep=None) -> tuple:
    """The compile_args tuple from a grouped input (tables cached per config and buffers; `keep`,
    a list: gets them); `narrow_ctas` fixes a multi-form config's split (`launch_tables`) instead
    of the plan's choice."""
    from cutlass.cute.runtime import make_ptr

    rows, shapes = group_table_rows(data)
    dev = data[0][0][2].device
    tabs = cached_launch_tables(launch_table_key(config, rows, narrow_ctas),
                                lambda: launch_tables(config, dev, rows, shapes, narrow_ctas))
    if keep is not None:
        keep.append(tabs)
    meta, halves, row0, segs, seg_offs, a16, ws, flags, total, k_max, a16_rows, ctas = tabs[:12]
    if not isinstance(stream, cuda.CUstream):
        stream = cuda.CUstream(stream.cuda_stream)

    def p(dt, t):
        return make_ptr(dt, t.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)

    firsts = (tuple(Int32(x) for x in tabs[12]),) if config.forms else ()
    return (p(cutlass.Int64, meta), p(cutlass.Int32, halves), p(cutlass.Int32, row0), p(cutlass.Int32, segs),
            p(cutlass.Int32, seg_offs), p(cutlass.Float16, a16), p(cutlass.Float32, ws), p(cutlass.Int32, flags),
            Int32(total), Int32(k_max), Int32(a16_rows), Int32(ctas)) + firsts + (stream,)
