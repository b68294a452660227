"""Exp. 181: which sm_90a configs CI compiles (tests/test_sm90_compile.py's CASES and SKINNY_CASES)
no logged GPU test compiled.  Usage: python3 compare.py LOG [LOG ...] (from the repository root)."""

import json
import sys

sys.path.insert(0, "tests")
import configs  # noqa: E402,F401  (repr of KernelConfig evaluates against it)
from configs import KernelConfig  # noqa: E402,F401
import test_sm90_compile as t  # noqa: E402

ran = set()
for path in sys.argv[1:]:
    for line in open(path):
        problem, arch, cfg = json.loads(line)
        if arch == "sm_90a":
            ran.add((problem, eval(cfg)))
ci = [(p, c) for p, c, _ in t.CASES] + list(t.SKINNY_CASES)
missing = [(p, c) for p, c in ci if (p, c) not in ran]
print(f"{len(ran)} sm_90a configs compiled on the GPU; CI compiles {len(ci)}; never on the GPU: {len(missing)}")
for p, c in missing:
    print(" ", p, c.short(), "|", c)
