// Fixture tree for the xllm_native adapter's tests (not xLLM code): a worker's KV-cache allocation in
// upstream's shape. The harness cuts its branches for sleep mode and xtensor, up to the ordinary allocation
// (build.generate.allocation_checks_cut), and compiles them with its shim (cpp/allocation_shim.h); the rest of
// this file is never compiled.
#include <glog/logging.h>

#include <cstdint>
#include <vector>

namespace xllm {

template <typename Caches, typename Shape, typename Options>
void allocate_kv_caches(Caches& kv_caches, const Shape& kv_cache_shape, const Options& create_options) {
  const int64_t num_layers = create_options.num_layers();
  const std::vector<bool>& layer_cache_owned = create_options.layer_cache_owned();

  if (create_options.enable_sleep_mode()) {
#ifndef FIXTURE_PLANT_SLEEP_ACCEPTED  // planted (a test's manifest): the sleepable allocation takes the split
    CHECK(layer_cache_owned.empty()) << "Sleep mode does not support layerwise split.";
#endif
    allocate_sleepable_kv_caches(kv_caches, kv_cache_shape, create_options);
    return;
  }

  if (create_options.enable_xtensor()) {
    CHECK(layer_cache_owned.empty()) << "XTensor does not support layerwise split.";
    auto k_tensors = XTensorAllocator::get_instance().create_k_tensors(
        create_options.model_id(), kv_cache_shape.key_cache_shape(), create_options.dtype(), num_layers);
    (void)k_tensors;
    return;
  }

  if (layer_cache_owned.empty()) {
    for (int64_t layer = 0; layer < num_layers; ++layer) kv_caches.emplace_back(layer);
    return;
  }
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    if (layer_cache_owned[static_cast<size_t>(layer)]) kv_caches.emplace_back(layer);
  }
}

}  // namespace xllm
