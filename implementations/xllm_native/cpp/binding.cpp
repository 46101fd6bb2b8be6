// lwsplit-harness glue for upstream xLLM (494f293b5): its planning code's
// functions answering the protocol's ops (protocol.h: one C entry point,
// lwsplit_call, key=value request lines in, one JSON object out).
#include "protocol.h"
#include "request_args.h"

namespace lwsplit {
namespace {

void set_parallel(const Request& req, const std::string& p) {
  auto& pc = xllm::ParallelConfig::get_instance();
  pc.layerwise_split_size(static_cast<int32_t>(req.i64(p + "layerwise_split_size", 1)));
  pc.cp_size(static_cast<int32_t>(req.i64("cp_size", 1)));
  pc.kv_split_size(static_cast<int32_t>(req.i64("kv_split_size", 1)));
}

xllm::ModelArgs model_args(const Request& req, const std::string& p) {
  return model_args_of<xllm::ModelArgs>(req, p);
}

xllm::KVCacheEstimateOptions estimate_options(const Request& req, const std::string& p) {
  return estimate_options_of<xllm::KVCacheEstimateOptions>(req, p);
}

// is_full_attention_layer and resolve_indexer_cache_enabled_layers per layer.
Json& layer_facts(Json& j, const xllm::ModelArgs& args, int64_t n_layers) {
  std::vector<int> full;
  for (int64_t layer = 0; layer < n_layers; ++layer) {
    full.push_back(xllm::is_full_attention_layer(args, layer) ? 1 : 0);
  }
  const std::vector<bool> indexer =
      xllm::resolve_indexer_cache_enabled_layers(args, n_layers);
  return j.raw("full_attention", array(full))
      .raw("indexer_layers", array(std::vector<int>(indexer.begin(), indexer.end())));
}

// Role: master startup validation (validate_layerwise_split_size_startup_config).
std::string op_validate(const Request& req) {
  set_parallel(req, "");
  xllm::Options options;
  options.dp_size_ = static_cast<int32_t>(req.i64("dp_size", 1));
  options.cp_size_ = static_cast<int32_t>(req.i64("cp_size", 1));
  options.host_blocks_factor_ = req.f64("host_blocks_factor", 0.0);
  xllm::validate_layerwise_split_size_startup_config(
      options, req.str("model_type"), static_cast<int32_t>(req.i64("world_size")));
  return Json().raw("ok", "true").str();
}

// Role: estimation (estimate_kv_cache_capacity) plus the per-layer facts it uses.
std::string op_estimate(const Request& req) {
  set_parallel(req, "");
  const xllm::ModelArgs args = model_args(req, "");
  const xllm::KVCacheCapacity cap =
      xllm::estimate_kv_cache_capacity(args, estimate_options(req, ""));
  Json j;
  j.raw("capacity", capacity(cap)).raw("shape_capacity", shape_capacity(cap));
  return layer_facts(j, args, cap.n_layers()).str();
}

// Role: layout (LayerwiseSplitLayout and build_layer_cache_owned): each split
// rank's ownership mask over the model's layers.
std::string op_layout(const Request& req) {
  const xllm::ModelArgs args = model_args(req, "");
  const int32_t s = static_cast<int32_t>(req.i64("layerwise_split_size", 1));
  std::string masks = "[";
  for (int32_t rank = 0; rank < s; ++rank) {
    const xllm::LayerwiseSplitLayout layout(/*enabled=*/true, s, rank);
    const std::vector<bool> owned =
        xllm::build_layer_cache_owned(args, layout, args.n_layers());
    masks += (rank ? "," : "") + array(std::vector<int>(owned.begin(), owned.end()));
  }
  masks += "]";
  return Json().raw("owned", masks).str();
}

// Role: speculative (SpeculativeEngine::calculate_kv_cache) on the two
// engines' capacities, estimated as LLMEngine::estimate_kv_cache_capacity does.
std::string op_speculative(const Request& req) {
  set_parallel(req, "t.");
  xllm::SpeculativeEngine engine;
  engine.model_args_ = model_args(req, "t.");
  engine.options_.enable_mtp_draft_body_tp1_ = req.flag("draft_body_tp1");
  engine.options_.is_draft_engine_ = false;
  const xllm::KVCacheCapacity target =
      xllm::estimate_kv_cache_capacity(engine.model_args_, estimate_options(req, "t."));
  const xllm::ModelArgs draft_args = model_args(req, "d.");
  const xllm::KVCacheCapacity draft =
      xllm::estimate_kv_cache_capacity(draft_args, estimate_options(req, "d."));
  const int64_t n_blocks = engine.calculate_kv_cache(target, draft);
  Json j;
  j.raw("target", capacity(target)).raw("draft", capacity(draft)).num("n_blocks", n_blocks)
      .raw("target_shape_capacity", shape_capacity(target)).raw("draft_shape_capacity", shape_capacity(draft));
  return layer_facts(j, engine.model_args_, target.n_layers()).str();
}

// A KVCacheCapacity handed in (``<p>cap.<name>``: every property shape_capacity answers), as another
// library's estimation computed it.
xllm::KVCacheCapacity capacity_of(const Request& req, const std::string& p) {
  xllm::KVCacheCapacity c;
  c.n_blocks(req.i64(p + "n_blocks")).cache_size_in_bytes(req.i64(p + "cache_size_in_bytes"));
  c.block_size(req.i64(p + "block_size")).slot_size(req.i64(p + "slot_size"));
  c.index_slot_size(req.i64(p + "index_slot_size")).num_indexer_layers(req.i64(p + "num_indexer_layers"));
  c.enable_indexer_cache_quant(req.flag(p + "enable_indexer_cache_quant"));
  c.scale_slot_size(req.i64(p + "scale_slot_size")).linear_slot_size(req.i64(p + "linear_slot_size"));
  c.linear_cache_size_in_bytes(req.i64(p + "linear_cache_size_in_bytes"));
  c.linear_conv_state_len(req.i64(p + "linear_conv_state_len"));
  c.linear_ssm_checkpoint_stride(req.i64(p + "linear_ssm_checkpoint_stride", 1));
  c.n_layers(req.i64(p + "n_layers")).num_linear_state_blocks(req.i64(p + "num_linear_state_blocks"));
  c.num_full_attention_layers(req.i64(p + "num_full_attention_layers"));
  c.num_linear_attention_layers(req.i64(p + "num_linear_attention_layers"));
  c.swa_count(req.i64(p + "swa_count")).c4_count(req.i64(p + "c4_count")).c128_count(req.i64(p + "c128_count"));
  return c;
}

// Role: speculative, as the engine around a port runs it (SpeculativeEngine::calculate_kv_cache) on the
// two capacities the port's estimation computed (t.cap.*, d.cap.*), the target's ModelArgs (t.*).
std::string op_speculative_caps(const Request& req) {
  set_parallel(req, "t.");
  xllm::SpeculativeEngine engine;
  engine.model_args_ = model_args(req, "t.");
  engine.options_.enable_mtp_draft_body_tp1_ = req.flag("draft_body_tp1");
  engine.options_.is_draft_engine_ = false;
  const int64_t n_blocks = engine.calculate_kv_cache(capacity_of(req, "t.cap."), capacity_of(req, "d.cap."));
  return Json().num("n_blocks", n_blocks).str();
}

// Role: the worker's start-up checks (WorkerImpl::allocate_kv_cache_storage's statements up to the linear state's
// dtype, its quantization block included, cut by the build: lwsplit_worker.inc) for one worker of global rank `rank`
// with the run's KV and indexer cache dtypes: its CHECKs, then, for a worker with an indexer, the indexed cache
// allocation's branch on the int8 indexer cache (create_indexed_kv_cache_tensors, cut: lwsplit_indexer_checks), then
// the mask it builds ([] with the split off, as upstream's worker passes none on). A tree without that allocation
// answers `indexer_absent` where the worker would reach it with an int8 indexer cache.
std::string op_worker_checks(const Request& req) {
#ifdef LWSPLIT_WORKER_CHECKS_ABSENT
  (void)req;
  return Json().raw("absent", quote(LWSPLIT_WORKER_CHECKS_ABSENT)).str();
#else
  const xllm::LwsplitWorkerChecks checks = xllm::lwsplit_worker_checks(
      model_args(req, ""), static_cast<int32_t>(req.i64("layerwise_split_size", 1)),
      static_cast<int32_t>(req.i64("rank")), req.str("kv_cache_dtype", "auto"),
      req.str("indexer_cache_dtype", "auto"));
  Json reply;
  if (checks.enable_lighting_indexer) {
#ifdef LWSPLIT_INDEXER_CHECKS_ABSENT
    if (checks.enable_indexer_cache_quant) reply.raw("indexer_absent", quote(LWSPLIT_INDEXER_CHECKS_ABSENT));
#else
    xllm::lwsplit_indexer::lwsplit_indexer_checks(checks.enable_indexer_cache_quant, checks.index_cache_scale);
#endif
  }
  const std::vector<bool>& owned = checks.layer_cache_owned;
  return reply.raw("owned", array(std::vector<int>(owned.begin(), owned.end())))
      .raw("linear_attention", checks.enable_linear_attention ? "true" : "false")
      .raw("lighting_indexer", checks.enable_lighting_indexer ? "true" : "false").str();
#endif
}

// Role: engine_options (LLMEngine's attention TP size, local heads per TP rank and KVCacheEstimateOptions, and
// WorkerImpl::get_num_layers for a draft worker, cut by the build: lwsplit_engine_options.inc) for one engine:
// the target's (is_draft_engine 0) or the draft's, handed the model's args and the launch's options.
std::string op_engine_options(const Request& req) {
#ifdef LWSPLIT_ENGINE_OPTIONS_ABSENT
  (void)req;
  return Json().raw("absent", quote(LWSPLIT_ENGINE_OPTIONS_ABSENT)).str();
#else
  set_parallel(req, "");
  const xllm::ModelArgs args = model_args(req, "");
  xllm::lwsplit_engine::Inputs in;
  in.options.dp_size_ = static_cast<int32_t>(req.i64("dp_size", 1));
  in.options.cp_size_ = static_cast<int32_t>(req.i64("cp_size", 1));
  in.options.devices_ = {xllm::lwsplit_engine::Device{req.i64("dtype_code")}};
  in.options.kv_cache_dtype_ = req.str("kv_cache_dtype", "auto");
  in.options.block_size_ = static_cast<int32_t>(req.i64("block_size"));
  in.options.max_seqs_per_batch_ = req.i64("max_seqs_per_batch");
  in.options.num_speculative_tokens_ = req.i64("num_speculative_tokens");
  in.options.max_tokens_per_batch_ = req.i64("max_tokens_per_batch");
  in.options.max_linear_state_cache_slots_ = req.i64("max_linear_state_cache_slots");
  in.options.is_draft_engine_ = req.flag("is_draft_engine");
  in.options.enable_mtp_draft_body_tp1_ = req.flag("enable_mtp_draft_body_tp1");
  in.n_workers = req.i64("n_workers", 1);
  in.cache_size_in_bytes = req.i64("cache_size_in_bytes");
  in.indexer_cache_dtype = req.str("indexer_cache_dtype", "auto");
  in.enable_prefix_cache = req.flag("enable_prefix_cache");
  const xllm::LwsplitEngineOptions out = xllm::lwsplit_engine_options(args, in);
  const xllm::KVCacheEstimateOptions& o = out.estimate_options;
  xllm::LwsplitEngineWorker worker{xllm::lwsplit_engine::Context{args}, in.options.is_draft_engine_};
  return Json().num("dtype_code", static_cast<int64_t>(o.dtype)).raw("kv_cache_dtype", quote(o.kv_cache_dtype))
      .raw("indexer_cache_dtype", quote(o.indexer_cache_dtype)).num("cache_size_in_bytes", o.cache_size_in_bytes)
      .num("block_size", o.block_size).num("world_size", o.world_size).num("n_local_kv_heads", o.n_local_kv_heads)
      .num("n_local_linear_k_heads", o.n_local_linear_k_heads).num("n_local_linear_v_heads", o.n_local_linear_v_heads)
      .num("max_seqs_per_batch", o.max_seqs_per_batch).num("num_speculative_tokens", o.num_speculative_tokens)
      .num("max_tokens_per_batch", o.max_tokens_per_batch)
      .num("max_linear_state_cache_slots", o.max_linear_state_cache_slots)
      .raw("is_draft_engine", o.is_draft_engine ? "true" : "false")
      .raw("enable_prefix_cache", o.enable_prefix_cache ? "true" : "false")
      .num("layerwise_split_size", static_cast<int64_t>(o.layerwise_split_size))
      .num("dp_local_tp_size", out.dp_local_tp_size).num("n_layers", worker.get_num_layers()).str();
#endif
}

// Role: the worker's allocation's refusals of the split (allocate_kv_caches' branches for sleep mode and xtensor,
// cut by the build: lwsplit_allocation.inc) for the create options the worker built: its mask `owned` (the
// worker_checks answer at its rank), sleep mode and xtensor as the run sets them. Its CHECKs, then the path the
// allocation took (`sleepable`, `xtensor`, or `ordinary`: past both branches, to the allocation of the mask).
std::string op_allocation_checks(const Request& req) {
#ifdef LWSPLIT_ALLOCATION_CHECKS_ABSENT
  (void)req;
  return Json().raw("absent", quote(LWSPLIT_ALLOCATION_CHECKS_ABSENT)).str();
#else
  std::vector<bool> owned;
  for (const auto& v : req.list("owned")) owned.push_back(v == "1");
  xllm::lwsplit_allocation::CreateOptions options;
  options.sleep_mode = req.flag("enable_sleep_mode");
  options.xtensor = req.flag("enable_xtensor");
  options.linear_attention = req.flag("linear_attention");
  options.id = req.str("model_id");
  xllm::lwsplit_allocation::Shape shape;
  shape.index = req.flag("lighting_indexer");
  shape.linear = options.linear_attention;
  xllm::lwsplit_allocation::Outcome outcome;
  xllm::lwsplit_allocation::lwsplit_allocation_checks(outcome, owned, options, shape,
                                                       static_cast<int64_t>(owned.size()));
  return Json().raw("path", quote(outcome.path)).str();
#endif
}

#ifdef LWSPLIT_GROUPS
// Role: groups (MappingNPU::get_layerwise_split_group over the attention TP groups get_tp_group builds,
// after the CHECKs of MappingNPU::validate), for every rank of the world: the split groups and each rank's
// (group id, rank inside it). The group sizes are what CollectiveCommunicator hands MappingNPU::Options
// (tp = world / (dp x cp), moe_tp = world / ep with ep 1, sp 1, kv_split -1 when 0) as
// MappingNPU::parse_parallel_info keeps them; no rank table: one node.
std::string op_groups(const Request& req) {
  const int32_t world = static_cast<int32_t>(req.i64("world_size"));
  const int32_t dp = static_cast<int32_t>(req.i64("dp_size", 1));
  const int32_t cp = std::max<int32_t>(1, static_cast<int32_t>(req.i64("cp_size", 1)));
  const int32_t kv_split = static_cast<int32_t>(req.i64("kv_split_size", 0));
  const int32_t s = static_cast<int32_t>(req.i64("layerwise_split_size", 1));
  std::string groups = "[]", positions = "[";
  for (int32_t rank = 0; rank < world; ++rank) {
    xllm::MappingNPU m;
    m.world_size_ = world;
    m.num_nodes_ = 1;
    m.local_world_size_ = world;
    m.rank_ = rank;
    m.attn_dp_.group_size(dp);
    m.attn_tp_.group_size(world / (dp * cp));
    m.attn_cp_.group_size(cp);
    m.attn_kv_split_.group_size(kv_split > 0 ? kv_split : 1);
    m.attn_layerwise_split_.group_size(s);
    m.moe_tp_.group_size(world);
    m.moe_ep_.group_size(1);
    m.attn_inner_sp_.group_size(1);
    m.validate();
    m.get_tp_group(m.attn_tp_);
    m.get_layerwise_split_group(m.attn_layerwise_split_);
    if (rank == 0) {
      groups = "[";
      const auto& all = m.attn_layerwise_split_.rank_per_group();
      for (size_t g = 0; g < all.size(); ++g) groups += (g ? "," : "") + array(all[g]);
      groups += "]";
    }
    positions += (rank ? "," : "") + array(std::vector<int32_t>{
        m.attn_layerwise_split_.current_group_id(), m.attn_layerwise_split_.rank()});
  }
  positions += "]";
  return Json().raw("groups", groups).raw("positions", positions).str();
}
#endif

}  // namespace

std::string dispatch(const Request& req) {
  const std::string op = req.str("op");
  if (op == "validate") return op_validate(req);
  if (op == "estimate") return op_estimate(req);
  if (op == "layout") return op_layout(req);
  if (op == "speculative") return op_speculative(req);
  if (op == "speculative_caps") return op_speculative_caps(req);
  if (op == "worker_checks") return op_worker_checks(req);
  if (op == "engine_options") return op_engine_options(req);
  if (op == "allocation_checks") return op_allocation_checks(req);
#ifdef LWSPLIT_GROUPS
  if (op == "groups") return op_groups(req);
#endif
  throw std::invalid_argument("unknown op " + op);
}


}  // namespace lwsplit
