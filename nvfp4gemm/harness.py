"""Compile harness: build any kernel for a named arch and config, with or without a GPU.

`compile_kernel(problem, arch, config, shape)` returns a cached `CompiledKernel`.  When the
arch is not the GPU in this machine (or there is no GPU), the kernel is compiled only
(`--gpu-arch <arch>`, see nvfp4gemm/__init__.py), which is how CI checks sm_100a kernels on
CPU.  With `dump_dir` the PTX and cubin are kept and ptxas reports registers, spills and
stack frame.

Kernel modules follow one contract:
  class <Kernel>(config)             @cute.jit __call__ builds TMA atoms and launches
  compile_args(config, *shape)       fake arguments for cute.compile (dual: m, n, k, l)
  compile_args(config, shapes)       (grouped: tuple of per-group (m, n, k))
  runtime_args(data, config, stream) the same tuple built from real tensors (stream: a
                                     cuda.bindings.driver.CUstream from the dispatcher,
                                     always the LAST argument: the dispatcher swaps it)
  shared_storage_bytes(config)       optional: the shared memory the kernel allocates
"""

from __future__ import annotations

import glob
import importlib
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass

from configs import KernelConfig, shape_key, smem_bytes

KERNELS = {
    ("dual", "sm_100a"): ("nvfp4gemm.sm100.dual_gemm", "Sm100DualGemmKernel"),
    ("group", "sm_100a"): ("nvfp4gemm.sm100.grouped_gemm", "Sm100GroupedGemmKernel"),
    ("dual", "sm_90a"): ("nvfp4gemm.sm90.dual_gemm", "Sm90DualGemmKernel"),
    ("group", "sm_90a"): ("nvfp4gemm.sm90.grouped_gemm", "Sm90GroupedGemmKernel"),
}


@dataclass
class CompiledKernel:
    problem: str
    arch: str
    config: KernelConfig
    fn: object  # the compiled callable (only callable when `runnable`)
    runnable: bool
    seconds: float
    smem_bytes: int
    ptx_path: str | None = None
    cubin_path: str | None = None
    registers: int | None = None
    spill_bytes: int | None = None
    stack_bytes: int | None = None
    # ptxas performance advisories ("(C7513) Potential Performance Loss: wgmma.mma_async
    # instructions are serialized ..."): codes of the "Potential Performance Loss" lines
    perf_warnings: tuple = ()


_CACHE: dict[tuple, CompiledKernel] = {}


def device_arch() -> str | None:
    """The arch of the current CUDA device as our kernels name it, or None."""
    from nvfp4gemm import COMPILE_ONLY_HOST

    if COMPILE_ONLY_HOST:
        return None
    import torch

    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability()
    return {9: "sm_90a", 10: "sm_100a"}.get(major, f"sm_{major}{minor}")


# Kernels selected by a config flag ("swap_ab", "skinny", "forms", "a_prepass") where the problem's main kernel
# does not implement it: (problem, arch, flag) -> (module, class)
VARIANT_KERNELS = {
    ("dual", "sm_90a", "swap_ab"): ("nvfp4gemm.sm90.dual_swap", "Sm90DualSwapKernel"),
    ("dual", "sm_90a", "a_prepass"): ("nvfp4gemm.sm90.dual_mixed", "Sm90DualMixedKernel"),
    ("group", "sm_90a", "forms"): ("nvfp4gemm.sm90.grouped_mixed", "Sm90GroupedMixedFormsKernel"),
    ("group", "sm_90a", "a_prepass"): ("nvfp4gemm.sm90.grouped_mixed", "Sm90GroupedMixedKernel"),
    ("dual", "sm_90a", "skinny"): ("nvfp4gemm.sm90.dual_skinny", "Sm90DualSkinnyKernel"),
    ("group", "sm_90a", "skinny"): ("nvfp4gemm.sm90.grouped_skinny", "Sm90GroupedSkinnyKernel"),
}


def kernel_module(problem: str, arch: str, config=None):
    """(module, kernel class) for the problem on the arch; the config's flags pick a
    variant kernel where that is a separate module (VARIANT_KERNELS)."""
    if (problem, arch) not in KERNELS:
        raise ValueError(f"no kernel for problem {problem!r} on {arch!r}; have {sorted(KERNELS)}")
    mod_name, cls_name = KERNELS[(problem, arch)]
    for flag in ("skinny", "forms", "a_prepass", "swap_ab"):  # a_prepass configs are swap_ab too
        if config is not None and getattr(config, flag) and (problem, arch, flag) in VARIANT_KERNELS:
            mod_name, cls_name = VARIANT_KERNELS[(problem, arch, flag)]
            break
    mod = importlib.import_module(mod_name)
    pick = getattr(mod, "kernel_class", None)  # (a module whose config picks among its classes)
    return mod, (pick(config) if pick is not None and config is not None else getattr(mod, cls_name))


def _static_key(mod, config, shape):
    """Kernels take shapes as runtime values, so one compile serves every shape; a kernel
    that specialises on part of the shape (e.g. the group count) says so here."""
    fn = getattr(mod, "static_shape_key", None)
    return fn(config, shape) if fn else None


def compile_kernel(problem: str, arch: str, config: KernelConfig, shape,
                   dump_dir: str | None = None, stats: bool = False) -> CompiledKernel:
    import cutlass.cute as cute

    if config.arch != arch or config.problem != problem:
        raise ValueError(f"config is for {config.problem}/{config.arch}, asked {problem}/{arch}")
    shape = shape_key(problem, shape)
    mod, cls = kernel_module(problem, arch, config)
    runnable = device_arch() == arch
    key = (problem, arch, config, _static_key(mod, config, shape), runnable, bool(dump_dir or stats))
    if key in _CACHE:
        return _CACHE[key]

    if (dump_dir is None) and stats:
        dump_dir = os.path.join("/tmp", "nvfp4gemm_dump", f"{problem}_{arch}_{abs(hash(key))}")
    opts = [] if runnable else [f"--gpu-arch {arch}"]
    if dump_dir:
        os.makedirs(dump_dir, exist_ok=True)
        for f in glob.glob(os.path.join(dump_dir, "*")):
            os.remove(f)
        opts += ["--keep-ptx", "--keep-cubin", f"--dump-dir {dump_dir}"]
    args = mod.compile_args(config, *shape) if problem == "dual" else mod.compile_args(config, shape)
    kernel = cls(config)
    t0 = time.perf_counter()
    fn = cute.compile(kernel, *args, options=" ".join(opts))
    seconds = time.perf_counter() - t0
    sm = getattr(mod, "shared_storage_bytes", None)
    ck = CompiledKernel(problem, arch, config, fn, runnable, seconds,
                        sm(config) if sm else smem_bytes(config))
    if dump_dir:
        ptx = sorted(glob.glob(os.path.join(dump_dir, f"*.{arch}.ptx")))
        cubin = sorted(glob.glob(os.path.join(dump_dir, f"*.{arch}.cubin")))
        ck.ptx_path = ptx[-1] if ptx else None
        ck.cubin_path = cubin[-1] if cubin else None
        if ck.ptx_path:
            _ptxas_stats(ck)
    _CACHE[key] = ck
    return ck


def read_ptx(path: str) -> str:
    """The dumped PTX, without the NUL bytes the DSL leaves in it."""
    with open(path, "rb") as f:
        return f.read().replace(b"\x00", b"").decode("utf-8", "replace")


def find_ptxas() -> str | None:
    for cand in (shutil.which("ptxas"), "/usr/local/cuda/bin/ptxas",
                 *sorted(glob.glob("/usr/local/cuda-*/bin/ptxas"), reverse=True)):
        if cand and os.path.exists(cand):
            return cand
    return None


def _ptxas_stats(ck: CompiledKernel) -> None:
    """Registers, spill bytes and stack frame of the kernel, from `ptxas -v` on its PTX."""
    ptxas = find_ptxas()
    if ptxas is None:
        return
    clean = ck.ptx_path + ".clean.ptx"
    with open(clean, "w") as f:
        f.write(read_ptx(ck.ptx_path))
    out = subprocess.run([ptxas, f"-arch={ck.arch}", "-v", clean, "-o", os.devnull],
                         capture_output=True, text=True)
    text = out.stdout + out.stderr
    if out.returncode != 0:
        raise RuntimeError(f"ptxas failed on {ck.ptx_path}:\n{text[-2000:]}")
    regs = [int(x) for x in re.findall(r"Used (\d+) registers", text)]
    spills = [int(a) + int(b) for a, b in re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", text)]
    stack = [int(x) for x in re.findall(r"(\d+) bytes stack frame", text)]
    ck.registers = max(regs) if regs else None
    ck.spill_bytes = sum(spills) if spills else 0
    ck.stack_bytes = max(stack) if stack else 0
    ck.perf_warnings = tuple(sorted(set(re.findall(r"\((C\d+)\) Potential Performance Loss", text))))
