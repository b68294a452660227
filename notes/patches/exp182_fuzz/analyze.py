"""Exp. 182: a fuzz failure's element against an fp64 ground truth.  For each (shape, seed) given,
regenerate the input on the GPU (the CUDA generator: CPU draws differ), run custom_kernel, and compare
kernel and reference (fp32) against fp64 sums: the worst elements of each by |x - truth| / tolerance,
and the failing element's x1, x2 and its silu-product sensitivity."""

import json
import sys

import torch

import reference as R
from nvfp4gemm.dispatch import custom_kernel


def truth_dual(data):
    a, b1, b2, sfa, sfb1, sfb2 = data[:6]
    fa = R._dequant(a, sfa).double()
    x1 = torch.bmm(fa, R._dequant(b1, sfb1).double().transpose(1, 2))
    x2 = torch.bmm(fa, R._dequant(b2, sfb2).double().transpose(1, 2))
    return x1, x2, (torch.nn.functional.silu(x1) * x2).permute(1, 2, 0)


def main():
    res = []
    for spec in sys.argv[1:]:
        m, n, k, l, seed = (int(x) for x in spec.split(","))
        data = R.generate_input(m, n, k, l, seed, device="cuda", poison_padding=True)
        out = custom_kernel(data).double()
        ref = R.ref_dual(data).double()
        x1, x2, t = truth_dual(data)
        tol = 1e-3 + 1e-3 * t.abs()
        ek, er = (out - t).abs() / tol, (ref - t).abs() / tol
        fail = ((out - ref).abs() > 1e-3 + 1e-3 * ref.abs())
        idx = fail.nonzero().tolist()
        row = {"shape": [m, n, k, l], "seed": seed, "kernel_max_err_over_tol": ek.max().item(),
               "ref_max_err_over_tol": er.max().item(), "kernel_mean_err_over_tol": ek.mean().item(),
               "ref_mean_err_over_tol": er.mean().item(),
               "kernel_elems_over_tol_vs_truth": int((ek > 1).sum()), "ref_elems_over_tol_vs_truth": int((er > 1).sum()),
               "fails_vs_ref": []}
        for i, j, b in idx[:5]:
            row["fails_vs_ref"].append({"at": [i, j, b], "kernel": out[i, j, b].item(), "ref": ref[i, j, b].item(),
                                        "truth": t[i, j, b].item(), "x1": x1[b, i, j].item(), "x2": x2[b, i, j].item()})
        res.append(row)
        print(json.dumps(row), flush=True)
        del data, out, ref, x1, x2, t
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
