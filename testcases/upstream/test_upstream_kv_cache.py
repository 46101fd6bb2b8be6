"""Upstream xLLM's ``kv_cache_test.cpp`` at 494f293b5: its tensor-shape expectations, ported as data.

Every TEST of ``tests/core/framework/kv_cache/kv_cache_test.cpp`` (repository
xLLM-AI/xllm, commit 494f293b5629; unchanged since) that expects a shape (or the
presence or absence of a cache tensor) of a standard KV / indexer cache is a case
below; the rest are in ``OUT_OF_SCOPE`` with the reason. Upstream builds its
``KVCacheShape`` from a hand-set ``KVCacheCapacity`` (``n_blocks``, ``block_size``);
here the same n_blocks comes from a budget of exactly ``n_blocks`` blocks
(``cache.kv_budget_bytes``), checked first, and the tensors are what
``init_worker`` allocates on rank 0.

Shapes: upstream's default layout is ``[n_blocks, block_size, heads, dim]``
(tokens-major); ``KVCacheShape::apply_device_layout`` transposes it to
``[n_blocks, heads, block_size, dim]`` on MLU and ILU alike, so upstream's MLU
shape expectations are the BI-V100's (heads-major device below). Five of the
eight ported TESTs sit inside upstream's ``#if defined(USE_MLU)``: they are ported
for their heads-major shapes, on a simulated device that allows the int8 caches
MLU allows (BI-V100 itself refuses them, FEATURE section 3). Scales are the
cache tensor's shape without the last dim (``create_quantized_kv_cache_tensors``,
``init_index_cache_scale_shape``). The harness names the tensors ``k``, ``v``,
``index``, ``k_scale``, ``v_scale``, ``index_scale`` (upstream roles KEY, VALUE,
INDEX, KEY_SCALE, VALUE_SCALE, INDEX_SCALE).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

import pytest
import torch

from contract.specs import ModelSpec
from testcases.upstream._upstream import (
    HEADS_MAJOR_DEVICE,
    IMPLEMENTATIONS,
    KV_CACHE_TEST,
    UNIT_TEST_DEVICE,
    allocate,
    implementation,
    run_spec,
    source,
)

OUT_OF_SCOPE = {
    "Dsv4StateCacheTest.SplitStateReturnsInputsAndSwapsBoth": "DeepSeek-V4 compressed state cache",
    "Dsv4StateCacheTest.PackedStateReturnsWritableViewsAndSwapsOwner": "DeepSeek-V4 compressed state cache",
    "Dsv4StateCacheTest.MissingPackedFallsBackWithoutSwappingSplit": "DeepSeek-V4 compressed state cache",
    "KVCacheTest.DeepSeekV4FourDimCachesUseDeviceLayout": "DeepSeek-V4 pools",
    "KVCacheTest.DeepSeekV4DSparkUsesGroupedSwaCaches": "DeepSeek-V4 pools",
    "KVCacheTest.DeepSeekV4MtpKeepsGroupedCacheClassification": "DeepSeek-V4 pools",
    "KVCacheTest.GroupedCacheCapabilitySurvivesProtoRoundTrip":
        "DeepSeek-V4 grouped layout serialized for PD transfer (shard metadata)",
    "KVCacheTest.DeepSeekV4KVCacheExposesIndexerScaleThroughSharedContract": "DeepSeek-V4 pools",
    "KVCacheTest.CacheVariantsNormalizeInvalidIndexerScaleToNullopt":
        "accessor normalization of an empty tensor; no shape the allocation decides",
    "KVCacheTest.KVCacheShapeRoundTripsIndexCacheScaleShape": "proto round trip: PD-transfer shard metadata",
    "KVCacheTest.DeepSeekV4UsesInjectedAllocatorForTransferableOwners": "MLU-only, DeepSeek-V4 pools",
    "KVCacheTest.MluSharedDsaLayersAllocateOnlyMlaCache":
        "MLU-only DSA indexer elision (indexer_cache_enabled_layers); BI-V100 indexes every DSA layer",
    "KVCacheTest.MluMixedDsaLayersUseInjectedAllocatorForActualRoles":
        "MLU-only DSA indexer elision and tensor-allocator role order",
    "HostKVCacheTest.HostKVCacheNormalLayoutAddsLayerDim":
        "host (hierarchical) cache: not modelled; refused with an active split (FEATURE 3)",
    "HostKVCacheTest.HostKVCacheDeepSeekV4PerBlockType": "host cache, DeepSeek-V4 pools",
    "HostKVCacheConfigTest.MluPlatformAdvertisesHostOffloadSupport": "MLU-only host offload capability",
    "HostKVCacheConfigTest.AcceptsQuantizedIndexerCache": "host cache validation",
    "HostKVCacheConfigTest.AcceptsDisaggregatedPrefillInstance": "host cache / PD disaggregation",
    "HostKVCacheConfigTest.AcceptsKVCacheStore": "host cache / KV cache store",
    "HostKVCacheConfigTest.AcceptsKVCacheStoreOnDisaggregatedDecode": "host cache / PD disaggregation",
    "HostKVCacheConfigTest.AcceptsDisaggregatedDecodeInstance": "host cache / PD disaggregation",
    "HostKVCacheConfigTest.RejectsDisaggregatedPrefillOocMode": "host cache / PD disaggregation",
    "HostKVCacheConfigTest.RejectsQuantizedKVCache": "host cache validation",
    "HostKVCacheConfigTest.RejectsUnsupportedGroupedCacheLayout": "host cache, grouped (DeepSeek-V4) layout",
    "HostKVCacheConfigTest.AcceptsSupportedGroupedCacheLayout": "host cache, grouped (DeepSeek-V4) layout",
}
"""Upstream TESTs of the file that are not ported, with the reason."""

NUM_TESTS = 33
"""TESTs in the file at 494f293b5 (ported + out of scope)."""


def gqa_model(model_type: str, *, num_key_value_heads: int, head_dim: int, index_n_heads: int = 0,
              index_head_dim: int = 0, num_hidden_layers: int = 1) -> ModelSpec:
    """Upstream's ``ModelArgs`` of these tests: GQA (no MLA), bf16 (the create options' dtype)."""
    return ModelSpec(name=f"{model_type or 'model'}_unit_test", model_type=model_type, attention="gqa",
                     num_hidden_layers=num_hidden_layers, dtype="bfloat16", head_dim=head_dim,
                     num_key_value_heads=num_key_value_heads, index_n_heads=index_n_heads,
                     index_head_dim=index_head_dim)


@dataclass(frozen=True)
class ShapeCase:
    """One upstream TEST: a model, the blocks and options of its capacity, the tensors it expects."""

    test: str
    model: ModelSpec
    n_blocks: Optional[int]
    """Upstream's hand-set ``capacity.n_blocks``; None when upstream estimated it."""
    block_size: int
    options: Mapping[str, object] = field(default_factory=dict)
    heads_major: bool = False
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Tensor name -> upstream's expected shape."""
    dtypes: Mapping[str, torch.dtype] = field(default_factory=dict)
    present: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    cache_size_in_bytes: int = 0
    """Upstream's estimate budget when ``n_blocks`` is None."""


DSV32 = dict(num_key_value_heads=2, head_dim=64, index_n_heads=1, index_head_dim=32)
"""``deepseek_v32`` args of the indexer tests: 8 heads, 2 KV heads, head_dim 64, indexer 1 x 32."""

CASES = [
    ShapeCase("KVCacheTest.IndexerInt8WithoutIndexerDoesNotCreateScaleShape",
              gqa_model("", num_key_value_heads=2, head_dim=64), 8, 16, {"indexer_cache_dtype": "int8"},
              absent=("index", "index_scale")),
    ShapeCase("KVCacheTest.IndexedKVCacheExposesIndexerCacheScaleTensor",
              gqa_model("deepseek_v32", num_key_value_heads=1, head_dim=64, index_n_heads=1, index_head_dim=32),
              2, 4, {"indexer_cache_dtype": "int8"}, heads_major=True,
              shapes={"index": (2, 1, 4, 32), "index_scale": (2, 1, 4)},
              dtypes={"index": torch.int8, "index_scale": torch.float32}),
    ShapeCase("KVCacheTest.IndexedKVCacheExposesQuantizedKvScaleTensors",
              gqa_model("deepseek_v32", num_key_value_heads=1, head_dim=64, index_n_heads=1, index_head_dim=32),
              2, 4, {"kv_cache_dtype": "int8"},
              shapes={"k": (2, 4, 1, 64), "v": (2, 4, 1, 64), "k_scale": (2, 4, 1), "v_scale": (2, 4, 1)},
              dtypes={"k": torch.int8, "v": torch.int8, "k_scale": torch.float32, "v_scale": torch.float32}),
    ShapeCase("KVCacheTest.MluQuantizedIndexedKVCacheAllocatesInt8KvAndScalesOnCpuDevice",
              gqa_model("deepseek_v32", **DSV32), 8, 16, {"kv_cache_dtype": "int8"}, heads_major=True,
              shapes={"k_scale": (8, 2, 16), "v_scale": (8, 2, 16)},
              dtypes={"k": torch.int8, "v": torch.int8}),
    ShapeCase("KVCacheTest.MluIndexerInt8ScaleShapeMatchesQuantPagedCacheContract",
              gqa_model("deepseek_v32", **DSV32), 8, 16, {"indexer_cache_dtype": "int8"}, heads_major=True,
              shapes={"index": (8, 1, 16, 32), "index_scale": (8, 1, 16)}),
    ShapeCase("KVCacheTest.IndexerInt8ShapeUsesCapacityDecisionWhenGlobalIsAuto",
              gqa_model("deepseek_v32", **DSV32), None, 16, {"indexer_cache_dtype": "int8"},
              present=("index_scale",), cache_size_in_bytes=1024 * 1024),
    ShapeCase("KVCacheTest.IndexerAutoShapeUsesCapacityDecisionWhenGlobalIsInt8",
              gqa_model("deepseek_v32", **DSV32), None, 16, {"indexer_cache_dtype": "auto"},
              absent=("index_scale",), cache_size_in_bytes=1024 * 1024),
    ShapeCase("KVCacheTest.MluIndexerAutoUsesDefaultCacheShapeWithoutScale",
              gqa_model("deepseek_v32", **DSV32), 8, 16, {"indexer_cache_dtype": "auto"}, heads_major=True,
              shapes={"index": (8, 1, 16, 32)}, dtypes={"index": torch.bfloat16}, absent=("index_scale",)),
]


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request):
    return implementation(request.param)


def _budget_for(impl, case: ShapeCase) -> int:
    """A budget of exactly ``case.n_blocks`` blocks: the plan's uniform bytes per block times n_blocks."""
    probe = impl.plan(run_spec(case.model, cache_size_in_bytes=1 << 30, block_size=case.block_size, **case.options))
    return case.n_blocks * sum(probe.layer_bytes_per_block)


@pytest.mark.parametrize("case", CASES, ids=[c.test.split(".")[1] for c in CASES])
def test_kv_cache_shapes(impl, case: ShapeCase) -> None:
    """Allocated tensors of layer 0 have upstream's shapes, dtypes and presence."""
    check_shapes(impl, case)


def check_shapes(impl, case: ShapeCase) -> None:
    where = source(KV_CACHE_TEST, case.test.split(".")[1])
    device = HEADS_MAJOR_DEVICE if case.heads_major else UNIT_TEST_DEVICE
    budget = case.cache_size_in_bytes or _budget_for(impl, case)
    run = run_spec(case.model, cache_size_in_bytes=budget, block_size=case.block_size, device=device,
                   **case.options)
    plan, cache = allocate(impl, run)
    if case.n_blocks is not None:
        assert plan.n_blocks == case.n_blocks, f"precondition: {plan.n_blocks} blocks, upstream sets {case.n_blocks}"
    tensors = cache.layer(0).tensors
    for name, shape in case.shapes.items():
        assert name in tensors, f"no {name} tensor ({where}); have {sorted(tensors)}"
        assert tuple(tensors[name].shape) == shape, f"{name} {tuple(tensors[name].shape)} != upstream {shape} ({where})"
    for name, dtype in case.dtypes.items():
        assert tensors[name].dtype == dtype, f"{name} dtype {tensors[name].dtype} != upstream {dtype} ({where})"
    for name in case.present:
        assert name in tensors, f"no {name} tensor ({where}); have {sorted(tensors)}"
    for name in case.absent:
        assert name not in tensors, f"unexpected {name} tensor ({where})"


def test_ported_shapes_catch_swapped_axes() -> None:
    """The ported shape expectations can fail: the layout-axes mutant fails every case that states a 4-d shape."""
    broken = implementation("mutant_wrong_layout_axes")
    failing = set()
    for case in CASES:
        try:
            check_shapes(broken, case)
        except AssertionError:
            failing.add(case.test)
    assert failing == {c.test for c in CASES if c.shapes}


def test_every_upstream_test_is_ported_or_listed() -> None:
    """The module accounts for each TEST of the file, no more, no fewer."""
    ported = {c.test for c in CASES}
    assert not ported & set(OUT_OF_SCOPE)
    assert len(ported) + len(OUT_OF_SCOPE) == NUM_TESTS
