"""Pieces shared by the sm_90a NVFP4 kernels (dual and grouped): static tile attributes,
shared-memory layouts and storage, TMA atom helpers, the load pipeline, the wgmma tiled MMA,
and the stmatrix + TMA-store epilogue plumbing.

Shared memory per CTA (all 1024-byte aligned):
  ab_stages x [ packed A (tile_m x 128 B), packed B_g (tile_n x 128 B each),
                scales of A and each B_g (2 KB each: 128 rows x 4 sub-blocks x 4 B) ]
  dec_stages x [ decoded fp16 A (tile_m x 64; not with rs_a), decoded fp16 B_g
                 (tile_n x 64 each; one (2*tile_n, 64) tile for the fused dual) ]
  epi_stages x C subtile (epi_tile fp16), plus mbarriers.
This is what `configs.sm90_smem_bytes` models; `_make_storage` asserts the two agree.

Environment variable SM90_DEBUG (read when a kernel object is built; experiments only,
never set in production): "bitdecode" (e2m1 by bit placement instead of via e4m3 cvt),
"splitn" (two m64 x tile_n wgmmas instead of one fused), "nodecode" / "nomma" / "nosts" /
"nofence" (drop the decode / the wgmma / the decoded-tile stores / the proxy fence: wrong
or racy results, for timing only).
"""



import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90_utils
from cutlass.cute.nvgpu import warpgroup

from configs import K_BLOCK, KernelConfig, sm90_acc_registers, sm90_smem_bytes
from nvfp4gemm.sm90 import decode

SF_ATOM_BYTES = 512  # 128 rows x 4 scale bytes (one 64-code sub-block)
SF_STAGE_BYTES = SF_ATOM_BYTES * (K_BLOCK // 64)  # one k-block of scales of 128 rows


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
        import os
        self.dbg = os.environ.get("SM90_DEBUG", "")  # experiment switches (compile-time)
        self.bit_decode = "bitdecode" in self.dbg  # e2m1 via bit placement (else via e4m3 cvt)
        # dual: B1 and B2 decoded into one (2*tile_n, 64) tile and multiplied by one
        # m64 x (2*tile_n) wgmma, so A is read from shared memory once per k16, not twice
        self.fuse_n = self.num_gemms == 2 and "splitn" not in self.dbg
        self.mma_n = 2 * self.tile_n if self.fuse_n else self.tile_n
        self.b_buf_bytes = self.mma_n * 64 * 2  # one decoded B buffer (stride between buffers)
        # A decoded straight into wgmma A-fragment registers (double-buffered by sub-block
        # parity, which needs dec_stages == 2); the B tiles use the matching K order
        if self.bit_decode and config.rs_a:
            raise ValueError("SM90_DEBUG=bitdecode has no register-A path: use a config with rs_a=False")
        self.rs_a = config.rs_a
        self.epi_tile = tuple(config.epi_tile_mn)
        self.raster_m = config.raster == "m"
        self.num_mma_wg = config.mma_warpgroups
        self.decode_wgs = config.decode_wgs
        self.threads_per_cta = 128 * (1 + self.num_mma_wg + self.decode_wgs)
        self.load_regs = 40
        self.mma_regs = 232

        self.num_mma_threads = 128 * self.num_mma_wg
        # threads that decode B each sub-block: the MMA warpgroups plus, optionally, warps
        # 1..3 of the TMA warpgroup (which otherwise idle)
        self.helpers = config.decode_helpers
        self.num_decoders = self.num_mma_threads + 32 * self.helpers
        self.decode_barrier = pipeline.NamedBarrier(barrier_id=2, num_threads=self.num_decoders)
        if self.helpers:
            self.load_regs, self.mma_regs = 56, 224  # 128*56 + 256*224 <= 64K
        self.epi_barrier = pipeline.NamedBarrier(barrier_id=1, num_threads=self.num_mma_threads)
        # bytes of one stage / one decoded buffer
        self.a_stage_bytes = self.tile_m * (K_BLOCK // 2)
        self.b_stage_bytes = self.tile_n * (K_BLOCK // 2)
        self.a_dec_bytes = self.tile_m * 64 * 2
        self.b_dec_bytes = self.tile_n * 64 * 2

    @staticmethod
    def check_config(config: KernelConfig) -> None:
        if config.arch != "sm_90a":
            raise ValueError(f"config arch {config.arch} is not sm_90a")
        tm, tn = config.mma_tile_mn
        if config.mma_warpgroups != 2 or tm != 128:
            raise ValueError(f"sm_90a kernels need tile M == 128 with 2 consumer warpgroups, got {tm} x wg{config.mma_warpgroups}")
        if tn not in (64, 128):
            raise ValueError(f"sm_90a tile N must be 64 or 128, got {tn}")
        if config.swap_ab:
            raise ValueError("sm_90a kernels do not implement swap_ab")
        if config.cluster_mn != (1, 1) or config.cta_group != 1:
            raise ValueError("sm_90a kernels run without clusters (cluster_mn == (1, 1), cta_group == 1)")
        if tuple(config.epi_tile_mn) != (128, 32):
            raise ValueError(f"sm_90a epilogue tile must be (128, 32), got {config.epi_tile_mn}")
        if config.decode_helpers not in (0, 3):
            raise ValueError(f"sm_90a decode_helpers must be 0 or 3, got {config.decode_helpers}")
        if config.decode_helpers and (config.problem != "dual" or config.decode_wgs):
            raise ValueError("sm_90a decode_helpers: dual problem without decode_wgs only")
        if config.decode_wgs not in (0, 2):
            raise ValueError(f"sm_90a decode_wgs must be 0 or 2, got {config.decode_wgs}")
        if config.decode_wgs and tn != 64:
            raise ValueError("sm_90a decode_wgs == 2 runs 640 threads (96 registers each): tile N must be 64")
        if config.decode_wgs and config.rs_a:
            raise ValueError("sm_90a decode_wgs needs A in shared memory (rs_a == False)")
        if config.rs_a and config.dec_stages != 2:
            raise ValueError("sm_90a rs_a (A in registers) needs dec_stages == 2")
        if config.dec_stages not in ((2, 3, 4) if config.decode_wgs else (2, 3)):
            raise ValueError(f"sm_90a dec_stages must be 2 or 3 (up to 4 with decode_wgs), got {config.dec_stages}")
        if config.occupancy != 1:
            raise ValueError("sm_90a kernels run one CTA per SM (occupancy == 1)")

    @staticmethod
    def smem_bytes_of(config: KernelConfig, gemms: int) -> int:
        """Bytes of the SharedStorage struct (excluding alignment padding of the mbarriers)."""
        tm, tn = config.mma_tile_mn
        stage = tm * (K_BLOCK // 2) + gemms * tn * (K_BLOCK // 2) + (1 + gemms) * SF_STAGE_BYTES
        dec = config.dec_stages * ((0 if config.rs_a else tm) + gemms * tn) * 64 * 2
        epi = config.epi_stages * config.epi_tile_mn[0] * config.epi_tile_mn[1] * 2
        return config.ab_stages * stage + dec + epi + 1024

    # ------------------------------------------------------------------ trace-time setup
    def _setup(self):
        """Host side of __call__: layouts, tiled MMA, shared storage struct."""
        g = self.num_gemms
        self.tiled_mma = sm90_utils.make_trivial_tiled_mma(
            cutlass.Float16, cutlass.Float16,
            warpgroup.OperandMajorMode.K, warpgroup.OperandMajorMode.K,
            cutlass.Float32, (self.num_mma_wg, 1, 1), tiler_mn=(64, self.mma_n),
            a_source=warpgroup.OperandSource.RMEM if self.rs_a else warpgroup.OperandSource.SMEM,
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
        # (128 words, 4 sub-blocks, stages) int32 scale words
        self.sf_layout = cute.make_layout((128, K_BLOCK // 64, self.ab_stages), stride=(1, 128, 128 * (K_BLOCK // 64)))
        f16_atom = warpgroup.make_smem_layout_atom(warpgroup.SmemLayoutAtomKind.K_SW128, cutlass.Float16)
        # (tile_m, 64, 2) decoded A; (tile_n, 64, 2) decoded B
        self.a_dec_layout = cute.tile_to_shape(f16_atom, (self.tile_m, 64, self.dec_stages), order=(0, 1, 2))
        # fused dual: rows [0, tile_n) are B1, [tile_n, 2*tile_n) are B2
        self.b_dec_layout = cute.tile_to_shape(f16_atom, (self.mma_n, 64, self.dec_stages), order=(0, 1, 2))
        c_atom = warpgroup.make_smem_layout_atom(
            sm90_utils.get_smem_layout_atom(utils.LayoutEnum.ROW_MAJOR, cutlass.Float16, self.epi_tile[1]),
            cutlass.Float16)
        # (128, 32, epi_stages) C staging
        self.epi_layout = cute.tile_to_shape(c_atom, (*self.epi_tile, self.epi_stages), order=(0, 1, 2))

    def _make_storage(self):
        g = self.num_gemms
        assert cute.cosize(self.a_packed_layout) == self.a_stage_bytes * self.ab_stages
        assert cute.cosize(self.a_dec_layout) * 2 == self.dec_stages * self.a_dec_bytes
        self.tx_bytes = self.a_stage_bytes + g * self.b_stage_bytes + (1 + g) * SF_STAGE_BYTES

        stages = self.ab_stages
        a_pk, b_pk = cute.cosize(self.a_packed_layout), cute.cosize(self.b_packed_layout)
        sf_n = cute.cosize(self.sf_layout)
        a_dc, b_dc = cute.cosize(self.a_dec_layout), cute.cosize(self.b_dec_layout)
        c_n = cute.cosize(self.epi_layout)

        def buf(dtype, n):
            return cute.struct.Align[cute.struct.MemRange[dtype, n], 1024]

        # fields in order; B2 buffers only for the dual problem, sAd only without rs_a,
        # sB2d only for the unfused dual
        fields = {"mbar": cute.struct.MemRange[cutlass.Int64, stages * 2],
                  "dmbar": cute.struct.MemRange[cutlass.Int64, self.dec_stages * 2],
                  "sAp": buf(cutlass.Uint8, a_pk), "sB1p": buf(cutlass.Uint8, b_pk)}
        if g == 2:
            fields["sB2p"] = buf(cutlass.Uint8, b_pk)
        fields["sSFA"] = buf(cutlass.Int32, sf_n)
        fields["sSFB1"] = buf(cutlass.Int32, sf_n)
        if g == 2:
            fields["sSFB2"] = buf(cutlass.Int32, sf_n)
        if not self.rs_a:
            fields["sAd"] = buf(cutlass.Float16, a_dc)
        fields["sB1d"] = buf(cutlass.Float16, b_dc)
        if g == 2 and not self.fuse_n:
            fields["sB2d"] = buf(cutlass.Float16, b_dc)
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
        got = cute.size(acc) * (1 if self.fuse_n else self.num_gemms)
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

    def make_dec_pipeline(self, mbar_ptr):
        """Decoded-tile ring between the decode warpgroups (producers, every thread arrives
        after its proxy fence) and the MMA warpgroups (consumers, every thread arrives once
        its wgmma on the buffer has completed)."""
        return pipeline.PipelineAsync.create(
            barrier_storage=mbar_ptr,
            num_stages=self.dec_stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, 128 * self.decode_wgs),
            consumer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread, self.num_mma_threads),
        )

    # ------------------------------------------------------------------ A operand
    def make_a_operand(self, st, tiled_mma, thr_mma, ct):
        """The wgmma A operand of the consumer thread `ct` (0..255).
        rs_a: two register fragments ((2,2,2),1,4) fp16 (one per sub-block parity) plus this
        thread's rows r0, r1 = r0 + 8 and lane-in-quad c of the m64k16 A layout; else the
        decoded smem tile (tile_m, 64, dec_stages) and its wgmma descriptors."""
        ra = _Epi()
        if cutlass.const_expr(self.rs_a):
            # (tile_m, 64) coordinates of this thread's A values
            frag_shape = thr_mma.partition_A(cute.make_identity_tensor((self.tile_m, 64))).shape
            ra.frag = [cute.make_rmem_tensor(frag_shape, cutlass.Float16) for _ in range(2)]
            ra.frag32 = [cute.recast_tensor(f, cutlass.Int32) for f in ra.frag]
            lane = ct % 32
            ra.r0 = 64 * (ct // 128) + 16 * ((ct % 128) // 32) + lane // 4
            ra.c = lane % 4
            ra.sel = 0x5410 + (ra.c % 2) * 0x2222  # this thread's halfword of each word
        else:
            # (tile_m, 64, dec_stages) decoded fp16 A
            sAd = st.sAd.get_tensor(self.a_dec_layout.outer, swizzle=self.a_dec_layout.inner)
            ra.tCrA = tiled_mma.make_fragment_A(thr_mma.partition_A(sAd))
            ra.a_d = st.sAd.data_ptr().toint()
        return ra

    def a_operand_k(self, ra, kk, buf, j):
        if cutlass.const_expr(self.rs_a):
            return ra.frag[j % 2][(None, None, kk)]
        return ra.tCrA[(None, None, kk, buf)]

    @cute.jit
    def decode_a(self, ra, ct, a_src, sfa, buf, j: cutlass.Constexpr):
        """Sub-block j of the packed A stage: into this thread's wgmma A registers (rs_a) or,
        shared by all 256 consumer threads, into the decoded smem tile."""
        if cutlass.const_expr(self.rs_a):
            frag = ra.frag32[j % 2]
            r1 = ra.r0 + 8
            sw0 = decode.ld_shared_u32(sfa + (j * 128 + (ra.r0 % 32) * 4 + ra.r0 // 32) * 4)
            sw1 = decode.ld_shared_u32(sfa + (j * 128 + (r1 % 32) * 4 + r1 // 32) * 4)
            for g in cutlass.range_constexpr(4):
                # group g = codes 16g..16g+15 = words 2g, 2g+1 of the 32-byte row segment;
                # halfword c of the group lies in word 2g + c//2
                word4 = ((g % 2) * 2 + ra.c // 2) * 4
                w0 = decode.ld_shared_u32(decode.swizzle128_chunk_addr(a_src, ra.r0, 2 * j + g // 2) + word4)
                w1 = decode.ld_shared_u32(decode.swizzle128_chunk_addr(a_src, r1, 2 * j + g // 2) + word4)
                q0, q1, q2, q3 = decode.decode_a_frag(
                    w0, w1, ra.sel, decode.scale_half2(sw0, g), decode.scale_half2(sw1, g))
                frag[4 * g + 0] = q0
                frag[4 * g + 1] = q1
                frag[4 * g + 2] = q2
                frag[4 * g + 3] = q3
        else:
            for i in cutlass.range_constexpr((2 * self.tile_m) // 256):
                t = ct + 256 * i
                seg = t // self.tile_m
                row = t % self.tile_m
                src_addr = decode.swizzle128_chunk_addr(a_src, row, 2 * j + seg)
                sf_word = decode.ld_shared_u32(sfa + (j * 128 + (row % 32) * 4 + row // 32) * 4)
                dst_addr = decode.swizzle128_chunk_addr(ra.a_d + buf * self.a_dec_bytes, row, 4 * seg)
                decode.decode_task(src_addr, sf_word, seg * 16, dst_addr, self.bit_decode,
                                   "nosts" not in self.dbg, False)

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
