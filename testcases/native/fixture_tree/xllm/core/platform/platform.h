// Fixture tree for the xllm_native adapter's tests (not xLLM code): the platform queries the engine's
// option statements ask (a build with no MLU or NPU backend).
#pragma once

namespace xllm {

class Platform final {
 public:
  static constexpr bool is_mlu() { return false; }
  static constexpr bool is_npu() { return false; }
  static constexpr bool uses_model_cp_sharding() { return is_mlu() || is_npu(); }
};

}  // namespace xllm
