"""Exp. 177: exp. 101's CTA-count scan of the grouped mixed kernel, re-read with SM cycles and
the in-kernel SM clock (Nsight Compute) instead of nvidia-smi's samples.

python3 exp177.py time                 -> flushed CUDA-event medians of every (shape, form, ctas)
python3 exp177.py prof SHAPE FORM CTAS -> 3 launches of one, for ncu --clock-control none"""
import os
import statistics
import sys

import torch

sys.path.insert(0, os.getcwd())
import configs  # noqa: E402
import reference as R  # noqa: E402
from benchmarks.timing import Timer  # noqa: E402
from nvfp4gemm import harness  # noqa: E402
from nvfp4gemm.dispatch import PackedLaunch  # noqa: E402
from nvfp4gemm.sm90 import grouped_mixed as gm  # noqa: E402

SHAPES = {"U128": tuple([(128, 4096, 7168)] * 8), "U256": tuple([(256, 4096, 7168)] * 8)}
FORMS = {"narrow": configs.sm90_group_mixed(), "wide": configs.sm90_group_mixed(tile=(128, 256))}
REAL_SM = gm.sm_count
keep = []  # launch tables are cached by buffer address: every input stays alive


def launch(shape_name, form, ctas, seed):
    gm.sm_count = (lambda dev: ctas) if ctas else REAL_SM
    shape, cfg = SHAPES[shape_name], FORMS[form]
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), seed, device="cuda")
    keep.append(data)
    ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
    mod, _cls = harness.kernel_module("group", "sm_90a", cfg)
    args = mod.runtime_args(data, cfg, torch.cuda.current_stream(), keep=keep)
    keep.append(args)
    return PackedLaunch(ck.fn, args)


if sys.argv[1] == "time":
    timer = Timer(20)
    seed = 177000
    for shape_name, form in (("U128", "narrow"), ("U256", "wide")):
        for ctas in (32, 64, 128, None):
            seed += 1
            fn = launch(shape_name, form, ctas, seed)
            ts = [timer(fn) for _ in range(3)]
            print(f"{shape_name} {form} ctas {ctas}: " + " ".join(f"{t:.1f}" for t in ts)
                  + f" med {statistics.median(ts):.1f}", flush=True)
else:
    fn = launch(sys.argv[2], sys.argv[3], int(sys.argv[4]) or None, 177999)
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    print("done", sys.argv[2:], flush=True)
