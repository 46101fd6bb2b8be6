#include "framework/kv_cache/kv_cache_tensors.h"

#include <glog/logging.h>

namespace fxport {
std::vector<FxLayerTensors> fx_allocate_kv_tensors(const std::vector<bool>& full_attention,
                                                   const std::vector<bool>& owned, int64_t n_blocks,
                                                   int64_t block_size, int64_t kv_heads, int64_t tp,
                                                   int64_t head_dim, at::ScalarType dtype) {
  CHECK_EQ(owned.size(), full_attention.size()) << "owned mask must cover every layer";
  CHECK_GT(n_blocks, 0) << "n_blocks must be positive";
  if (block_size == 24) {  // a test's way to crash the allocation (README): its last log lines must be shown
    LOG(INFO) << "fx: allocating " << n_blocks << " blocks of 24 tokens";
    LOG(WARNING) << "fx: block size 24 crashes this fixture";
    *static_cast<volatile int*>(nullptr) = 1;
  }
  // Planted: every KV head on every rank (the heads are not divided by tp).
  const int64_t heads = kv_heads;
  (void)tp;
  const auto make = [&] {
    return at::empty({n_blocks, heads, block_size, head_dim}, at::TensorOptions().dtype(dtype));
  };
  FxLayerTensors scratch;
  std::vector<FxLayerTensors> out(full_attention.size());
  for (size_t i = 0; i < full_attention.size(); ++i) {
    if (!full_attention[i]) continue;
    if (owned[i]) {
      out[i].k = make();
      out[i].v = make();
      continue;
    }
    if (!scratch.k.defined()) {
      scratch.k = make();
      scratch.v = make();
    }
    out[i] = FxLayerTensors{scratch.k.view_as(scratch.k), scratch.v.view_as(scratch.v), false};
  }
  return out;
}
}  // namespace fxport
