// lwsplit-harness shim for core/util/model_config_utils.h: util/utils.h's model-path helpers call
// get_model_type; the allocation path takes model_type from ModelArgs.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "shim.h"

namespace xllm::util {
inline std::string get_model_type(const std::filesystem::path&,
                                  const std::optional<std::string>& = std::nullopt) {
  LWSPLIT_SHIM_UNREACHED("util::get_model_type");
  return std::string();
}
}  // namespace xllm::util
