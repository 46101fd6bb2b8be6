// Fixture tree for the xllm_native adapter's tests (not xLLM code).
#pragma once
#include <cstdint>

#define FIXTURE_CAP(name)                                  \
 public:                                                   \
  int64_t name() const { return name##_; }                 \
  KVCacheCapacity& name(int64_t value) {                   \
    name##_ = value;                                       \
    return *this;                                          \
  }                                                        \
                                                           \
 private:                                                  \
  int64_t name##_ = 0;

namespace xllm {

class KVCacheCapacity final {
  FIXTURE_CAP(n_blocks)
  FIXTURE_CAP(cache_size_in_bytes)
  FIXTURE_CAP(block_size)
  FIXTURE_CAP(slot_size)
  FIXTURE_CAP(index_slot_size)
  FIXTURE_CAP(num_indexer_layers)
  FIXTURE_CAP(scale_slot_size)
  FIXTURE_CAP(linear_slot_size)
  FIXTURE_CAP(linear_cache_size_in_bytes)
  FIXTURE_CAP(n_layers)
  FIXTURE_CAP(num_linear_state_blocks)
  FIXTURE_CAP(num_full_attention_layers)
  FIXTURE_CAP(num_linear_attention_layers)
  FIXTURE_CAP(enable_indexer_cache_quant)
  FIXTURE_CAP(linear_conv_state_len)
  FIXTURE_CAP(linear_ssm_checkpoint_stride)
  FIXTURE_CAP(swa_count)
  FIXTURE_CAP(c4_count)
  FIXTURE_CAP(c128_count)
};

}  // namespace xllm
