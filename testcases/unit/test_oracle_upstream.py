"""Upstream xLLM's own KV cache tests, run against the oracle (not against any implementation).

Source: repository xLLM-AI/xllm at commit 494f293b5 (unchanged in today's upstream),
``tests/core/framework/kv_cache/kv_cache_estimation_test.cpp`` and
``tests/core/framework/kv_cache/kv_cache_test.cpp``. Each case id names the file and the
upstream TEST; inputs and expected numbers are copied verbatim. Upstream passes the
per-rank head counts (``n_local_kv_heads``, ``n_local_linear_*_heads``) directly; here
they come from the model's head counts at attention TP 1, which gives the same numbers.
Upstream's ``KVCacheEstimateOptions`` defaults ``enable_prefix_cache`` to false (the
gflag defaults it to true), so these cases pass it explicitly as upstream's tests do.

Out of scope (not ported), with the reason:
- DeepSeek-V4 pools (``EstimatesDeepSeekV4Pools``, ``EstimatesDeepSeekV4DSparkSwaPool``,
  ``DeepSeekV4SpeculativeBudgetIncludesDSparkDraftSwaPool``,
  ``SpeculativeDecodePreservesDeepSeekV4PoolBlockCount``, ``DeepSeekV4FourDimCachesUseDeviceLayout``,
  ``DeepSeekV4DSparkUsesGroupedSwaCaches``, ``DeepSeekV4MtpKeepsGroupedCacheClassification``,
  ``GroupedCacheCapabilitySurvivesProtoRoundTrip``,
  ``DeepSeekV4KVCacheExposesIndexerScaleThroughSharedContract``,
  ``CacheVariantsNormalizeInvalidIndexerScaleToNullopt``, the ``Dsv4StateCacheTest`` cases,
  ``DeepSeekV4UsesInjectedAllocatorForTransferableOwners``, ``HostKVCacheDeepSeekV4PerBlockType``):
  DeepSeek-V4 is not a model the feature covers (FEATURE section 10).
- MLU/NPU-only branches: ``SharedDsaLayersDoNotConsumeIndexerCacheBudget``,
  ``MluSharedDsaLayersAllocateOnlyMlaCache``, ``MluMixedDsaLayersUseInjectedAllocatorForActualRoles``
  (indexer-cache elision exists only where ``supports_dsa_indexer_cache_elision``), and the
  NPU NZ-aligned MLA slot. The MLU-guarded shape cases that only depend on the heads-major
  layout, which the BI-V100 shares (``apply_device_layout``: ``USE_MLU || USE_ILU``), ARE
  ported below and say so.
- PD-transfer shard metadata and proto round trips (``KVCacheShapeRoundTripsIndexCacheScaleShape``).
- Host (hierarchical) cache (``HostKVCacheNormalLayoutAddsLayerDim``, ``HostKVCacheConfigTest.*``,
  ``MluPlatformAdvertisesHostOffloadSupport``): refused with layerwise split (FEATURE section 3)
  and outside the harness's allocation model.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from harness import oracle

pytestmark = pytest.mark.unit

COMMIT = "494f293b5"
EST = "kv_cache_estimation_test.cpp"
KVT = "kv_cache_test.cpp"


def model_args(**values) -> SimpleNamespace:
    """Upstream ``ModelArgs`` defaults, the attribute names the oracle reads."""
    base = dict(
        name="upstream", model_type="", num_hidden_layers=0, attention="gqa", dtype="float16",
        num_key_value_heads=0, head_dim=0, kv_lora_rank=0, qk_rope_head_dim=0, index_n_heads=0,
        index_head_dim=0, layer_types=None, full_attention_interval=1, linear_num_key_heads=0,
        linear_num_value_heads=0, linear_key_head_dim=0, linear_value_head_dim=0, linear_conv_kernel_dim=0,
        mamba_ssm_dtype=None, num_nextn_predict_layers=0,
    )
    base.update(values)
    return SimpleNamespace(**base)


def make_standard_args(**values) -> SimpleNamespace:
    """``make_standard_args``: n_layers 4, head_dim 16 (and, via the options, 2 local KV heads)."""
    return model_args(**{"num_hidden_layers": 4, "head_dim": 16, "num_key_value_heads": 2, **values})


def make_linear_attention_args(head_dim: int = 16, **values) -> SimpleNamespace:
    """``make_linear_attention_args``: interval 2, 2 + 2 linear heads, dims 4 / 8, kernel 3."""
    return make_standard_args(**{
        "head_dim": head_dim, "full_attention_interval": 2, "linear_num_key_heads": 2,
        "linear_num_value_heads": 2, "linear_key_head_dim": 4, "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 3, **values})


def make_estimate_options(**values) -> SimpleNamespace:
    """``make_estimate_options``: fp16, auto, 1 MiB, block 16, world 1, 8 sequences."""
    base = dict(block_size=16, kv_cache_dtype="auto", indexer_cache_dtype="auto", max_seqs_per_batch=8,
                max_linear_state_cache_slots=0, enable_prefix_cache=False, num_speculative_tokens=0,
                cache_size_in_bytes=1024 * 1024)
    base.update(values)
    return SimpleNamespace(**base)


def estimate(args, options, *, n_local_kv_heads: int = 2):
    if n_local_kv_heads != args.num_key_value_heads:
        args = SimpleNamespace(**{**vars(args), "num_key_value_heads": n_local_kv_heads})
    return oracle.estimate_capacity(args, options, attn_tp=1, budget_bytes=options.cache_size_in_bytes)


# ---- kv_cache_estimation_test.cpp ---------------------------------------------------------

# Capacity attribute names here are upstream's accessor names, mapped to the oracle's.
_FIELD = {
    "cache_size_in_bytes": "cache_size_bytes", "linear_cache_size_in_bytes": "linear_cache_bytes",
}

ESTIMATION_CASES = [
    pytest.param(
        make_standard_args(), make_estimate_options(), 2,
        {"cache_size_in_bytes": 1024 * 1024, "block_size": 16, "slot_size": 128, "n_layers": 4,
         "num_full_attention_layers": 4, "num_linear_attention_layers": 0, "n_blocks": 128},
        id=f"{EST}:KVCacheEstimationTest.EstimatesStandardAttentionBlocks@{COMMIT}"),
    pytest.param(
        make_standard_args(), make_estimate_options(max_linear_state_cache_slots=32), 2,
        {"num_linear_attention_layers": 0, "num_linear_state_blocks": 2, "linear_cache_size_in_bytes": 0},
        id=f"{EST}:KVCacheEstimationTest.IgnoresLinearStateSlotsWithoutLinearAttention@{COMMIT}"),
    pytest.param(
        make_standard_args(model_type="unsupported_model", index_n_heads=1, index_head_dim=16),
        make_estimate_options(indexer_cache_dtype="auto"), 2, {"index_slot_size": 32},
        id=f"{EST}:KVCacheEstimationTest.UserIndexerCacheDtypeDirectlyControlsQuantization[auto]@{COMMIT}"),
    pytest.param(
        make_standard_args(model_type="unsupported_model", index_n_heads=1, index_head_dim=16),
        make_estimate_options(indexer_cache_dtype="int8"), 2, {"index_slot_size": 20},
        id=f"{EST}:KVCacheEstimationTest.UserIndexerCacheDtypeDirectlyControlsQuantization[int8]@{COMMIT}"),
    pytest.param(
        make_standard_args(model_type="deepseek_v32", index_n_heads=1, index_head_dim=16),
        make_estimate_options(indexer_cache_dtype="int8", cache_size_in_bytes=10 * 1024 * 1024), 2,
        {"n_blocks": 1107},
        id=f"{EST}:KVCacheEstimationTest.IndexerScaleUsesLogicalCacheCapacity@{COMMIT}"),
    pytest.param(
        make_linear_attention_args(), make_estimate_options(), 2,
        {"num_full_attention_layers": 2, "num_linear_attention_layers": 2, "num_linear_state_blocks": 10,
         "linear_slot_size": 256, "linear_cache_size_in_bytes": 5120, "n_blocks": 254},
        id=f"{EST}:KVCacheEstimationTest.ReservesLinearAttentionState@{COMMIT}"),
    pytest.param(
        make_standard_args(model_type="qwen3_5", full_attention_interval=2, linear_num_key_heads=2,
                           linear_num_value_heads=2, linear_key_head_dim=4, linear_value_head_dim=8,
                           linear_conv_kernel_dim=3),
        make_estimate_options(num_speculative_tokens=1), 2,
        {"linear_conv_state_len": 3, "linear_ssm_checkpoint_stride": 2, "linear_slot_size": 448,
         "linear_cache_size_in_bytes": 8960},
        id=f"{EST}:KVCacheEstimationTest.Qwen35MtpExpandsConvStateLen@{COMMIT}"),
    pytest.param(
        make_standard_args(model_type="qwen3_5_text", full_attention_interval=2, linear_num_key_heads=2,
                           linear_num_value_heads=2, linear_key_head_dim=4, linear_value_head_dim=8,
                           linear_conv_kernel_dim=3),
        make_estimate_options(num_speculative_tokens=1), 2,
        {"linear_conv_state_len": 3, "linear_ssm_checkpoint_stride": 2, "linear_slot_size": 448,
         "linear_cache_size_in_bytes": 8960},
        id=f"{EST}:KVCacheEstimationTest.Qwen35TextMtpUsesSsmCheckpointStride@{COMMIT}"),
]


@pytest.mark.parametrize(("args", "options", "n_local_kv_heads", "expected"), ESTIMATION_CASES)
def test_upstream_estimation(args, options, n_local_kv_heads, expected):
    capacity = estimate(args, options, n_local_kv_heads=n_local_kv_heads)
    got = {name: getattr(capacity, _FIELD.get(name, name)) for name in expected}
    assert got == expected


# TEST(KVCacheEstimationTest, LinearStateCapacityVariants): the table verbatim.
# (name, head_dim, cache_size_in_bytes, block_size, n_local_kv_heads, max_seqs_per_batch,
#  enable_prefix_cache, max_linear_state_cache_slots, expected, min (exclusive))
LINEAR_STATE_VARIANTS = [
    ("PrefixCacheGrowsLinearStateCheckpointPool", 16, 64 << 30, 16, 2, 200, True, 0, -1, 202),
    ("PrefixCacheUsesLinearStateMemoryRatio", 1, 1024 * 1024, 1, 1, 8, True, 0, 970, -1),
    ("NoPrefixCacheCapsLinearStateBlocksByBudget", 16, 1024 * 1024, 16, 2, 100000, False, 0, 229, -1),
    ("UnlimitedConcurrencyFallsBackToPaddingSlots", 16, 1024 * 1024, 16, 2, 0, False, 0, 2, -1),
    ("ExplicitLinearStateSlotsOverrideAutoSizing", 16, 64 << 30, 16, 2, 200, True, 32, 34, -1),
]


@pytest.mark.parametrize(
    "case", LINEAR_STATE_VARIANTS,
    ids=[f"{EST}:KVCacheEstimationTest.LinearStateCapacityVariants[{c[0]}]@{COMMIT}" for c in LINEAR_STATE_VARIANTS],
)
def test_upstream_linear_state_capacity_variants(case):
    _, head_dim, size, block, heads, seqs, prefix, slots, expected, minimum = case
    options = make_estimate_options(cache_size_in_bytes=size, block_size=block, max_seqs_per_batch=seqs,
                                    enable_prefix_cache=prefix, max_linear_state_cache_slots=slots)
    capacity = estimate(make_linear_attention_args(head_dim), options, n_local_kv_heads=heads)
    if expected >= 0:
        assert capacity.num_linear_state_blocks == expected
    if minimum >= 0:
        assert capacity.num_linear_state_blocks > minimum


def _capacity(**values) -> oracle.Capacity:
    """An upstream ``KVCacheCapacity`` built by its setters (every other field 0)."""
    base = dict(cache_size_bytes=0, block_size=0, n_blocks=0, slot_size=0, index_slot_size=0, scale_slot_size=0,
                linear_slot_size=0, n_layers=0, num_full_attention_layers=0, num_linear_attention_layers=0,
                num_indexer_layers=0, num_linear_state_blocks=0, linear_cache_bytes=0)
    base.update(values)
    return oracle.Capacity(**base)


@pytest.mark.parametrize(
    ("target", "draft", "draft_body_tp1", "expected"),
    [
        pytest.param(
            _capacity(cache_size_bytes=100000, block_size=10, slot_size=2, num_full_attention_layers=1),
            _capacity(cache_size_bytes=100000, block_size=10, slot_size=1, n_layers=2),
            False, 1666,
            id=f"{EST}:KVCacheEstimationTest.SpeculativeDecodeCombinesStandardCacheCosts@{COMMIT}"),
        pytest.param(
            _capacity(cache_size_bytes=100000, block_size=10, slot_size=2, scale_slot_size=1, index_slot_size=3,
                      num_full_attention_layers=2, num_indexer_layers=1),
            _capacity(cache_size_bytes=100000, block_size=10, slot_size=4, scale_slot_size=1, index_slot_size=2,
                      num_indexer_layers=1, n_layers=2),
            True, 476,
            id=f"{EST}:KVCacheEstimationTest.SpeculativeDecodeUsesDraftShapeForTp1Body@{COMMIT}"),
    ],
)
def test_upstream_speculative_block_count(target, draft, draft_body_tp1, expected):
    assert oracle.speculative_block_count(target, draft, share_device=True, draft_body_tp1=draft_body_tp1) == expected


# ---- kv_cache_test.cpp: tensor shapes --------------------------------------------------------


def _cache(**values) -> SimpleNamespace:
    return SimpleNamespace(**{"block_size": 16, "kv_cache_dtype": "auto", "indexer_cache_dtype": "auto", **values})


@pytest.mark.parametrize(
    "n_blocks", [pytest.param(8, id=f"{KVT}:KVCacheTest.IndexerInt8WithoutIndexerDoesNotCreateScaleShape@{COMMIT}")]
)
def test_upstream_indexer_int8_without_indexer_creates_no_scale_shape(n_blocks):
    args = model_args(num_key_value_heads=2, head_dim=64, index_n_heads=0, dtype="bfloat16")
    tensors = oracle.full_layer_tensor_specs(args, _cache(indexer_cache_dtype="int8"), 1, "heads_major", n_blocks)
    assert "index" not in tensors and "index_scale" not in tensors


_DSV32_GQA = model_args(model_type="deepseek_v32", num_key_value_heads=2, head_dim=64, index_n_heads=1,
                        index_head_dim=32, dtype="bfloat16")


@pytest.mark.parametrize(
    ("cache_values", "expected"),
    [
        pytest.param(
            {"kv_cache_dtype": "int8"},
            {"k": ((8, 2, 16, 64), "int8"), "v": ((8, 2, 16, 64), "int8"),
             "k_scale": ((8, 2, 16), "float32"), "v_scale": ((8, 2, 16), "float32")},
            id=f"{KVT}:KVCacheTest.MluQuantizedIndexedKVCacheAllocatesInt8KvAndScalesOnCpuDevice"
               f"[USE_MLU; heads-major as ILU]@{COMMIT}"),
        pytest.param(
            {"indexer_cache_dtype": "int8"},
            {"index": ((8, 1, 16, 32), "int8"), "index_scale": ((8, 1, 16), "float32")},
            id=f"{KVT}:KVCacheTest.MluIndexerInt8ScaleShapeMatchesQuantPagedCacheContract"
               f"[USE_MLU; heads-major as ILU]@{COMMIT}"),
        pytest.param(
            {"indexer_cache_dtype": "auto"},
            {"index": ((8, 1, 16, 32), "bfloat16")},
            id=f"{KVT}:KVCacheTest.MluIndexerAutoUsesDefaultCacheShapeWithoutScale[USE_MLU; heads-major as ILU]@{COMMIT}"),
    ],
)
def test_upstream_heads_major_shapes(cache_values, expected):
    tensors = oracle.full_layer_tensor_specs(_DSV32_GQA, _cache(**cache_values), 1, "heads_major", 8)
    got = {name: (tensors[name].shape, tensors[name].dtype) for name in expected}
    assert got == expected
    if cache_values.get("indexer_cache_dtype") == "auto":
        assert "index_scale" not in tensors


@pytest.mark.parametrize(
    ("indexer_cache_dtype", "has_scale"),
    [
        pytest.param("int8", True,
                     id=f"{KVT}:KVCacheTest.IndexerInt8ShapeUsesCapacityDecisionWhenGlobalIsAuto[USE_MLU]@{COMMIT}"),
        pytest.param("auto", False,
                     id=f"{KVT}:KVCacheTest.IndexerAutoShapeUsesCapacityDecisionWhenGlobalIsInt8[USE_MLU]@{COMMIT}"),
    ],
)
def test_upstream_index_scale_follows_the_estimate(indexer_cache_dtype, has_scale):
    # upstream: n_layers 1, 2 local KV heads, head_dim 64, index 1 x 32, bf16, 1 MiB, block 16
    args = model_args(**{**vars(_DSV32_GQA), "num_hidden_layers": 1})
    options = make_estimate_options(indexer_cache_dtype=indexer_cache_dtype, block_size=16)
    capacity = estimate(args, options)
    assert (capacity.index_slot_size == 32 + 4) is has_scale  # int8 index slot: 32 B + one fp32 scale
    tensors = oracle.full_layer_tensor_specs(args, _cache(indexer_cache_dtype=indexer_cache_dtype), 1,
                                             "heads_major", capacity.n_blocks)
    assert ("index_scale" in tensors) is has_scale


@pytest.mark.parametrize(
    ("layout", "name", "shape", "scale_shape"),
    [
        # IndexedKVCacheExposesQuantizedKvScaleTensors: key int8 [2, 4, 1, 64] -> scale [2, 4, 1]
        pytest.param("tokens_major", "k", (2, 4, 1, 64), (2, 4, 1),
                     id=f"{KVT}:KVCacheTest.IndexedKVCacheExposesQuantizedKvScaleTensors@{COMMIT}"),
        # IndexedKVCacheExposesIndexerCacheScaleTensor: index int8 [2, 1, 4, 32] -> scale [2, 1, 4]
        pytest.param("heads_major", "index", (2, 1, 4, 32), (2, 1, 4),
                     id=f"{KVT}:KVCacheTest.IndexedKVCacheExposesIndexerCacheScaleTensor@{COMMIT}"),
    ],
)
def test_upstream_scale_drops_the_trailing_dim(layout, name, shape, scale_shape):
    args = model_args(num_key_value_heads=1, head_dim=64, index_n_heads=1, index_head_dim=32, dtype="float32")
    tensors = oracle.full_layer_tensor_specs(args, _cache(block_size=4, kv_cache_dtype="int8", indexer_cache_dtype="int8"),
                                             1, layout, 2)
    assert tensors[name].shape == shape and tensors[name].dtype == "int8"
    assert tensors[f"{name}_scale"].shape == scale_shape and tensors[f"{name}_scale"].dtype == "float32"
