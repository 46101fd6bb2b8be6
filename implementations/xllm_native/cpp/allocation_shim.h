// lwsplit-harness shim: what the branches of the worker's allocation for sleep mode and xtensor read
// (framework/kv_cache/kv_cache.cpp, allocate_kv_caches, cut from its sleep-mode branch up to its ordinary
// allocation: build.generate.allocation_checks_cut). The create options the worker built: its split mask, sleep
// mode and xtensor as the run sets them, the model's id, linear attention as the worker found it; a shape of key
// and value caches, with an index cache where the model has an indexer and conv and ssm caches where it has
// linear attention. Nothing is allocated: the sleepable allocator and the xtensor allocator only record that the
// branch reached them (the path the allocation took), and their tensors are empty.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace xllm {
namespace lwsplit_allocation {

struct Outcome {
  std::string path = "ordinary";
};

struct CreateOptions {
  bool sleep_mode = false;
  bool xtensor = false;
  bool linear_attention = false;
  std::string id;
  bool enable_sleep_mode() const { return sleep_mode; }
  bool enable_xtensor() const { return xtensor; }
  bool enable_linear_attention() const { return linear_attention; }
  const std::string& model_id() const { return id; }
  int dtype() const { return 0; }
};

struct Shape {
  bool index = false;
  bool linear = false;
  bool has_key_cache_shape() const { return true; }
  bool has_value_cache_shape() const { return true; }
  bool has_index_cache_shape() const { return index; }
  bool has_conv_cache_shape() const { return linear; }
  bool has_ssm_cache_shape() const { return linear; }
  std::vector<int64_t> key_cache_shape() const { return {}; }
  std::vector<int64_t> value_cache_shape() const { return {}; }
};

// `n` empty tensors of whatever tensor type the branch holds them in (no allocation).
struct NoTensors {
  int64_t n = 0;
  template <typename T>
  operator std::vector<T>() const {
    return std::vector<T>(static_cast<size_t>(n));
  }
};

class XTensorAllocator {
 public:
  static XTensorAllocator& get_instance() {
    static thread_local XTensorAllocator allocator;
    return allocator;
  }
  template <typename Id, typename S, typename D>
  NoTensors create_k_tensors(const Id&, const S&, const D&, int64_t num_layers) {
    if (outcome != nullptr) outcome->path = "xtensor";
    return NoTensors{num_layers};
  }
  template <typename Id, typename S, typename D>
  NoTensors create_v_tensors(const Id&, const S&, const D&, int64_t num_layers) {
    return NoTensors{num_layers};
  }
  Outcome* outcome = nullptr;
};

template <typename K, typename V>
struct KVCacheTensors {
  K k;
  V v;
};

// What the branches append to (the caches they made): kept by count only.
struct Caches {
  size_t count = 0;
  template <typename... A>
  void emplace_back(A&&...) {
    ++count;
  }
};

}  // namespace lwsplit_allocation

// The locals and arguments the cut statements name, in the generated function.
#define LWSPLIT_ALLOCATION_STATE(result)                                                          \
  lwsplit_allocation::Caches kv_caches;                                                          \
  lwsplit_allocation::XTensorAllocator::get_instance().outcome = &(result);                      \
  auto allocate_sleepable_kv_caches = [&result](auto&, const auto&, const auto&) {               \
    (result).path = "sleepable";                                                                 \
  }

}  // namespace xllm
