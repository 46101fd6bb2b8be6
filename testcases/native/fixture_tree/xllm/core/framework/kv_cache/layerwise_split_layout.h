// Fixture tree for the xllm_native adapter's tests (not xLLM code).
#pragma once
#include <glog/logging.h>

#include <cstdint>
#include <string>

namespace xllm {

inline bool is_layerwise_split_supported_model(const std::string& model_type) {
  return model_type == "fixture_split";
}

inline void validate_layerwise_split_size_config(int32_t layerwise_split_size) {
  CHECK_GE(layerwise_split_size, 1) << "layerwise_split_size must be >= 1";
}

inline void validate_layerwise_split_enablement(int32_t layerwise_split_size, int32_t attn_tp_size,
                                                const std::string& model_type) {
  if (layerwise_split_size <= 1) return;
  CHECK(is_layerwise_split_supported_model(model_type)) << "unsupported " << model_type;
#ifndef FIXTURE_PLANT_SPLIT_DIVISOR_DROPPED  // planted (a test's manifest): s need not divide the attention TP
  CHECK_EQ(attn_tp_size % layerwise_split_size, 0) << "tp not divisible";
#endif
}

class LayerwiseSplitLayout final {
 public:
  LayerwiseSplitLayout(bool enabled, int32_t group_size, int32_t local_rank)
      : enabled_(enabled), group_size_(group_size), local_rank_(local_rank) {
    CHECK_GT(group_size_, 0);
  }
  int32_t owner_rank(int64_t layer_id) const { return static_cast<int32_t>(layer_id % group_size_); }
  bool owns(int64_t layer_id) const { return !enabled_ || owner_rank(layer_id) == local_rank_; }

 private:
  bool enabled_;
  int32_t group_size_;
  int32_t local_rank_;
};

}  // namespace xllm
