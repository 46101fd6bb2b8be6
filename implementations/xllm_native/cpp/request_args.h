// lwsplit-harness request decoding: the one place the C++ side turns a request's ModelArgs and
// KVCacheEstimateOptions keys (decided on the Python side: implementations/xllm_native/impl.py
// model_args / estimate_options) into the tree's types. Templates over the tree's types: upstream's
// and a port's differ (a port's ModelArgs may lack dtype or linear_num_key_heads; its options carry
// dtype_enum where upstream's carry dtype), and a field the type lacks is skipped at compile time.
#pragma once

#include <string>

#include "protocol.h"

// The tree's setter obj.name(value), where its type has one.
#define LWSPLIT_SET_IF_ANY(obj, name, value) \
  if constexpr (requires { obj.name(value); }) obj.name(value)
// The tree's member obj.name = value (converted to the member's type), where its type has one.
#define LWSPLIT_ASSIGN_IF_ANY(obj, name, value) \
  if constexpr (requires { obj.name; }) obj.name = static_cast<decltype(obj.name)>(value)

namespace lwsplit {
namespace {

// The tree's ModelArgs from the request's <p><field> keys.
template <typename Args>
Args model_args_of(const Request& req, const std::string& p) {
  Args args;
  static_assert(requires { args.n_layers(int64_t{}); }, "a ModelArgs type has n_layers");
  LWSPLIT_SET_IF_ANY(args, model_type, req.str(p + "model_type"));
  LWSPLIT_SET_IF_ANY(args, dtype, req.str(p + "dtype", "bfloat16"));
  LWSPLIT_SET_IF_ANY(args, n_layers, req.i64(p + "n_layers"));
  LWSPLIT_SET_IF_ANY(args, enable_mla, req.flag(p + "enable_mla"));
  LWSPLIT_SET_IF_ANY(args, head_dim, req.i64(p + "head_dim"));
  LWSPLIT_SET_IF_ANY(args, n_heads, req.i64(p + "n_heads"));
  if (req.i64(p + "n_kv_heads") > 0) {
    LWSPLIT_SET_IF_ANY(args, n_kv_heads, req.i64(p + "n_kv_heads"));
  }
  LWSPLIT_SET_IF_ANY(args, kv_lora_rank, req.i64(p + "kv_lora_rank"));
  LWSPLIT_SET_IF_ANY(args, qk_rope_head_dim, req.i64(p + "qk_rope_head_dim"));
  LWSPLIT_SET_IF_ANY(args, index_n_heads, req.i64(p + "index_n_heads"));
  LWSPLIT_SET_IF_ANY(args, index_head_dim, req.i64(p + "index_head_dim"));
  LWSPLIT_SET_IF_ANY(args, num_nextn_predict_layers, req.i64(p + "num_nextn_predict_layers"));
  LWSPLIT_SET_IF_ANY(args, full_attention_interval, req.i64(p + "full_attention_interval"));
  LWSPLIT_SET_IF_ANY(args, linear_conv_kernel_dim, req.i64(p + "linear_conv_kernel_dim"));
  LWSPLIT_SET_IF_ANY(args, linear_key_head_dim, req.i64(p + "linear_key_head_dim"));
  LWSPLIT_SET_IF_ANY(args, linear_value_head_dim, req.i64(p + "linear_value_head_dim"));
  LWSPLIT_SET_IF_ANY(args, linear_num_key_heads, req.i64(p + "linear_num_key_heads"));
  LWSPLIT_SET_IF_ANY(args, linear_num_value_heads, req.i64(p + "linear_num_value_heads"));
  LWSPLIT_SET_IF_ANY(args, mamba_ssm_dtype, req.str(p + "mamba_ssm_dtype"));
  LWSPLIT_SET_IF_ANY(args, layer_types, req.list(p + "layer_types"));
  return args;
}

// The tree's KVCacheEstimateOptions from the request's <p><field> keys (the dtype as its torch
// ScalarType code: upstream's dtype, a port's dtype_enum).
template <typename Options>
Options estimate_options_of(const Request& req, const std::string& p) {
  Options o;
  static_assert(requires { o.dtype; } || requires { o.dtype_enum; },
                "a KVCacheEstimateOptions type has dtype or dtype_enum");
  LWSPLIT_ASSIGN_IF_ANY(o, dtype, req.i64(p + "dtype_code"));
  LWSPLIT_ASSIGN_IF_ANY(o, dtype_enum, req.i64(p + "dtype_code"));
  LWSPLIT_ASSIGN_IF_ANY(o, kv_cache_dtype, req.str(p + "kv_cache_dtype", "auto"));
  LWSPLIT_ASSIGN_IF_ANY(o, indexer_cache_dtype, req.str(p + "indexer_cache_dtype", "auto"));
  LWSPLIT_ASSIGN_IF_ANY(o, cache_size_in_bytes, req.i64(p + "cache_size_in_bytes"));
  LWSPLIT_ASSIGN_IF_ANY(o, block_size, req.i64(p + "block_size"));
  LWSPLIT_ASSIGN_IF_ANY(o, world_size, req.i64(p + "world_size", 1));
  LWSPLIT_ASSIGN_IF_ANY(o, n_local_kv_heads, req.i64(p + "n_local_kv_heads"));
  LWSPLIT_ASSIGN_IF_ANY(o, n_local_linear_k_heads, req.i64(p + "n_local_linear_k_heads"));
  LWSPLIT_ASSIGN_IF_ANY(o, n_local_linear_v_heads, req.i64(p + "n_local_linear_v_heads"));
  LWSPLIT_ASSIGN_IF_ANY(o, max_seqs_per_batch, req.i64(p + "max_seqs_per_batch"));
  LWSPLIT_ASSIGN_IF_ANY(o, num_speculative_tokens, req.i64(p + "num_speculative_tokens"));
  LWSPLIT_ASSIGN_IF_ANY(o, max_tokens_per_batch, req.i64(p + "max_tokens_per_batch"));
  LWSPLIT_ASSIGN_IF_ANY(o, max_linear_state_cache_slots, req.i64(p + "max_linear_state_cache_slots"));
  LWSPLIT_ASSIGN_IF_ANY(o, is_draft_engine, req.flag(p + "is_draft_engine"));
  LWSPLIT_ASSIGN_IF_ANY(o, enable_prefix_cache, req.flag(p + "enable_prefix_cache"));
  LWSPLIT_ASSIGN_IF_ANY(o, layerwise_split_size, req.i64(p + "layerwise_split_size", 1));
  return o;
}

}  // namespace
}  // namespace lwsplit

#undef LWSPLIT_SET_IF_ANY
#undef LWSPLIT_ASSIGN_IF_ANY
