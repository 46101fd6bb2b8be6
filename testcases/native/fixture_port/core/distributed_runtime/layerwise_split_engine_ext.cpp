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

FxEngineOptions fx_engine_options(int world, int dp, int cp, long kv_heads, long linear_k_heads, long linear_v_heads,
                                  int split_size, bool draft) {
  FxEngineOptions o;
  o.world_size = world / (dp * cp);
  const long tp = o.world_size > 0 ? o.world_size : 1;
#ifdef FXPORT_PLANT_HEADS_UNDIVIDED  // planted (manifest_planted.yaml): every TP rank keeps every KV head
  o.n_local_kv_heads = kv_heads > 1 ? kv_heads : 1;
#else
  o.n_local_kv_heads = kv_heads / tp > 1 ? kv_heads / tp : 1;
#endif
  o.n_local_linear_k_heads = linear_k_heads / tp > 1 ? linear_k_heads / tp : 1;
  o.n_local_linear_v_heads = linear_v_heads / tp > 1 ? linear_v_heads / tp : 1;
  o.layerwise_split_size = draft ? 1 : split_size;
  return o;
}
}  // namespace fxport
