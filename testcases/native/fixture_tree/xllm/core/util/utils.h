// Fixture tree for the xllm_native adapter's tests (not xLLM code). Like the real header it pulls
// headers the adapter must not compile (they do not exist here); the adapter cuts out the helpers.
#pragma once
#include "rec.pb.h"
#include "models/model_registry.h"

namespace xllm {
namespace util {

template <typename T>
inline T ceil_div(T value, T divisor) {
  CHECK_GT(divisor, 0) << "divisor must be positive.";
  return value / divisor + static_cast<T>(value % divisor != 0);
}

inline int32_t kv_split_size_effective(void) {
  return ParallelConfig::get_instance().kv_split_size_effective();
}

inline bool enable_kvcache_split(void) { return kv_split_size_effective() > 1; }

ModelRegistry& registry();  // not cut out: needs the registry

}  // namespace util
}  // namespace xllm
