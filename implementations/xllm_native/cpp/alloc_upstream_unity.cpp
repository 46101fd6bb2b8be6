// lwsplit-harness: the upstream allocation build as one translation unit (torch's headers are
// parsed once). Paths resolve against xllm/core on the include path; see
// scripts/build_upstream_alloc.sh for the per-file alternative and the shims.
#include "framework/kv_cache/kv_cache.cpp"
#include "framework/kv_cache/kv_cache_impl.cpp"
#include "framework/kv_cache/indexed_kv_cache_impl.cpp"
#include "framework/kv_cache/linear_attention_kv_cache_impl.cpp"
#include "framework/kv_cache/quantized_kv_cache_impl.cpp"
#include "framework/kv_cache/deepseek_v4_kv_cache_impl.cpp"
#include "framework/kv_cache/kv_cache_shape.cpp"
#include "framework/kv_cache/kv_cache_utils.cpp"
#include "framework/kv_cache/kv_cache_tensor_allocator.cpp"
// kv_cache_shape.cpp and kv_cache_estimation.cpp each define kNzAlignment in an anonymous namespace:
// one translation unit needs the second spelled apart.
#define kNzAlignment lwsplit_estimation_kNzAlignment
#include "framework/kv_cache/kv_cache_estimation.cpp"
#undef kNzAlignment
#include "framework/block/block_utils.cpp"
#include "util/pretty_print.cpp"
#include "alloc_upstream.cpp"
