import sys, os, statistics
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import torch
import configs
import reference as R
from cutlass.cute.runtime import make_ptr
import cutlass, cutlass.cute as cute
from cutlass import Int32
from nvfp4gemm import harness
from nvfp4gemm.dispatch import PackedLaunch

flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
CASES = [((512, 4096, 7168, 1), 128), ((512, 3072, 7168, 1), 132), ((512, 3072, 7168, 1), 128),
         ((1024, 1536, 7168, 1), 128), ((384, 3072, 7168, 1), 132)]
if os.environ.get("NVFP4_DIAG"):
    CASES = [((512, 3072, 7168, 1), 128)]
if os.environ.get("WHOLE_SK"):
    CASES = [((512, 3072, 7168, 1), 96)]
prev = None
for shape, ctas in CASES:
    m, n, k, l = shape
    cfg = configs.select_config("dual", "sm_90a", shape)
    if shape != prev:
        data = R.generate_input(m, n, k, l, 1111, device="cuda")
        ck = harness.compile_kernel("dual", "sm_90a", cfg, shape)
        mod, _ = harness.kernel_module("dual", "sm_90a", cfg)
        base = list(mod.runtime_args(data, cfg, torch.cuda.current_stream()))
        prev = shape
    big = torch.zeros(1 << 21, dtype=torch.int32, device="cuda")
    a = list(base)
    a[9] = make_ptr(cutlass.Int32, big.data_ptr(), cute.AddressSpace.gmem, assumed_align=16)
    a[13] = Int32(ctas)
    if os.environ.get("WHOLE_SK"):
        a[14] = Int32(96)  # dp_tiles = tiles: every tile whole in the split_k-compiled kernel
    fn = PackedLaunch(ck.fn, tuple(a))
    c = data[-1]
    c.fill_(float("nan")); fn(); torch.cuda.synchronize()
    ok, msg = R.check_implementation(data, c)
    assert ok or os.environ.get("NVFP4_DIAG", "none") != "none", msg
    evs = []
    for it in range(10):
        flush.zero_(); torch.cuda._sleep(60000)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); torch.cuda.synchronize()
        evs.append(s.elapsed_time(e) * 1e3)
    raw = big.view(torch.int64)[1024:].cpu()
    st = raw[:ctas * 32].view(ctas, 32).double() / 1e3
    print(shape, ctas, cfg.short(), "events med %.1f" % statistics.median(evs))
    kb = k // 256
    tiles = configs.dual_tiles(cfg, shape)
    units = tiles * kb
    D = {}
    def add(key, v):
        D.setdefault(key, []).append(v)
    for cta in range(ctas):
        r = st[cta]
        if cfg.split_k and not os.environ.get("WHOLE_SK"):
            u0, u1 = cta * units // ctas, (cta + 1) * units // ctas
            segs = []; u = u0
            while u < u1:
                t = u // kb; e = min(u1, (t + 1) * kb); segs.append((t, u - t * kb)); u = e
            nseg = len(segs)
            # writer: first segment with kb0 > 0
            if segs[0][1] > 0:
                le = r[2]
                add("W issue", r[29] - le); add("W fence", r[30] - r[29]); add("W barrier", r[31] - r[30])
            if segs[-1][1] == 0 and (nseg > 1 or True):
                j = min(nseg - 1, 2)
                le, he, se = r[2 + 4 * j], r[3 + 4 * j], r[4 + 4 * j]
                if r[24] > le - 1e-9 and r[24] > 0 and he - le > 0.05:
                    add("R barrier(WG2)", r[24] - le); add("R flag+bar", r[25] - r[24]); add("R fence", r[26] - r[25])
                    add("R cp.async", r[27] - r[26]); add("R add", r[28] - r[27]); add("R total", he - le)
                if se - he > 0.05:
                    add("E pass0 silu+sts", r[16] - he); add("E pass0 bar", r[17] - r[16]); add("E pass0 stg", r[18] - r[17])
                    add("E pass0 bar2", r[19] - r[18]); add("E pass1 silu+sts", r[20] - r[19]); add("E pass1 bar", r[21] - r[20])
                    add("E pass1 stg", r[22] - r[21]); add("E pass1 bar2", r[23] - r[22]); add("E total", se - he)
        else:
            le, se = r[2], r[4]
            add("E pass0 silu+sts", r[16] - le); add("E pass0 bar", r[17] - r[16]); add("E pass0 stg", r[18] - r[17])
            add("E pass0 bar2", r[19] - r[18]); add("E pass1 silu+sts", r[20] - r[19]); add("E pass1 bar", r[21] - r[20])
            add("E pass1 stg", r[22] - r[21]); add("E pass1 bar2", r[23] - r[22]); add("E total", se - le)
    for key, v in D.items():
        print(f"  {key:18s} n={len(v):3d} med {statistics.median(v):6.2f} min {min(v):6.2f} max {max(v):6.2f}")
