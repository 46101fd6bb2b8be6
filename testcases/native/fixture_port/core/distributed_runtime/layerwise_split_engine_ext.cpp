#include "distributed_runtime/layerwise_split_engine_ext.h"

#include "config/parallel_config_layerwise.h"
#include "framework/parallel_state/mapping_ilu.h"

namespace fxport {
std::optional<std::vector<std::vector<int>>> fx_engine_layout(int n_full, int tp, int split_size) {
#ifndef FXPORT_PLANT_FLAG_IGNORED  // planted (a test's manifest): the engine splits with the flag off too
  if (!FLAGS_fx_layerwise) return std::nullopt;
#endif
  return fx_group_layout(n_full, tp, split_size);
}
}  // namespace fxport
