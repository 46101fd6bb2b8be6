// Fixture tree for the xllm_native adapter's tests (not xLLM code).
#include "speculative_engine.h"
#include "llm_engine.h"

namespace xllm {

bool SpeculativeEngine::allocate_kv_cache() {
  return engine_->allocate_kv_cache(calculate_kv_cache(engine_->cap(), draft_engine_->cap()));
}

int64_t SpeculativeEngine::calculate_kv_cache(const KVCacheCapacity& target_kv_cache_cap,
                                              const KVCacheCapacity& draft_kv_cache_cap) const {
  CHECK_EQ(target_kv_cache_cap.block_size(), draft_kv_cache_cap.block_size()) << "block sizes differ";
  const int64_t draft_block_bytes = target_kv_cache_cap.block_size() * draft_kv_cache_cap.n_layers() *
                                    (options_.enable_mtp_draft_body_tp1() ? draft_kv_cache_cap.slot_size()
                                                                          : target_kv_cache_cap.slot_size());
  const int32_t layerwise_split_size = ParallelConfig::get_instance().layerwise_split_size();
  if (layerwise_split_size > 1) {
    return estimate_layerwise_split_block_count(model_args_, layerwise_split_size, target_kv_cache_cap,
                                                target_kv_cache_cap.cache_size_in_bytes(), draft_block_bytes);
  }
  return target_kv_cache_cap.cache_size_in_bytes() /
         (target_kv_cache_cap.block_size() * target_kv_cache_cap.slot_size() *
              target_kv_cache_cap.num_full_attention_layers() + draft_block_bytes);
}

}  // namespace xllm
