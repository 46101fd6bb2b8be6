#include "runtime/worker_layerwise_init.h"

#include <glog/logging.h>

#include "framework/kv_cache/kv_cache_estimation_layerwise.h"
#include "framework/kv_cache/layerwise_split_layout.h"

namespace fxport {
// Planted: the owner is picked by layer id, not by the full layer's index.
std::vector<bool> fx_worker_mask(const std::vector<std::string>& layer_types, int64_t n_layers, int split_size,
                                 int rank) {
  CHECK_GT(n_layers, 0) << "n_layers";
  std::vector<bool> mask;
  for (int64_t l = 0; l < n_layers; ++l) {
#ifdef FXPORT_PLANT_LINEAR_UNOWNED  // planted (manifest_planted.yaml): linear layers owned by no rank
    mask.push_back(is_full(layer_types, l) && full_layer_owner(static_cast<int>(l), split_size) == rank % split_size);
#else
    mask.push_back(!is_full(layer_types, l) || full_layer_owner(static_cast<int>(l), split_size) == rank % split_size);
#endif
  }
  return mask;
}

// The worker's start-up checks (role worker_checks), before it allocates: no model with both linear-attention
// layers and a DSA indexer.
void fx_worker_checks(const std::vector<std::string>& layer_types, int64_t n_layers, int64_t index_n_heads) {
  bool enable_linear_attention = false;
  for (int64_t l = 0; l < n_layers; ++l) enable_linear_attention = enable_linear_attention || !is_full(layer_types, l);
  const bool enable_lighting_indexer = index_n_heads > 0;
#ifndef FXPORT_PLANT_NO_WORKER_CHECK  // planted (manifest_planted.yaml): the worker lets both through
  CHECK(!(enable_linear_attention && enable_lighting_indexer)) << "linear attention with a lighting indexer";
#else
  (void)enable_linear_attention;
  (void)enable_lighting_indexer;
#endif
}
}  // namespace fxport
