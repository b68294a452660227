"""Exp. 171h: the bound for a skinny kernel with a free A decode (exp. 49's switch: A's packed words
used as MMA operands undecoded, results wrong) with and without `chunk_pairs` -- is an A pre-pass
plus paired requests worth building?  Needs exp171f_chunk_pairs.patch applied.
Modes: full, noadec; configs: the rule's, and the rule's with chunk_pairs (same stages).
`python3 exp171h.py` ($OUT/exp171h.json)."""
import dataclasses, json, os, sys, tempfile, time
sys.path.insert(0, "benchmarks")
import torch
import cutlass
import cutlass.cute as cute
import timing as T
import configs
import reference as R
from nvfp4gemm import harness
from nvfp4gemm.sm90 import decode
from nvfp4gemm.sm90 import skinny as S

MODE = "full"
_orig = S.Sm90SkinnyCore.mma_chunk


@cute.jit
def mma_chunk_noadec(self, buf, acc, lane):
    s_lo = []
    s_hi = []
    for i in cutlass.range_constexpr(self.lane_rows):
        lo, hi = decode.skinny_scales(buf[4 * self.lane_rows + i])
        s_lo.append(lo)
        s_hi.append(hi)
    for wi in cutlass.range_constexpr(4):
        sc = s_lo if wi < 2 else s_hi
        a_dec = [[buf[4 * (self.b_rows + nt) + wi]] * 4 for nt in range(self.n8)]  # undecoded (wrong)
        for bi in cutlass.range_constexpr(self.num_b * self.row_groups):
            r0 = decode.decode_word(buf[4 * (2 * bi) + wi], sc[2 * bi])
            r1 = decode.decode_word(buf[4 * (2 * bi + 1) + wi], sc[2 * bi + 1])
            for half in cutlass.range_constexpr(2):
                af = (r0[2 * half], r1[2 * half], r0[2 * half + 1], r1[2 * half + 1])
                for nt in cutlass.range_constexpr(self.n8):
                    bfrag = (a_dec[nt][2 * half], a_dec[nt][2 * half + 1])
                    base = (bi * self.n8 + nt) * 4
                    d = decode.mma_m16n8k16_f16(af, bfrag, [acc[base + v] for v in range(4)])
                    for v in cutlass.range_constexpr(4):
                        acc[base + v] = d[v]


@cute.jit
def mma_chunk_switch(self, buf, acc, lane):
    if cutlass.const_expr(MODE == "noadec"):
        mma_chunk_noadec(self, buf, acc, lane)
    else:
        _orig(self, buf, acc, lane)


S.Sm90SkinnyCore.mma_chunk = mma_chunk_switch
SHAPES = [(16, 28672, 8192), (16, 14336, 4096), (16, 8192, 8192), (1, 28672, 8192), (16, 4096, 7168), (16, 12288, 3072)]

if __name__ == "__main__":
    timer = T.Timer(30)
    ceil = T.measure_ceilings(timer)
    out = {"device": torch.cuda.get_device_name(), "ceilings": ceil, "rows": []}
    print(json.dumps(out), flush=True)
    for m, n, k in SHAPES:
        shape = (m, n, k, 1)
        rule = configs.sm90_dual_skinny(shape, static_b=False)
        data = R.generate_input(*shape, 1712, device="cuda")
        kern = {}
        for cname, cfg in (("rule", rule), ("pairs", dataclasses.replace(rule, chunk_pairs=True))):
            for mode in ("full", "noadec"):
                MODE = mode
                harness._CACHE.clear()
                ck = harness.compile_kernel("dual", "sm_90a", cfg, shape, dump_dir=tempfile.mkdtemp())
                mod, _ = harness.kernel_module("dual", "sm_90a", cfg)
                kern[(cname, mode)] = (ck, mod.runtime_args(data, cfg, torch.cuda.current_stream()))
        ck, args = kern[("pairs", "full")]
        data[-1].fill_(float("nan"))
        ck.fn(*args)
        torch.cuda.synchronize()
        ok, _ = R.check_implementation(data, data[-1])
        times = {key: [] for key in kern}
        keys = list(kern)
        for rnd in range(3):
            for key in (keys if rnd % 2 == 0 else keys[::-1]):
                ck, args = kern[key]
                times[key].append(timer(lambda: ck.fn(*args)))
        base = min(times[("rule", "full")])
        row = {"shape": list(shape), "rule": rule.short(), "pairs_ok": ok,
               "us": {f"{a}/{b}": min(v) for (a, b), v in times.items()},
               "regs": {f"{a}/{b}": kern[(a, b)][0].registers for (a, b) in kern}}
        out["rows"].append(row)
        print(json.dumps({"s": shape, "rule": rule.short(), "ok": ok,
                          **{k: f"{v:.2f} ({v / base:.3f})" for k, v in row["us"].items()}, "regs": row["regs"]}), flush=True)
    os.makedirs(os.environ.get("OUT", "/tmp"), exist_ok=True)
    with open(os.path.join(os.environ.get("OUT", "/tmp"), "exp171h.json"), "w") as f:
        json.dump(out, f, indent=1, default=str)
