"""Exp. 150: which launch of MaskedGroupedGemm's split goes on the side stream, and with which
priority (a high-priority stream's CTAs are dispatched first).  python3 s44/exp150.py OUT.json"""
import json, random, sys, time
import torch
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
from nvfp4gemm.dispatch import _stream_handle

CALLS, ROUNDS, CAP = 20, 8, 256
flush_buf = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
DISTS = {
    "1-16": lambda r, c: r.randint(1, 16),
    "0|1-8": lambda r, c: 0 if r.random() < 0.375 else r.randint(1, 8),
    "1-64": lambda r, c: r.randint(1, 64),
    "half<=16": lambda r, c: r.randint(1, 16) if r.random() < 0.5 else r.randint(17, c),
    "1-256": lambda r, c: r.randint(1, c),
    "17-256": lambda r, c: r.randint(17, c),
}


class Variant(MaskedGroupedGemm):
    mode = "skinny_side"

    def _enqueue(self, masked_m):
        src = masked_m
        at = src.data_ptr()
        if at != self._counts_at:
            for arg in self._counts_args:
                arg._desc.value = at
            self._counts_at = at
        cur = torch.cuda.current_stream(self.device)
        launches = self._launch_on(_stream_handle(self.device))
        if self._side is None:
            prio = -1 if self.mode.endswith("_hi") else 0
            self._side = torch.cuda.Stream(self.device, priority=prio)
            self._fork, self._join = torch.cuda.Event(), torch.cuda.Event()
        side_idx = 0 if self.mode.startswith("skinny") else 1
        self._fork.record(cur)
        self._side.wait_event(self._fork)
        if side_idx == 0:
            self._launch_on(self._side.cuda_stream)[0]()
            launches[1]()
        else:
            self._launch_on(self._side.cuda_stream)[1]()
            launches[0]()
        self._join.record(self._side)
        cur.wait_event(self._join)


def timed(gemm, counts, sleep):
    for c in gemm.outputs:
        c.fill_(float("nan"))
    flush_buf.zero_()
    torch.cuda.synchronize()
    if sleep:
        torch.cuda._sleep(20_000_000)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for t in counts:
        gemm(t)
    e.record()
    torch.cuda.synchronize()
    return s.elapsed_time(e) * 1e3 / len(counts)


MODES = ("skinny_side", "skinny_side_hi", "mixed_side", "mixed_side_hi")
res = {}
for (g, n, k) in ((8, 4096, 7168), (8, 7168, 2048), (16, 2048, 7168)):
    data = R.generate_input([CAP] * g, [n] * g, [k] * g, g, 5000, device="cuda")
    ref = R.ref_group(data)
    objs = {"alone": MaskedGroupedGemm(data, small=False)}
    for m in MODES:
        o = Variant(data, small=True)
        o.mode = m
        objs[m] = o
    for dname, draw in DISTS.items():
        rnd = random.Random(5001)
        acc = {nm: [] for nm in objs}
        bad = {nm: 0 for nm in objs}
        for r in range(ROUNDS):
            sets = [[draw(rnd, CAP) for _ in range(g)] for _ in range(CALLS)]
            counts = [torch.tensor(x, dtype=torch.int32, device="cuda") for x in sets]
            order = list(objs.items())
            order = order[r % len(order):] + order[:r % len(order)]
            for nm, o in order:
                acc[nm].append(timed(o, counts, True))
                for gi, (c, m) in enumerate(zip(o.outputs, sets[-1])):
                    if R.compare(c[:m], ref[gi][:m]) or bool(torch.isnan(c[:m]).any()):
                        bad[nm] += 1
        med = {nm: sorted(v)[len(v) // 2] for nm, v in acc.items()}
        key = f"g{g} N{n} K{k} {dname}"
        res[key] = {"gpu_us": med, "bad": bad}
        print("R", f"{key:26s} alone {med['alone']:6.1f}", "  ".join(f"{m} {med[m] / med['alone']:.3f}" for m in MODES),
              "bad", sum(bad.values()), flush=True)
    del objs, data, ref
    torch.cuda.empty_cache()
json.dump(res, open(sys.argv[1], "w"), indent=1)
