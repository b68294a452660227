"""Device-only helper: compile the sm_90a kernels for the benchmark configs and dump their
SASS with cuobjdump into $OUT/{dual,group}.sass (the CPU machine has no disassembler)."""
import os, sys, glob, subprocess
sys.path.insert(0, os.getcwd())
import nvfp4gemm
from nvfp4gemm import harness
import configs as C
out = os.environ.get("OUT", "/tmp")
for prob, shape in [("dual", C.DUAL_BENCHMARKS[1]), ("group", C.GROUP_BENCHMARKS[0])]:
    cfg = C.select_config(prob, "sm_90a", shape)
    d = f"/tmp/sass_{prob}"
    ck = harness.compile_kernel(prob, "sm_90a", cfg, shape, dump_dir=d)
    cub = sorted(glob.glob(d + "/*.cubin"))
    print(prob, cub, ck.registers)
    if cub:
        s = subprocess.run(["cuobjdump", "-sass", cub[-1]], capture_output=True, text=True).stdout
        open(f"{out}/{prob}.sass", "w").write(s)
        print(prob, "sass lines", len(s.splitlines()))
