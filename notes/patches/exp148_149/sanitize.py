"""Exps. 146-147: MaskedGroupedGemm's kernels under compute-sanitizer (zero counts first in the process)."""
import os, sys, torch
sys.path.insert(0, os.getcwd())
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
for caps, n, k, sets in (([64, 128, 32, 200], 2048, 1024, ([0] * 4, [0, 5, 32, 0], [16, 17, 1, 200], [64, 128, 32, 200], [99, 200, -3, 1])),
                         ([16, 3, 9], 1024, 512, ([0] * 3, [1, 0, 3], [16, 3, 9], [40, 2, 0]))):
    g = len(caps)
    data = R.generate_input(caps, [n] * g, [k] * g, g, 5, device="cuda", poison_padding=True)
    ref = R.ref_group(data)
    gemm = MaskedGroupedGemm(data, small=True if max(caps) > 16 else None)
    for raw in sets:
        outs = gemm(torch.tensor(raw, dtype=torch.int32, device="cuda"))
        torch.cuda.synchronize()
        for gi, (c, m) in enumerate(zip(outs, raw)):
            m = min(max(m, 0), caps[gi])
            assert not R.compare(c[:m], ref[gi][:m]), (gemm.cfg.short(), raw, gi)
    print(" + ".join(c.short() for c in gemm.configs), "ok", flush=True)
