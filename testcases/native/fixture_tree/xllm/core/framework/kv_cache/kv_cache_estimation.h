// Fixture tree for the xllm_native adapter's tests (not xLLM code).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "framework/kv_cache/kv_cache_capacity.h"
#include "framework/kv_cache/layerwise_split_layout.h"

namespace xllm {

class ModelArgs;

enum class ScalarType : int8_t { Half = 5, Float = 6, BFloat16 = 15 };

struct KVCacheEstimateOptions {
  ScalarType dtype = ScalarType::BFloat16;
  std::string kv_cache_dtype = "auto";
  std::string indexer_cache_dtype = "auto";
  int64_t cache_size_in_bytes = 0;
  int64_t block_size = 0;
  int64_t world_size = 1;
  int64_t n_local_kv_heads = 0;
  int64_t n_local_linear_k_heads = 0;
  int64_t n_local_linear_v_heads = 0;
  int64_t max_seqs_per_batch = 0;
  int64_t num_speculative_tokens = 0;
  int64_t max_tokens_per_batch = 0;
  int64_t max_linear_state_cache_slots = 0;
  bool is_draft_engine = false;
  bool enable_prefix_cache = false;
  int32_t layerwise_split_size = 1;
};

std::vector<bool> resolve_indexer_cache_enabled_layers(const ModelArgs& model_args, int64_t num_cache_layers);
std::vector<bool> build_layer_cache_owned(const ModelArgs& model_args, const LayerwiseSplitLayout& layout,
                                          int64_t num_layers);
int64_t estimate_layerwise_split_block_count(const ModelArgs& model_args, int32_t layerwise_split_size,
                                             const KVCacheCapacity& kv_cache_cap, int64_t available_bytes,
                                             int64_t additional_block_bytes);
KVCacheCapacity estimate_kv_cache_capacity(const ModelArgs& model_args, const KVCacheEstimateOptions& options);

}  // namespace xllm
