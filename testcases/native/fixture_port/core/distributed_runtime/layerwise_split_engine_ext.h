#pragma once
#include <optional>
#include <vector>

namespace fxport {
// What an engine hands its workers: the TP ranks holding each full layer; nothing (the engine's uniform
// allocation) while the flag fx_layerwise is off.
std::optional<std::vector<std::vector<int>>> fx_engine_layout(int n_full, int tp, int split_size);
}  // namespace fxport
