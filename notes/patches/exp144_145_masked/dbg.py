import os, sys, torch
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
caps = [16, 9, 16, 12, 16, 16, 3, 16]
data = R.generate_input(caps, [7168] * 8, [2048] * 8, 8, 1441, device="cuda", poison_padding=True)
gemm = MaskedGroupedGemm(data)
print(gemm.cfg.short(), gemm._counts_arg, flush=True)
print("table", gemm.table.view(16, 8)[:9].tolist(), flush=True)
for raw, mk in (([0] * 8, "i64"), (caps, "i32"), ([3, 5, 1, 2, 9, 16, 3, 7], "strided"), ([30, -1, 5, 12, 0, 16, 3, 1], "i64")):
    if mk == "strided":
        t = torch.tensor([x for v in raw for x in (v, -99)], dtype=torch.int32, device="cuda")[::2]
    else:
        t = torch.tensor(raw, dtype=torch.int64 if mk == "i64" else torch.int32, device="cuda")
    gemm(t)
    torch.cuda.synchronize()
    print(raw, mk, "ok; M column", gemm.table.view(16, 8)[:8, 5].tolist(), flush=True)
