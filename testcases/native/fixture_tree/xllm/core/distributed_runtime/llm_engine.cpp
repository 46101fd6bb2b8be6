// Fixture tree for the xllm_native adapter's tests (not xLLM code): an engine's option values in upstream's
// shape. The harness cuts the statements of the constructor, init_model and estimate_kv_cache_capacity that
// compute them (tree.files.ENGINE_OPTIONS_CUTS) and compiles them with its LLMEngine shim
// (cpp/engine_options_shim.h). Planted (a test's manifest): FIXTURE_PLANT_HEADS_UNDIVIDED, each TP rank keeps
// every KV head; FIXTURE_PLANT_DRAFT_KEEPS_SPLIT, the draft engine keeps the split size.
#include <algorithm>

#include "framework/kv_cache/kv_cache_estimation.h"
#include "framework/model/model_args.h"
#include "platform/platform.h"

namespace xllm {

LLMEngine::LLMEngine(const runtime::Options& options, std::shared_ptr<DistManager> dist_manager)
    : options_(options), dist_manager_(dist_manager) {
  CHECK_GT(options.devices().size(), 0) << "no device";
  dp_size_ = options_.dp_size();
  cp_size_ = options_.cp_size();
  dp_batch_embedding_ids_.resize(dp_size_);
  dp_batch_request_ids_.resize(dp_size_);
  dp_batch_generations_.resize(dp_size_, 0);
  worker_clients_num_ = worker_clients_.size();
  dp_local_size_ = worker_clients_num_ / dp_size_;
  const bool use_model_sharding = cp_size_ > 1 && Platform::uses_model_cp_sharding();
  const bool mlu_overlap = use_model_sharding && Platform::is_mlu();
  dp_local_tp_size_ = mlu_overlap ? dp_local_size_ : dp_local_size_ / cp_size_;

  link_threadpool_ = std::make_unique<ThreadPool>(worker_clients_num_);
}

bool LLMEngine::init_model() {
  args_ = ModelLoader::create(options_.model_path())->model_args();
  // the engine's local heads per TP rank
  const uint32_t world_size = dp_local_tp_size_;
  const int64_t n_heads = args_.n_heads();
  const int64_t n_kv_heads = args_.n_kv_heads().value_or(n_heads);
#ifdef FIXTURE_PLANT_HEADS_UNDIVIDED
  n_local_kv_heads_ = std::max<int64_t>(1, n_kv_heads);
#else
  n_local_kv_heads_ = std::max<int64_t>(1, n_kv_heads / world_size);
#endif
  n_local_q_heads_ = std::max<int64_t>(1, n_heads / world_size);
  head_dim_ = args_.head_dim();
  dtype_ = util::parse_dtype(args_.dtype(), options_.devices()[0]);
  if (has_linear_attention_layers(args_)) {
    n_local_linear_k_heads_ = std::max<int64_t>(1, args_.linear_num_key_heads() / world_size);
    n_local_linear_v_heads_ = std::max<int64_t>(1, args_.linear_num_value_heads() / world_size);
  }
  LOG(INFO) << "local kv heads: " << n_local_kv_heads_;
  return true;
}

KVCacheCapacity LLMEngine::estimate_kv_cache_capacity() {
  int64_t cache_size_in_bytes = available_memory();
  KVCacheEstimateOptions estimate_options;
  estimate_options.dtype = dtype_;
  estimate_options.kv_cache_dtype = options_.kv_cache_dtype();
  estimate_options.indexer_cache_dtype = ::xllm::KVCacheConfig::get_instance().indexer_cache_dtype();
  estimate_options.cache_size_in_bytes = cache_size_in_bytes;
  estimate_options.block_size = options_.block_size();
  estimate_options.world_size = dp_local_tp_size_;
  estimate_options.n_local_kv_heads = n_local_kv_heads_;
  estimate_options.n_local_linear_k_heads = n_local_linear_k_heads_;
  estimate_options.n_local_linear_v_heads = n_local_linear_v_heads_;
  estimate_options.max_seqs_per_batch = options_.max_seqs_per_batch();
  estimate_options.num_speculative_tokens = options_.num_speculative_tokens();
  estimate_options.max_tokens_per_batch = options_.max_tokens_per_batch();
  estimate_options.max_linear_state_cache_slots = options_.max_linear_state_cache_slots();
  estimate_options.is_draft_engine = options_.is_draft_engine();
  estimate_options.enable_prefix_cache = ::xllm::KVCacheConfig::get_instance().enable_prefix_cache();
  if (options_.enable_mtp_draft_body_tp1() && options_.is_draft_engine()) {
    estimate_options.world_size = 1;
    estimate_options.n_local_kv_heads = args_.n_kv_heads().value_or(args_.n_heads());
    estimate_options.n_local_linear_k_heads = args_.linear_num_key_heads();
    estimate_options.n_local_linear_v_heads = args_.linear_num_value_heads();
  }
#ifdef FIXTURE_PLANT_DRAFT_KEEPS_SPLIT  // planted (a test's manifest): the draft engine keeps the split size
  estimate_options.layerwise_split_size = ParallelConfig::get_instance().layerwise_split_size();
#else
  estimate_options.layerwise_split_size =
      options_.is_draft_engine() ? 1 : ParallelConfig::get_instance().layerwise_split_size();
#endif

  KVCacheCapacity kv_cache_cap = ::xllm::estimate_kv_cache_capacity(args_, estimate_options);
  return kv_cache_cap;
}

}  // namespace xllm
