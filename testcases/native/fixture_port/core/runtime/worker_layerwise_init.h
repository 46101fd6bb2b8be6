#pragma once
#include <string>
#include <vector>

namespace fxport {
// The mask a worker of global rank `rank` allocates by (true: real storage).
std::vector<bool> fx_worker_mask(const std::vector<std::string>& layer_types, int64_t n_layers, int split_size,
                                 int rank);
// The worker's start-up checks: a CHECK that fires refuses the configuration.
void fx_worker_checks(const std::vector<std::string>& layer_types, int64_t n_layers, int64_t index_n_heads);
}  // namespace fxport
