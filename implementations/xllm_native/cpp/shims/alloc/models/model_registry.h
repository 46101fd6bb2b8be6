// lwsplit-harness shim for models/model_registry.h (every model's factory): util/utils.h's
// get_model_backend asks it for a backend; the allocation path never does. The real header
// reaches core/common/constants.h (xllm/models/ is not in this tree, and no header of xllm/core on
// utils.h's path includes it), which kv_cache_estimation.cpp relies on through util/utils.h.
#pragma once
#include <string>

#include "core/common/constants.h"

#include "shim.h"

namespace xllm {
class ModelRegistry {
 public:
  static std::string get_model_backend(const std::string&) {
    LWSPLIT_SHIM_UNREACHED("ModelRegistry::get_model_backend");
    return std::string();
  }
};
}  // namespace xllm
