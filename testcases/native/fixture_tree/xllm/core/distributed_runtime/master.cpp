// Fixture tree for the xllm_native adapter's tests (not xLLM code). The rest of this file needs
// headers the fixture does not have: the adapter compiles only the function it cuts out.
#include "master.h"
#include "models/model_registry.h"

namespace xllm {
namespace {

void apply_unrelated_options(const Options& source, runtime::Options& destination) {
  destination.kv_cache_dtype(source.kv_cache_dtype());
}

void validate_layerwise_split_size_startup_config(const Options& options, const std::string& model_type,
                                                  int32_t global_world_size) {
  const ParallelConfig& parallel_config = ParallelConfig::get_instance();
  const int32_t layerwise_split_size = parallel_config.layerwise_split_size();
  validate_layerwise_split_size_config(layerwise_split_size);
  if (layerwise_split_size <= 1) {
    return;
  }
  CHECK_GE(options.dp_size(), 1) << "dp_size must be >= 1.";
  CHECK_GT(global_world_size, 0) << "world_size must be > 0.";
  const int32_t dp_cp_size = options.dp_size() * options.cp_size();
  CHECK_EQ(global_world_size % dp_cp_size, 0) << "world_size not divisible by dp * cp";
  validate_layerwise_split_enablement(layerwise_split_size, global_world_size / dp_cp_size, model_type);
  CHECK_LE(options.host_blocks_factor(), 1.0) << "no host cache with layerwise split";
  CHECK_EQ(parallel_config.cp_size(), 1) << "no context parallel with layerwise split";
  CHECK_EQ(parallel_config.kv_split_size_effective(), 1) << "no KV split with layerwise split";
}

}  // namespace

Master::Master(const Options& options) { validate_layerwise_split_size_startup_config(options, "", 1); }

}  // namespace xllm
