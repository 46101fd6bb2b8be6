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

std::vector<std::vector<int>> fx_split_groups(int world, int tp, int split_size) {
  std::vector<std::vector<int>> out;
  for (int first = 0; first + tp <= world; first += tp) {
    for (int g = 0; g < tp / split_size; ++g) {
      std::vector<int> group;
      for (int j = 0; j < split_size; ++j) {
#ifdef FXPORT_PLANT_GROUPS
        group.push_back(first + g + j * (tp / split_size));
#else
        group.push_back(first + g * split_size + j);
#endif
      }
      out.push_back(group);
    }
  }
  return out;
}
}  // namespace fxport
