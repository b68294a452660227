"""Timeline diagnostic: %globaltimer stamps of the mixed dual kernel (instrumented tree)."""
import sys, os, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import configs
import reference as R
from cutlass.cute.runtime import make_ptr
import cutlass, cutlass.cute as cute
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
shapes = [tuple(x) for x in configs.DUAL_BENCHMARKS]
if len(sys.argv) > 1:
    shapes = [tuple(int(v) for v in a.split("x")) + (1,) for a in sys.argv[1:]]
for shape in shapes:
    m, n, k, l = shape
    cfg = configs.select_config("dual", "sm_90a", shape)
    data = R.generate_input(m, n, k, l, 11, device="cuda")
    ck = harness.compile_kernel("dual", "sm_90a", cfg, shape)
    mod, _ = harness.kernel_module("dual", "sm_90a", cfg)
    args = list(mod.runtime_args(data, cfg, torch.cuda.current_stream()))
    ctas, dp = mod.stream_k_plan(cfg, m, n, k, data[-1].device)
    tl = torch.zeros(1 << 20, dtype=torch.int64, device="cuda")
    if dp < configs.dual_tiles(cfg, shape) and cfg.cluster_mn == (1, 1):
        flags = args[9]
    else:
        flags = tl
    # stamps live at byte 8192 of the flags buffer: use our own buffer, keeping stream-K flags zeroed
    big = torch.zeros(1 << 21, dtype=torch.int32, device="cuda")
    args[9] = make_ptr(cutlass.Int32, big.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    fn = PackedLaunch(ck.fn, tuple(args))
    c = data[-1]
    c.fill_(float("nan")); fn(); torch.cuda.synchronize()
    ok, msg = R.check_implementation(data, c)
    print(shape, cfg.short(), "ctas", ctas, "dp", dp, "correct", ok, flush=True)
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    res = []
    for it in range(16):
        flush.zero_()
        if it % 2:
            torch.cuda._sleep(300000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        ev = s.elapsed_time(e) * 1e3
        raw = big.view(torch.int64)[1024:].cpu()
        main = raw[:ctas * 32].view(ctas, 32)[:, :16].clone()
        pre = raw[160 * 32: 160 * 32 + 2 * 4096].view(-1, 2)
        npre = int((pre[:, 0] > 0).sum())
        pre = pre[:npre]
        t0 = int(pre[:, 0].min())
        rel = lambda x: (x - t0).double() / 1e3
        res.append((ev, rel(pre[:, 0]), rel(pre[:, 1]), main, t0))
    for variant in (0, 1):
        print("  VARIANT", "host ahead (sleep kernel before)" if variant else "as bench (flush only)")
        evs = [r[0] for r in res[variant::2]]
        i = sorted(range(len(evs)), key=lambda j: evs[j])[len(evs) // 2]
        ev, ps, pe, main, t0 = res[variant::2][i]
        rel = lambda x: ((x - t0).double() / 1e3)
        print(f"  events us: {' '.join(f'{x:.1f}' for x in evs)}  (median run below)")
        print(f"  prepass {len(ps)} CTAs: start min {ps.min():.2f} max {ps.max():.2f}; end min {pe.min():.2f} med {pe.median():.2f} max {pe.max():.2f}")
        def col(j, name):
            v = main[:, j]
            v = v[v > 0]
            if len(v) == 0:
                return
            r = rel(v)
            print(f"  {name:22s} n={len(r):3d} min {r.min():7.2f} med {r.median():7.2f} max {r.max():7.2f}")
        col(15, "kernel entry")
        col(14, "producer start")
        col(0, "consumer start")
        col(13, "griddep wait done")
        for sg in range(3):
            for o, nm in enumerate(["loop start", "loop end", "handoff end", "store end"]):
                col(1 + 4 * sg + o, f"seg{sg} {nm}")
        last = main[:, :13].max(dim=1).values
        print(f"  last stamp per CTA: min {rel(last).min():.2f} med {rel(last).median():.2f} max {rel(last).max():.2f}")
        # per-CTA segment durations (stream-K): loop time per k-block
        kb = k // 256
        if dp == 0 and cfg.split_k:
            units = configs.dual_tiles(cfg, shape) * kb
            rows = []
            for cta in range(ctas):
                u0, u1 = cta * units // ctas, (cta + 1) * units // ctas
                segs = []
                u = u0
                while u < u1:
                    t = u // kb
                    e = min(u1, (t + 1) * kb)
                    segs.append(e - u); u = e
                rows.append(segs)
            lp = []
            for cta in range(ctas):
                for sg, L in enumerate(rows[cta][:3]):
                    a, b = int(main[cta, 1 + 4 * sg]), int(main[cta, 2 + 4 * sg])
                    if a and b:
                        lp.append(((b - a) / 1e3) / L)
            print(f"  loop us per k-block over segments: min {min(lp):.3f} med {statistics.median(lp):.3f} max {max(lp):.3f}")
            for cta in (0, 1, 2, 3, 64, ctas - 1):
                st = [f"{rel(main[cta, j]).item():.1f}" if main[cta, j] > 0 else "-" for j in [0, 13] + list(range(1, 13))]
                print(f"  cta {cta:3d} segs {rows[cta]}: {' '.join(st)}")
        else:
            kpc = []
            for cta in range(ctas):
                a, b = int(main[cta, 1]), int(main[cta, 2])
                kpc.append((b - a) / 1e3)
            nk = kb // 2 if cfg.cluster_mn == (2, 1) else kb
            print(f"  seg0 loop us: min {min(kpc):.2f} med {statistics.median(kpc):.2f} max {max(kpc):.2f} -> per k-block {statistics.median(kpc)/nk:.3f}")
