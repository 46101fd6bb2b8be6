// lwsplit-harness shim for core/util/json_reader.h (nlohmann/json): util/utils.h's
// get_model_backend names JsonReader; the allocation path never resolves a model path.
#pragma once
#include <filesystem>
#include <optional>
#include <string>

#include "shim.h"

namespace xllm {
class JsonReader {
 public:
  bool parse(const std::filesystem::path&) {
    LWSPLIT_SHIM_UNREACHED("JsonReader::parse");
    return false;
  }
  template <typename T>
  std::optional<T> value(const std::string&) const {
    LWSPLIT_SHIM_UNREACHED("JsonReader::value");
    return std::nullopt;
  }
};
}  // namespace xllm
