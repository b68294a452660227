"""Exp. 98: %globaltimer / %smid per CTA of the grouped mixed kernel, one launch vs the split (exp. 95).

Apply stamps.patch first; from the repository root:
    python3 notes/patches/exp98_timeline/split_tl.py SPEC P:Q[,P:Q] [ahead [wfirst]]"""
import os, sys, statistics
sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.join(os.getcwd(), "notes", "patches", "exp95_split"))
import nvfp4gemm  # noqa
import configs
import torch
import reference as R
from benchmarks.forms import parse_shapes
from benchmarks.timing import Timer
from nvfp4gemm import harness
from split_proto import subset, subset_launch  # noqa: E402

spec = sys.argv[1]
splits = sys.argv[2].split(",")
ahead = len(sys.argv) > 3 and sys.argv[3] == "ahead"  # queue a 300 us sleep first: the host is ahead
wfirst = len(sys.argv) > 4 and sys.argv[4] == "wfirst"
sms = torch.cuda.get_device_properties(0).multi_processor_count
cur = torch.cuda.current_stream()
side = torch.cuda.Stream()
buf = {k: torch.zeros(sms * 8, dtype=torch.int64, device="cuda") for k in ("n", "w")}
cfg_n = configs.sm90_group_mixed()
cfg_w = configs.sm90_group_mixed(tile=(128, 256))
os.environ["NVFP4_TL"] = str(buf["n"].data_ptr())
ck_n = harness.compile_kernel("group", "sm_90a", cfg_n, configs.GROUP_BENCHMARKS[0])
os.environ["NVFP4_TL"] = str(buf["w"].data_ptr())
ck_w = harness.compile_kernel("group", "sm_90a", cfg_w, configs.GROUP_BENCHMARKS[0])
keep = []
flush = Timer(1).flush_buf


def launch_for(data, cfg, ck, ctas, stream):
    return subset_launch(data, cfg, ck, ctas, stream, keep)


def read(key, n):
    v = buf[key].view(sms, 8)[:n].cpu()
    return [dict(entry=int(r[0]), sm=int(r[1]) & 0xFFFFFFFF, wait=int(r[2]), seg1=int(r[4]), end=int(r[6])) for r in v]


def stats(name, rows, t0):
    def q(key):
        xs = sorted((r[key] - t0) / 1e3 for r in rows if r[key])
        return f"{xs[0]:6.1f}/{statistics.median(xs):6.1f}/{xs[-1]:6.1f}" if xs else "-"
    print(f"    {name}: {len(rows)} CTAs on {len(set(r['sm'] for r in rows))} SMs; us from t0 (min/med/max): "
          f"entry {q('entry')}  wait {q('wait')}  seg1-end {q('seg1')}  end {q('end')}", flush=True)


for shape in parse_shapes("group", spec):
    ms, ns, ks = (list(x) for x in zip(*shape))
    data = R.generate_input(ms, ns, ks, len(shape), 1111, device="cuda")
    wide = [i for i, m in enumerate(ms) if -(-m // 128) % 2 == 0]
    narrow = [i for i in range(len(ms)) if i not in wide]
    forms = {"rule": ([(launch_for(data, cfg_n, ck_n, sms, cur), "n", sms)], None)}
    for sp in splits:
        p, q = (int(x) for x in sp.split(":"))
        ln = launch_for(subset(data, narrow), cfg_n, ck_n, p, cur)
        lw = launch_for(subset(data, wide), cfg_w, ck_w, q, side)
        forms[f"split {p}:{q}"] = ([(ln, "n", p), (lw, "w", q)], True)
        forms[f"N{p} alone"] = ([(launch_for(subset(data, narrow), cfg_n, ck_n, p, cur), "n", p)], None)
        forms[f"W{q} alone"] = ([(launch_for(subset(data, wide), cfg_w, ck_w, q, cur), "w", q)], None)
    print(" ".join(map(str, ms)), f"N{ns[0]} K{ks[0]}", flush=True)
    for name, (launches, two) in forms.items():
        for rep in range(3):
            for b in buf.values():
                b.zero_()
            flush.zero_()
            torch.cuda.synchronize()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if ahead:
                torch.cuda._sleep(600000)
            e0.record()
            if two:
                ev0, ev1 = torch.cuda.Event(), torch.cuda.Event()
                ev0.record(cur)
                side.wait_event(ev0)
                if wfirst:
                    launches[1][0]()
                    launches[0][0]()
                else:
                    launches[0][0]()
                    launches[1][0]()
                ev1.record(side)
                cur.wait_event(ev1)
            else:
                launches[0][0]()
            e1.record()
            torch.cuda.synchronize()
        rows = {k: read(k, n) for _l, k, n in launches}
        t0 = min(r["entry"] for rs in rows.values() for r in rs if r["entry"])
        print(f"  {name}: {e0.elapsed_time(e1) * 1e3:.1f} us (events)", flush=True)
        for k, rs in rows.items():
            stats(k, rs, t0)
        if len(rows) == 2:
            sn, sw = set(r["sm"] for r in rows["n"]), set(r["sm"] for r in rows["w"])
            print(f"    SMs shared by both launches: {len(sn & sw)}; W's latest entries (us): "
                  + " ".join(f"{(x - t0) / 1e3:.1f}" for x in sorted(r['entry'] for r in rows['w'])[-5:]), flush=True)
