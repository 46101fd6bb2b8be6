"""Upstream xLLM's ``kv_cache_estimation_test.cpp`` at 494f293b5, ported as data.

Every TEST of ``tests/core/framework/kv_cache/kv_cache_estimation_test.cpp``
(repository xLLM-AI/xllm, commit 494f293b5629; unchanged since) is either a case
below, with upstream's inputs and expected numbers copied verbatim, or listed in
``OUT_OF_SCOPE`` with its reason. Each case's id is the upstream TEST name (and
the sub-case name of a table-driven TEST); its ``source`` names the file.

The cases run through the harness's interface on every implementation of
``IMPLEMENTATIONS``: a ``RunSpec`` is planned and the plan's figures
(``budget_bytes``, ``block_size``, ``slot_size``, ``index_slot_size``,
``linear_slot_size``, ``num_linear_state_blocks``, ``linear_cache_bytes``, layer
counts, ``n_blocks``) are compared with upstream's ``KVCacheCapacity`` getters of
the same meaning. These are the non-split estimates the feature builds on, and
TC-06's external pre-feature anchor (FEATURE section 10).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Optional

import pytest

from contract.interface import SpeculativeCapacityEstimator
from contract.plan_types import CacheCapacity
from contract.specs import ModelSpec
from testcases.upstream._upstream import (
    ESTIMATION_TEST,
    IMPLEMENTATIONS,
    allocate,
    implementation,
    run_spec,
    source,
)

OUT_OF_SCOPE = {
    "SharedDsaLayersDoNotConsumeIndexerCacheBudget":
        "MLU-only (#if defined(USE_MLU)): DSA indexer-cache elision by index_topk_pattern, a platform "
        "capability (supports_dsa_indexer_cache_elision) only MLU has; BI-V100 caches an indexer on every DSA layer",
    "EstimatesDeepSeekV4Pools": "DeepSeek-V4 SWA/C4/C128 pools: a different cache manager, not layerwise split's KV",
    "EstimatesDeepSeekV4DSparkSwaPool": "DeepSeek-V4 pools (DSpark SWA pool)",
    "DeepSeekV4SpeculativeBudgetIncludesDSparkDraftSwaPool": "DeepSeek-V4 pools (speculative DSpark draft)",
    "SpeculativeDecodePreservesDeepSeekV4PoolBlockCount": "DeepSeek-V4 pools (speculative pool block count)",
}
"""Upstream TESTs of the file that are not ported, with the reason."""


def make_standard_args(**changes: object) -> ModelSpec:
    """Upstream ``make_standard_args``: 4 layers, head_dim 16 (GQA; 2 local KV heads at world size 1)."""
    base = ModelSpec(name="make_standard_args", model_type="", num_hidden_layers=4, attention="gqa",
                     dtype="float16", head_dim=16, num_key_value_heads=2)
    return replace(base, **changes)


def make_linear_attention_args(head_dim: int = 16, **changes: object) -> ModelSpec:
    """Upstream ``make_linear_attention_args``: every 2nd layer full, GDN 2/2 heads, dims 4/8, kernel 3."""
    return make_standard_args(head_dim=head_dim, full_attention_interval=2, linear_num_key_heads=2,
                              linear_num_value_heads=2, linear_key_head_dim=4, linear_value_head_dim=8,
                              linear_conv_kernel_dim=3, **changes)


ESTIMATE_OPTIONS = dict(cache_size_in_bytes=1024 * 1024, block_size=16, max_seqs_per_batch=8)
"""Upstream ``make_estimate_options``: fp16 (the model dtype above), kv auto, 1 MiB, block 16, 8 sequences."""


@dataclass(frozen=True)
class EstimateCase:
    """One upstream expectation set: a model, estimate options, and plan figures to equal."""

    test: str
    model: ModelSpec
    options: Mapping[str, object]
    expected: Mapping[str, int]
    """Plan attribute -> upstream's EXPECT_EQ value."""
    greater_than: Mapping[str, int] = field(default_factory=dict)
    """Plan attribute -> upstream's EXPECT_GT bound."""
    conv_state_len: Optional[int] = None
    """Upstream ``linear_conv_state_len()``: checked on the allocated conv state's shape."""
    ssm_checkpoint_stride: Optional[int] = None
    """Upstream ``linear_ssm_checkpoint_stride()``: recurrent slots / conv slots of the allocation."""


CASES = [
    EstimateCase(
        "EstimatesStandardAttentionBlocks", make_standard_args(), ESTIMATE_OPTIONS,
        {"budget_bytes": 1024 * 1024, "block_size": 16, "slot_size": 128, "num_layers": 4,
         "num_full_attention_layers": 4, "num_linear_attention_layers": 0, "n_blocks": 128}),
    EstimateCase(
        "IgnoresLinearStateSlotsWithoutLinearAttention", make_standard_args(),
        {**ESTIMATE_OPTIONS, "max_linear_state_cache_slots": 32},
        {"num_linear_attention_layers": 0, "num_linear_state_blocks": 2, "linear_cache_bytes": 0}),
    EstimateCase(
        "UserIndexerCacheDtypeDirectlyControlsQuantization/auto",
        make_standard_args(model_type="unsupported_model", index_n_heads=1, index_head_dim=16),
        {**ESTIMATE_OPTIONS, "indexer_cache_dtype": "auto"}, {"index_slot_size": 32}),
    EstimateCase(
        "UserIndexerCacheDtypeDirectlyControlsQuantization/int8",
        make_standard_args(model_type="unsupported_model", index_n_heads=1, index_head_dim=16),
        {**ESTIMATE_OPTIONS, "indexer_cache_dtype": "int8"}, {"index_slot_size": 20}),
    EstimateCase(
        "IndexerScaleUsesLogicalCacheCapacity",
        make_standard_args(model_type="deepseek_v32", index_n_heads=1, index_head_dim=16),
        {**ESTIMATE_OPTIONS, "indexer_cache_dtype": "int8", "cache_size_in_bytes": 10 * 1024 * 1024},
        {"n_blocks": 1107}),
    EstimateCase(
        "ReservesLinearAttentionState", make_linear_attention_args(), ESTIMATE_OPTIONS,
        {"num_full_attention_layers": 2, "num_linear_attention_layers": 2, "num_linear_state_blocks": 10,
         "linear_slot_size": 256, "linear_cache_bytes": 5120, "n_blocks": 254}),
    EstimateCase(
        "LinearStateCapacityVariants/PrefixCacheGrowsLinearStateCheckpointPool", make_linear_attention_args(16),
        {"cache_size_in_bytes": 64 << 30, "block_size": 16, "max_seqs_per_batch": 200,
         "enable_prefix_cache": True, "max_linear_state_cache_slots": 0},
        {}, greater_than={"num_linear_state_blocks": 202}),
    EstimateCase(
        "LinearStateCapacityVariants/PrefixCacheUsesLinearStateMemoryRatio",
        make_linear_attention_args(1, num_key_value_heads=1),
        {"cache_size_in_bytes": 1024 * 1024, "block_size": 1, "max_seqs_per_batch": 8,
         "enable_prefix_cache": True, "max_linear_state_cache_slots": 0},
        {"num_linear_state_blocks": 970}),
    EstimateCase(
        "LinearStateCapacityVariants/NoPrefixCacheCapsLinearStateBlocksByBudget", make_linear_attention_args(16),
        {"cache_size_in_bytes": 1024 * 1024, "block_size": 16, "max_seqs_per_batch": 100000,
         "enable_prefix_cache": False, "max_linear_state_cache_slots": 0},
        {"num_linear_state_blocks": 229}),
    EstimateCase(
        "LinearStateCapacityVariants/UnlimitedConcurrencyFallsBackToPaddingSlots", make_linear_attention_args(16),
        {"cache_size_in_bytes": 1024 * 1024, "block_size": 16, "max_seqs_per_batch": 0,
         "enable_prefix_cache": False, "max_linear_state_cache_slots": 0},
        {"num_linear_state_blocks": 2}),
    EstimateCase(
        "LinearStateCapacityVariants/ExplicitLinearStateSlotsOverrideAutoSizing", make_linear_attention_args(16),
        {"cache_size_in_bytes": 64 << 30, "block_size": 16, "max_seqs_per_batch": 200,
         "enable_prefix_cache": True, "max_linear_state_cache_slots": 32},
        {"num_linear_state_blocks": 34}),
    EstimateCase(
        "Qwen35MtpExpandsConvStateLen", make_linear_attention_args(16, model_type="qwen3_5"),
        {**ESTIMATE_OPTIONS, "num_speculative_tokens": 1},
        {"linear_slot_size": 448, "linear_cache_bytes": 8960}, conv_state_len=3, ssm_checkpoint_stride=2),
    EstimateCase(
        "Qwen35TextMtpUsesSsmCheckpointStride", make_linear_attention_args(16, model_type="qwen3_5_text"),
        {**ESTIMATE_OPTIONS, "num_speculative_tokens": 1},
        {"linear_slot_size": 448, "linear_cache_bytes": 8960}, conv_state_len=3, ssm_checkpoint_stride=2),
]
"""Upstream's model in ``Qwen35*`` is ``make_standard_args`` plus the same GDN numbers as
``make_linear_attention_args`` (written out there); the helper is used here for brevity."""


@pytest.fixture(params=IMPLEMENTATIONS)
def impl(request):
    return implementation(request.param)


@pytest.mark.parametrize("case", CASES, ids=[c.test for c in CASES])
def test_estimation(impl, case: EstimateCase) -> None:
    """Plan figures equal upstream's ``KVCacheCapacity`` for the TEST named by the case id."""
    check_estimate(impl, case)


def check_estimate(impl, case: EstimateCase) -> None:
    run = run_spec(case.model, **case.options)
    need_shapes = case.conv_state_len is not None
    plan, cache = allocate(impl, run) if need_shapes else (impl.plan(run), None)
    where = source(ESTIMATION_TEST, case.test.split("/")[0])
    for name, want in case.expected.items():
        assert getattr(plan, name) == want, f"{name}: {getattr(plan, name)} != upstream {want} ({where})"
    for name, bound in case.greater_than.items():
        assert getattr(plan, name) > bound, f"{name}: {getattr(plan, name)} not > upstream {bound} ({where})"
    if need_shapes:
        linear = [layer for layer in cache.layers if layer.kind == "linear"]
        assert linear, f"no linear-attention layer allocated ({where})"
        conv, recurrent = linear[0].tensors["conv"], linear[0].tensors["recurrent"]
        assert conv.shape[1] == case.conv_state_len, f"conv state {tuple(conv.shape)} ({where})"
        assert recurrent.shape[0] // conv.shape[0] == case.ssm_checkpoint_stride, (
            f"ssm {tuple(recurrent.shape)} / conv {tuple(conv.shape)} slots ({where})")


@dataclass(frozen=True)
class SpeculativeCase:
    """Upstream ``estimate_speculative_kv_cache_blocks`` on hand-made engine figures."""

    test: str
    target: CacheCapacity
    draft: CacheCapacity
    draft_body_tp1: bool
    expected_n_blocks: int


SPECULATIVE_CASES = [
    SpeculativeCase(
        "SpeculativeDecodeCombinesStandardCacheCosts",
        CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=2, num_full_attention_layers=1),
        CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=1, n_layers=2),
        False, 1666),
    SpeculativeCase(
        "SpeculativeDecodeUsesDraftShapeForTp1Body",
        CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=2, scale_slot_size=1, index_slot_size=3,
                      num_full_attention_layers=2, num_indexer_layers=1),
        CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=4, scale_slot_size=1, index_slot_size=2,
                      num_indexer_layers=1, n_layers=2),
        True, 476),
]


@pytest.mark.parametrize("case", SPECULATIVE_CASES, ids=[c.test for c in SPECULATIVE_CASES])
def test_speculative_blocks(impl, case: SpeculativeCase) -> None:
    """The speculative block count on upstream's engine figures (share_device = true)."""
    assert isinstance(impl, SpeculativeCapacityEstimator), (
        f"{impl.name} offers no speculative_n_blocks; upstream's {case.test} cannot run on it")
    got = impl.speculative_n_blocks(case.target, case.draft, share_device=True, draft_body_tp1=case.draft_body_tp1)
    assert got == case.expected_n_blocks, f"{got} != upstream {case.expected_n_blocks} " \
                                          f"({source(ESTIMATION_TEST, case.test)})"


@pytest.mark.parametrize("mutant, caught_by", [
    ("mutant_linear_slots_unpadded", {"ReservesLinearAttentionState",
                                      "LinearStateCapacityVariants/NoPrefixCacheCapsLinearStateBlocksByBudget",
                                      "LinearStateCapacityVariants/ExplicitLinearStateSlotsOverrideAutoSizing",
                                      "LinearStateCapacityVariants/PrefixCacheUsesLinearStateMemoryRatio",
                                      "LinearStateCapacityVariants/UnlimitedConcurrencyFallsBackToPaddingSlots",
                                      "Qwen35MtpExpandsConvStateLen", "Qwen35TextMtpUsesSsmCheckpointStride"}),
    ("mutant_index_slot_dropped", {"IndexerScaleUsesLogicalCacheCapacity"}),
])
def test_ported_cases_catch_broken_rules(mutant, caught_by) -> None:
    """The ported expectations can fail: one-rule mutants fail exactly the cases their rule decides."""
    broken = implementation(mutant)
    failing = set()
    for case in CASES:
        try:
            check_estimate(broken, case)
        except AssertionError:
            failing.add(case.test)
    assert failing == caught_by


def test_every_upstream_test_is_ported_or_listed() -> None:
    """The module accounts for each of the 15 TESTs of the file, no more, no fewer."""
    ported = {c.test.split("/")[0] for c in CASES} | {c.test for c in SPECULATIVE_CASES}
    assert not ported & set(OUT_OF_SCOPE)
    assert len(ported) + len(OUT_OF_SCOPE) == 15


SLOT_CASES = [c for c in CASES if "num_linear_state_blocks" in {**c.expected, **c.greater_than}
              and c.model.linear_num_value_heads]


@pytest.mark.parametrize("case", SLOT_CASES, ids=[c.test for c in SLOT_CASES])
def test_baseline_recorder_slots_match_upstream(case: EstimateCase) -> None:
    """The recorded TC-06 baseline's slot rule (harness/suites/baseline.py) gives upstream's numbers."""
    from harness.suites import baseline

    model, o = case.model, {"max_linear_state_cache_slots": 0, "enable_prefix_cache": False, **case.options}
    ls = 2 * (2 * 4 * 2 + 8 * 2) * 2 + 2 * 2 * 4 * 8  # fp16 conv (kernel 3) + ssm of make_linear_attention_args
    full = o["block_size"] * 2 * (2 * 2 * model.head_dim * model.num_key_value_heads)  # 2 full layers
    slots = baseline.linear_state_slots(
        budget_bytes=o["cache_size_in_bytes"], num_linear_layers=2, linear_slot_bytes=ls, full_bytes_per_block=full,
        max_seqs_per_batch=o["max_seqs_per_batch"], max_linear_state_cache_slots=o["max_linear_state_cache_slots"],
        enable_prefix_cache=o["enable_prefix_cache"])
    if "num_linear_state_blocks" in case.expected:
        assert slots == case.expected["num_linear_state_blocks"]
    else:
        assert slots > case.greater_than["num_linear_state_blocks"]
