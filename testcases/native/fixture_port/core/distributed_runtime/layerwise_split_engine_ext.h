#pragma once
#include <optional>
#include <vector>

namespace fxport {
// What an engine hands its workers: the TP ranks holding each full layer; nothing (the engine's uniform
// allocation) while the flag fx_layerwise is off.
std::optional<std::vector<std::vector<int>>> fx_engine_layout(int n_full, int tp, int split_size);

// The option values the engine hands its estimation: the attention TP size, the KV and linear heads each TP
// rank holds, and the split size (1 for a draft engine).
struct FxEngineOptions {
  int world_size = 1;
  long n_local_kv_heads = 0;
  long n_local_linear_k_heads = 0;
  long n_local_linear_v_heads = 0;
  int layerwise_split_size = 1;
};
FxEngineOptions fx_engine_options(int world, int dp, int cp, long kv_heads, long linear_k_heads, long linear_v_heads,
                                  int split_size, bool draft);
}  // namespace fxport
