"""Exp. 96 diagnostic: time grouped mixed configs (no correctness check: NVFP4_EXP96 variants are wrong on purpose)."""
import os, sys, statistics
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.timing import Timer
from benchmarks.forms import parse_shapes
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch
timer = Timer(20)
spec = sys.argv[1] if len(sys.argv) > 1 else "leaderboard"
for shape in parse_shapes("group", spec):
    for tile in ((256, 128), (128, 128)):
        cfg = configs.sm90_group_mixed(tile=tile)
        if not configs.fits(cfg, shape) or any(n % tile[0] for _m, n, _k in shape):
            continue
        ms, ns, ks = (list(x) for x in zip(*shape))
        data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda")
        mod, cls = harness.kernel_module("group", "sm_90a", cfg)
        ck = harness.compile_kernel("group", "sm_90a", cfg, shape)
        fn = PackedLaunch(ck.fn, mod.runtime_args(data, cfg, torch.cuda.current_stream()))
        ts = [timer(fn) for _ in range(3)]
        print(f"EXP96={os.environ.get('NVFP4_EXP96', 'base'):10s} {ms} N{ns[0]} K{ks[0]} {tile}: "
              + " ".join(f"{t:.1f}" for t in ts) + f" med {statistics.median(ts):.1f}", flush=True)
