// Fixture tree for the xllm_native adapter's tests (not xLLM code).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#define FIXTURE_FIELD(T, name)                        \
 public:                                              \
  const T& name() const { return name##_; }           \
  void name(const T& value) { name##_ = value; }      \
                                                      \
 private:                                             \
  T name##_{};

namespace xllm {

class ModelArgs {
  FIXTURE_FIELD(std::string, model_type)
  FIXTURE_FIELD(std::string, dtype)
  FIXTURE_FIELD(int64_t, n_layers)
  FIXTURE_FIELD(bool, enable_mla)
  FIXTURE_FIELD(int64_t, head_dim)
  FIXTURE_FIELD(int64_t, n_heads)
  FIXTURE_FIELD(std::optional<int64_t>, n_kv_heads)
  FIXTURE_FIELD(int32_t, kv_lora_rank)
  FIXTURE_FIELD(int32_t, qk_rope_head_dim)
  FIXTURE_FIELD(int32_t, index_n_heads)
  FIXTURE_FIELD(int32_t, index_head_dim)
  FIXTURE_FIELD(int32_t, num_nextn_predict_layers)
  FIXTURE_FIELD(int32_t, full_attention_interval)
  FIXTURE_FIELD(int32_t, linear_conv_kernel_dim)
  FIXTURE_FIELD(int32_t, linear_key_head_dim)
  FIXTURE_FIELD(int32_t, linear_value_head_dim)
  FIXTURE_FIELD(int64_t, linear_num_key_heads)
  FIXTURE_FIELD(int32_t, linear_num_value_heads)
  FIXTURE_FIELD(std::string, mamba_ssm_dtype)
  FIXTURE_FIELD(std::vector<std::string>, layer_types)
};

// Every layer is full attention in the fixture's models unless full_attention_interval > 1.
inline bool is_full_attention_layer(const ModelArgs& args, int64_t layer_id) {
  const int32_t interval = args.full_attention_interval();
  return interval <= 1 || (layer_id + 1) % interval == 0;
}

// Whether any layer is linear attention (the engine then divides the linear heads among its TP ranks).
inline bool has_linear_attention_layers(const ModelArgs& args) {
  for (int64_t layer = 0; layer < args.n_layers(); ++layer) {
    if (!is_full_attention_layer(args, layer)) return true;
  }
  return false;
}

}  // namespace xllm
