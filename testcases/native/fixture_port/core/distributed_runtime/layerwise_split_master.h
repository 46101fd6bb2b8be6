#pragma once
#include <vector>

namespace fxport {
// The master's layout: the TP ranks holding each full layer.
std::vector<std::vector<int>> fx_master_layout(int n_full, int tp, int split_size);
}  // namespace fxport
