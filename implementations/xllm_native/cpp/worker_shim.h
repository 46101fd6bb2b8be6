// lwsplit-harness shim: the state the worker's KV-cache start-up statements read from WorkerImpl
// (runtime/worker_impl.cpp, WorkerImpl::allocate_kv_cache_storage, cut up to its first statement on the linear
// state's dtype: build.generate.worker_checks_cut, its quantization block included). A worker of a model whose
// weights are loaded, holding no KV cache yet, with no PD disaggregation, no grouped cache layout, no xtensor, the
// llm backend; the model's args, the split size, the worker's global rank, the KV cache's and the indexer cache's
// dtypes are the request's. The shape the engine handed it holds an index-cache scale exactly where upstream's
// KVCacheShape builds one (kv_cache_shape.cpp: an indexer and an int8 indexer cache, as the estimation's capacity
// says). Nothing else of WorkerImpl is compiled. Beside it, what the indexed cache's allocation reads
// (framework/kv_cache/kv_cache_utils.cpp, create_indexed_kv_cache_tensors, cut from its branch on the int8
// indexer cache: build.generate.indexer_checks_include): its create options and shape; no tensor is made.
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
  std::string indexer_cache_dtype_ = "auto";  // the request's, set before each call (LWSPLIT_WORKER_STATE)
};
#define LWSPLIT_SET_INDEXER_CACHE_DTYPE(dtype) KVCacheConfig::get_instance().indexer_cache_dtype_ = (dtype)
#else
#define LWSPLIT_SET_INDEXER_CACHE_DTYPE(dtype) (void)(dtype)
#endif

namespace lwsplit_worker {
struct Model {};
struct Options {
  std::string kv_cache_dtype_ = "auto";
  bool enable_disagg_pd() const { return false; }
  bool enable_pd_ooc() const { return false; }
  const std::string& kv_cache_dtype() const { return kv_cache_dtype_; }
  std::string backend() const { return "llm"; }
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
  bool index_scale = false;
  bool has_grouped_cache_layout() const { return false; }
  bool has_index_cache_scale_shape() const { return index_scale; }
};
}  // namespace lwsplit_worker

// What the indexed cache's allocation names in its branch on the int8 indexer cache, for a build neither NPU's nor
// MLU's (its other branches are left to the preprocessor): no tensor is made.
namespace lwsplit_indexer {
namespace torch {
struct Tensor {};
struct TensorOptions {
  TensorOptions device(int) const { return *this; }
};
constexpr int kFloat16 = 5;
constexpr int kFloat32 = 6;
inline TensorOptions dtype(int) { return {}; }
inline Tensor zeros(const std::vector<int64_t>&, const TensorOptions&) { return {}; }
}  // namespace torch
struct CreateOptions {
  bool indexer_quant = false;
  bool enable_indexer_cache_quant() const { return indexer_quant; }
  int device() const { return 0; }
};
struct Shape {
  bool index_scale = false;
  bool has_index_cache_scale_shape() const { return index_scale; }
  std::vector<int64_t> index_cache_shape() const { return {}; }
  std::vector<int64_t> index_cache_scale_shape() const { return {}; }
};
struct Tensors {
  torch::Tensor index_cache_scale;
};
inline torch::Tensor alloc_scale(const std::vector<int64_t>&, int) { return {}; }
}  // namespace lwsplit_indexer

struct LwsplitWorkerChecks {
  std::vector<bool> layer_cache_owned;
  bool enable_linear_attention = false;
  bool enable_lighting_indexer = false;
  bool enable_indexer_cache_quant = false;
  bool index_cache_scale = false;
};

// The members and the arguments the cut statements name, as locals of the generated function.
#define LWSPLIT_WORKER_STATE(args, split, global_rank, kv_dtype, indexer_dtype)                 \
  LWSPLIT_SET_INDEXER_CACHE_DTYPE(indexer_dtype);                                            \
  const lwsplit_worker::Model lwsplit_model;                                                \
  const lwsplit_worker::Model* model_ = &lwsplit_model;                                     \
  const std::vector<int> kv_caches_;                                                         \
  const lwsplit_worker::Options options_{kv_dtype};                                          \
  const lwsplit_worker::Context context_{args};                                             \
  const lwsplit_worker::ParallelArgs parallel_args_{split, global_rank};                    \
  const lwsplit_worker::Shape kv_cache_shape{(args).index_n_heads() > 0 && (indexer_dtype) == "int8"}; \
  auto get_num_layers = [&context_]() -> int64_t { return context_.get_model_args().n_layers(); }

}  // namespace xllm
