import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import nvfp4gemm  # noqa: E402,F401  must precede any `import cutlass` (compile-only setup)
