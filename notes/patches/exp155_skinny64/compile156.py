import configs
from nvfp4gemm import harness
for t, kw, ab in [((32,16),4,2), ((32,16),1,2), ((32,8),4,2), ((16,16),2,2), ((32,16),8,2)]:
    c = configs.KernelConfig("dual", "sm_90a", t, skinny=True, k_warps=kw, ab_stages=ab)
    import tempfile; ck = harness.compile_kernel("dual", "sm_90a", c, (t[1], 1024, 1280, 1), dump_dir=tempfile.mkdtemp())
    print(c.short(), ck.registers, ck.spill_bytes, ck.smem_bytes)
