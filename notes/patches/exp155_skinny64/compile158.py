import tempfile
import configs
from nvfp4gemm import harness
from dataclasses import replace
cases = [("dual", configs.KernelConfig("dual", "sm_90a", (16, 8), skinny=True, k_warps=4, ab_stages=3), (1, 1024, 1280, 1)),
         ("dual", configs.KernelConfig("dual", "sm_90a", (16, 16), skinny=True, k_warps=4, ab_stages=2), (16, 1024, 1280, 1)),
         ("dual", configs.KernelConfig("dual", "sm_90a", (16, 16), skinny=True, k_warps=2, ab_stages=3), (16, 1024, 1280, 1)),
         ("group", configs.KernelConfig("group", "sm_90a", (32, 16), skinny=True, k_warps=1, ab_stages=2), ((16, 1024, 1280),)),
         ("group", configs.KernelConfig("group", "sm_90a", (64, 16), skinny=True, k_warps=1, ab_stages=2, masked=True, table_groups=256), ((16, 1024, 1280),))]
for prob, c, shape in cases:
    for lines in (False, True):
        cc = replace(c, line_loads=lines)
        assert not configs.check_config(cc), configs.check_config(cc)
        ck = harness.compile_kernel(prob, "sm_90a", cc, shape, dump_dir=tempfile.mkdtemp())
        print(prob, cc.short(), "regs", ck.registers, "spill", ck.spill_bytes, "smem", ck.smem_bytes, configs.smem_bytes(cc))
