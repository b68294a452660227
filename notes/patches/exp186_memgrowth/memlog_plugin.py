"""pytest plugin (exp. 186): after each test, one line of GPU memory use to $MEMLOG --
cudaMemGetInfo's used bytes (what the process and the tools hold on the device) and torch's
allocated / reserved bytes (what live tensors hold)."""
import os

import torch


def pytest_runtest_teardown(item, nextitem):
    if not torch.cuda.is_available():
        return
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    with open(os.environ["MEMLOG"], "a") as f:
        f.write(f"{(total - free) / 2**30:.3f} {torch.cuda.memory_allocated() / 2**30:.3f} "
                f"{torch.cuda.memory_reserved() / 2**30:.3f} {item.nodeid}\n")
