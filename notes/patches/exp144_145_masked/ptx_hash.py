"""Hash the PTX of grouped mixed configs (device-scheduled and host-planned): unchanged by exp. 145?"""
import hashlib, json, os, sys, tempfile
sys.path.insert(0, os.getcwd())
import nvfp4gemm  # noqa
import configs
from nvfp4gemm import harness
cfgs = [configs.sm90_group_mixed_dynamic(t) for t in ((256, 128), (256, 64), (128, 128))] + [
    configs.sm90_group_mixed(), configs.sm90_group_mixed(tile=(128, 192)), configs.sm90_group_mixed_three_forms()]
shape = configs.GROUP_BENCHMARKS[1]
out = {}
for c in cfgs:
    d = tempfile.mkdtemp()
    ck = harness.compile_kernel("group", "sm_90a", c, shape if c.forms else ((100, 4096, 7168),) * 8, dump_dir=d)
    out[c.short()] = hashlib.sha256(harness.read_ptx(ck.ptx_path).encode()).hexdigest()[:16]
    print(c.short(), out[c.short()], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
