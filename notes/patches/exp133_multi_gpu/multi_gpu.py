"""Which devices custom_kernel runs on: scenarios in one process each (argv[1])."""
import sys
import traceback

import torch

import reference as R
from nvfp4gemm.dispatch import custom_kernel


def run(dev, problem, seed=11):
    if problem == "dual":
        d = R.generate_input(256, 512, 1024, 1, seed, device=dev)
        d[-1].fill_(float("nan"))
    else:
        d = R.generate_input([40, 200], [512, 512], [1024, 1024], 2, seed, device=dev)
        for _, _, c in d[0]:
            c.fill_(float("nan"))
    out = custom_kernel(d)
    torch.cuda.synchronize(dev)
    ok, msg = R.check_implementation(d, out)
    return ok, (msg or "")[:200]


def step(label, fn):
    try:
        print(label, fn(), flush=True)
    except Exception as e:  # noqa: BLE001
        print(label, "ERR", type(e).__name__, str(e)[:400].replace("\n", " | "), flush=True)


scen = sys.argv[1]
for problem in ("dual", "group"):
    if scen == "cur0_dev1":  # current device 0, tensors on cuda:1
        step(f"{problem} cur0 dev1", lambda: run("cuda:1", problem))
    elif scen == "set1_dev1":
        torch.cuda.set_device(1)
        step(f"{problem} set1 dev1", lambda: run("cuda:1", problem))
    elif scen == "seq":  # 0, then 1 under a device guard, then 0, then 1 unguarded
        step(f"{problem} dev0", lambda: run("cuda:0", problem))
        with torch.cuda.device(1):
            step(f"{problem} guard1 dev1", lambda: run("cuda:1", problem, 12))
        step(f"{problem} dev0 again", lambda: run("cuda:0", problem, 13))
        step(f"{problem} cur0 dev1 after", lambda: run("cuda:1", problem, 14))
print("current device at exit", torch.cuda.current_device())
