// lwsplit-harness shim for platform/sleepable_allocator.h (VMM-backed device regions):
// allocate_kv_caches reaches it only with enable_sleep_mode, which the glue leaves false.
#pragma once
#include <c10/core/Device.h>

#include <cstddef>
#include <cstdint>

#include "shim.h"

namespace xllm {
enum class MemTag : int32_t { WEIGHTS = 0, KV_CACHE = 1 };

class SleepableAllocator final {
 public:
  static SleepableAllocator& get_instance() {
    static SleepableAllocator instance;
    return instance;
  }
  void* reserve_and_map(MemTag, const c10::Device&, size_t, size_t = 0) {
    LWSPLIT_SHIM_UNREACHED("SleepableAllocator::reserve_and_map");
    return nullptr;
  }
};
}  // namespace xllm
