// lwsplit-harness shim: the state the two extracted functions read from their
// classes. validate_layerwise_split_size_startup_config reads the master's
// Options; SpeculativeEngine::calculate_kv_cache reads runtime::Options and the
// target's ModelArgs. Nothing else of Master or SpeculativeEngine is compiled.
#pragma once

#include <cstdint>
#include <string>

#include "core/framework/config/parallel_config.h"
#include "lwsplit_roles.h"  // generated: the tree's estimation, layout and ModelArgs headers

namespace xllm {

class Options {
 public:
  int32_t dp_size() const { return dp_size_; }
  int32_t cp_size() const { return cp_size_; }
  double host_blocks_factor() const { return host_blocks_factor_; }
  const std::string& model_path() const { return model_path_; }
  const std::string& backend() const { return backend_; }

  int32_t dp_size_ = 1;
  int32_t cp_size_ = 1;
  double host_blocks_factor_ = 0.0;
  std::string model_path_;
  std::string backend_ = "llm";
};

namespace runtime {
class Options {
 public:
  bool enable_mtp_draft_body_tp1() const { return enable_mtp_draft_body_tp1_; }
  bool is_draft_engine() const { return is_draft_engine_; }

  bool enable_mtp_draft_body_tp1_ = false;
  bool is_draft_engine_ = false;
};
}  // namespace runtime

class SpeculativeEngine {
 public:
  int64_t calculate_kv_cache(const KVCacheCapacity& target_kv_cache_cap,
                             const KVCacheCapacity& draft_kv_cache_cap) const;

  runtime::Options options_;
  ModelArgs model_args_;
};

}  // namespace xllm
