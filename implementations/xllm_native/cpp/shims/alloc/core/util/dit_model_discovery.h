// lwsplit-harness shim for core/util/dit_model_discovery.h: util/utils.h's get_model_backend
// calls discover_dit_components; the allocation path never resolves a model path.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "shim.h"

namespace xllm {
inline std::optional<std::vector<std::string>> discover_dit_components(
    const std::filesystem::path&) {
  LWSPLIT_SHIM_UNREACHED("discover_dit_components");
  return std::nullopt;
}
}  // namespace xllm
