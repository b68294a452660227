"""Pieces shared by the sm_90a NVFP4 kernels (dual and grouped): static tile attributes,
shared-memory layouts and storage, TMA atom helpers, the load pipeline, the wgmma tiled MMA,
and the stmatrix + TMA-store epilogue plumbing.

Shared memory per CTA (all 1024-byte aligned):
  ab_stages x [ packed A (tile_m x 128 B), packed B_g (tile_n x 128 B each),
                scales of A and each B_g (2 KB each: 128 rows x 4 sub-blocks x 4 B;
                4 KB per B_g for tile N 48 / 96, whose tiles can straddle two atoms; 4 KB of
                A for tile M 256, grouped swap_ab) ]
  dec_stages x decoded fp16 B_g (tile_n x 64 each; one (2*tile_n, 64) tile for the dual
                 problem); A is decoded straight into wgmma registers (rs_a).  2 buffers:
                 the wgmmas drain before each sub-block barrier; 3: they run two deep
                 (`wait_a_free`, `sync_decoded`)
  epi_stages x C subtile (epi_tile fp16), plus mbarriers.
This is what `configs.sm90_smem_bytes` models; `_make_storage` asserts the two agree.

(The experiment paths -- SM90_DEBUG switches, bit-placement decode, A decoded to shared
memory, dedicated decode warpgroups, decode helpers, unfused dual wgmma -- were removed;
notes/sm90.md records them; the code is in git history, commit fa0454c).
"""



import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass import Int32, Int64
from cutlass.cute.nvgpu import warpgroup

from configs import (K_BLOCK, KernelConfig, check_shape, mixed_c_stage_bytes, sm90_acc_registers, sm90_sfb_atoms,
                     sm90_smem_bytes)
from nvfp4gemm.cache import refuse_in_capture
from nvfp4gemm.epilogue import silu_mul
from nvfp4gemm.sm90 import decode

SUB_K = 64  # codes per decoded sub-block (one 128-byte fp16 row, one wgmma k-tile of 4 x 16)
SF_ATOM_BYTES = 512  # 128 rows x 4 scale bytes (one 64-code sub-block)
SF_STAGE_BYTES = SF_ATOM_BYTES * (K_BLOCK // 64)  # one k-block of scales of 128 rows

_SMS: dict = {}


def sm_count(dev) -> int:
    """Multiprocessors of torch device `dev` (cached)."""
    if dev not in _SMS:
        import torch

        _SMS[dev] = torch.cuda.get_device_properties(dev).multi_processor_count
    return _SMS[dev]


def device_tables(dev, *tables) -> list:
    """Device copies of host tables, each given as (nested list of ints, torch dtype), through
    one pinned host buffer and one non-blocking copy (each 16-byte aligned on the device).
    `torch.tensor(..., device=cuda)` per table is a synchronous copy each, so a new grouped
    shape made the host wait for the GPU's queue once per table (five for the mixed kernels);
    the pinned block is not reused before the copy has run (PyTorch's host allocator records
    the stream's use).  (A CPU `dev`, for tests: no pinning.)"""
    import torch

    refuse_in_capture()
    pin = dev.type == "cuda"
    if len(tables) == 1:  # (the per-address-set group table: the fewest host steps)
        (v, dt), = tables
        return [torch.tensor(v, dtype=dt, pin_memory=pin).to(dev, non_blocking=True)]
    host = [torch.tensor(v, dtype=dt) for v, dt in tables]
    offs, total = [], 0
    for h in host:
        offs.append(total)
        total += -(-h.numel() * h.element_size() // 16) * 16
    buf = torch.empty(max(total, 16), dtype=torch.uint8, pin_memory=pin)
    for h, o in zip(host, offs):
        buf[o:o + h.numel() * h.element_size()] = h.flatten().view(torch.uint8)
    dbuf = buf.to(dev, non_blocking=True)
    return [dbuf[o:o + h.numel() * h.element_size()].view(h.dtype).view(h.shape) for h, o in zip(host, offs)]


class _Epi:
    """Register/shared-memory plumbing of the epilogue (plain holder of traced values)."""


class Sm90Common:
    num_gemms = 1

    def __init__(self, config: KernelConfig):
        self.check_config(config)
        self.config = config
        self.tile_m, self.tile_n = config.mma_tile_mn
        self.ab_stages = config.ab_stages
        self.epi_stages = config.epi_stages
        self.dec_stages = config.dec_stages
        # dual: B1 and B2 decoded into one (2*tile_n, 64) tile and multiplied by one
        # m64 x (2*tile_n) wgmma, so A is read once per k16, not twice
        self.mma_n = self.num_gemms * self.tile_n
        self.b_buf_bytes = self.mma_n * 64 * 2  # one decoded B buffer (stride between buffers)
        # A is decoded straight into wgmma A-fragment registers (double-buffered by sub-block
        # parity: with 3 decoded B buffers `wait_a_free` keeps wgmma(it - 2), the reader of
        # this parity, finished before the decode); the B tiles use the matching K order
        self.epi_tile = tuple(config.epi_tile_mn)
        self.raster_m = config.raster == "m"
        self.num_mma_wg = config.mma_warpgroups
        self.threads_per_cta = 128 * (1 + self.num_mma_wg)
        self.load_regs = 40
        self.mma_regs = 232
        self.c_stage_bytes = mixed_c_stage_bytes(config)  # store_c_t_staged's buffer (mixed kernels)

        self.num_mma_threads = 128 * self.num_mma_wg
        # the MMA warpgroups decode B each sub-block
        self.decode_barrier = pipeline.NamedBarrier(barrier_id=2, num_threads=self.num_mma_threads)
        self.epi_barrier = pipeline.NamedBarrier(barrier_id=1, num_threads=self.num_mma_threads)
        # bytes of one stage / one decoded buffer
        self.a_stage_bytes = self.tile_m * (K_BLOCK // 2)
        self.b_stage_bytes = self.tile_n * (K_BLOCK // 2)
        # scale atoms per B per stage: 2 when a B tile can straddle two 128-row atoms (N 96)
        self.sfb_atoms = sm90_sfb_atoms(self.tile_n)
        self.sfb_stage_bytes = self.sfb_atoms * SF_STAGE_BYTES
        # 128-row scale atoms of A per stage (tile M 256: 2) and 64-row wgmma tiles per
        # consumer warpgroup along M (the A register fragments hold m_reps of them)
        self.sfa_atoms = self.tile_m // 128
        self.m_reps = self.tile_m // (64 * self.num_mma_wg)
        # K order inside each 64-code sub-block (decode.py): pair-major where every B decode
        # task is a 32-code row segment (`decode_one` / `decode_pair`), group-major where the
        # kernel decodes B in 16-code quarter tasks (`decode_quarter`), which cannot fill a
        # pair-major 16-byte chunk from one scale group
        self.pair_major = self.b_task_codes() == 32

    def b_task_codes(self) -> int:
        """Codes per B decode task of this kernel (32: row segments, 16: quarter tasks)."""
        raise NotImplementedError

    @staticmethod
    def check_config(config: KernelConfig) -> None:
        if config.arch != "sm_90a":
            raise ValueError(f"config arch {config.arch} is not sm_90a")
        tm, tn = config.mma_tile_mn
        # swap_ab (C^T = B A^T): each consumer warpgroup holds 2 x 64 rows of B (dual: 64
        # rows of B1 and the same 64 rows of B2)
        swap = config.swap_ab
        if config.mma_warpgroups != 2 or tm != (256 if swap else 128):
            raise ValueError(f"sm_90a kernels need tile M == 128 (256 with swap_ab) with 2 consumer "
                             f"warpgroups, got {tm} x wg{config.mma_warpgroups}")
        if tn not in ((16, 32, 64) if swap else (48, 64, 96, 128) if config.problem == "dual" else (64, 128, 256)):
            raise ValueError(f"sm_90a tile N must be 64 or 128 (also 48, 96 for dual; 256 for grouped; "
                             f"16, 32 or 64 with swap_ab), got {tn}")
        # cluster (2, 1): dual split-K pairs reduced through distributed shared memory
        pair = config.problem == "dual" and config.cluster_mn == (2, 1) and (not swap or config.a_prepass)
        if (config.cluster_mn != (1, 1) and not pair) or config.cta_group != 1:
            raise ValueError("sm_90a kernels run without clusters (cluster_mn == (1, 1), cta_group == 1; "
                             "dual also (2, 1): split-K pairs)")
        if tuple(config.epi_tile_mn) != (128, 32 if tn % 32 == 0 else 16):
            raise ValueError(f"sm_90a epilogue tile must be (128, 32) ((128, 16) for tile N 48), "
                             f"got {config.epi_tile_mn}")
        if not config.rs_a:
            raise ValueError("sm_90a kernels decode A into wgmma registers: rs_a must be True")
        if config.dec_stages not in (2, 3):
            raise ValueError(f"sm_90a kernels need dec_stages 2 or 3, got {config.dec_stages}")
        if config.occupancy != 1:
            raise ValueError("sm_90a kernels run one CTA per SM (occupancy == 1)")

    @staticmethod
    def check_problem(config: KernelConfig, problem: str, shape) -> None:
        """can_implement: the config, the shape rules shared with every kernel
        (`configs.check_shape`), and N a multiple of this config's tile N (tile M with
        grouped swap_ab, whose MMA M side runs over N)."""
        Sm90Common.check_config(config)
        errs = check_shape(problem, shape, "sm_90a")
        # the tile side over N: MMA N, or MMA M with swap_ab (dual swap_ab: 128 columns of
        # B1 stacked on the same columns of B2)
        tn = config.mma_tile_mn[0 if config.swap_ab else 1]
        if problem == "dual" and config.swap_ab:
            tn = 128
            if shape[3] != 1:
                errs.append(f"L={shape[3]}: the dual swap_ab kernel runs one batch (L == 1)")
        if problem == "dual":
            ns = [("", shape[1])]
        else:
            ns = [(f"group {g}: ", n) for g, (_m, n, _k) in enumerate(shape)]
        errs += [f"{pre}N={n} must be a multiple of the tile {'M (swap_ab)' if config.swap_ab else 'N'} {tn}"
                 for pre, n in ns if n % tn]
        if errs:
            raise ValueError("; ".join(errs))

    @staticmethod
    def smem_bytes_of(config: KernelConfig, gemms: int) -> int:
        """Bytes of the SharedStorage struct (excluding alignment padding of the mbarriers)."""
        tm, tn = config.mma_tile_mn
        stage = (tm * (K_BLOCK // 2) + gemms * tn * (K_BLOCK // 2)
                 + (tm // 128 + gemms * sm90_sfb_atoms(tn)) * SF_STAGE_BYTES)
        dec = config.dec_stages * gemms * tn * 64 * 2  # decoded B only (A lives in registers)
        epi = config.epi_stages * config.epi_tile_mn[0] * config.epi_tile_mn[1] * 2
        return config.ab_stages * stage + dec + epi + 1024

    # ------------------------------------------------------------------ trace-time setup
    def _setup(self):
        """Host side of __call__: layouts, tiled MMA, shared storage struct."""
        self.tiled_mma = sm90_utils.make_trivial_tiled_mma(
            cutlass.Float16, cutlass.Float16,
            warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.K,
            cutlass.Float32, (self.num_mma_wg, 1, 1), tiler_mn=(64, self.mma_n),
            a_source=warpgroup.OperandSource.RMEM,
        )
        self._make_layouts()
        self._make_storage()

    def _make_layouts(self):
        """Shared-memory layouts (called on the host and again inside the kernel: layout
        values cannot cross into the kernel's region)."""
        u8_atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, cutlass.Uint8)
        # (tile_m, 128 bytes, stages) packed A; (tile_n, 128, stages) packed B
        self.a_packed_layout = cute.tile_to_shape(u8_atom, (self.tile_m, K_BLOCK // 2, self.ab_stages), order=(0, 1, 2))
        self.b_packed_layout = cute.tile_to_shape(u8_atom, (self.tile_n, K_BLOCK // 2, self.ab_stages), order=(0, 1, 2))
        # (128 words, 4 sub-blocks, atoms x stages) int32 scale words of A (atom a of stage
        # s at index sfa_atoms * s + a)
        self.sf_layout = cute.make_layout((128, K_BLOCK // 64, self.sfa_atoms * self.ab_stages),
                                          stride=(1, 128, 128 * (K_BLOCK // 64)))
        # B scales: sfb_atoms atoms per stage (atom a of stage s at index sfb_atoms * s + a)
        self.sfb_layout = cute.make_layout((128, K_BLOCK // 64, self.sfb_atoms * self.ab_stages),
                                           stride=(1, 128, 128 * (K_BLOCK // 64)))
        f16_atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, cutlass.Float16)
        # (mma_n, 64, 2) decoded B; fused dual: rows [0, tile_n) are B1, [tile_n, 2*tile_n) are B2
        self.b_dec_layout = cute.tile_to_shape(f16_atom, (self.mma_n, 64, self.dec_stages), order=(0, 1, 2))
        c_atom = warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(utils.LayoutEnum.ROW_MAJOR, cutlass.Float16, self.epi_tile[1]),
            cutlass.Float16)
        # (128, 32, epi_stages) C staging
        self.epi_layout = cute.tile_to_shape(c_atom, (*self.epi_tile, self.epi_stages), order=(0, 1, 2))

    def _make_storage(self):
        g = self.num_gemms
        assert cute.cosize(self.a_packed_layout) == self.a_stage_bytes * self.ab_stages
        self.tx_bytes = (self.a_stage_bytes + g * self.b_stage_bytes + self.sfa_atoms * SF_STAGE_BYTES
                         + g * self.sfb_stage_bytes)

        stages = self.ab_stages
        a_pk, b_pk = cute.cosize(self.a_packed_layout), cute.cosize(self.b_packed_layout)
        sf_n = cute.cosize(self.sf_layout)
        sfb_n = cute.cosize(self.sfb_layout)
        b_dc = cute.cosize(self.b_dec_layout)
        c_n = cute.cosize(self.epi_layout)

        def buf(dtype, n):
            return cute.struct.Align[cute.struct.MemRange[dtype, n], 1024]

        # fields in order; B2 buffers only for the dual problem
        # flag: the split-K arrival count that one thread reads and broadcasts to the CTA
        fields = {"mbar": cute.struct.MemRange[cutlass.Int64, stages * 2],
                  "flag": cute.struct.MemRange[cutlass.Int32, 4],
                  "sAp": buf(cutlass.Uint8, a_pk), "sB1p": buf(cutlass.Uint8, b_pk)}
        if g == 2:
            fields["sB2p"] = buf(cutlass.Uint8, b_pk)
        fields["sSFA"] = buf(cutlass.Int32, sf_n)
        fields["sSFB1"] = buf(cutlass.Int32, sfb_n)
        if g == 2:
            fields["sSFB2"] = buf(cutlass.Int32, sfb_n)
        fields["sB1d"] = buf(cutlass.Float16, b_dc)
        fields["sC"] = buf(cutlass.Float16, c_n)
        Storage = cute.struct(type("Storage", (), {"__annotations__": fields}))
        self.shared_storage = Storage
        # the resource model in configs.py must describe what we allocate
        model = sm90_smem_bytes(self.config)
        ours = self.smem_bytes_of(self.config, g)
        assert model == ours, f"configs.sm90_smem_bytes {model} != kernel shared memory {ours}"
        assert ours <= 232448, f"shared memory {ours} B over the sm_90a limit"

    def assert_acc_regs(self, acc):
        want = sm90_acc_registers(self.config)
        got = cute.size(acc)
        assert got == want, f"accumulator registers {got} != configs.sm90_acc_registers {want}"

    # ------------------------------------------------------------------ TMA helpers
    def make_tma_load(self, tensor, staged_layout, rows):
        smem_layout = cute.slice_(staged_layout, (None, None, 0))
        return cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), tensor, smem_layout, (rows, K_BLOCK // 2))

    def make_tma_load_sf(self, tensor, staged_layout):
        smem_layout = cute.slice_(staged_layout, (None, None, 0))
        return cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileG2SOp(), tensor, smem_layout, (128, K_BLOCK // 64))

    def make_tma_store(self, tensor_c):
        smem_layout = cute.slice_(self.epi_layout, (None, None, 0))
        return cute.nvgpu.cpasync.make_tiled_tma_atom(
            cute.nvgpu.cpasync.CopyBulkTensorTileS2GOp(), tensor_c, smem_layout, self.epi_tile)

    @staticmethod
    def packed_tensor(mem, layout):
        return mem.get_tensor(layout.outer, swizzle=layout.inner)

    @staticmethod
    def tma_part(atom, s, g):
        return cute.nvgpu.cpasync.tma_partition(
            atom, 0, cute.make_layout(1), cute.group_modes(s, 0, 2), cute.group_modes(g, 0, 2))

    def make_ab_pipeline(self, mbar_ptr):
        producer = pipeline.CooperativeGroup(pipeline.Agent.Thread)
        consumer = pipeline.CooperativeGroup(pipeline.Agent.Thread, self.num_mma_wg * 4)
        return pipeline.PipelineTmaAsync.create(
            barrier_storage=mbar_ptr,
            num_stages=self.ab_stages,
            producer_group=producer,
            consumer_group=consumer,
            tx_count=self.tx_bytes,
        )

    # ------------------------------------------------------------------ split-K work items
    @cute.jit
    def unit_of(self, item, full_tiles, splits):
        """(tile, split, number of splits) of work item `item` (scheduler.split_plan): items
        below full_tiles are whole tiles (split 0 of 1), the rest split units of the
        remaining tiles, `splits` consecutive items per tile.  Without config.split_k the
        split code is not compiled in: (item, 0, 1) as Python constants."""
        if cutlass.const_expr(not self.config.split_k):  # every item a whole tile
            return item, 0, 1
        tail = Int32(item >= full_tiles)
        u = (item - full_tiles) * tail
        tile = item + tail * (full_tiles + u // splits - item)
        return tile, u % splits, 1 + tail * (splits - 1)

    def split_stage_bytes(self) -> int:
        """Contiguous shared memory from the packed A buffers to the end of the decoded B
        buffers (every field 1 KB aligned and a multiple of 1 KB): free once a CTA's last work
        item has left the mainloop, and reused to stage split-K partials."""
        g = self.num_gemms
        return (self.ab_stages * (self.a_stage_bytes + g * self.b_stage_bytes
                                  + self.sfa_atoms * SF_STAGE_BYTES + g * self.sfb_stage_bytes)
                + self.dec_stages * self.b_buf_bytes)

    @cute.jit
    def split_reduce(self, acc, ws, ws_addr, cnt_base, flag, stage, slot, s, ns, ct):
        """Split s of ns of split tile `slot` (a CTA's split unit is always its last work item,
        scheduler.split_plan, so the pipeline's shared memory from `stage` on is free):

        1. every consumer thread writes its fp32 accumulators to the workspace (unit block
           (slot, s): element i of thread ct at i * threads + ct, coalesced);
        2. gpu-scope fence, CTA barrier, one acq_rel atomic on the tile's counter, the old
           value broadcast through shared memory (the whole CTA agrees who is last);
        3. the last of the ns units sums the partials in split order (deterministic whatever
           the arrival order; for ns == 2 its own registers + the other split, p0 + p1 ==
           p1 + p0), resets the counter for the next launch and returns 1 (it runs the
           epilogue); the others return 0.  Each partial block is staged into shared memory
           by 16-byte cp.async from all consumer threads (every copy in flight at once, no
           registers held), then read back per thread: loading it straight into registers
           measured ~7 us per split tile (the 128 accumulators leave few registers for loads
           in flight, H200 2026-11-21).
        """
        nt = self.num_mma_threads
        n_acc = cute.size(acc)
        unit = n_acc * nt  # floats per split unit
        assert unit * 4 <= self.split_stage_bytes(), "split-K partial does not fit the free shared memory"
        base = (slot * ns + s) * unit + ct
        for i in cutlass.range_constexpr(n_acc):
            ws[base + i * nt] = acc[i]
        cute.arch.fence_acq_rel_gpu()  # this thread's partials before the CTA's arrival
        self.epi_barrier.arrive_and_wait()
        if ct == 0:
            old = decode.atom_add_acq_rel_gpu(cnt_base + Int64(slot) * 4, Int32(1))
            if old == ns - 1:
                decode.atom_add_acq_rel_gpu(cnt_base + Int64(slot) * 4, -ns)
            flag[0] = old
        self.epi_barrier.arrive_and_wait()
        last = Int32(flag[0] == ns - 1)
        if last != 0:
            cute.arch.fence_acq_rel_gpu()
            if ns == 2:
                self._add_partial(acc, ws_addr, stage, slot * 2 + 1 - s, unit, ct)
            else:  # ((0 + p0) + p1) + ...: 0 + p0 is p0 exactly
                acc.fill(0.0)
                for s2 in cutlass.range(ns, unroll=1):
                    self._add_partial(acc, ws_addr, stage, slot * ns + s2, unit, ct)
        return last

    @cute.jit
    def _add_partial(self, acc, ws_addr, stage, block, unit, ct):
        """acc (+)= partial block `block` of the workspace, staged through shared memory."""
        nt = self.num_mma_threads
        chunks = unit * 4 // 16
        src = ws_addr + Int64(block) * (unit * 4)
        for c in cutlass.range_constexpr(chunks // nt):
            ofs = (c * nt + ct) * 16
            decode.cp_async_16(stage + ofs, src + Int64(ofs), Int32(16))
        decode.cp_async_wait_all()
        self.epi_barrier.arrive_and_wait()
        for i in cutlass.range_constexpr(cute.size(acc)):
            acc[i] = acc[i] + decode.ld_shared_f32(stage + (i * nt + ct) * 4)
        self.epi_barrier.arrive_and_wait()  # the staging buffer is free for the next block

    # ------------------------------------------------------------------ A operand
    def make_a_operand(self, thr_mma, ct):
        """The wgmma A operand of the consumer thread `ct` (0..255): two register fragments
        ((2,2,2),m_reps,4) fp16 (one per sub-block parity) plus this thread's rows r0, r1 = r0 + 8
        and lane-in-quad c of the m64k16 A layout."""
        ra = _Epi()
        # (tile_m, 64) coordinates of this thread's A values
        frag_shape = thr_mma.partition_A(cute.make_identity_tensor((self.tile_m, 64))).shape
        ra.frag = [cute.make_rmem_tensor(frag_shape, cutlass.Float16) for _ in range(2)]
        ra.frag32 = [cute.recast_tensor(f, cutlass.Int32) for f in ra.frag]
        lane = ct % 32
        ra.r0 = 64 * (ct // 128) + 16 * ((ct % 128) // 32) + lane // 4
        ra.c = lane % 4
        ra.sel = 0x5410 + (ra.c % 2) * 0x2222  # this thread's halfword of each word
        # pair-major: scale bytes c // 2 and 2 + c // 2 (this thread's groups in the two halves)
        ra.ssel = (ra.c // 2) + (ra.c // 2 + 2) * 16
        return ra

    @staticmethod
    def a_operand_k(ra, kk, j):
        return ra.frag[j % 2][(None, None, kk)]

    @cute.jit
    def decode_a(self, ra, a_src, sfa, j: cutlass.Constexpr, sf_row=None):
        """Sub-block j of the packed A stage into this thread's wgmma A registers (every
        64-row tile rep of the thread's warpgroup: rows 128 * rep + r0, scale atom rep).
        `sf_row` (one rep only): the scale row of the thread's r0 counted from the stage's
        first atom, for tiles whose rows start inside an atom (the grouped three-warpgroup
        form: 192 rows from row 0 or 64 of an atom, two atoms per stage)."""
        frag = ra.frag32[j % 2]
        for rep in cutlass.range_constexpr(self.m_reps):
            r0 = ra.r0 if rep == 0 else ra.r0 + 128 * rep
            r1 = r0 + 8
            if cutlass.const_expr(sf_row is None):
                sf = sfa if rep == 0 else sfa + rep * SF_STAGE_BYTES
                # scale words: rows r0 % 128 (= ra.r0) and ra.r0 + 8 of atom rep
                sw0 = decode.ld_shared_u32(sf + (j * 128 + (ra.r0 % 32) * 4 + ra.r0 // 32) * 4)
                sw1 = decode.ld_shared_u32(sf + (j * 128 + ((ra.r0 + 8) % 32) * 4 + (ra.r0 + 8) // 32) * 4)
            else:
                assert self.m_reps == 1, "sf_row: one m64 rep per warpgroup"
                sw0 = decode.ld_shared_u32(sfa + self.sf_word_offset(sf_row, j))
                sw1 = decode.ld_shared_u32(sfa + self.sf_word_offset(sf_row + 8, j))
            if cutlass.const_expr(self.pair_major):
                self._decode_a_pairs(frag, rep, a_src, r0, r1, sw0, sw1, ra, j)
            else:
                self._decode_a_groups(frag, rep, a_src, r0, r1, sw0, sw1, ra, j)

    @staticmethod
    def sf_word_offset(row, j: int):
        """Byte offset of row `row` (< 256) of a stage's consecutive 128-row scale atoms, scale
        word of sub-block j (the permuted layout: word 4 (row % 32) + (row % 128) // 32 of the
        sub-block's 128)."""
        return (row // 128) * SF_STAGE_BYTES + (j * 128 + (row % 32) * 4 + (row % 128) // 32) * 4

    @cute.jit
    def _decode_a_pairs(self, frag, rep: cutlass.Constexpr, a_src, r0, r1, sw0, sw1, ra, j: cutlass.Constexpr):
        """Pair-major K order: in half h of the sub-block (16 bytes of each row: groups 2h and
        2h + 1), thread c owns word c -- group 2h + c // 2 -- whose 8 codes feed k16 steps 2h
        and 2h + 1 (`decode_word`: registers (E, O) of step 2h, then of 2h + 1).  One 32-bit
        load per row and half, no halfword select, two scales per row."""
        s0 = decode.scale_pair(sw0, ra.ssel)
        s1 = decode.scale_pair(sw1, ra.ssel)
        for h in cutlass.range_constexpr(2):
            w0 = decode.ld_shared_u32(decode.swizzle128_chunk_addr(a_src, r0, 2 * j + h) + ra.c * 4)
            w1 = decode.ld_shared_u32(decode.swizzle128_chunk_addr(a_src, r1, 2 * j + h) + ra.c * 4)
            d0 = decode.decode_word(w0, s0[h])
            d1 = decode.decode_word(w1, s1[h])
            for t in cutlass.range_constexpr(2):
                # int32 fragment ((1,2,2), m_reps, 4): R0 (r0, even), R1 (r1, even), R2 (r0,
                # odd), R3 (r1, odd) of k16 step 2h + t
                base = 4 * (rep + self.m_reps * (2 * h + t))
                frag[base + 0] = d0[2 * t]
                frag[base + 1] = d1[2 * t]
                frag[base + 2] = d0[2 * t + 1]
                frag[base + 3] = d1[2 * t + 1]

    @cute.jit
    def _decode_a_groups(self, frag, rep: cutlass.Constexpr, a_src, r0, r1, sw0, sw1, ra, j: cutlass.Constexpr):
        """Group-major K order: k16 step g = scale group g; thread c owns halfword c of it."""
        sq0 = decode.scale_quad(sw0)
        sq1 = decode.scale_quad(sw1)
        for g in cutlass.range_constexpr(4):
            # group g = codes 16g..16g+15 = words 2g, 2g+1 of the 32-byte row segment;
            # halfword c of the group lies in word 2g + c//2
            word4 = ((g % 2) * 2 + ra.c // 2) * 4
            w0 = decode.ld_shared_u32(decode.swizzle128_chunk_addr(a_src, r0, 2 * j + g // 2) + word4)
            w1 = decode.ld_shared_u32(decode.swizzle128_chunk_addr(a_src, r1, 2 * j + g // 2) + word4)
            q0, q1, q2, q3 = decode.decode_a_frag(
                w0, w1, ra.sel, sq0[g], sq1[g])
            # int32 fragment ((1,2,2), m_reps, 4): register q of rep `rep`, k16 group g
            base = 4 * (rep + self.m_reps * g)
            frag[base + 0] = q0
            frag[base + 1] = q1
            frag[base + 2] = q2
            frag[base + 3] = q3

    @cute.jit
    def mainloop(self, ab_pipe, read, it, kb_lo, kb_hi, tiled_mma, acc, ra, tCrB, a_p, sfa_p, decode_b, item_args,
                 release_before_sync: cutlass.Constexpr):
        """The consumer k-loop of one work item, k-blocks [kb_lo, kb_hi): per 64-code
        sub-block j of each stage, decode A into wgmma registers and B (the kernel's own
        `decode_b(si, j, buf, *item_args)`) into decoded buffer it % dec_stages, make it visible and meet the
        other decoders at the barrier, then issue the wgmmas (async: they overlap the next
        sub-block's decode).  The stage is released after its last sub-block's decode, before
        the barrier (`release_before_sync`: each thread's reads of it are done) or after it.
        Returns (read, it) advanced."""
        for kb in cutlass.range(kb_lo, kb_hi, unroll=1):
            ab_pipe.consumer_wait(read)
            si = read.index
            for j in cutlass.range_constexpr(K_BLOCK // SUB_K):
                buf = it % self.dec_stages
                self.wait_a_free()
                self.decode_a(ra, a_p + si * self.a_stage_bytes, sfa_p + si * (self.sfa_atoms * SF_STAGE_BYTES), j)
                decode_b(si, j, buf, *item_args)
                if cutlass.const_expr(release_before_sync and j == K_BLOCK // SUB_K - 1):
                    ab_pipe.consumer_release(read)
                self.sync_decoded()
                if cutlass.const_expr(not release_before_sync and j == K_BLOCK // SUB_K - 1):
                    ab_pipe.consumer_release(read)
                self.mma_subblock(tiled_mma, acc, ra, tCrB, buf, j)
                it += 1
            read.advance()
        return read, it

    @cute.jit
    def wait_a_free(self):
        """Before decoding sub-block it: with 3 decoded buffers the wgmmas run two deep, so
        wait here until wgmma(it - 2) (the reader of this A-register parity) is done;
        wgmma(it - 1) keeps the tensor cores busy through the decode.  (With 2 buffers
        `sync_decoded` already drained them.)"""
        if cutlass.const_expr(self.dec_stages == 3):
            cute.nvgpu.warpgroup.wait_group(1)

    @cute.jit
    def sync_decoded(self):
        """After a sub-block's decode: make the decoded B tile visible to wgmma (async proxy),
        then the named barrier of all decoders.  With 2 buffers, first wait until this
        warpgroup's wgmma(it - 1) is done, so buffer (it + 1) % 2 is free for the next
        decode; with 3, `wait_a_free` (wgmma(it - 2) done before sub-block it) already
        frees buffer (it + 1) % 3 = (it - 2) % 3 of every warpgroup at this barrier."""
        cute.arch.fence_proxy(cute.arch.ProxyKind.async_shared, space=cute.arch.SharedSpace.shared_cta)
        if cutlass.const_expr(self.dec_stages == 2):
            cute.nvgpu.warpgroup.wait_group(0)
        self.decode_barrier.arrive_and_wait()

    @cute.jit
    def mma_subblock(self, tiled_mma, acc, ra, tCrB, buf, j: cutlass.Constexpr):
        """Issue the wgmmas of sub-block j (A registers of parity j, decoded B buffer `buf`)
        as one async group; it overlaps the next sub-block's decode."""
        cute.nvgpu.warpgroup.fence()
        for kk in cutlass.range_constexpr(SUB_K // 16):
            cute.gemm(tiled_mma, acc, self.a_operand_k(ra, kk, j), tCrB[(None, None, kk, buf)], acc)
        cute.nvgpu.warpgroup.commit_group()

    @cute.jit
    def decode_one(self, src, sf, dst, row, sf_row, seg, j: cutlass.Constexpr):
        """B row `row`, 32-code segment `seg` of sub-block j: 16 packed bytes -> 4 fp16
        chunks in the K order of the register A operand; `sf_row` is the row's index inside
        its 128-row scale atom."""
        src_addr = decode.swizzle128_chunk_addr(src, row, 2 * j + seg)
        sf_word = self.sfb_word(sf, sf_row, j)
        dst_addr = decode.swizzle128_chunk_addr(dst, row, 4 * seg)
        decode.decode_task(src_addr, sf_word, seg * 16, dst_addr, self.pair_major)

    @cute.jit
    def decode_pair(self, src0, sf0, dst0, row0, seg0, src1, sf1, dst1, row1, seg1, nb_row0,
                    j: cutlass.Constexpr):
        """Two `decode_one` tasks (B rows row0 / row1 of the tiles at src0 / src1) in one
        asm block that loads both first (`decode.decode_task_x2`): the second task's
        shared-memory latency hides behind the first's decode."""
        w0 = self.sfb_word(sf0, nb_row0 + row0, j)
        w1 = self.sfb_word(sf1, nb_row0 + row1, j)
        decode.decode_task_x2(
            decode.swizzle128_chunk_addr(src0, row0, 2 * j + seg0), w0, seg0 * 16,
            decode.swizzle128_chunk_addr(dst0, row0, 4 * seg0),
            decode.swizzle128_chunk_addr(src1, row1, 2 * j + seg1), w1, seg1 * 16,
            decode.swizzle128_chunk_addr(dst1, row1, 4 * seg1), self.pair_major)

    @cute.jit
    def decode_quarter(self, src, sf, dst, row, sf_row, q, j: cutlass.Constexpr):
        """B row `row`, 16-code scale group q (0..3) of sub-block j: 8 packed bytes -> fp16
        chunks 2q, 2q + 1 (decode.decode_task16; group-major K order only)."""
        assert not self.pair_major, "quarter tasks need the group-major K order"
        src_addr = decode.swizzle128_chunk_addr(src, row, 2 * j + q // 2) + (q % 2) * 8
        sf_word = self.sfb_word(sf, sf_row, j)
        dst_addr = decode.swizzle128_chunk_addr(dst, row, 2 * q)
        decode.decode_task16(src_addr, sf_word, q * 8, dst_addr)

    @staticmethod
    def spread_rows(row, n_rows: int):
        """The B row that decode task `row` (0 .. n_rows - 1; 32 consecutive tasks are one
        warp) takes, chosen so that one warp's B scale-word loads hit distinct banks.

        In the permuted scale atom row r's word sits at 4 (r % 32) + (r % 128) // 32, so the
        32 consecutive rows of a warp hit only 8 banks (4-way conflict on every load).  Here
        quarter-warp k takes 8 consecutive rows (still distinct r % 8: the packed loads and
        decoded stores stay conflict-free) from 32-row block k: 128 rows -> 1 wavefront; 96
        (3 blocks) and 64 (2 blocks) -> 2.  A bijection on [0, n_rows); other sizes keep
        consecutive rows.  Requires the tile's first row inside its atom to be a multiple of
        32 (tile N 64 / 96 / 128k).  (Grouped 128x256 does not use it: exp. 62, its spill.)"""
        if n_rows % 128 == 0:  # quarter k -> block k, octet = the warp's index in its 128
            return (row & ~120) | ((row << 2) & 0x60) | ((row >> 2) & 0x18)
        lo = row & 7
        k = (row >> 3) & 3  # quarter-warp
        if n_rows == 96:  # warp b's quarter k -> block (b + k) % 3, octet k
            return ((row >> 5) + k) % 3 * 32 + k * 8 + lo
        if n_rows == 64:  # quarter k -> block k // 2, octet 2 (k % 2) + warp
            return ((k >> 1) << 5) | ((k & 1) << 4) | (((row >> 5) & 1) << 3) | lo
        return row

    @cute.jit
    def sfb_word(self, sf, sf_row, j: cutlass.Constexpr):
        """The B scale word (4 e4m3 scales of sub-block j) of row `sf_row` of the stage's
        scale atom(s)."""
        if cutlass.const_expr(self.sfb_atoms == 1):
            w = decode.ld_shared_u32(sf + (j * 128 + (sf_row % 32) * 4 + sf_row // 32) * 4)
        else:  # sf_row < 256: atom sf_row // 128 of the stage
            w = decode.ld_shared_u32(sf + (sf_row // 128) * SF_STAGE_BYTES
                                     + (j * 128 + (sf_row % 32) * 4 + (sf_row % 128) // 32) * 4)
        return w

    # ------------------------------------------------------------------ swap_ab epilogue
    @cute.jit
    def store_c_t(self, acc, tCcC, c_g, n0, m0, mg, ng, ct, passes: cutlass.Constexpr = 0):
        """swap_ab: the accumulator is a (tile_m over N_g, tile_n over M_g) tile of C^T;
        element (r, c) goes to C[m0 + c, n0 + r]; columns (rows of C) >= M_g are skipped.
        `passes` (> 0, no SiLU pairing): only the values of accumulator columns [0, 64 passes)
        (a split-K pair rank holds its 64 rows of C there, `Sm90MixedCommon.pair_exchange`).

        A thread's pair (r, c), (r, c + 1) lands in two rows of C, but lane + 4 holds
        (r + 1, c), (r + 1, c + 1): each thread packs its pair (f16x2), swaps it with that
        partner (one shuffle) and keeps one row of both -- even lane groups row c, odd ones
        row c + 1 -- so every store is one 32-bit pair C[row, n0 + r_even .. + 1]."""
        scale = cutlass.Float32(decode.ACC_RESCALE)
        n0 = self.c_t_n0(n0)
        # (M_g, N_g / 2) fp16 pairs of this group's C
        mC2 = cute.make_tensor(cute.make_ptr(cutlass.Int32, c_g, cute.AddressSpace.gmem, assumed_align=16),
                               cute.make_layout((mg, ng // 2), stride=(ng // 2, 1)))
        odd, sel = self.c_t_lane(ct)
        pairs = self.c_t_pairs(acc, tCcC)
        # pair i is flat values 2i, 2i + 1; a rep's tile_n / 2 values hold 8-column groups
        # j = 0 .. tile_n / 8 - 1 four values each, so column group j is pass j // 8
        per_rep = self.tile_n // 2
        assert not passes or 2 * pairs == cute.size(acc) == self.m_reps * per_rep, "passes: no SiLU pairing"
        for i in cutlass.range_constexpr(pairs):
            if cutlass.const_expr(not passes or ((2 * i) % per_rep) // 32 < passes):
                r, c, p, q = self.c_t_word(acc, tCcC, i, scale)
                row = m0 + c + odd
                if row < mg:
                    mC2[(row, (n0 + r - odd) // 2)] = decode.prmt(p, q, sel)

    @staticmethod
    def c_t_lane(ct):
        """(odd, sel) of consumer thread ct for `c_t_word`: whether its accumulator rows are
        odd, and the byte selector that keeps one row of C from its pair and its partner's --
        even: (own r, partner r + 1) of column c; odd: (partner r - 1, own r) of column c + 1."""
        odd = (ct // 4) % 2
        return odd, 0x5410 + odd * (0x3276 - 0x5410)

    @cute.jit
    def c_t_word(self, acc, tCcC, i, scale):
        """Value pair i of the C^T accumulator: (r, c, own fp16x2, partner's).  A thread's
        pair (r, c), (r, c + 1) lands in two rows of C, but lane + 4 holds (r + 1, c),
        (r + 1, c + 1): with the partner's pair (one shuffle) `prmt(own, partner, sel)`
        (`c_t_lane`) is the 32-bit word C[c + odd, r - odd .. r - odd + 1]."""
        r, c = tCcC[2 * i]
        p = self.c_t_pair(acc, i, scale)
        return r, c, p, cute.arch.shuffle_sync_bfly(p, 4)

    @cute.jit
    def store_c_t_staged(self, acc, tCcC, c_g, n0, m0, mg, ng, ct, stage, passes: cutlass.Constexpr = 0):
        """`store_c_t` through a shared-memory buffer at `stage` (`self.c_stage_bytes`, from
        `configs.mixed_c_stage_bytes`), `rows` rows of C at a time: each thread's words
        (`c_t_word`) go to a row-major (rows, C columns of the tile) fp16 buffer (16-byte chunk
        XOR row % 8: an instruction's 8 rows x 16 bytes hit 32 distinct banks), then the
        consumer threads store whole rows of C with 16-byte stores (rows >= M_g skipped).
        Stored straight (`store_c_t`), each warp instruction writes 8 rows x 16 bytes: half
        sectors.  C columns of the tile: tile_m / 2 with the dual SiLU pairing (64 rows of 256
        or 128 bytes per pass), tile_m for a plain C^T (grouped: 32 rows of 512 bytes or 64 of
        256).  `passes` (> 0): only the first that many passes (a split-K pair rank holds its
        rows in pass 0's positions; 64-row passes only)."""
        scale = cutlass.Float32(decode.ACC_RESCALE)
        n0 = self.c_t_n0(n0)
        pairs = self.c_t_pairs(acc, tCcC)
        rb = 2 * (self.tile_m // 2 if self.c_t_silu else self.tile_m)  # bytes of one row of C in the tile
        rows = self.c_stage_rows(rb)  # rows of C per pass
        assert self.tile_m in (128, 192, 256) and (4 if self.c_t_silu else 2) * pairs == cute.size(acc)
        assert not passes or rows == 64, "pair passes are 64 rows of C"
        odd, sel = self.c_t_lane(ct)
        nt = self.num_mma_threads
        chunks = rb // 16
        for p in cutlass.range_constexpr(passes or self.tile_n // rows):
            # the pairs whose accumulator columns (rows of C) lie in [rows p, rows p + rows)
            for i in [i for i in range(pairs) if self.c_t_col_group(i) // (rows // 8) == p]:
                r, c, v, q = self.c_t_word(acc, tCcC, i, scale)
                row = c + odd - rows * p  # row of C inside the pass
                col_b = (r - odd) * 2  # byte of the word inside the row
                row_p = stage + row * rb
                slot = self._staged_chunk(col_b >> 4, row, chunks)
                decode.st_shared_u32(row_p + ((slot << 4) | (col_b & 15)), decode.prmt(v, q, sel))
            self.epi_barrier.arrive_and_wait()
            for k in cutlass.range_constexpr((rows * rb) // 16 // nt):
                qd = ct + nt * k
                row = qd // chunks
                ch = qd % chunks
                w = decode.ld_shared_v4_u32(stage + row * rb + (self._staged_chunk(ch, row, chunks) << 4))
                grow = m0 + rows * p + row
                if cutlass.const_expr(self.ragged_n):  # a last tile over N past N (columns of C)
                    if grow < mg and n0 + ch * 8 < ng:
                        decode.st_global_v4_u32(c_g + (Int64(grow) * ng + n0 + ch * 8) * 2, w[0], w[1], w[2], w[3])
                else:
                    if grow < mg:
                        decode.st_global_v4_u32(c_g + (Int64(grow) * ng + n0 + ch * 8) * 2, w[0], w[1], w[2], w[3])
            self.epi_barrier.arrive_and_wait()  # the buffer is free for the next pass / tile

    def c_stage_rows(self, rb: int) -> int:
        """Rows of C per pass of `store_c_t_staged` (rows of rb bytes): as many as the buffer
        holds, fewer where they do not divide tile_n (A widths 80-240, exp. 112), so that a
        pass is whole 8-column accumulator groups and whole 16-byte chunks per consumer thread."""
        nt = self.num_mma_threads
        for rows in (64, 32, 16, 8):
            if rows * rb <= self.c_stage_bytes and self.tile_n % rows == 0 and ((rows * rb) // 16) % nt == 0:
                return rows
        raise AssertionError(f"no C staging pass fits tile_n {self.tile_n} ({rb}-byte rows, {self.c_stage_bytes} B)")

    @staticmethod
    def _staged_chunk(ch, row, chunks: int):
        """Physical 16-byte chunk of logical chunk ch in row `row` of `store_c_t_staged`'s
        buffer: ch XOR row % 8, or, where a row's chunk count is no power of two (12: 96
        columns, the three-warpgroup form), ch rotated by row % 8 -- either way an
        instruction's 8 rows of one chunk hit 32 distinct banks."""
        if chunks & (chunks - 1):
            return (ch + (row & 7)) % chunks
        return ch ^ (row & 7)

    c_t_silu = False  # DualSiluPairs: a stored pair is silu(x1) * x2 of two accumulator rows
    ragged_n = False  # the three-warpgroup dual form: its last tile over N may pass N

    def c_t_col_group(self, i: int) -> int:
        """The 8-column group j of the accumulator (rows 8 j .. 8 j + 7 of C in the tile) that
        pair i of `c_t_word` lies in: each m64 rep holds tile_n / 2 values per thread, value
        e0 + 2 e1 + 4 j at column 8 j + 2 (lane % 4) + e0, so pair i = e1 + 2 j of its rep."""
        return (i % (self.tile_n // 4)) // 2

    # store_c_t hooks (the dual kernels' fused SiLU epilogue overrides them: DualSiluPairs)
    def c_t_n0(self, n0):
        """Column of C of the tile's accumulator row 0."""
        return n0

    def c_t_pairs(self, acc, tCcC) -> int:
        """Value pairs (r, c), (r, c + 1) of this thread to store."""
        return cute.size(acc) // 2

    def c_t_pair(self, acc, i, scale):
        """Pair i as packed fp16x2."""
        return decode.pack_f16x2(acc[2 * i] * scale, acc[2 * i + 1] * scale)

    # ------------------------------------------------------------------ epilogue plumbing
    def make_epilogue(self, tiled_mma, st, ct):
        e = _Epi()
        e.sC = st.sC.get_tensor(self.epi_layout.outer, swizzle=self.epi_layout.inner)
        copy_atom_r2s = sm90_utils.get_smem_store_op(
            utils.LayoutEnum.ROW_MAJOR, elem_ty_d=cutlass.Float16, elem_ty_acc=cutlass.Float32)
        copy_atom_c = cute.make_copy_atom(cute.nvgpu.warp.StMatrix8x8x16bOp(False, 4), cutlass.Float16)
        tiled_copy_c_atom = cute.make_tiled_copy_C_atom(copy_atom_c, tiled_mma)
        e.tiled_copy_r2s = cute.make_tiled_copy_S(copy_atom_r2s, tiled_copy_c_atom)
        thr_copy_r2s = e.tiled_copy_r2s.get_slice(ct)
        # (R2S, R2S_M, R2S_N, PIPE_D)
        e.tRS_sD = thr_copy_r2s.partition_D(e.sC)
        rd_shape = cute.shape(thr_copy_r2s.partition_S(e.sC))
        e.tRS_rD = cute.make_rmem_tensor(cute.make_layout(rd_shape[:3]).shape, cutlass.Float32)
        e.tRS_rD_out = cute.make_rmem_tensor(cute.make_layout(rd_shape[:3]).shape, cutlass.Float16)
        e.store_pipe = pipeline.PipelineTmaStore.create(
            num_stages=self.epi_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.num_mma_threads),
        )
        return e


class DualSiluPairs:
    """`Sm90Common.store_c_t` hooks for the dual kernels with C^T tiles (dual_swap.py,
    dual_mixed.py): accumulator rows r < 128 hold x1 of column n0 + r of C and the same
    thread's rep-1 value (row r + 128) its x2, so each stored pair is silu(x1) * x2."""

    c_t_silu = True

    def c_t_pairs(self, acc, tCcC) -> int:
        # value i of rep 0 and value i + half of rep 1 are the same (r, c) 128 rows apart
        want = f"((2,2,{self.tile_n // 8}),2,1):((1@1,8@0,8@1),128@0,0)"
        assert str(tCcC.layout) == want, tCcC.layout
        return cute.size(acc) // 4

    def c_t_pair(self, acc, i, scale):
        half = cute.size(acc) // 2
        y0 = silu_mul(acc[2 * i] * scale, acc[half + 2 * i] * scale)
        y1 = silu_mul(acc[2 * i + 1] * scale, acc[half + 2 * i + 1] * scale)
        return decode.pack_f16x2(y0, y1)
