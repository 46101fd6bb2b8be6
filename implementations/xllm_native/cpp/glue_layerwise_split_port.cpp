// lwsplit-harness glue for the BI-V100 port layout (core/... : layerwise_split_layout.h,
// worker_layerwise_init, layerwise_split_master, layerwise_split_engine_ext,
// kv_cache_estimation_layerwise), written from the port's headers. Each op calls the
// port's function of one role and answers its result as JSON (protocol.h).
// LWSPLIT_HAS_ESTIMATION (set by the manifest): the tree carries upstream's
// kv_cache_estimation.h (estimate_kv_cache_capacity with KVCacheEstimateOptions::dtype_enum,
// build_layer_cache_owned over ModelArgs); without it build_layer_cache_owned takes layer types.
#include <gflags/gflags.h>

#include <optional>
#include <string>
#include <vector>

#include "distributed_runtime/layerwise_split_engine_ext.h"
#include "distributed_runtime/layerwise_split_master.h"
#include "framework/kv_cache/kv_cache_layerwise.h"
#include "framework/kv_cache/layerwise_split_layout.h"
#include "protocol.h"
#include "request_args.h"
#include "runtime/worker_layerwise_init.h"
#ifdef LWSPLIT_HAS_ESTIMATION
#include "framework/kv_cache/kv_cache_estimation.h"
#include "framework/model/model_args.h"
#endif

DECLARE_bool(enable_layerwise_split);

namespace lwsplit {
namespace {

std::vector<int> ints(const std::vector<bool>& v) { return std::vector<int>(v.begin(), v.end()); }

std::string layout_json(const std::optional<xllm::IluLayerwiseLayout>& layout) {
  if (!layout.has_value()) return "null";
  std::string out = "[";
  for (const auto& spec : layout->specs()) {
    out += (out.size() > 1 ? "," : "");
    out += Json().num("layer", spec.layer_id).raw("ranks", array(spec.assigned_ranks))
               .raw("heads", array(spec.heads_per_rank)).str();
  }
  return out + "]";
}

#ifdef LWSPLIT_HAS_ESTIMATION
xllm::ModelArgs model_args(const Request& req) { return model_args_of<xllm::ModelArgs>(req, ""); }

// Role: estimation (estimate_kv_cache_capacity, split block count included).
std::string op_estimate(const Request& req) {
  const xllm::ModelArgs args = model_args(req);
  const auto o = estimate_options_of<xllm::KVCacheEstimateOptions>(req, "");
  const xllm::KVCacheCapacity cap = xllm::estimate_kv_cache_capacity(args, o);
  std::vector<int> full;
  for (int64_t layer = 0; layer < cap.n_layers(); ++layer) {
    full.push_back(xllm::is_full_attention_layer(args, layer) ? 1 : 0);
  }
  const std::vector<bool> indexer = xllm::resolve_indexer_cache_enabled_layers(args, cap.n_layers());
  return Json().raw("capacity", capacity(cap)).raw("shape_capacity", shape_capacity(cap))
      .raw("full_attention", array(full))
      .raw("indexer_layers", array(ints(indexer))).str();
}
#endif

// Role: validation (validate_layerwise_split_size_config, validate_layerwise_split_enablement).
std::string op_validate(const Request& req) {
  const int32_t s = static_cast<int32_t>(req.i64("layerwise_split_size", 1));
  xllm::validate_layerwise_split_size_config(s);
  xllm::validate_layerwise_split_enablement(s, static_cast<int32_t>(req.i64("attn_tp_size", 1)),
                                            req.str("model_type"));
  return Json().raw("ok", "true").str();
}

// Role: ownership (build_layer_cache_owned with LayerwiseSplitLayout): each split rank's mask.
std::string op_layout(const Request& req) {
  const int32_t s = static_cast<int32_t>(req.i64("layerwise_split_size", 1));
  const int64_t n = req.i64("n_layers");
  std::string masks = "[";
  for (int32_t rank = 0; rank < s; ++rank) {
    const xllm::LayerwiseSplitLayout layout(/*enabled=*/true, s, rank);
#ifdef LWSPLIT_HAS_ESTIMATION
    const std::vector<bool> owned = xllm::build_layer_cache_owned(model_args(req), layout, n);
#else
    const std::vector<bool> owned = xllm::build_layer_cache_owned(req.list("layer_types"), layout, n);
#endif
    masks += (rank ? "," : "") + array(ints(owned));
  }
  return Json().raw("owned", masks + "]").str();
}

// Role: worker (worker_compute_layer_cache_owned): the mask one worker of global rank `rank` builds.
std::string op_worker(const Request& req) {
  const std::vector<bool> owned = xllm::worker_compute_layer_cache_owned(
      req.list("layer_types"), static_cast<int32_t>(req.i64("layerwise_split_size", 1)),
      static_cast<int32_t>(req.i64("rank")), req.i64("n_layers"));
  return Json().raw("owned", array(ints(owned))).str();
}

// Role: worker (allocate_kv_caches_layerwise): what the tree allocates for one worker. The function
// returns nothing and creates no tensor (it logs its counts): there is no tensor to hand over.
std::string op_allocate(const Request& req) {
  std::vector<bool> owned;
  for (const auto& v : req.list("owned")) owned.push_back(v == "1");
  xllm::allocate_kv_caches_layerwise(owned, req.i64("n_layers"), static_cast<int32_t>(req.i64("rank")));
  return Json().raw("tensors", "[]").str();
}

// Role: layout (master_compute_layerwise_layout): the layout the master publishes.
std::string op_master_layout(const Request& req) {
  FLAGS_enable_layerwise_split = req.flag("enable");  // --enable_layerwise_split
  const auto layout = xllm::master_compute_layerwise_layout(
      req.list("layer_types"), req.i64("kv_heads"), static_cast<int32_t>(req.i64("world_size", 1)),
      req.i64("n_blocks"), req.i64("block_size"), req.i64("head_dim"), req.i64("max_tokens"),
      static_cast<int>(req.i64("dtype_code")));
  return Json().raw("layout", layout_json(layout)).str();
}

// Role: engine (maybe_compute_layerwise_layout): the layout an engine passes on to its workers.
std::string op_engine(const Request& req) {
  FLAGS_enable_layerwise_split = req.flag("enable");  // --enable_layerwise_split
  std::vector<int64_t> heads;
  for (const auto& h : req.list("per_layer_kv_heads")) heads.push_back(std::stoll(h));
  const auto layout = xllm::maybe_compute_layerwise_layout(
      static_cast<int64_t>(heads.size()), heads, static_cast<int32_t>(req.i64("world_size", 1)));
  return Json().raw("layout", layout_json(layout)).str();
}

}  // namespace

std::string dispatch(const Request& req) {
  const std::string op = req.str("op");
  if (op == "validate") return op_validate(req);
#ifdef LWSPLIT_HAS_ESTIMATION
  if (op == "estimate") return op_estimate(req);
#endif
  if (op == "layout") return op_layout(req);
  if (op == "worker") return op_worker(req);
  if (op == "allocate") return op_allocate(req);
  if (op == "master_layout") return op_master_layout(req);
  if (op == "engine") return op_engine(req);
  throw std::invalid_argument("unknown op " + op);
}

}  // namespace lwsplit
