#!/usr/bin/env bash
# Creates .venv and installs the harness. Idempotent.
#
# CPU (default): pins torch==2.13.0, the CPU wheel (a plain `torch` requirement
# would pull a multi-GB CUDA build).
# Cards (Iluvatar BI-V100): LWSPLIT_SYSTEM_TORCH=1 bash setup.sh makes the venv
# see the system site-packages, so the vendor torch (CoreX) is kept, not replaced;
# it prints the torch it uses and stops on one older than 2.1.0 (scripts/check_torch.py).
set -euo pipefail
cd "$(dirname "$0")"
PY=${PYTHON:-python3}
quiet=(-q --disable-pip-version-check)

if [ ! -x .venv/bin/python ]; then
  if [ "${LWSPLIT_SYSTEM_TORCH:-0}" = 1 ]; then
    "$PY" -m venv --system-site-packages .venv
  else
    "$PY" -m venv .venv
  fi
fi

if [ "${LWSPLIT_SYSTEM_TORCH:-0}" = 1 ]; then
  # The vendor torch: CoreX 3.2.3's reads a bare "2.1.0"; local tags (+corex.3.2.3, +cpu) and
  # pre-release suffixes are ignored. Older than 2.1.0 or not importable: one error line, exit 1.
  .venv/bin/python scripts/check_torch.py --floor 2.1.0
elif ! .venv/bin/python -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.13.0")' 2>/dev/null; then
  .venv/bin/pip install "${quiet[@]}" torch==2.13.0
fi
.venv/bin/pip install "${quiet[@]}" -e '.[dev]'
.venv/bin/python -c 'import torch, hydra, allure, xdist; print("setup ok: torch", torch.__version__)'
