#!/usr/bin/env bash
# Makes .tools/venv-torch21 (or $LWSPLIT_TORCH21_VENV): the harness on torch==2.1.0 (the torch of the CoreX 3.2.3 stack,
# FEATURE section 9) with numpy<2 (torch 2.1 was built against numpy 1.x). Idempotent.
#
# The package registry has no CPU-only torch 2.1.0 for Linux: its wheel is the CUDA 12.1
# build, whose libtorch_cuda.so links cuBLAS, cuDNN, cuFFT, cuRAND, cuSPARSE, NCCL and the
# CUDA runtime, so `import torch` needs those nvidia-* wheels even on a CPU-only host. They
# are installed with --no-deps at the exact versions torch 2.1.0 pins; triton (only
# torch.compile uses it) is left out. torch.cuda.is_available() is then False here and the
# harness runs gloo on CPU as with the default torch.
#
# Wheels are downloaded once into $LWSPLIT_WHEEL_CACHE (default ~/.cache/lwsplit-wheels) and
# installed from there, so a rerun on the same machine fetches nothing. Unpacking them is the
# larger cost (about 5 minutes on 2 busy cores), so a venv outside the clone
# (LWSPLIT_TORCH21_VENV=~/.cache/lwsplit/venv-torch21, as .ci/run does) is kept between
# clones: a rerun only re-points its editable install of the harness at this checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${LWSPLIT_TORCH21_VENV:-.tools/venv-torch21}
CACHE=${LWSPLIT_WHEEL_CACHE:-$HOME/.cache/lwsplit-wheels}
quiet=(-q --disable-pip-version-check)

TORCH=torch==2.1.0
NVIDIA=(
  nvidia-cuda-runtime-cu12==12.1.105 nvidia-cuda-nvrtc-cu12==12.1.105 nvidia-cuda-cupti-cu12==12.1.105
  nvidia-cudnn-cu12==8.9.2.26 nvidia-cublas-cu12==12.1.3.1 nvidia-cufft-cu12==11.0.2.54
  nvidia-curand-cu12==10.3.2.106 nvidia-cusolver-cu12==11.4.5.107 nvidia-cusparse-cu12==12.1.0.106
  nvidia-nccl-cu12==2.18.1 nvidia-nvtx-cu12==12.1.105 nvidia-nvjitlink-cu12==12.1.105
)

mkdir -p "$CACHE" "$(dirname "$VENV")"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
if ! "$VENV/bin/python" -c 'import torch, sys; sys.exit(torch.__version__.split("+")[0] != "2.1.0")' 2>/dev/null; then
  "$VENV/bin/python" -m pip download "${quiet[@]}" --no-deps --find-links "$CACHE" -d "$CACHE" "$TORCH" "${NVIDIA[@]}"
  "$VENV/bin/python" -m pip install "${quiet[@]}" --no-deps --find-links "$CACHE" "$TORCH" "${NVIDIA[@]}"
fi
# torch's pure-Python requirements, numpy 1.x, then the harness (torch>=1.13 is already met)
"$VENV/bin/python" -m pip install "${quiet[@]}" "numpy<2" filelock typing-extensions sympy networkx jinja2 fsspec
"$VENV/bin/python" -m pip install "${quiet[@]}" -e '.[dev]' "numpy<2"
"$VENV/bin/python" -c 'import torch, numpy, hydra, xdist; print("torch-2.1 env ok: torch", torch.__version__, "numpy", numpy.__version__, "cuda", torch.cuda.is_available())'
