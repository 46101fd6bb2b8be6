// lwsplit-harness shim for core/framework/config/kv_cache_config.h (nlohmann/json and the option
// registry; get_instance lives in a .cpp). kv_cache_utils.cpp names enable_prefix_cache only in
// use_npu_nz_kv_cache_layout, which USE_NPU code alone calls. The glue passes enable_xtensor and
// indexer_cache_dtype through KVCacheCreateOptions, as the worker reads them from this singleton.
#pragma once
#include "shim.h"

namespace xllm {
class KVCacheConfig final {
 public:
  static KVCacheConfig& get_instance() {
    static KVCacheConfig instance;
    return instance;
  }
  bool enable_prefix_cache() const {
    LWSPLIT_SHIM_UNREACHED("KVCacheConfig::enable_prefix_cache");
    return true;
  }
};
}  // namespace xllm
