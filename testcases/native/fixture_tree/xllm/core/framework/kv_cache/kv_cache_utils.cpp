// Fixture tree for the xllm_native adapter's tests (not xLLM code): an indexed KV cache's allocation in upstream's
// shape. The harness cuts its branch on the int8 indexer cache (build.generate.indexer_checks_cut) and compiles it
// with its shim (cpp/worker_shim.h, lwsplit_indexer): a build neither NPU's nor MLU's refuses the int8 indexer cache.
#include "framework/kv_cache/kv_cache_estimation.h"

namespace xllm {

IndexedKVCacheTensors create_indexed_kv_cache_tensors(const KVCacheShape& kv_cache_shape,
                                                      const KVCacheCreateOptions& create_options) {
  IndexedKVCacheTensors tensors;
  tensors.index_cache = torch::zeros(kv_cache_shape.index_cache_shape(), create_options.dtype());
  if (create_options.enable_indexer_cache_quant()) {
#if !defined(USE_MLU) && !defined(USE_NPU) && !defined(FIXTURE_PLANT_INT8_INDEXER_ACCEPTED)  // planted: no refusal
    CHECK(false) << "Indexer cache INT8 is unsupported on this backend.";
#endif
    tensors.index_cache_scale = alloc_scale(kv_cache_shape.index_cache_shape(), create_options.device());
  }
  return tensors;
}

}  // namespace xllm
