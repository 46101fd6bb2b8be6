// Glue of the fixture port: its functions (namespace fxport) answering the harness's ops.
// Written against the fixture's headers only; protocol.h (implementations/xllm_native/cpp) is
// the harness's one C ABI. Figures the fixture does not have (linear state, scales, indexer) are 0.
#include <algorithm>
#include <string>
#include <vector>

#include "config/parallel_config_layerwise.h"
#include "distributed_runtime/layerwise_split_engine_ext.h"
#include "distributed_runtime/layerwise_split_master.h"
#include "framework/kv_cache/kv_cache_estimation_layerwise.h"
#include "framework/kv_cache/kv_cache_layerwise.h"
#include "framework/kv_cache/layerwise_split_layout.h"
#include "framework/parallel_state/mapping_ilu.h"
#include "protocol.h"
#include "runtime/worker_layerwise_init.h"

namespace lwsplit {
namespace {

int split(const Request& req) { return static_cast<int>(req.i64("layerwise_split_size", 1)); }

std::string layout_json(const std::vector<std::vector<int>>& ranks, int64_t heads) {
  std::string out = "[";
  for (size_t i = 0; i < ranks.size(); ++i) {
    out += (i ? "," : "");
    out += Json().num("layer", static_cast<int64_t>(i)).raw("ranks", array(ranks[i]))
               .raw("heads", array(std::vector<int64_t>(ranks[i].size(), heads))).str();
  }
  return out + "]";
}

// Role: validation
std::string op_validate(const Request& req) {
  fxport::check_split_config(split(req), static_cast<int>(req.i64("attn_tp_size", 1)), req.str("model_type"));
  return Json().raw("ok", "true").str();
}

// Role: estimation
std::string op_estimate(const Request& req) {
  const auto cap = fxport::fx_estimate(req.list("layer_types"), req.i64("n_layers"), req.i64("n_local_kv_heads"),
                                       req.i64("head_dim"), req.i64("block_size"),
                                       req.i64("cache_size_in_bytes"), split(req));
  int64_t n_full = 0;
  for (bool f : cap.full) n_full += f ? 1 : 0;
  Json c;
  c.num("n_blocks", cap.n_blocks).num("cache_size_in_bytes", req.i64("cache_size_in_bytes"))
      .num("block_size", cap.block_size).num("slot_size", cap.slot_size).num("index_slot_size", 0)
      .num("num_indexer_layers", 0).num("scale_slot_size", 0).num("linear_slot_size", 0)
      .num("linear_cache_size_in_bytes", 0).num("n_layers", cap.n_layers).num("num_linear_state_blocks", 0)
      .num("num_full_attention_layers", n_full).num("num_linear_attention_layers", cap.n_layers - n_full);
  return Json().raw("capacity", c.str()).raw("full_attention", array(std::vector<int>(cap.full.begin(), cap.full.end())))
      .raw("indexer_layers", "[]").str();
}

// Role: ownership
std::string op_layout(const Request& req) {
  const auto types = req.list("layer_types");
  const int s = split(req);
  std::string masks = "[";
  for (int rank = 0; rank < s; ++rank) {
    std::vector<int> mask;
    int full_index = 0;
    for (int64_t l = 0; l < req.i64("n_layers"); ++l) {
      mask.push_back(!fxport::is_full(types, l) || fxport::full_layer_owner(full_index++, s) == rank);
    }
    masks += (rank ? "," : "") + array(mask);
  }
  return Json().raw("owned", masks + "]").str();
}

// Role: worker
std::string op_worker(const Request& req) {
  const auto mask = fxport::fx_worker_mask(req.list("layer_types"), req.i64("n_layers"), split(req),
                                           static_cast<int>(req.i64("rank")));
  return Json().raw("owned", array(std::vector<int>(mask.begin(), mask.end()))).str();
}

// Role: worker_checks (the worker's start-up checks)
std::string op_worker_checks(const Request& req) {
  fxport::fx_worker_checks(req.list("layer_types"), req.i64("n_layers"), req.i64("index_n_heads", 0));
  return Json().raw("ok", "true").str();
}

// Role: allocation_checks (the allocation's refusals of the split)
std::string op_allocation_checks(const Request& req) {
  std::vector<bool> owned;
  for (const auto& v : req.list("owned")) owned.push_back(v == "1");
  fxport::fx_allocation_checks(owned, req.flag("enable_sleep_mode"), req.flag("enable_xtensor"));
  return Json().raw("ok", "true").str();
}

// Role: worker (allocation): the fixture counts the layers it would allocate and creates no tensor.
std::string op_allocate(const Request& req) {
  std::vector<bool> owned;
  for (const auto& v : req.list("owned")) owned.push_back(v == "1");
  return Json().num("allocated_layers", fxport::fx_allocated_layers(owned)).raw("tensors", "[]").str();
}

// Role: layout
std::string op_master_layout(const Request& req) {
  int n_full = 0;
  for (const auto& t : req.list("layer_types")) n_full += t == "full_attention" ? 1 : 0;
  const int tp = static_cast<int>(req.i64("world_size", 1));
  return Json().raw("layout", layout_json(fxport::fx_master_layout(n_full, tp, split(req)),
                                          std::max<int64_t>(1, req.i64("kv_heads") / tp))).str();
}

// Role: engine (its flag fx_layerwise is the request's `enable`: null, the uniform allocation, while off)
std::string op_engine(const Request& req) {
  FLAGS_fx_layerwise = req.flag("enable");
  const auto heads = req.list("per_layer_kv_heads");
  const int tp = static_cast<int>(req.i64("world_size", 1));
  const int64_t per_rank = heads.empty() ? 0 : std::max<int64_t>(1, std::stoll(heads[0]) / tp);
  const auto layout = fxport::fx_engine_layout(static_cast<int>(heads.size()), tp, split(req));
  return Json().raw("layout", layout ? layout_json(*layout, per_rank) : std::string("null")).str();
}

// Role: engine_options (the option values its engine hands the estimation; the draft's layer count: its own)
std::string op_engine_options(const Request& req) {
  const auto o = fxport::fx_engine_options(
      static_cast<int>(req.i64("n_workers", 1)), static_cast<int>(req.i64("dp_size", 1)),
      static_cast<int>(std::max<int64_t>(1, req.i64("cp_size", 1))), req.i64("n_kv_heads"),
      req.i64("linear_num_key_heads"), req.i64("linear_num_value_heads"), split(req), req.flag("is_draft_engine"));
  return Json().num("dtype_code", req.i64("dtype_code")).raw("kv_cache_dtype", quote(req.str("kv_cache_dtype", "auto")))
      .raw("indexer_cache_dtype", quote(req.str("indexer_cache_dtype", "auto")))
      .num("cache_size_in_bytes", req.i64("cache_size_in_bytes")).num("block_size", req.i64("block_size"))
      .num("world_size", o.world_size).num("n_local_kv_heads", o.n_local_kv_heads)
      .num("n_local_linear_k_heads", o.n_local_linear_k_heads).num("n_local_linear_v_heads", o.n_local_linear_v_heads)
      .num("max_seqs_per_batch", req.i64("max_seqs_per_batch"))
      .num("num_speculative_tokens", req.i64("num_speculative_tokens")).num("max_tokens_per_batch", 0)
      .num("max_linear_state_cache_slots", req.i64("max_linear_state_cache_slots"))
      .raw("is_draft_engine", req.flag("is_draft_engine") ? "true" : "false")
      .raw("enable_prefix_cache", req.flag("enable_prefix_cache") ? "true" : "false")
      .num("layerwise_split_size", o.layerwise_split_size).num("dp_local_tp_size", o.world_size)
      .num("n_layers", req.i64("n_layers")).str();
}

// Role: groups (a manifest naming fx_split_groups): attention TP groups of world / (dp x cp) ranks.
std::string op_groups(const Request& req) {
  const int world = static_cast<int>(req.i64("world_size"));
  const int tp = world / static_cast<int>(req.i64("dp_size", 1) * std::max<int64_t>(1, req.i64("cp_size", 1)));
  std::string out = "[";
  const auto groups = fxport::fx_split_groups(world, tp, split(req));
  for (size_t g = 0; g < groups.size(); ++g) out += (g ? "," : "") + array(groups[g]);
  return Json().raw("groups", out + "]").str();
}

}  // namespace

std::string dispatch(const Request& req) {
  const std::string op = req.str("op");
  if (op == "validate") return op_validate(req);
  if (op == "estimate") return op_estimate(req);
  if (op == "layout") return op_layout(req);
  if (op == "worker") return op_worker(req);
  if (op == "worker_checks") return op_worker_checks(req);
  if (op == "allocation_checks") return op_allocation_checks(req);
  if (op == "allocate") return op_allocate(req);
  if (op == "master_layout") return op_master_layout(req);
  if (op == "engine") return op_engine(req);
  if (op == "groups") return op_groups(req);
  if (op == "engine_options") return op_engine_options(req);
  throw std::invalid_argument("unknown op " + op);
}

}  // namespace lwsplit
