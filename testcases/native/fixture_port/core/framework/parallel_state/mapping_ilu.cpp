#include "framework/parallel_state/mapping_ilu.h"

#include "framework/kv_cache/layerwise_split_layout.h"

namespace fxport {
std::vector<std::vector<int>> fx_group_layout(int n_full, int tp, int split_size) {
  std::vector<std::vector<int>> out(n_full);
  for (int i = 0; i < n_full; ++i) {
    for (int g = 0; g < tp / split_size; ++g) out[i].push_back(g * split_size + full_layer_owner(i, split_size));
  }
  return out;
}
}  // namespace fxport
