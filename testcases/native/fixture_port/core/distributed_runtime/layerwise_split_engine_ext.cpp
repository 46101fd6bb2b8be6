#include "distributed_runtime/layerwise_split_engine_ext.h"

#include "framework/parallel_state/mapping_ilu.h"

namespace fxport {
std::vector<std::vector<int>> fx_engine_layout(int n_full, int tp, int split_size) {
  return fx_group_layout(n_full, tp, split_size);
}
}  // namespace fxport
