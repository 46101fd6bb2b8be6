#pragma once
#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fxport {
// One worker layer's KV tensors: its own where it owns the layer, else views of the rank's scratch.
struct FxLayerTensors {
  at::Tensor k;
  at::Tensor v;
  bool owned = true;
};

// The fixture's allocation: per layer of `full_attention`, k and v of [n_blocks, heads, block_size,
// head_dim] on `device`; a linear layer gets nothing (the fixture has no linear state).
std::vector<FxLayerTensors> fx_allocate_kv_tensors(const std::vector<bool>& full_attention,
                                                   const std::vector<bool>& owned, int64_t n_blocks,
                                                   int64_t block_size, int64_t kv_heads, int64_t tp,
                                                   int64_t head_dim, at::ScalarType dtype,
                                                   const std::string& device = "cpu");
}  // namespace fxport
