// Fixture tree for the xllm_native adapter's tests (not xLLM code): a worker's KV-cache start-up in
// upstream's shape. The harness cuts the statements before the first one on the linear state's dtype (its
// quantization block included: build.generate.worker_checks_cut) and compiles them with cpp/worker_shim.h.
#include <vector>

#include "framework/kv_cache/kv_cache_estimation.h"
#include "framework/model/model_args.h"

namespace xllm {

bool WorkerImpl::allocate_kv_cache_storage(const KVCacheShape& kv_cache_shape) {
  CHECK(model_ != nullptr) << "no model";
  const auto& args = context_.get_model_args();
  bool enable_linear_attention = false;
  for (int64_t layer = 0; layer < args.n_layers(); ++layer) {
    enable_linear_attention = enable_linear_attention || !is_full_attention_layer(args, layer);
  }
  const bool enable_lighting_indexer = args.index_n_heads() > 0;
#ifndef FIXTURE_PLANT_NO_WORKER_CHECK  // planted (a test's manifest): the worker lets both through
  CHECK(!(enable_linear_attention && enable_lighting_indexer)) << "the fixture keeps linear state or an index cache";
#endif
  const int32_t split_size = parallel_args_.layerwise_split_size();
  std::vector<bool> layer_cache_owned;
  if (split_size > 1) {
#ifdef FIXTURE_PLANT_WORKER_RANK  // planted (a test's manifest): the worker takes split rank rank / s % s
    const LayerwiseSplitLayout layout(true, split_size, parallel_args_.rank() / split_size % split_size);
#else
    const LayerwiseSplitLayout layout(true, split_size, parallel_args_.rank() % split_size);
#endif
    layer_cache_owned = build_layer_cache_owned(args, layout, get_num_layers());
  }
  const bool enable_kv_cache_quant = options_.kv_cache_dtype() == "int8";
  const bool enable_indexer_cache_quant = ::xllm::KVCacheConfig::get_instance().indexer_cache_dtype() == "int8";
  if (enable_lighting_indexer) {
    CHECK_EQ(kv_cache_shape.has_index_cache_scale_shape(), enable_indexer_cache_quant) << "shape and config disagree";
  }
  if (enable_kv_cache_quant) {
#if !defined(USE_MLU) && !defined(FIXTURE_PLANT_INT8_KV_ACCEPTED)  // planted (a test's manifest): no refusal
    LOG(FATAL) << "KV Cache quantization is only supported on MLU backend.";
#endif
  }
  const int ssm_dtype = 0;
  return kv_cache_shape.allocate(layer_cache_owned, enable_kv_cache_quant, enable_indexer_cache_quant, ssm_dtype);
}

// The worker's layer count: a speculative draft's is its MTP layers when it has any.
int64_t WorkerImpl::get_num_layers() const {
  const int64_t num_layers = context_.get_model_args().n_layers();
  if (is_spec_draft_ && context_.get_model_args().num_nextn_predict_layers() > 0) {
    return context_.get_model_args().num_nextn_predict_layers();
  }
  return num_layers;
}

}  // namespace xllm
