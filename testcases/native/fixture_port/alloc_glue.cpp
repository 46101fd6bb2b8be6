// Allocation glue of the fixture port: fx_allocate_kv_tensors answering the harness's allocate op
// (alloc_protocol.h: the tensors are handed to the rank through DLPack). Written against the
// fixture's header only.
#include <string>
#include <vector>

#include "alloc_protocol.h"
#include "framework/kv_cache/kv_cache_tensors.h"

namespace lwsplit {

// Role: allocation
std::string dispatch(const Request& req) {
  if (req.str("op") != "allocate") throw std::invalid_argument("unknown op " + req.str("op"));
  const int64_t n_layers = req.i64("n_layers");
  std::vector<bool> full(static_cast<size_t>(n_layers), true);
  const auto types = req.list("layer_types");
  const int64_t interval = req.i64("full_attention_interval");
  for (int64_t i = 0; i < n_layers; ++i) {
    if (!types.empty()) {
      full[i] = i < static_cast<int64_t>(types.size()) && types[i] == "full_attention";
    } else if (interval > 0) {
      full[i] = (i + 1) % interval == 0;
    }
  }
  std::vector<bool> owned(static_cast<size_t>(n_layers), true);
  const auto given = req.list("owned");
  for (size_t i = 0; i < given.size() && i < owned.size(); ++i) owned[i] = given[i] == "1";
  const auto layers = fxport::fx_allocate_kv_tensors(
      full, owned, req.i64("cap.n_blocks"), req.i64("block_size"), req.i64("n_kv_heads"),
      req.i64("world_size", 1), req.i64("head_dim"), static_cast<at::ScalarType>(req.i64("dtype_code")),
      req.str("device", "cpu"));
  std::string out = "[";
  for (size_t i = 0; i < layers.size(); ++i) {
    Json tensors;
    if (layers[i].k.defined()) tensors.num("k", keep(layers[i].k)).num("v", keep(layers[i].v));
    out += (i ? "," : "") + Json().num("layer", static_cast<int64_t>(i))
                                .raw("owned", layers[i].owned ? "true" : "false")
                                .raw("tensors", tensors.str()).str();
  }
  return Json().raw("layers", out + "]").str();
}

}  // namespace lwsplit
