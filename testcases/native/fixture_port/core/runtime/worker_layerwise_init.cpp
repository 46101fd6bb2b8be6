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
}  // namespace fxport
