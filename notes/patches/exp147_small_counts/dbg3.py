import sys, torch
import reference as R
from nvfp4gemm.masked import MaskedGroupedGemm
from nvfp4gemm.dispatch import _stream_handle
caps, n, k, counts = [64, 128, 32, 200], 2048, 1024, [16, 17, 1, 200]
g = len(caps)
data = R.generate_input(caps, [n] * g, [k] * g, g, 5, device="cuda", poison_padding=True)
ref = R.ref_group(data)
gemm = MaskedGroupedGemm(data)
cnt = torch.tensor(counts, dtype=torch.int32, device="cuda")
for a in gemm._counts_args:
    a._desc.value = cnt.data_ptr()
gemm._counts_at = cnt.data_ptr()
L = gemm._launch_on(_stream_handle(gemm.device))
def state(tag):
    out = []
    for gi, (c, m) in enumerate(zip(gemm.outputs, counts)):
        nan_rows = int(torch.isnan(c).any(dim=1).sum())
        ok = len(R.compare(c[:m], ref[gi][:m])) == 0
        out.append((gi, m, ok, nan_rows, c.shape[0]))
    print("R", tag, out, flush=True)
for order in ([0], [1], [0, 1], [1, 0]):
    for c in gemm.outputs:
        c.fill_(float("nan"))
    for i in order:
        L[i]()
        torch.cuda.synchronize()
    state(str(order))
