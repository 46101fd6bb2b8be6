#include "framework/kv_cache/kv_cache_estimation_layerwise.h"

#include <glog/logging.h>

namespace fxport {

bool is_full(const std::vector<std::string>& layer_types, int64_t layer) {
  return layer_types.empty() || layer_types[layer] == "full_attention";
}

FxCapacity fx_estimate(const std::vector<std::string>& layer_types, int64_t n_layers, int64_t kv_heads_local,
                       int64_t head_dim, int64_t block_size, int64_t budget_bytes, int split_size) {
  CHECK_GT(budget_bytes, 0) << "cache_size_in_bytes, 0)";
  FxCapacity cap;
  cap.block_size = block_size;
  cap.n_layers = n_layers;
  cap.slot_size = 2 * kv_heads_local * head_dim * 2;
#ifdef FXPORT_PLANT_SLOT  // planted (manifest_planted.yaml): K and V counted twice
  cap.slot_size *= 2;
#endif
  int64_t n_full = 0;
  for (int64_t l = 0; l < n_layers; ++l) {
    cap.full.push_back(is_full(layer_types, l));
    n_full += cap.full.back() ? 1 : 0;
  }
  const int64_t held = split_size > 1 ? (n_full + split_size - 1) / split_size + 1 : n_full;
  cap.n_blocks = budget_bytes / (block_size * cap.slot_size * held);
  return cap;
}

}  // namespace fxport
