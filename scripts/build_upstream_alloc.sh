#!/bin/bash
# Build upstream xLLM's KV-cache allocation (framework/kv_cache/*.cpp, 494f293b5) on CPU with
# -DUSE_ILU into one shared library answering lwsplit_call op=allocate
# (implementations/xllm_native/cpp/alloc_upstream.cpp; shims in cpp/shims/alloc, first on the
# include path).
#
#   scripts/build_upstream_alloc.sh OUT.so [UPSTREAM_TREE]
#
# UPSTREAM_TREE (the folder holding xllm/core): $2, else $LWSPLIT_XLLM_SRC, else
# ../shared/upstream_494f293b5. LWSPLIT_ALLOC_BUILD=unity (default: one translation unit,
# cpp/alloc_upstream_unity.cpp) or objects (one object per file, compiled in parallel, then linked).
# LWSPLIT_ALLOC_TORCH=light puts cpp/shims/torch_light first (a <torch/torch.h> of torch/types.h and
# torch/serialize.h only: the same code, parsed in about half the time); default: torch's own.
# PYTHON (default /work/main/.venv/bin/python, then python3) names the interpreter whose torch is
# compiled against.
set -euo pipefail

out=${1:?usage: build_upstream_alloc.sh OUT.so [UPSTREAM_TREE]}
here=$(cd "$(dirname "$0")/.." && pwd)
src=${2:-${LWSPLIT_XLLM_SRC:-$here/../shared/upstream_494f293b5}}
cpp=$here/implementations/xllm_native/cpp
py=${PYTHON:-/work/main/.venv/bin/python}
[ -x "$py" ] || py=python3
torch=$("$py" -c "import torch,os;print(os.path.dirname(torch.__file__))")

light=()
[ "${LWSPLIT_ALLOC_TORCH:-full}" = light ] && light=(-I"$cpp/shims/torch_light")
flags=(-std=c++20 -O1 -fPIC -DUSE_ILU -DNDEBUG -w "${light[@]}"
       -I"$cpp/shims/alloc" -I"$src/xllm" -I"$src/xllm/core" -I"$cpp"
       -isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include")
libs=(-Wl,--no-undefined -L"$torch/lib" -Wl,-rpath,"$torch/lib" -ltorch_cpu -lc10 -lglog -lgflags)

case ${LWSPLIT_ALLOC_BUILD:-unity} in
  unity)
    set -x
    g++ "${flags[@]}" -shared "$cpp/alloc_upstream_unity.cpp" -o "$out" "${libs[@]}"
    ;;
  objects)
    core=$src/xllm/core
    sources=("$core"/framework/kv_cache/{kv_cache,kv_cache_impl,indexed_kv_cache_impl,linear_attention_kv_cache_impl,quantized_kv_cache_impl,deepseek_v4_kv_cache_impl,kv_cache_shape,kv_cache_utils,kv_cache_tensor_allocator,kv_cache_estimation}.cpp
             "$core/framework/block/block_utils.cpp" "$core/util/pretty_print.cpp" "$cpp/alloc_upstream.cpp")
    objdir=$(mktemp -d)
    trap 'rm -rf "$objdir"' EXIT
    pids=()
    for s in "${sources[@]}"; do
      g++ "${flags[@]}" -c "$s" -o "$objdir/$(basename "$s" .cpp).o" & pids+=($!)
      # at most $(nproc) compilers at once
      while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
    done
    for p in "${pids[@]}"; do wait "$p"; done
    g++ -shared "$objdir"/*.o -o "$out" "${libs[@]}"
    ;;
  *) echo "LWSPLIT_ALLOC_BUILD must be unity or objects" >&2; exit 2 ;;
esac
