// lwsplit-harness shim for framework/xtensor/xtensor_allocator.h (the XTensor page allocator and
// its RPC peers): allocate_kv_caches calls it only when enable_xtensor, which the glue leaves
// false as the worker does without --enable_xtensor.
#pragma once
#include <torch/types.h>

#include <string>
#include <vector>

#include "shim.h"

namespace xllm {
class XTensorAllocator {
 public:
  static XTensorAllocator& get_instance() {
    static XTensorAllocator instance;
    return instance;
  }
  std::vector<torch::Tensor> create_k_tensors(const std::string&, const std::vector<int64_t>&,
                                              torch::Dtype, int64_t) {
    LWSPLIT_SHIM_UNREACHED("XTensorAllocator::create_k_tensors");
    return {};
  }
  std::vector<torch::Tensor> create_v_tensors(const std::string&, const std::vector<int64_t>&,
                                              torch::Dtype, int64_t) {
    LWSPLIT_SHIM_UNREACHED("XTensorAllocator::create_v_tensors");
    return {};
  }
};
}  // namespace xllm
