"""Exp. 101b: DRAM-fresh B through TMA (dual mixed kernel) against cp.async (grouped mixed kernel),
same tiles and bytes; NVFP4_EXP101=bsame makes the grouped kernel read one L2-resident B block."""
import os, sys, statistics
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.timing import Timer
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch

var = os.environ.get("NVFP4_EXP101", "base") or "base"
timer = Timer(20)
keep = []


def run(prob, shape, cfg):
    if prob == "dual":
        data = R.generate_input(*shape, 1111, device="cuda")
    else:
        ms, ns, ks = (list(x) for x in zip(*shape))
        data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda")
    keep.append(data)
    mod, _cls = harness.kernel_module(prob, "sm_90a", cfg)
    ck = harness.compile_kernel(prob, "sm_90a", cfg, shape)
    fn = PackedLaunch(ck.fn, mod.runtime_args(data, cfg, torch.cuda.current_stream()))
    ts = [timer(fn) for _ in range(3)]
    print(f"{var:8s} {prob:5s} {str(shape):40s} {cfg.short():36s}: " + " ".join(f"{t:.1f}" for t in ts)
          + f" med {statistics.median(ts):.1f}", flush=True)


if var in ("base", "x"):
    for shape in ((128, 16384, 7168, 1), (1408, 1536, 7168, 1)):
        run("dual", shape, configs.sm90_dual_mixed(shape))
for shape in (((128, 32768, 7168),), ((1408, 3072, 7168),), tuple([(128, 4096, 7168)] * 8), configs.GROUP_BENCHMARKS[0],
              configs.GROUP_BENCHMARKS[1]):
    run("group", shape, configs.sm90_group_mixed())
