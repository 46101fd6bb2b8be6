// lwsplit-harness glue for upstream xLLM's KV-cache allocation (494f293b5), compiled on CPU with
// -DUSE_ILU against upstream's framework/kv_cache/*.cpp and the shims in shims/alloc/
// (scripts/build_upstream_alloc.sh). One op, allocate: it does what
// WorkerImpl::allocate_kv_cache_storage (runtime/worker_impl.cpp) does on a worker that is not a
// speculative draft, has no xtensor, no sleep mode and no tensor allocator override, with the device
// CPU and the shape the engine builds from its capacity (KVCacheShape(cap, args, world_size)), and
// hands the tensors upstream allocated to the caller (alloc_protocol.h: JSON indices, then DLPack).
#include "alloc_protocol.h"

#include <algorithm>
#include <utility>

#include "framework/kv_cache/kv_cache.h"
#include "framework/kv_cache/kv_cache_capacity.h"
#include "framework/kv_cache/kv_cache_estimation.h"
#include "framework/kv_cache/kv_cache_shape.h"
#include "framework/kv_cache/layerwise_split_layout.h"
#include "framework/model/model_args.h"
#include "request_args.h"
#include "util/tensor_helper.h"

namespace lwsplit {
namespace {

xllm::ModelArgs model_args(const Request& req, const std::string& p) {
  return model_args_of<xllm::ModelArgs>(req, p);
}

// Every KVCacheCapacity property, from cap.<property>.
xllm::KVCacheCapacity capacity_of(const Request& req) {
  xllm::KVCacheCapacity c;
  c.n_blocks(req.i64("cap.n_blocks"))
      .cache_size_in_bytes(req.i64("cap.cache_size_in_bytes"))
      .block_size(req.i64("cap.block_size"))
      .slot_size(req.i64("cap.slot_size"))
      .index_slot_size(req.i64("cap.index_slot_size"))
      .num_indexer_layers(req.i64("cap.num_indexer_layers"))
      .enable_indexer_cache_quant(req.flag("cap.enable_indexer_cache_quant"))
      .scale_slot_size(req.i64("cap.scale_slot_size"))
      .linear_slot_size(req.i64("cap.linear_slot_size"))
      .linear_cache_size_in_bytes(req.i64("cap.linear_cache_size_in_bytes"))
      .linear_conv_state_len(req.i64("cap.linear_conv_state_len"))
      .linear_ssm_checkpoint_stride(req.i64("cap.linear_ssm_checkpoint_stride", 1))
      .n_layers(req.i64("cap.n_layers"))
      .num_linear_state_blocks(req.i64("cap.num_linear_state_blocks"))
      .num_full_attention_layers(req.i64("cap.num_full_attention_layers"))
      .num_linear_attention_layers(req.i64("cap.num_linear_attention_layers"))
      .swa_count(req.i64("cap.swa_count"))
      .c4_count(req.i64("cap.c4_count"))
      .c128_count(req.i64("cap.c128_count"));
  return c;
}

std::string shape_json(bool has, const std::vector<int64_t>& shape) {
  return has ? array(shape) : "null";
}

// Role: allocation (WorkerImpl::allocate_kv_cache_storage, lines ~465-575, then
// allocate_kv_caches in framework/kv_cache/kv_cache.cpp).
std::string op_allocate(const Request& req) {
  g_tensors.clear();
  const xllm::ModelArgs args = model_args(req, "");
  const xllm::KVCacheCapacity cap = capacity_of(req);
  const int64_t world_size = req.i64("world_size", 1);
  // The shape the engine built and the worker was handed: from the allocating model's args, or (a
  // speculative draft worker, MTPWorkerImpl::allocate_kv_cache) the target's, given as shape.<key>.
  const xllm::ModelArgs shape_args = req.str("shape.model_type").empty() ? args : model_args(req, "shape.");
  const xllm::KVCacheShape kv_cache_shape(cap, shape_args, world_size);
  const auto dtype = static_cast<torch::ScalarType>(req.i64("dtype_code", 15));

  // From here on, the call site's statements in its order (options_/parallel_args_ read from the
  // request; device_ is the rank's device, given as `device`).
  const bool enable_linear_attention = xllm::has_linear_attention_layers(args);
  const bool enable_lighting_indexer = args.index_n_heads() > 0;
  CHECK(!(enable_linear_attention && enable_lighting_indexer))
      << "KVCache does not support linear attention and lighting indexer "
      << "simultaneously.";

  const int64_t num_layers = args.n_layers();
  const int32_t layerwise_split_size = static_cast<int32_t>(req.i64("layerwise_split_size", 1));
  std::vector<bool> layer_cache_owned;
  if (layerwise_split_size > 1) {
    const xllm::LayerwiseSplitLayout layout(
        /*enabled=*/true, layerwise_split_size,
        static_cast<int32_t>(req.i64("rank")) % layerwise_split_size);
    layer_cache_owned = xllm::build_layer_cache_owned(args, layout, num_layers);
  }
  std::vector<bool> indexer_cache_enabled_layers =
      xllm::resolve_indexer_cache_enabled_layers(args, num_layers);

  const bool enable_kv_cache_quant = req.str("kv_cache_dtype", "auto") == "int8";
  const bool enable_indexer_cache_quant = req.str("indexer_cache_dtype", "auto") == "int8";
  if (enable_lighting_indexer) {
    CHECK_EQ(kv_cache_shape.has_index_cache_scale_shape(), enable_indexer_cache_quant)
        << "Indexer cache shape and worker quantization config must agree.";
  }
  if (enable_kv_cache_quant) {
    // The call site's #if !defined(USE_MLU) branch (USE_ILU here).
    LOG(FATAL) << "KV Cache quantization is only supported on MLU backend. "
               << "Current backend does not support this feature.";
  }

  torch::ScalarType ssm_dtype = dtype;
  if (enable_linear_attention) {
    ssm_dtype = xllm::resolve_ssm_dtype(args.mamba_ssm_dtype(), dtype);
  }

  const std::vector<bool> owned_mask = layer_cache_owned;
  xllm::KVCacheCreateOptions create_options;
  create_options.device(torch::Device(req.str("device", "cpu")))
      .dtype(dtype)
      .ssm_dtype(ssm_dtype)
      .num_layers(num_layers)
      .full_attention_interval(args.full_attention_interval())
      .model_type(args.model_type())
      .enable_xtensor(false)
      .enable_sleep_mode(false)
      .enable_linear_attention(enable_linear_attention)
      .enable_lighting_indexer(enable_lighting_indexer)
      .layer_cache_owned(std::move(layer_cache_owned))
      .indexer_cache_enabled_layers(std::move(indexer_cache_enabled_layers))
      .enable_kv_cache_quant(enable_kv_cache_quant)
      .enable_indexer_cache_quant(enable_indexer_cache_quant)
      .block_size(req.i64("block_size", cap.block_size()))
      .head_dim(args.head_dim())
      .index_head_dim(std::max(args.index_head_dim(), 1))
      .window_size(std::max(args.window_size(), 1))
      .compress_ratios(args.compress_ratios());

  std::vector<xllm::KVCache> kv_caches;
  xllm::allocate_kv_caches(kv_caches, kv_cache_shape, create_options);

  std::string layers = "[";
  for (size_t i = 0; i < kv_caches.size(); ++i) {
    const xllm::KVCache& cache = kv_caches[i];
    Json t;
    auto add = [&t](const char* name, const torch::Tensor& tensor) {
      const int64_t index = keep(tensor);
      if (index >= 0) t.num(name, index);
    };
    auto add_opt = [&add](const char* name, const std::optional<torch::Tensor>& tensor) {
      if (tensor.has_value()) add(name, *tensor);
    };
    add("k", cache.get_k_cache());
    add("v", cache.get_v_cache());
    add("index", cache.get_index_cache());
    add_opt("k_scale", cache.get_k_cache_scale());
    add_opt("v_scale", cache.get_v_cache_scale());
    add_opt("index_scale", cache.get_indexer_cache_scale());
    add("conv", cache.get_conv_cache());
    add("ssm", cache.get_ssm_cache());
    layers += std::string(i ? "," : "") + Json()
                                              .num("layer", static_cast<int64_t>(i))
                                              .raw("owned", cache.owns_layer_cache() ? "true" : "false")
                                              .raw("tensors", t.str())
                                              .str();
  }
  layers += "]";
  std::vector<int> mask(owned_mask.begin(), owned_mask.end());
  return Json()
      .raw("layers", layers)
      .raw("layer_cache_owned", array(mask))
      .raw("key_cache_shape", shape_json(kv_cache_shape.has_key_cache_shape(),
                                         kv_cache_shape.has_key_cache_shape()
                                             ? kv_cache_shape.key_cache_shape()
                                             : std::vector<int64_t>{}))
      .raw("value_cache_shape", shape_json(kv_cache_shape.has_value_cache_shape(),
                                           kv_cache_shape.value_cache_shape()))
      .raw("index_cache_shape", shape_json(kv_cache_shape.has_index_cache_shape(),
                                           kv_cache_shape.index_cache_shape()))
      .raw("index_cache_scale_shape", shape_json(kv_cache_shape.has_index_cache_scale_shape(),
                                                 kv_cache_shape.index_cache_scale_shape()))
      .raw("conv_cache_shape", shape_json(kv_cache_shape.has_conv_cache_shape(),
                                          kv_cache_shape.conv_cache_shape()))
      .raw("ssm_cache_shape", shape_json(kv_cache_shape.has_ssm_cache_shape(),
                                         kv_cache_shape.ssm_cache_shape()))
      .str();
}

}  // namespace

std::string dispatch(const Request& req) {
  const std::string op = req.str("op");
  if (op == "allocate") return op_allocate(req);
  throw std::invalid_argument("unknown op " + op);
}

}  // namespace lwsplit
