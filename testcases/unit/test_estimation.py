"""Block counts and the memory estimate (FEATURE section 6), including its worked example."""

from __future__ import annotations

from dataclasses import replace

import pytest

from implementations.errors import PlanError
from implementations.reference import ReferenceImplementation, estimation
from implementations.specs import CacheSpec
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
    assert estimation.capacity_gain(3, 0) == float("inf")


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
    cache = CacheSpec(max_seqs_per_batch=4)
    plan = REF.plan(run_spec(QWEN3_5_MOE, split=2, cache=cache))
    linear = 30 * 6 * 274_432  # see test_kv_bytes
    assert plan.linear_state_bytes == linear
    assert plan.available_bytes == 16 * GiB - linear
    layer = 128 * 1024
    assert plan.uniform_n_blocks == (16 * GiB - linear) // (10 * layer)
    assert plan.n_blocks == (16 * GiB - linear) // ((5 + 1) * layer)
    for rank in plan.ranks:
        assert rank.estimated_bytes == plan.n_blocks * 6 * layer + linear


# ---- speculative ------------------------------------------------------------------


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
    budget = 1 * 1024 * 1024  # below the 49 MB of Qwen3.5 linear state
    with pytest.raises(PlanError) as err:
        REF.plan(run_spec(QWEN3_5_MOE, split=2, budget_bytes=budget))
    assert "linear state 49397760 B" in str(err.value)
    assert f"available {budget - 49_397_760} B" in str(err.value)


def test_block_count_needs_an_owner():
    with pytest.raises(PlanError):
        estimation.block_count(AVAILABLE, [])


def test_split_fits_where_uniform_does_not():
    # 40 layers' worth fits at s = 2 (31 + 1 = 32) but not uniform (61).
    plan = REF.plan(run_spec(DEEPSEEK_V32, split=2, budget_bytes=40 * LAYER))
    assert plan.uniform_n_blocks == 0
    assert plan.n_blocks == 1
    assert plan.capacity_gain == float("inf")
    assert any("uniform" in note for note in plan.notes)


def test_no_kv_layer_when_disabled():
    # A model with only linear layers has no KV block to count, split or not.
    all_linear = replace(QWEN3_5_MOE, num_hidden_layers=3, full_attention_interval=8)
    with pytest.raises(PlanError) as err:
        REF.plan(run_spec(all_linear, split=1))
    assert err.value.field == "model"
    assert "full-attention layer" in str(err.value)
