// lwsplit-harness shim: the state the worker's KV-cache start-up statements read from WorkerImpl
// (runtime/worker_impl.cpp, WorkerImpl::allocate_kv_cache_storage, cut up to its first statement on the
// KV-cache quantization: build.generate.worker_checks_cut). A worker of a model whose weights are loaded, holding no
// KV cache yet, with no PD disaggregation, no grouped cache layout and no xtensor; the model's args, the
// split size and the worker's global rank are the request's. Nothing else of WorkerImpl is compiled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lwsplit_roles.h"  // generated: the tree's estimation, layout and ModelArgs headers

namespace xllm {

#ifndef LWSPLIT_HAS_KV_CACHE_CONFIG
class KVCacheConfig {
 public:
  static KVCacheConfig& get_instance() {
    static KVCacheConfig config;
    return config;
  }
  bool enable_xtensor() const { return false; }
  const std::string& indexer_cache_dtype() const { return indexer_cache_dtype_; }

 private:
  std::string indexer_cache_dtype_ = "auto";
};
#endif

namespace lwsplit_worker {
struct Model {};
struct Options {
  bool enable_disagg_pd() const { return false; }
  bool enable_pd_ooc() const { return false; }
};
struct Context {
  const ModelArgs& args;
  const ModelArgs& get_model_args() const { return args; }
};
struct ParallelArgs {
  int32_t split_size;
  int32_t global_rank;
  int32_t layerwise_split_size() const { return split_size; }
  int32_t rank() const { return global_rank; }
};
struct Shape {
  bool has_grouped_cache_layout() const { return false; }
};
}  // namespace lwsplit_worker

struct LwsplitWorkerChecks {
  std::vector<bool> layer_cache_owned;
  bool enable_linear_attention = false;
  bool enable_lighting_indexer = false;
};

// The members and the argument the cut statements name, as locals of the generated function.
#define LWSPLIT_WORKER_STATE(args, split, global_rank)                                     \
  const lwsplit_worker::Model lwsplit_model;                                                \
  const lwsplit_worker::Model* model_ = &lwsplit_model;                                     \
  const std::vector<int> kv_caches_;                                                         \
  const lwsplit_worker::Options options_;                                                    \
  const lwsplit_worker::Context context_{args};                                             \
  const lwsplit_worker::ParallelArgs parallel_args_{split, global_rank};                    \
  const lwsplit_worker::Shape kv_cache_shape;                                                \
  auto get_num_layers = [&context_]() -> int64_t { return context_.get_model_args().n_layers(); }

}  // namespace xllm
