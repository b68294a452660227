"""Random legal shapes of both problems through custom_kernel on this GPU (exp. 182).

The GPU tests run fixed shape lists (the leaderboard's, and per rule or config a few chosen
ones).  This draws shapes the way `tests/test_sm90_compile.py`'s rule sweep does -- any M, N % 64,
K % 256, L 1-3 for the dual problem; 1-20 groups of ragged M_g for grouped -- keeps those the
shape rules accept (`configs.check_shape`) and whose FLOPs stay under `--max-gflop`, and runs
each once: outputs NaN-poisoned, scale padding poisoned, then every output element written and
within the tolerance of the CPU-portable reference (`reference.check_implementation`).
Where that check fails, the case is also compared with an fp64 ground truth at the same
tolerance: "TOL" marks an output within it (beyond the leaderboard's K <= 7168, an element
whose sum cancels heavily can differ from the fp32 reference by more than 1e-3 while both sit
inside the tolerance of the truth: the reference's own fp32 error counts against the kernel;
exp. 182), "FAIL" one outside it.  Prints one line per case and a summary; `--json` keeps every
case (shape, config, result, time); the exit status is 1 on any FAIL.

    python3 tools/fuzz_gpu.py --count 150 --seed 1 --json fuzz.json [--draw wide] [--problem dual]
"""

import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import configs  # noqa: E402
import reference as R  # noqa: E402


def dual_shape(rnd: random.Random):
    m = rnd.choice([rnd.randint(1, 16), rnd.randint(17, 64), rnd.randint(65, 1024), rnd.randint(1025, 8192)])
    n = rnd.choice(range(64, 14337, rnd.choice([64, 128, 192, 256])))
    return m, n, rnd.choice(range(256, 16385, 256)), rnd.choice([1, 1, 1, 2, 3])


def group_shape(rnd: random.Random):
    g = rnd.choice([1, 2, 3, 4, 8, 8, 12, 16, 20])
    n = rnd.choice(range(128, 14337, rnd.choice([64, 128, 256])))
    k = rnd.choice(range(256, 8193, 256))
    mmax = rnd.choice([16, 64, 256, 600])
    return tuple((rnd.randint(1, mmax), n if rnd.random() < .8 else rnd.choice(range(128, 8193, 128)), k)
                 for _ in range(g))


def gflop(problem: str, shape) -> float:
    if problem == "dual":
        m, n, k, l = shape
        return 4 * m * n * k * l / 1e9
    return sum(2 * m * n * k for m, n, k in shape) / 1e9


def shapes(problem: str, rnd: random.Random, count: int, max_gflop: float, arch: str) -> list:
    """`count` shapes of `problem` the shape rules accept for `arch`, each under `max_gflop`."""
    out = []
    while len(out) < count:
        s = dual_shape(rnd) if problem == "dual" else group_shape(rnd)
        errs = configs.check_shape("dual", s, arch) if problem == "dual" else configs.check_shape("group", s)
        if not errs and gflop(problem, s) <= max_gflop:
            out.append(s)
    return out


def make_input(problem: str, shape, seed: int, wide: bool):
    if problem == "dual":
        return R.generate_input(*shape, seed, device="cuda", poison_padding=True, wide=wide)
    ms, ns, ks = (list(x) for x in zip(*shape))
    return R.generate_input(ms, ns, ks, len(shape), seed, device="cuda", poison_padding=True, wide=wide)


def run_case(problem: str, shape, seed: int, wide: bool, arch: str) -> dict:
    import torch

    from nvfp4gemm.dispatch import custom_kernel

    row = {"problem": problem, "shape": shape, "seed": seed, "gflop": round(gflop(problem, shape), 3),
           "config": configs.select_config(problem, arch, shape).short()}
    data = make_input(problem, shape, seed, wide)
    outs = [data[-1]] if problem == "dual" else [c for _, _, c in data[0]]
    for c in outs:
        c.fill_(float("nan"))
    t0 = time.time()
    try:
        out = custom_kernel(data)
        torch.cuda.synchronize()
    except Exception as e:  # reported per case, the fuzz goes on
        row.update(ok=False, msg=f"{type(e).__name__}: {e}"[:400], s=round(time.time() - t0, 2), verdict="FAIL")
        return row
    row["s"] = round(time.time() - t0, 2)
    if any(torch.isnan(c).any() for c in outs):
        row.update(ok=False, msg="output not fully written (NaN left)", verdict="FAIL")
        return row
    ok, msg = R.check_implementation(data, out)
    row.update(ok=ok, msg=msg[:400], verdict="ok")
    if not ok:
        worst = truth_error(data, out)
        row.update(truth_err_over_tol=round(worst, 3), verdict="TOL" if worst <= 1.0 else "FAIL")
    return row


def truth_error(data, out) -> float:
    """The largest |output - fp64 truth| / (atol + rtol |truth|) over all elements."""
    import torch

    with torch.no_grad():
        if R.is_dual(data):
            a, b1, b2, sfa, sfb1, sfb2 = data[:6]
            fa = R._dequant(a, sfa).double()
            x1 = torch.bmm(fa, R._dequant(b1, sfb1).double().transpose(1, 2))
            x2 = torch.bmm(fa, R._dequant(b2, sfb2).double().transpose(1, 2))
            pairs = [(out, (torch.nn.functional.silu(x1) * x2).permute(1, 2, 0))]
        else:
            pairs = [(o, torch.bmm(R._dequant(a, sfa).double(), R._dequant(b, sfb).double().transpose(1, 2))
                      .permute(1, 2, 0)) for o, (a, b, _c), (sfa, sfb) in zip(out, data[0], data[1])]
        return max(((o.double() - t).abs() / (R.ATOL + R.RTOL * t.abs())).max().item() for o, t in pairs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--count", type=int, default=100, help="shapes per problem")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--problem", choices=["dual", "group", "both"], default="both")
    ap.add_argument("--max-gflop", type=float, default=2000.0, help="skip larger shapes (bounds the run time)")
    ap.add_argument("--draw", choices=R.DRAWS, default="leaderboard")
    ap.add_argument("--json", help="write every case here")
    args = ap.parse_args(argv)

    import torch

    if not torch.cuda.is_available():
        print("fuzz_gpu: no CUDA GPU here", file=sys.stderr)
        return 2
    from nvfp4gemm.validate import arch_of_capability

    arch = arch_of_capability(torch.cuda.get_device_capability())  # the dispatcher's map; unsupported GPUs raise
    rnd = random.Random(args.seed)
    problems = ["dual", "group"] if args.problem == "both" else [args.problem]
    rows = []
    t0 = time.time()
    for problem in problems:
        for i, shape in enumerate(shapes(problem, rnd, args.count, args.max_gflop, arch)):
            row = run_case(problem, shape, args.seed * 100003 + i, args.draw == "wide", arch)
            rows.append(row)
            note = "" if row["ok"] else f"{row['msg'][:120]} (fp64 truth: {row.get('truth_err_over_tol', '-')} x tol)"
            print(f"{row['verdict']:4} {problem:5} {str(shape)[:90]:90} {row['config']:40} {row['s']:6.2f}s {note}",
                  flush=True)
    bad = [r for r in rows if r["verdict"] == "FAIL"]
    tol = [r for r in rows if r["verdict"] == "TOL"]
    print(f"fuzz_gpu: {len(rows) - len(bad) - len(tol)} of {len(rows)} cases pass the reference check, {len(tol)} "
          f"fail it but are within the tolerance of the fp64 truth, {len(bad)} fail ({arch}, {args.draw} draw, "
          f"seed {args.seed}, {time.time() - t0:.0f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"arch": arch, "device": torch.cuda.get_device_name(), "seed": args.seed, "draw": args.draw,
                       "cases": rows}, f, indent=1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
