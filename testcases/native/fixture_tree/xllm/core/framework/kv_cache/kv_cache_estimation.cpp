// Fixture tree for the xllm_native adapter's tests (not xLLM code): one slot size per full layer,
// no linear state, no indexer; a split rank pays for its layers plus one scratch layer.
#include "framework/kv_cache/kv_cache_estimation.h"

#include <algorithm>
#include <limits>

#include "framework/model/model_args.h"
#include "util/utils.h"

namespace xllm {

namespace {
int64_t dtype_size(ScalarType dtype) { return dtype == ScalarType::Float ? 4 : 2; }
}  // namespace

std::vector<bool> resolve_indexer_cache_enabled_layers(const ModelArgs&, int64_t) { return {}; }

std::vector<bool> build_layer_cache_owned(const ModelArgs& model_args, const LayerwiseSplitLayout& layout,
                                          int64_t num_layers) {
  std::vector<bool> owned;
  for (int64_t layer_id = 0; layer_id < num_layers; ++layer_id) {
    owned.push_back(!is_full_attention_layer(model_args, layer_id) || layout.owns(layer_id));
  }
  return owned;
}

int64_t estimate_layerwise_split_block_count(const ModelArgs& model_args, int32_t layerwise_split_size,
                                             const KVCacheCapacity& kv_cache_cap, int64_t available_bytes,
                                             int64_t additional_block_bytes) {
  const int64_t layer_bytes = kv_cache_cap.block_size() * kv_cache_cap.slot_size();
  int64_t common_block_count = std::numeric_limits<int64_t>::max();
  for (int32_t rank = 0; rank < layerwise_split_size; ++rank) {
    const std::vector<bool> owned = build_layer_cache_owned(
        model_args, LayerwiseSplitLayout(true, layerwise_split_size, rank), kv_cache_cap.n_layers());
    int64_t owned_bytes = 0;
    for (int64_t layer_id = 0; layer_id < kv_cache_cap.n_layers(); ++layer_id) {
      if (owned[layer_id] && is_full_attention_layer(model_args, layer_id)) owned_bytes += layer_bytes;
    }
    if (owned_bytes == 0) continue;
    common_block_count =
        std::min(common_block_count, available_bytes / (owned_bytes + layer_bytes + additional_block_bytes));
  }
  CHECK_NE(common_block_count, std::numeric_limits<int64_t>::max()) << "No layerwise split rank owns a layer.";
  CHECK_GT(common_block_count, 0) << "No memory for one layerwise split block.";
  return common_block_count;
}

KVCacheCapacity estimate_kv_cache_capacity(const ModelArgs& model_args, const KVCacheEstimateOptions& options) {
  KVCacheCapacity cap;
  cap.cache_size_in_bytes(options.cache_size_in_bytes).block_size(options.block_size);
  CHECK_GT(cap.cache_size_in_bytes(), 0) << "Available kv cache size must be greater than 0";
  const int64_t size = dtype_size(options.dtype);
  cap.slot_size(model_args.enable_mla() ? size * (model_args.kv_lora_rank() + model_args.qk_rope_head_dim())
                                        : 2 * size * model_args.head_dim() * options.n_local_kv_heads);
  cap.n_layers(options.is_draft_engine ? model_args.num_nextn_predict_layers() : model_args.n_layers());
  for (int64_t layer_id = 0; layer_id < cap.n_layers(); ++layer_id) {
    if (is_full_attention_layer(model_args, layer_id)) {
      cap.num_full_attention_layers(cap.num_full_attention_layers() + 1);
    } else {
      cap.num_linear_attention_layers(cap.num_linear_attention_layers() + 1);
    }
  }
  cap.num_linear_state_blocks(kPaddingLinearStateBlocks);
  const int64_t full_block_bytes =
      util::ceil_div<int64_t>(cap.block_size() * cap.slot_size() * std::max<int64_t>(cap.num_full_attention_layers(), 1), 1);
  if (options.layerwise_split_size > 1) {
    cap.n_blocks(estimate_layerwise_split_block_count(model_args, options.layerwise_split_size, cap,
                                                      cap.cache_size_in_bytes(), 0));
  } else {
    cap.n_blocks(cap.cache_size_in_bytes() / full_block_bytes);
  }
  CHECK_GT(cap.n_blocks(), 0) << "no n_blocks for kv cache";
  return cap;
}

}  // namespace xllm
