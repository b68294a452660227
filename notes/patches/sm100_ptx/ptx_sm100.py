"""Every sm_100a config CI compiles (both problems, tests/kernel_checks.sm100_cases), PTX with
kernel names normalized, one file: PYTHONPATH=$PWD python3 notes/patches/sm100_ptx/ptx_sm100.py OUT (from the repository root)"""
import re, sys, tempfile
sys.path.insert(0, "tests")
from kernel_checks import sm100_cases, compile_with_ptx
import test_sm100_dual_compile as D, test_sm100_group_compile as G
out = []
for prob, cases in (("dual", D.CASES), ("group", G.CASES)):
    for cfg, shape in cases:
        ck, ptx = compile_with_ptx(prob, cfg, shape, tempfile.mkdtemp())
        print(prob, cfg.short(), ck.registers, file=sys.stderr)
        out.append(f"=== {prob} {cfg.short()}\n" + re.sub(r"kernel_\w+", "K", ptx))
open(sys.argv[1], "w").write("\n".join(out))
