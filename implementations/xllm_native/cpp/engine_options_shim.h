// lwsplit-harness shim: the state the engine's option statements read from LLMEngine
// (distributed_runtime/llm_engine.cpp: its constructor's attention TP size, init_model's local heads per TP
// rank, and the KVCacheEstimateOptions estimate_kv_cache_capacity fills; tree.files.ENGINE_OPTIONS_CUTS) and
// the draft worker's layer count (runtime/worker_impl.cpp: WorkerImpl::get_num_layers). The members are the
// engine's as its constructor and init_model leave them; the runtime options, the KV-cache config and the
// worker count are the request's (what a launch's flags and its workers give the engine). Nothing of the
// arithmetic is written here: it is the tree's cut statements.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/framework/config/parallel_config.h"
#include "lwsplit_roles.h"  // generated: the tree's estimation, layout and ModelArgs headers
// The tree's platform header (file engine_platform: Platform::uses_model_cp_sharding, is_mlu) is included before.

namespace xllm {

namespace lwsplit_engine {
using Dtype = decltype(KVCacheEstimateOptions{}.dtype);

// A device of the runtime options: the model's dtype as the loader parses it (its ScalarType code).
struct Device {
  int64_t dtype_code = 0;
};

// runtime::Options as a launch's flags fill them (the fields the cut statements read).
struct Options {
  int32_t dp_size_ = 1;
  int32_t cp_size_ = 1;
  std::vector<Device> devices_{Device{}};
  std::string kv_cache_dtype_ = "auto";
  int32_t block_size_ = 0;
  int64_t max_seqs_per_batch_ = 0;
  int64_t num_speculative_tokens_ = 0;
  int64_t max_tokens_per_batch_ = 0;
  int64_t max_linear_state_cache_slots_ = 0;
  bool is_draft_engine_ = false;
  bool enable_mtp_draft_body_tp1_ = false;

  int32_t dp_size() const { return dp_size_; }
  int32_t cp_size() const { return cp_size_; }
  const std::vector<Device>& devices() const { return devices_; }
  const std::string& kv_cache_dtype() const { return kv_cache_dtype_; }
  int32_t block_size() const { return block_size_; }
  int64_t max_seqs_per_batch() const { return max_seqs_per_batch_; }
  int64_t num_speculative_tokens() const { return num_speculative_tokens_; }
  int64_t max_tokens_per_batch() const { return max_tokens_per_batch_; }
  int64_t max_linear_state_cache_slots() const { return max_linear_state_cache_slots_; }
  bool is_draft_engine() const { return is_draft_engine_; }
  bool enable_mtp_draft_body_tp1() const { return enable_mtp_draft_body_tp1_; }
};

// What the engine is handed: its options, its workers, the cache size the workers' memory leaves.
struct Inputs {
  Options options;
  int64_t n_workers = 1;
  int64_t cache_size_in_bytes = 0;
  std::string indexer_cache_dtype = "auto";
  bool enable_prefix_cache = false;
};

// ModelArgs as the draft worker's context holds them (WorkerImpl::get_num_layers reads them).
struct Context {
  const ModelArgs& args;
  const ModelArgs& get_model_args() const { return args; }
};
}  // namespace lwsplit_engine

// KVCacheConfig::get_instance() as the cut statements name it (renamed while they are compiled: the other cuts
// keep their own), holding the request's flags.
class LwsplitEngineKVCacheConfig {
 public:
  static LwsplitEngineKVCacheConfig& get_instance() {
    static LwsplitEngineKVCacheConfig config;
    return config;
  }
  const std::string& indexer_cache_dtype() const { return indexer_cache_dtype_; }
  bool enable_prefix_cache() const { return enable_prefix_cache_; }

  std::string indexer_cache_dtype_ = "auto";
  bool enable_prefix_cache_ = false;
};

// The draft worker (WorkerImpl, renamed while WorkerImpl::get_num_layers is compiled): its model's args and
// whether it is a speculative draft.
class LwsplitEngineWorker {
 public:
  int64_t get_num_layers() const;

  lwsplit_engine::Context context_;
  bool is_spec_draft_ = false;
};

namespace util {
// util::parse_dtype as the cut statements name it (renamed while they are compiled): the loader's dtype, the
// request's ScalarType code carried on the device.
inline lwsplit_engine::Dtype lwsplit_engine_parse_dtype(const std::string&, const lwsplit_engine::Device& device) {
  return static_cast<lwsplit_engine::Dtype>(device.dtype_code);
}
}  // namespace util

struct LwsplitEngineOptions {
  KVCacheEstimateOptions estimate_options;
  int64_t dp_local_tp_size = 0;
};

// The LLMEngine members and locals the cut statements read and write, as locals of the generated function.
#define LWSPLIT_ENGINE_STATE(args, in)                                     \
  const lwsplit_engine::Options options_ = (in).options;                   \
  const ModelArgs args_ = (args);                                          \
  const std::vector<int> worker_clients_(static_cast<size_t>((in).n_workers)); \
  uint32_t dp_size_ = 1;                                                   \
  uint32_t cp_size_ = 1;                                                   \
  uint32_t worker_clients_num_ = 0;                                        \
  uint32_t dp_local_tp_size_ = 0;                                          \
  uint32_t dp_local_size_ = 0;                                             \
  std::vector<std::vector<int32_t>> dp_batch_embedding_ids_;              \
  std::vector<std::vector<std::string>> dp_batch_request_ids_;            \
  std::vector<uint64_t> dp_batch_generations_;                             \
  lwsplit_engine::Dtype dtype_{};                                          \
  int64_t n_local_kv_heads_ = 0;                                           \
  int64_t n_local_q_heads_ = 0;                                            \
  int64_t head_dim_ = 0;                                                   \
  int64_t n_local_linear_v_heads_ = 0;                                     \
  int64_t n_local_linear_k_heads_ = 0;                                     \
  LwsplitEngineKVCacheConfig::get_instance().indexer_cache_dtype_ = (in).indexer_cache_dtype; \
  LwsplitEngineKVCacheConfig::get_instance().enable_prefix_cache_ = (in).enable_prefix_cache

}  // namespace xllm
