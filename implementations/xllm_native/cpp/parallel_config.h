// lwsplit-harness shim: the ParallelConfig singleton, reduced to the fields the
// layerwise split planning code reads. The build installs it where the tree's
// own parallel_config.h would be found (it pulls nlohmann/json and the option
// registry, which the planning math does not use).
#pragma once

#include <cstdint>

namespace xllm {

class ParallelConfig final {
 public:
  static ParallelConfig& get_instance() {
    static ParallelConfig instance;
    return instance;
  }

  int32_t layerwise_split_size() const noexcept { return layerwise_split_size_; }
  void layerwise_split_size(int32_t value) noexcept { layerwise_split_size_ = value; }
  int32_t cp_size() const noexcept { return cp_size_; }
  void cp_size(int32_t value) noexcept { cp_size_ = value; }
  int32_t kv_split_size() const noexcept { return kv_split_size_; }
  void kv_split_size(int32_t value) noexcept { kv_split_size_ = value; }
  // 0 follows cp_size, as the flag documents.
  int32_t kv_split_size_effective() const noexcept {
    return kv_split_size_ > 0 ? kv_split_size_ : cp_size_;
  }

 private:
  int32_t layerwise_split_size_ = 1;
  int32_t cp_size_ = 1;
  int32_t kv_split_size_ = 1;
};

}  // namespace xllm
