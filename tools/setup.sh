#!/usr/bin/env bash
# Installs what the project needs on a fresh machine, idempotently.
# With no torch present, torch==2.13.0 first: on our CPU machines that resolves to a local
# CPU build; an unpinned torch would pull several GB of CUDA wheels.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import torch" >/dev/null 2>&1; then
  "$PY" -m pip install -q torch==2.13.0
fi
"$PY" -m pip install -q -e ".[test]"
