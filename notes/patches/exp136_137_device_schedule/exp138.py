"""Exp. 138 (device): host time of custom_kernel calls with new M_g <= 16 (the skinny kernel) under
NVFP4_DYNAMIC_M, with and without the any-M path; and 30 such calls back to back."""
import json, os, random, sys, time
os.environ["NVFP4_DYNAMIC_M"] = "1"
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs, torch
import reference as R
from nvfp4gemm import dispatch, harness
from nvfp4gemm.dispatch import custom_kernel
REAL = configs.launch_serves_any_m
res = {"device": torch.cuda.get_device_name()}
def new_inputs(n, k, g, count, seed, lo=9, hi=16):
    rnd = random.Random(seed)
    return [R.generate_input([rnd.randint(lo, hi)] + [rnd.randint(1, hi) for _ in range(g - 1)], [n] * g, [k] * g, g,
                             seed + j, device="cuda") for j in range(count)]
for n, k, g in [(7168, 2048, 8), (4096, 7168, 8), (2048, 7168, 16)]:
    for mode in ("old", "new"):
        configs.launch_serves_any_m = REAL if mode == "new" else (lambda cfg: False)
        dispatch.clear_caches()
        dispatch._PLANS.clear()
        for d in new_inputs(n, k, g, 8, 100 + n):
            custom_kernel(d)
        torch.cuda.synchronize()
        ins = new_inputs(n, k, g, 30, 300 + n)
        host = []
        for d in ins:
            torch.cuda.synchronize()
            t = time.perf_counter(); custom_kernel(d); host.append((time.perf_counter() - t) * 1e6)
        torch.cuda.synchronize()
        ins2 = new_inputs(n, k, g, 30, 300 + n)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for d in ins2:
            custom_kernel(d)
        torch.cuda.synchronize()
        per = (time.perf_counter() - t) / 30 * 1e6
        host.sort()
        print(f"g{g} N{n} K{k} M_g<=16 {mode}: host per new-M_g call median {host[15]:.0f} us (min {host[0]:.0f}); back to back {per:.0f} us per call", flush=True)
        res[f"g{g} N{n} K{k} {mode}"] = {"median_us": host[15], "min": host[0], "back_to_back_us": per}
configs.launch_serves_any_m = REAL
if os.environ.get("OUT"):
    json.dump(res, open(os.environ["OUT"] + "/exp138.json", "w"), indent=1)
