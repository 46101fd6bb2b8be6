// Fixture tree for the xllm_native adapter's tests (not xLLM code): the split groups of an upstream-shaped
// mapping class. The rest of this file needs headers the fixture does not have (a rank table reader, the
// ATB mapping): the adapter cuts out only MappingNPU's group methods, behind the project's mapping shim.
#include "mapping_npu.h"
#include "util/json_reader.h"

namespace xllm {

nlohmann::json MappingNPU::to_json() { return JsonReader().dump(attn_tp_); }

void MappingNPU::validate() {
  CHECK(attn_tp_.group_size() * attn_dp_.group_size() * attn_cp_.group_size() == world_size_)
      << "world size " << world_size_ << " is not tp x dp x cp";
  CHECK(attn_tp_.group_size() % attn_layerwise_split_.group_size() == 0)
      << "tp " << attn_tp_.group_size() << " not divisible by layerwise_split_size "
      << attn_layerwise_split_.group_size();
}

void MappingNPU::get_tp_group(ParallelInfo& info) {
  std::vector<std::vector<int32_t>> groups;
  for (int32_t first = 0; first < world_size_; first += info.group_size()) {
    std::vector<int32_t> ranks;
    for (int32_t r = first; r < first + info.group_size(); ++r) ranks.push_back(r);
    groups.push_back(ranks);
  }
  info.num_group(static_cast<int32_t>(groups.size()));
  info.rank_per_group(groups);
  auto [group, local] = get_current_group_id(groups, rank_);
  info.current_group_id(group);
  info.rank(local);
}

void MappingNPU::get_layerwise_split_group(ParallelInfo& info) {
  const int32_t s = info.group_size();
  std::vector<std::vector<int32_t>> groups;
  for (const auto& tp_group : attn_tp_.rank_per_group()) {
    for (size_t at = 0; at < tp_group.size(); at += static_cast<size_t>(s)) {
      groups.emplace_back(tp_group.begin() + at, tp_group.begin() + at + s);
    }
  }
  info.num_group(static_cast<int32_t>(groups.size()));
  info.rank_per_group(groups);
  auto [group, local] = get_current_group_id(groups, rank_);
  CHECK(group >= 0) << "rank " << rank_ << " in no layerwise split group";
  info.current_group_id(group);
  info.rank(local);
}

std::tuple<int32_t, int32_t> MappingNPU::get_current_group_id(
    const std::vector<std::vector<int32_t>>& rank_per_group, int32_t target_rank_id) {
  for (size_t g = 0; g < rank_per_group.size(); ++g) {
    for (size_t i = 0; i < rank_per_group[g].size(); ++i) {
      if (rank_per_group[g][i] == target_rank_id) return {static_cast<int32_t>(g), static_cast<int32_t>(i)};
    }
  }
  return {-1, -1};
}

}  // namespace xllm
