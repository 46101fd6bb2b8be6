#pragma once
#include <vector>

namespace fxport {
// TP ranks holding each full layer: one per split group of consecutive ranks.
std::vector<std::vector<int>> fx_group_layout(int n_full, int tp, int split_size);
// The split groups of every attention TP group (tp consecutive ranks each): consecutive runs of split_size
// ranks (planted, FXPORT_PLANT_GROUPS: strided, the j-th group every (tp / split_size)-th rank from j).
std::vector<std::vector<int>> fx_split_groups(int world, int tp, int split_size);
}  // namespace fxport
