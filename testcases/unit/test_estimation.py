"""Block counts and the memory estimate (FEATURE section 6), including its worked example."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from contract.errors import ConfigError, PlanError
from contract.plan_types import CacheCapacity
from contract.specs import CacheSpec
from implementations.reference import ReferenceImplementation, estimation
from testcases.unit._models import (
    DEEPSEEK_MTP,
    DEEPSEEK_V3,
    DEEPSEEK_V32,
    QWEN3_5_MOE,
    QWEN3_5_MTP,
    GiB,
    run_spec,
)

pytestmark = pytest.mark.unit
REF = ReferenceImplementation()

# FEATURE section 6: DeepSeek-V3.2, bf16, block 128, 16 GiB available.
LAYER = 180_224
UNIFORM = 10_993_664
AVAILABLE = 16 * GiB
EXPECTED_BLOCKS = {1: 1562, 2: 2978, 4: 5607}


# ---- the worked example, with the pure functions ----------------------------------


def test_worked_example_pure():
    per_layer = (LAYER,) * 61
    assert estimation.uniform_bytes_per_block(per_layer) == UNIFORM
    assert estimation.block_count(AVAILABLE, [UNIFORM]) == EXPECTED_BLOCKS[1]
    for s in (2, 4):
        owners = tuple((l, l % s) for l in range(61))
        costs = estimation.owner_costs(per_layer, owners, scratch_bytes_per_block=LAYER)
        most_owned = -(-61 // s)  # 31 at s = 2, 16 at s = 4
        assert max(costs.values()) == (most_owned + 1) * LAYER
        assert estimation.block_count(AVAILABLE, costs.values()) == EXPECTED_BLOCKS[s]


@pytest.mark.parametrize("s", [1, 2, 4])
def test_worked_example_plan(s):
    plan = REF.plan(run_spec(DEEPSEEK_V32, split=s, budget_bytes=AVAILABLE))
    assert plan.layer_bytes_per_block == (LAYER,) * 61
    assert sum(plan.layer_bytes_per_block) == UNIFORM
    assert plan.available_bytes == AVAILABLE
    assert plan.uniform_n_blocks == 1562
    assert plan.n_blocks == EXPECTED_BLOCKS[s]
    assert plan.capacity_gain == pytest.approx(EXPECTED_BLOCKS[s] / 1562)
    if s == 2:  # peak = 32 layers' worth (31 owned + scratch)
        assert plan.peak_bytes == 2978 * 32 * LAYER
    assert plan.uniform_peak_bytes == plan.n_blocks * UNIFORM
    assert plan.savings_bytes == plan.uniform_peak_bytes - plan.peak_bytes


# ---- per rank, peak, mean, savings -------------------------------------------------


def test_rank_bytes_and_stats():
    assert estimation.rank_bytes(10, 300, 100, 7) == 10 * 400 + 7
    per_rank = {0: 100, 1: 80, 2: 61}
    assert estimation.peak_bytes(per_rank) == 100
    assert estimation.mean_bytes(per_rank) == 241 // 3
    assert estimation.capacity_gain(30, 20) == 1.5
    assert estimation.capacity_gain(3, 0) is None  # FEATURE 6 (2.2): undefined, never inf or 0


def test_plan_mean_over_ranks_s4():
    plan = REF.plan(run_spec(DEEPSEEK_V32, split=4))
    # 61 layers over 4 split ranks: 16, 15, 15, 15 owned, each plus one scratch layer.
    expected = sorted(plan.n_blocks * (k + 1) * LAYER for k in (16, 15, 15, 15))
    assert sorted(r.estimated_bytes for r in plan.ranks) == expected
    assert plan.mean_bytes == sum(expected) // 4
    assert plan.peak_bytes == expected[-1]


def test_owner_costs_skip_ranks_owning_nothing():
    costs = estimation.owner_costs((0, 5, 0, 5), ((1, 0), (3, 0)), scratch_bytes_per_block=5,
                                   additional_bytes_per_block=2)
    assert costs == {0: 5 + 5 + 5 + 2}


def test_hybrid_reserves_linear_state_first():
    cache = CacheSpec(max_seqs_per_batch=4, enable_prefix_cache=False)  # 4 + 2 slots
    plan = REF.plan(run_spec(QWEN3_5_MOE, split=2, cache=cache))
    linear = 30 * 6 * 274_432  # see test_kv_bytes
    assert plan.linear_state_bytes == linear
    assert plan.available_bytes == 16 * GiB - linear
    layer = 128 * 1024
    assert plan.uniform_n_blocks == (16 * GiB - linear) // (10 * layer)
    assert plan.n_blocks == (16 * GiB - linear) // ((5 + 1) * layer)
    for rank in plan.ranks:
        assert rank.estimated_bytes == plan.n_blocks * 6 * layer + linear


def test_prefix_cache_auto_sizes_linear_state():
    # FEATURE 5 with prefix cache (the default): slots = min(max(2, floor(C * 0.9 / 1.9) // (L * ls)), cap).
    plan = REF.plan(run_spec(QWEN3_5_MOE, split=2))
    per_slot = 30 * 274_432
    full = 10 * 128 * 1024
    cap = max(2, min((16 * GiB - 1) // per_slot, (16 * GiB + 2 * full) // (per_slot + full)))
    assert cap == 1800
    assert plan.num_linear_state_blocks == min(max(2, (16 * GiB * 9 // 19) // per_slot), cap) == 988
    assert plan.linear_state_bytes == plan.linear_cache_bytes == 30 * 988 * 274_432


@pytest.mark.parametrize("max_seqs, slots", [(0, 2), (4, 6), (100_000, 1800)])
def test_linear_state_without_prefix_cache(max_seqs, slots):
    # max(2, min(max_seqs + 2, cap)): 0 sequences is valid (2 padding slots); the cap bounds the rest.
    cache = CacheSpec(max_seqs_per_batch=max_seqs, enable_prefix_cache=False)
    assert REF.plan(run_spec(QWEN3_5_MOE, cache=cache)).num_linear_state_blocks == slots


def test_explicit_linear_state_slots():
    plan = REF.plan(run_spec(QWEN3_5_MOE, cache=CacheSpec(max_linear_state_cache_slots=32)))
    assert plan.num_linear_state_blocks == 34
    with pytest.raises(PlanError) as err:
        REF.plan(run_spec(QWEN3_5_MOE, cache=CacheSpec(max_linear_state_cache_slots=1799)))
    assert err.value.field == "cache.max_linear_state_cache_slots"
    assert "1801 slots > cap 1800" in str(err.value)


def test_linear_state_only_for_hybrids():
    plan = REF.plan(run_spec(DEEPSEEK_V32, cache=CacheSpec(max_linear_state_cache_slots=32)))
    assert (plan.num_linear_state_blocks, plan.linear_cache_bytes, plan.linear_slot_size) == (2, 0, 0)


def test_kv_budget_bytes_overrides_profile():
    plan = REF.plan(run_spec(DEEPSEEK_V32, cache=CacheSpec(kv_budget_bytes=1 * GiB)))
    assert plan.budget_bytes == 1 * GiB
    assert plan.n_blocks == GiB // (61 * LAYER)


def test_plan_figures():
    plan = REF.plan(run_spec(DEEPSEEK_V32, split=2))
    assert (plan.slot_size, plan.index_slot_size, plan.scale_slot_size) == (1152, 256, 0)
    assert (plan.num_full_attention_layers, plan.num_linear_attention_layers, plan.num_indexer_layers) == (61, 0, 61)
    hybrid = REF.plan(run_spec(QWEN3_5_MOE, cache=CacheSpec(kv_cache_dtype="int8")))
    assert (hybrid.slot_size, hybrid.scale_slot_size, hybrid.linear_slot_size) == (512, 8, 274_432)
    assert (hybrid.num_full_attention_layers, hybrid.num_linear_attention_layers) == (10, 30)


# ---- speculative ------------------------------------------------------------------


def test_draft_takes_target_cache_shape():
    # FEATURE 6: the draft costs draft_layers * (target slot + index + scale) unless its body runs at TP 1.
    plan = REF.plan(run_spec(DEEPSEEK_V32, split=2, draft=DEEPSEEK_MTP))
    assert plan.additional_bytes_per_block == 128 * (1152 + 256)  # the target's slot, index included
    tp1 = REF.plan(run_spec(DEEPSEEK_V32, split=2, draft=replace(DEEPSEEK_MTP, body_tp1=True)))
    assert tp1.additional_bytes_per_block == 128 * 1152  # the draft's own shape
    assert tp1.n_blocks >= plan.n_blocks


def test_draft_slot_above_target_refused():
    draft = replace(DEEPSEEK_MTP, index_n_heads=64, index_head_dim=128)  # 1152 + 256 > the target's 1152
    with pytest.raises(ConfigError) as err:
        REF.plan(run_spec(DEEPSEEK_V3, split=2, draft=draft))
    assert err.value.field == "draft"
    assert "draft.body_tp1" in str(err.value)
    REF.plan(run_spec(DEEPSEEK_V3, split=2, draft=replace(draft, body_tp1=True)))


def test_draft_layers_from_nextn():
    # A draft given as its full config: the draft engine holds num_nextn_predict_layers layers.
    draft = replace(DEEPSEEK_V3, name="v3_as_draft", num_nextn_predict_layers=1)
    plan = REF.plan(run_spec(DEEPSEEK_V3, split=2, draft=draft))
    assert plan.draft.num_layers == 1 and plan.additional_bytes_per_block == 128 * 1152


@pytest.mark.parametrize("tp1, expected", [(False, 1666), (True, 476)])
def test_speculative_n_blocks_on_capacities(tp1, expected):
    # Upstream's SpeculativeDecode* tests (see testcases/upstream); here as a unit of the reference.
    if tp1:
        target = CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=2, scale_slot_size=1,
                               index_slot_size=3, num_full_attention_layers=2, num_indexer_layers=1)
        draft = CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=4, scale_slot_size=1,
                              index_slot_size=2, num_indexer_layers=1, n_layers=2)
    else:
        target = CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=2, num_full_attention_layers=1)
        draft = CacheCapacity(cache_size_bytes=100000, block_size=10, slot_size=1, n_layers=2)
    assert REF.speculative_n_blocks(target, draft, draft_body_tp1=tp1) == expected
    assert REF.speculative_n_blocks(replace(target, n_blocks=7), replace(draft, n_blocks=5),
                                    share_device=False) == 5



@pytest.mark.parametrize("s", [1, 2, 4])
def test_speculative_deepseek_mtp(s):
    layer = 128 * 2 * (512 + 64)  # DeepSeek-V3 MLA, no indexer
    plan = REF.plan(run_spec(DEEPSEEK_V3, split=s, draft=DEEPSEEK_MTP))
    assert plan.additional_bytes_per_block == layer
    assert plan.draft is not None and plan.draft.layer_bytes_per_block == (layer,)
    assert plan.uniform_n_blocks == AVAILABLE // (62 * layer)
    most_owned = -(-61 // s)
    cost = (61 + 1) * layer if s == 1 else (most_owned + 1 + 1) * layer
    assert plan.n_blocks == AVAILABLE // cost
    for rank in plan.ranks:
        assert rank.draft_estimated_bytes == plan.n_blocks * layer
        assert rank.estimated_bytes + rank.draft_estimated_bytes <= plan.budget_bytes


def test_speculative_qwen35_mtp():
    plan = REF.plan(run_spec(QWEN3_5_MOE, split=2, draft=QWEN3_5_MTP))
    layer = 128 * 1024
    assert plan.additional_bytes_per_block == layer
    assert plan.n_blocks == plan.available_bytes // ((5 + 1 + 1) * layer)
    for rank in plan.ranks:
        assert rank.estimated_bytes + rank.draft_estimated_bytes <= plan.budget_bytes


# ---- nothing fits -----------------------------------------------------------------


@pytest.mark.parametrize("s", [1, 2])
def test_budget_below_one_block(s):
    budget = 5 * LAYER  # s = 2 needs 32 layers' worth per block
    with pytest.raises(PlanError) as err:
        REF.plan(run_spec(DEEPSEEK_V32, split=s, budget_bytes=budget))
    message = str(err.value)
    assert err.value.field == "hardware.reserved_bytes_per_card"
    assert f"budget {budget} B" in message
    assert f"{(32 if s == 2 else 61) * LAYER} B per block" in message


def test_linear_state_exceeding_budget():
    budget = 1 * 1024 * 1024  # below even the 2 padding slots: 30 x 2 x 274,432 B
    with pytest.raises(PlanError) as err:
        REF.plan(run_spec(QWEN3_5_MOE, split=2, budget_bytes=budget))
    assert err.value.field == "cache.max_seqs_per_batch"
    assert "linear state 16465920 B >= per-rank KV budget 1048576 B" in str(err.value)


def test_block_count_needs_an_owner():
    with pytest.raises(PlanError):
        estimation.block_count(AVAILABLE, [])


def test_split_fits_where_uniform_does_not():
    # 40 layers' worth fits at s = 2 (31 + 1 = 32) but not uniform (61).
    plan = REF.plan(run_spec(DEEPSEEK_V32, split=2, budget_bytes=40 * LAYER))
    assert plan.uniform_n_blocks == 0
    assert plan.n_blocks == 1
    assert plan.capacity_gain is None  # FEATURE 6 (2.2): null, never inf or 0
    assert any("the uniform allocation fits no block" in note for note in plan.notes)
    assert json.loads(json.dumps(plan.to_json(), allow_nan=False))["capacity_gain"] is None


def test_one_full_layer_split_raises_the_peak_and_says_so():
    # FEATURE 6 (2.2): 1 owned + 1 scratch = 2 layers on split rank 0 against 1 uniform layer
    plan = REF.plan(run_spec(replace(DEEPSEEK_V32, num_hidden_layers=1), split=2))
    assert plan.peak_bytes == 2 * plan.uniform_peak_bytes
    assert any(note.startswith("the split raises the peak") for note in plan.notes)
    assert not any("raises the peak" in note for note in REF.plan(run_spec(DEEPSEEK_V32, split=2)).notes)


def test_no_full_layer_when_disabled():
    # Upstream's F counts max(full layers, 1): an all-linear model still gets blocks of one layer's slot.
    all_linear = replace(QWEN3_5_MOE, num_hidden_layers=3, full_attention_interval=8)
    plan = REF.plan(run_spec(all_linear, split=1))
    assert plan.full_layers == () and plan.num_linear_attention_layers == 3
    assert plan.n_blocks == plan.available_bytes // (128 * 1024)