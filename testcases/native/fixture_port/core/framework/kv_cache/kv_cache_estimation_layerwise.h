#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fxport {

struct FxCapacity {
  int64_t n_blocks = 0;
  int64_t block_size = 0;
  int64_t slot_size = 0;
  int64_t n_layers = 0;
  std::vector<bool> full;
};

bool is_full(const std::vector<std::string>& layer_types, int64_t layer);

FxCapacity fx_estimate(const std::vector<std::string>& layer_types, int64_t n_layers, int64_t kv_heads_local,
                       int64_t head_dim, int64_t block_size, int64_t budget_bytes, int split_size);

}  // namespace fxport
