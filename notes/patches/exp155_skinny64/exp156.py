"""Exps. 156, 156b, 157, 159, 160: the dual skinny kernel's tile rows, warps and stages swept
(`python3 exp156.py 156|156b|157|159|160`; exp. 158's line loads reuse `sweep`).  Exp. 42's sweep
predates the word decode (exp. 45) and the grouped findings of exps. 151, 154-155.  Each config
compiled once, timed per shape in alternating rounds (L2 flushed, median of 30), checked once per
shape.  The four runs were separate copies of this script that differed only in SETS' lists and
the output name (merged afterwards; the loop is the one that ran)."""
import json, os, sys, tempfile, time
sys.path.insert(0, "benchmarks")
import torch
import timing as T
import configs
import reference as R
from nvfp4gemm import harness

# (shapes (M, N, K), variants: None = the rule, (B rows, k_warps, ab_stages))
SETS = {
    "156": ([(1, 4096, 7168), (16, 4096, 7168), (1, 14336, 4096), (16, 14336, 4096), (1, 28672, 8192),
             (16, 28672, 8192), (8, 1024, 4096), (16, 7168, 2048), (1, 2048, 7168), (16, 3072, 1536)],
            [None, (16, 2, 2), (16, 2, 3), (16, 8, 3), (32, 4, 2), (32, 2, 2), (32, 1, 2), (32, 8, 2)]),
    "156b": ([(16, n, k) for n, k in ((2048, 2048), (4096, 2048), (14336, 2048), (3072, 4096), (7168, 4096),
                                      (28672, 4096), (2048, 7168), (14336, 7168), (28672, 7168), (8192, 8192),
                                      (14336, 8192), (28672, 8192), (6144, 1024), (12288, 3072))],
             [None, (16, 2, 2), (16, 2, 3), (32, 1, 2), (32, 2, 2)]),
    "157": ([(1, 4096, 7168), (16, 4096, 7168), (1, 2048, 7168), (8, 1024, 4096), (1, 14336, 4096), (1, 28672, 8192),
             (16, 2048, 7168), (16, 8192, 8192), (16, 28672, 8192), (4, 7168, 2048), (16, 7168, 2048)],
            [None, (16, 4, 4), (16, 4, 6), (16, 4, 8), (16, 8, 4), (16, 8, 6), (16, 2, 6), (16, 2, 8)]),
    "159": ([(16, n, k) for n, k in ((10240, 4096), (16384, 2048), (11008, 4096), (8448, 7168), (9216, 7168),
                                     (13824, 5120), (8192, 4096), (16896, 6144), (12288, 8192), (14336, 4096))],
            [None, (16, 2, 2), (16, 2, 3), (16, 4, 2)]),
    "160": ([(16, n, k) for n, k in ((18432, 7168), (20480, 4096), (21504, 7168), (24576, 8192), (28672, 8192),
                                     (28672, 4096), (32768, 4096), (53248, 16384), (36864, 2048))]
            + [(1, 53248, 16384), (8, 28672, 8192)],
            [None, (32, 1, 2), (32, 1, 3), (32, 2, 2)]),
}


def variant_config(rule, v):
    return rule if v is None else configs.KernelConfig("dual", "sm_90a", (v[0], rule.mma_tile_mn[1]), skinny=True,
                                                       k_warps=v[1], ab_stages=v[2])


def sweep(shapes, variants, make_config=variant_config, rounds=3):
    """Time every variant config of each dual shape; returns (out dict, timer)."""
    out = {"device": torch.cuda.get_device_name(), "rows": []}
    timer = T.Timer(30)
    t0 = time.time()
    for m, n, k in shapes:
        shape = (m, n, k, 1)
        rule = configs.sm90_dual_skinny(shape)
        data = R.generate_input(*shape, 1560, device="cuda")
        cfgs = []
        for v in variants:
            c = make_config(rule, v)
            if configs.check_config(c) or not configs.fits(c, shape):
                continue
            ck = harness.compile_kernel("dual", "sm_90a", c, shape, dump_dir=tempfile.mkdtemp())
            mod, _ = harness.kernel_module("dual", "sm_90a", c)
            args = mod.runtime_args(data, c, torch.cuda.current_stream())
            data[-1].fill_(float("nan"))
            ck.fn(*args)
            torch.cuda.synchronize()
            ok, msg = R.check_implementation(data, data[-1])
            cfgs.append((v, c, ck, args, ok, ck.registers))
        times = {str(v): [] for v, *_ in cfgs}
        for rnd in range(rounds):
            for v, c, ck, args, ok, regs in (cfgs if rnd % 2 == 0 else cfgs[::-1]):
                times[str(v)].append(timer(lambda: ck.fn(*args)))
        base = min(times["None"])
        for v, c, ck, args, ok, regs in cfgs:
            t = min(times[str(v)])
            row = {"shape": list(shape), "variant": v, "config": c.short(), "regs": regs, "ok": ok,
                   "us": times[str(v)], "ratio": t / base}
            out["rows"].append(row)
            print(json.dumps({"s": shape, "cfg": c.short(), "regs": regs, "ok": ok, "us": round(t, 2),
                              "ratio": round(t / base, 3), "t": round(time.time() - t0)}), flush=True)
        torch.cuda.empty_cache()

    return out, timer


def save(out, name):
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), name), "w") as f:
        json.dump(out, f, indent=1, default=str)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "156"
    save(sweep(*SETS[which])[0], f"exp{which}.json")
