// Fixture tree for the xllm_native adapter's tests (not xLLM code).
#include <cstdint>
namespace xllm {
int64_t fixture_block_utils_linked() { return 1; }
}  // namespace xllm
