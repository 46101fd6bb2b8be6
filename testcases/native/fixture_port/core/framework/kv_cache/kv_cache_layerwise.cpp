#include "framework/kv_cache/kv_cache_layerwise.h"

namespace fxport {
int64_t fx_allocated_layers(const std::vector<bool>& mask) {
  int64_t n = 0;
  for (bool owned : mask) n += owned ? 1 : 0;
  return n;
}
}  // namespace fxport
