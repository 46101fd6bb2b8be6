// Fixture tree for the xllm_native adapter's tests (not xLLM code).
#include <string>
namespace xllm {
std::string fixture_readable_size(int64_t bytes) { return std::to_string(bytes) + " B"; }
}  // namespace xllm
