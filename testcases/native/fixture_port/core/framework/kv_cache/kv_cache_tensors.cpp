#include "framework/kv_cache/kv_cache_tensors.h"

#include <glog/logging.h>

namespace fxport {
std::vector<FxLayerTensors> fx_allocate_kv_tensors(const std::vector<bool>& full_attention,
                                                   const std::vector<bool>& owned, int64_t n_blocks,
                                                   int64_t block_size, int64_t kv_heads, int64_t tp,
                                                   int64_t head_dim, at::ScalarType dtype, const std::string& device) {
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
  const auto options = at::TensorOptions().dtype(dtype).device(at::Device(device));
  const auto make = [&] { return at::empty({n_blocks, heads, block_size, head_dim}, options); };
  // Planted on block size 48 only (README: a test's way to switch it on, so no second build is needed): each
  // owned layer's k and v are carved out of one pool per tensor (at::from_blob) at a stride of a third of a
  // layer, so neighbouring owned layers share blocks while every layer shows the spec's shape (and "owns" the
  // spec's bytes by its own storage's size).
  const bool aliased = block_size == 48;
  int64_t n_owned = 0;
  for (size_t i = 0; i < full_attention.size(); ++i) n_owned += aliased && full_attention[i] && owned[i];
  const int64_t block_elems = heads * block_size * head_dim;
  const int64_t stride = (n_blocks + 2) / 3 * block_elems;
  const int64_t pool_elems = n_owned > 0 ? stride * (n_owned - 1) + n_blocks * block_elems : 0;
  const at::Tensor pools[2] = {at::empty({pool_elems}, options), at::empty({pool_elems}, options)};
  int64_t carved = 0;
  const auto carve = [&](const at::Tensor& pool) {
    char* base = static_cast<char*>(pool.data_ptr()) + carved * stride * pool.element_size();
    return at::from_blob(base, {n_blocks, heads, block_size, head_dim}, [pool](void*) {}, options);
  };
  FxLayerTensors scratch;
  std::vector<FxLayerTensors> out(full_attention.size());
  for (size_t i = 0; i < full_attention.size(); ++i) {
    if (!full_attention[i]) continue;
    if (owned[i]) {
      if (aliased) {
        out[i].k = carve(pools[0]);
        out[i].v = carve(pools[1]);
        ++carved;
        continue;
      }
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
