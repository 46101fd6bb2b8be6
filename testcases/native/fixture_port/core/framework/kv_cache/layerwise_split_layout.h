#pragma once
#include <glog/logging.h>

#include <string>

namespace fxport {

inline bool is_layerwise_split_supported_model(const std::string& model_type) {
  return model_type == "qwen3_5_moe_text" || model_type == "deepseek_v32";
}

// Startup rule. Planted: the split size is never checked against the attention TP size.
inline void check_split_config(int split_size, int attn_tp_size, const std::string& model_type) {
  CHECK_GE(split_size, 1) << "layerwise split size must be >= 1";
  if (split_size == 1) return;
  CHECK(is_layerwise_split_supported_model(model_type)) << "unsupported model " << model_type;
  (void)attn_tp_size;
}

// Owner of the i-th full-attention layer.
inline int full_layer_owner(int full_index, int split_size) { return full_index % split_size; }

}  // namespace fxport
