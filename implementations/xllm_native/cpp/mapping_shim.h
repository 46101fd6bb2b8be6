// lwsplit-harness shim: the state MappingNPU's cut-out methods read (upstream's split groups:
// MappingNPU::get_layerwise_split_group, with get_tp_group, get_current_group_id and the
// CHECKs of MappingNPU::validate). ParallelInfo keeps only the properties those methods use
// (upstream's struct also serialises itself with nlohmann/json, which nothing here needs).
// The group sizes are set by the glue (binding.cpp op_groups) as CollectiveCommunicator and
// MappingNPU::parse_parallel_info set them: nothing of the grouping itself is written here.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace xllm {

struct ParallelInfo {
  int32_t group_size() const { return group_size_; }
  ParallelInfo& group_size(int32_t v) { group_size_ = v; return *this; }
  int32_t num_group() const { return num_group_; }
  ParallelInfo& num_group(int32_t v) { num_group_ = v; return *this; }
  const std::vector<std::vector<int32_t>>& rank_per_group() const { return rank_per_group_; }
  ParallelInfo& rank_per_group(std::vector<std::vector<int32_t>> v) { rank_per_group_ = std::move(v); return *this; }
  int32_t current_group_id() const { return current_group_id_; }
  ParallelInfo& current_group_id(int32_t v) { current_group_id_ = v; return *this; }
  int32_t rank() const { return rank_; }
  ParallelInfo& rank(int32_t v) { rank_ = v; return *this; }

  int32_t group_size_ = 1;
  int32_t num_group_ = -1;
  std::vector<std::vector<int32_t>> rank_per_group_;
  int32_t current_group_id_ = -1;
  int32_t rank_ = 0;
};

class MappingNPU final {
 public:
  void validate();
  void get_tp_group(ParallelInfo& parallel_info);
  void get_layerwise_split_group(ParallelInfo& parallel_info);
  std::tuple<int32_t, int32_t> get_current_group_id(
      const std::vector<std::vector<int>>& rank_per_group,
      int target_rank_id);

  int32_t num_nodes_ = 1;
  int32_t world_size_ = 0;
  int32_t rank_ = 0;
  int32_t local_world_size_ = 0;
  ParallelInfo attn_tp_;
  ParallelInfo attn_dp_;
  ParallelInfo attn_cp_;
  ParallelInfo attn_kv_split_;
  ParallelInfo attn_layerwise_split_;
  ParallelInfo moe_tp_;
  ParallelInfo moe_ep_;
  ParallelInfo attn_inner_sp_;
};

}  // namespace xllm
