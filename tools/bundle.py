"""Write a self-contained single-file leaderboard submission.

    python tools/bundle.py --problem dual  -o submission_dual.py
    python tools/bundle.py --problem group -o submission_group.py

The file starts with the leaderboard header (`#!POPCORN leaderboard nvfp4_dual_gemm` or
`nvfp4_group_gemm`), carries configs.py and the package modules that problem needs as
source strings, and on import writes them once into a private folder under the system temp
directory (named by their content hash) and imports `custom_kernel` from there.  Modules
are written as real files rather than exec'd from strings because CuTe DSL reads the
source of @cute.jit functions (inspect.getsource) to trace their control flow.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LEADERBOARD = {"dual": "nvfp4_dual_gemm", "group": "nvfp4_group_gemm"}
COMMON = ["configs.py", "nvfp4gemm/__init__.py", "nvfp4gemm/formats.py", "nvfp4gemm/validate.py",
          "nvfp4gemm/scheduler.py", "nvfp4gemm/epilogue.py", "nvfp4gemm/harness.py", "nvfp4gemm/cache.py",
          "nvfp4gemm/dispatch.py", "nvfp4gemm/side_streams.py", "nvfp4gemm/table_writer.py"]


def _all_kernels() -> list:
    """((problem, arch), (module, class)) of every main and variant kernel."""
    from nvfp4gemm.harness import KERNELS, VARIANT_KERNELS

    return sorted(KERNELS.items()) + sorted(((p, a), mc) for (p, a, _flag), mc in VARIANT_KERNELS.items())


def modules_for(problem: str) -> list[str]:
    """Repo-relative paths of every file the problem's submission needs: the common layers
    plus both architectures' kernels for that problem (and what those import)."""
    files = list(COMMON)
    for (prob, _arch), (mod, _cls) in _all_kernels():
        if prob != problem:
            continue
        pkg = os.path.dirname(mod.replace(".", "/"))
        if not os.path.isdir(os.path.join(ROOT, pkg)):
            continue  # that architecture's kernel is not written yet
        for f in (f"{pkg}/__init__.py", mod.replace(".", "/") + ".py"):
            if f not in files:
                files.append(f)
        # sibling helper modules of the arch package (e.g. sm90/decode.py)
        for name in sorted(os.listdir(os.path.join(ROOT, pkg))):
            f = f"{pkg}/{name}"
            if name.endswith(".py") and f not in files and not _is_other_problem_kernel(f, problem):
                files.append(f)
    return [f for f in files if os.path.exists(os.path.join(ROOT, f))]


def _is_other_problem_kernel(path: str, problem: str) -> bool:
    """Another problem's kernel module that none of this problem's kernels imports (the
    dual swap_ab kernel builds on the grouped one)."""
    mods = _all_kernels()
    other = any(mod.replace(".", "/") + ".py" == path and prob != problem for (prob, _), (mod, _) in mods)
    if not other:
        return False
    name = path[:-3].replace("/", ".")
    pkg, leaf = name.rsplit(".", 1)
    for (prob, _), (mod, _) in mods:
        if prob == problem and os.path.exists(os.path.join(ROOT, mod.replace(".", "/") + ".py")):
            with open(os.path.join(ROOT, mod.replace(".", "/") + ".py")) as f:
                src = f.read()
            if f"import {name}" in src or f"from {pkg} import {leaf}" in src:
                return False
    return True


LOADER = '''
def _install_bundled_sources():
    import hashlib, os, sys, tempfile
    digest = hashlib.sha256(repr(sorted(_SOURCES.items())).encode()).hexdigest()[:16]
    root = os.path.join(tempfile.gettempdir(), "nvfp4gemm_bundle_" + digest)
    if not os.path.exists(os.path.join(root, ".complete")):
        tmp = root + ".%d" % os.getpid()
        for rel, text in _SOURCES.items():
            path = os.path.join(tmp, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        open(os.path.join(tmp, ".complete"), "w").close()
        try:
            os.rename(tmp, root)
        except OSError:  # another process finished first
            pass
    if root not in sys.path:
        sys.path.insert(0, root)


_install_bundled_sources()
from nvfp4gemm.dispatch import custom_kernel  # noqa: E402
'''


def bundle(problem: str) -> str:
    files = modules_for(problem)
    sources = {}
    for f in files:
        with open(os.path.join(ROOT, f)) as fh:
            sources[f] = fh.read()
    digest = hashlib.sha256(repr(sorted(sources.items())).encode()).hexdigest()[:16]
    out = [f"#!POPCORN leaderboard {LEADERBOARD[problem]}",
           f'"""Single-file submission for {LEADERBOARD[problem]}, bundled by tools/bundle.py',
           f"from {len(files)} files (content {digest}): {', '.join(files)}.",
           'Entry point: custom_kernel(data)."""',
           "", "_SOURCES = {"]
    for f in files:
        out.append(f"    {f!r}: {sources[f]!r},")
    out.append("}")
    out.append(LOADER)
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problem", choices=sorted(LEADERBOARD), required=True)
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)
    text = bundle(args.problem)
    with open(args.output, "w") as f:
        f.write(text)
    print(f"wrote {args.output} ({len(text)} bytes) for {LEADERBOARD[args.problem]}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    sys.exit(main())
