#include "framework/kv_cache/kv_cache_layerwise.h"

#include <glog/logging.h>

namespace fxport {
int64_t fx_allocated_layers(const std::vector<bool>& mask) {
  int64_t n = 0;
  for (bool owned : mask) n += owned ? 1 : 0;
  return n;
}

void fx_allocation_checks(const std::vector<bool>& owned, bool sleep_mode, bool xtensor) {
  if (sleep_mode) {
#ifndef FXPORT_PLANT_SLEEP_ACCEPTED  // planted (manifest_planted.yaml): the sleepable allocation takes the split
    CHECK(owned.empty()) << "Sleep mode does not support layerwise split.";
#endif
    return;
  }
  if (xtensor) {
    CHECK(owned.empty()) << "XTensor does not support layerwise split.";
  }
}
}  // namespace fxport
