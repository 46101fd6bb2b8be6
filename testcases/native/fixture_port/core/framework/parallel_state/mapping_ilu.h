#pragma once
#include <vector>

namespace fxport {
// TP ranks holding each full layer: one per split group of consecutive ranks.
std::vector<std::vector<int>> fx_group_layout(int n_full, int tp, int split_size);
}  // namespace fxport
