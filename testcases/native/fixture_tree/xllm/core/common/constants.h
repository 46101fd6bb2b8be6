// Fixture tree for the xllm_native adapter's tests (not xLLM code): simple math, same signatures.
#pragma once
#include <cstdint>
namespace xllm {
inline constexpr int64_t kPaddingLinearStateBlocks = 2;
}  // namespace xllm
