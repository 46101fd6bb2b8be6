"""The reference plan end to end (no process groups): layout, estimate, engine and worker steps."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.errors import ConfigError, PlanError, TopologyError
from contract.interface import KVShardingImplementation
from contract.specs import CacheSpec
from implementations.reference import ReferenceImplementation, layers
from implementations.upstream_owner_rule import UpstreamOwnerRuleImplementation
from implementations.xllm_upstream import XllmUpstreamImplementation
from testcases.unit._models import (
    ALL_MODELS,
    DEEPSEEK_MTP,
    DEEPSEEK_V3,
    DEEPSEEK_V32,
    GLM_5,
    QWEN3_5_MOE,
    QWEN3_NEXT,
    SPLIT_MODELS,
    GiB,
    MiB,
    run_spec,
)

pytestmark = pytest.mark.unit
REF = ReferenceImplementation()
UPSTREAM = XllmUpstreamImplementation()
OWNER_RULE = UpstreamOwnerRuleImplementation()


def independent_n_blocks(plan) -> int:
    """min over split ranks owning a layer of available // (owned + scratch + additional)."""
    counts = []
    for group in plan.split_groups:
        for rank in group:
            owned = plan.ranks[rank].owned_full_layers
            if owned:
                cost = sum(plan.layer_bytes_per_block[l] for l in owned)
                cost += plan.scratch_bytes_per_block + plan.additional_bytes_per_block
                counts.append(plan.available_bytes // cost)
    return min(counts)


def assert_coverage(plan) -> None:
    """Inside each split group every full layer is owned exactly once; linear layers never."""
    full = set(plan.full_layers)
    for group in plan.split_groups:
        owned = [l for rank in group for l in plan.ranks[rank].owned_full_layers]
        assert sorted(owned) == sorted(full), group
    for rank in plan.ranks:
        assert set(rank.owned_full_layers) <= full


def test_satisfies_interface():
    assert isinstance(REF, KVShardingImplementation)
    assert isinstance(UPSTREAM, KVShardingImplementation)
    assert isinstance(OWNER_RULE, KVShardingImplementation)
    assert (REF.name, UPSTREAM.name, OWNER_RULE.name) == ("reference", "xllm_upstream", "upstream_owner_rule")


# ---- disabled == uniform ----------------------------------------------------------


@pytest.mark.parametrize("model", ALL_MODELS, ids=lambda m: m.name)
def test_disabled_is_uniform(model):
    off = REF.plan(run_spec(model, split=4, enable=False))
    size_one = REF.plan(run_spec(model, split=1, enable=True))
    assert off == size_one  # same plan either way, hence the same digest
    full_bytes = sum(off.layer_bytes_per_block)
    assert not off.active and off.split_size == 1
    assert off.layer_owner == () and off.scratch_bytes_per_block == 0
    assert off.split_groups == ((0,), (1,), (2,), (3,))
    assert off.n_blocks == off.uniform_n_blocks == off.available_bytes // full_bytes
    assert off.capacity_gain == 1.0 and off.savings_bytes == 0
    for rank in off.ranks:
        assert rank.owned_full_layers == off.full_layers
        assert rank.estimated_bytes == off.n_blocks * full_bytes + off.linear_state_bytes
        assert REF.ownership_mask(off, rank.rank) == (True,) * model.num_hidden_layers


# ---- split: coverage, block count, peak ------------------------------------------


@pytest.mark.parametrize("model", SPLIT_MODELS, ids=lambda m: m.name)
@pytest.mark.parametrize("s", [2, 4])
def test_reference_split(model, s):
    plan = REF.plan(run_spec(model, split=s))
    assert plan.active and plan.split_size == s
    assert_coverage(plan)
    counts = [len(plan.ranks[r].owned_full_layers) for r in plan.split_groups[0]]
    assert max(counts) - min(counts) <= 1
    assert plan.n_blocks == independent_n_blocks(plan)
    assert plan.peak_bytes <= plan.uniform_peak_bytes
    assert plan.n_blocks >= plan.uniform_n_blocks
    assert plan.capacity_gain >= 1.0
    assert len({r.estimated_bytes for r in plan.ranks}) <= 2  # balanced to within one layer
    assert plan.scratch_bytes_per_block == max(plan.layer_bytes_per_block)


@pytest.mark.parametrize("model", [QWEN3_5_MOE, QWEN3_NEXT], ids=lambda m: m.name)
@pytest.mark.parametrize("s", [2, 4])
def test_linear_layers_never_split(model, s):
    plan = REF.plan(run_spec(model, split=s))
    linear = set(layers.linear_layers(model))
    assert linear and not linear & {l for l, _ in plan.layer_owner}
    for rank in plan.ranks:
        mask = REF.ownership_mask(plan, rank.rank)
        assert all(mask[l] for l in linear)
        assert {l for l in plan.full_layers if mask[l]} == set(rank.owned_full_layers)


@pytest.mark.parametrize("s", [2, 4])
def test_upstream_rule_peak_above_uniform_on_qwen35(s):
    plan = OWNER_RULE.plan(run_spec(QWEN3_5_MOE, split=s))
    owner_rank = s - 1  # every full layer is 3 mod 4
    assert {o for _, o in plan.layer_owner} == {owner_rank}
    # The owner holds all 10 full layers plus the scratch: 11 layers against uniform's 10.
    layer = 128 * 1024
    assert plan.peak_bytes == plan.n_blocks * 11 * layer + plan.linear_state_bytes
    assert plan.peak_bytes > plan.uniform_peak_bytes
    assert plan.n_blocks < plan.uniform_n_blocks
    assert plan.capacity_gain < 1.0
    assert plan.savings_bytes < 0
    assert any(note.startswith("the split raises the peak") for note in plan.notes)


@pytest.mark.parametrize("model", [DEEPSEEK_V3, DEEPSEEK_V32, GLM_5], ids=lambda m: m.name)
def test_owner_rule_equals_reference_on_all_full_models(model):
    up, ref = OWNER_RULE.plan(run_spec(model, split=4)), REF.plan(run_spec(model, split=4))
    assert replace(up, implementation="reference") == ref


@pytest.mark.parametrize("model", [DEEPSEEK_V32, GLM_5], ids=lambda m: m.name)
@pytest.mark.parametrize("s", [1, 2, 4])
def test_upstream_equals_reference_on_its_models(model, s):
    # deepseek_v32 / glm_moe_dsa on flat cards: consecutive groups and layer_id % s agree with the reference.
    up, ref = UPSTREAM.plan(run_spec(model, split=s)), REF.plan(run_spec(model, split=s))
    assert replace(up, implementation="reference") == ref


def test_upstream_worker_split_rank_is_global_rank_mod_s():
    plan = UPSTREAM.plan(run_spec(DEEPSEEK_V32, split=2))
    regrouped = replace(plan, ranks=tuple(replace(r, split_rank=1 - r.split_rank) for r in plan.ranks))
    assert [UPSTREAM.worker_split_rank(regrouped, r) for r in range(4)] == [0, 1, 0, 1]
    assert [REF.worker_split_rank(regrouped, r) for r in range(4)] == [1, 0, 1, 0]


def test_upstream_ignores_the_enable_flag():
    assert UPSTREAM.plan(run_spec(DEEPSEEK_V32, split=2, enable=False)).active
    assert not REF.plan(run_spec(DEEPSEEK_V32, split=2, enable=False)).active


def test_dp2_tp4_groups():
    plan = REF.plan(run_spec(DEEPSEEK_V32, world=8, dp=2, split=2))
    assert plan.attn_tp_size == 4
    assert plan.split_groups == ((0, 1), (2, 3), (4, 5), (6, 7))
    assert_coverage(plan)
    for rank in plan.ranks:
        assert (rank.dp_rank, rank.tp_rank) == (rank.rank // 4, rank.rank % 4)
        assert rank.split_rank == rank.tp_rank % 2
        assert plan.split_groups[rank.split_group][rank.split_rank] == rank.rank


def test_fewer_full_layers_than_split_ranks():
    model = replace(QWEN3_5_MOE, num_hidden_layers=8)  # full layers 3 and 7 only
    plan = REF.plan(run_spec(model, split=4))
    assert [len(plan.ranks[r].owned_full_layers) for r in range(4)] == [1, 1, 0, 0]
    assert plan.n_blocks == independent_n_blocks(plan)
    assert any("own no full-attention layer" in note for note in plan.notes)


def test_card_over_hbm_rejected():
    # Ranks 0 and 1 share card 0: two ranks' KV plus two reserves exceed its 32 GiB.
    run = replace(run_spec(DEEPSEEK_V32, split=2), placement=(0, 0, 1, 2))
    with pytest.raises(PlanError) as err:
        REF.plan(run)
    assert "hbm_bytes_per_card" in str(err.value)


def test_split_group_cannot_share_a_card():
    # s = 4 puts all four ranks in one split group, but two of them are on card 0.
    run = replace(run_spec(DEEPSEEK_V32, split=4), placement=(0, 0, 1, 2))
    with pytest.raises(TopologyError) as err:
        REF.plan(run)
    assert err.value.field == "placement"


def test_plan_json_has_digest_and_is_stable():
    a, b = REF.plan(run_spec(split=2)), REF.plan(run_spec(split=2))
    assert a.digest == b.digest == a.to_json()["digest"]
    assert a.digest != REF.plan(run_spec(split=4)).digest


def test_digest_hashes_the_json_text_of_asdict():
    """The digest reads a plan's fields its own way (``plan_types._plain``, no deep copy): the text it hashes is
    ``json.dumps`` of ``dataclasses.asdict``, ranks, draft and all; a draft engine's message too."""
    import dataclasses
    import hashlib
    import json

    run = run_spec(DEEPSEEK_V3, split=2, draft=DEEPSEEK_MTP)
    target = REF.plan(run)
    for plan in (target, REF.engine_message(target, run, "draft"), REF.plan(run_spec(split=4))):
        text = json.dumps(dataclasses.asdict(plan), sort_keys=True, separators=(",", ":"))
        assert plan.digest == hashlib.sha256(text.encode()).hexdigest()[:16]


# ---- engine and worker -----------------------------------------------------------


def test_target_message_is_the_plan():
    run = run_spec(split=2)
    plan = REF.plan(run)
    assert REF.engine_message(plan, run, "target") is plan


def test_draft_message_never_splits():
    run = run_spec(DEEPSEEK_V3, split=2, draft=DEEPSEEK_MTP)
    plan = REF.plan(run)
    msg = REF.engine_message(plan, run, "draft")
    assert msg.model == "deepseek_v3_mtp"
    assert not msg.active and msg.split_size == 1 and msg.layer_owner == ()
    assert msg.split_groups == ((0,), (1,), (2,), (3,))
    assert msg.n_blocks == plan.n_blocks
    assert msg.num_layers == 1 and msg.full_layers == (0,)
    for rank in msg.ranks:
        assert rank.split_rank == 0 and rank.owned_full_layers == (0,)
        assert rank.estimated_bytes == plan.n_blocks * 128 * 1152
        assert REF.ownership_mask(msg, rank.rank) == (True,)
    assert msg.digest != plan.digest


def test_engine_message_bad_roles():
    run = run_spec(split=2)
    plan = REF.plan(run)
    with pytest.raises(ConfigError, match="role='verifier'"):
        REF.engine_message(plan, run, "verifier")
    with pytest.raises(ConfigError) as err:
        REF.engine_message(plan, run, "draft")
    assert err.value.field == "draft"


def test_check_message():
    run = run_spec(split=2)
    plan = REF.plan(run)
    REF.check_message(plan, plan.digest, 3)
    with pytest.raises(PlanError, match="digest"):
        REF.check_message(plan, "0" * 16, 0)
    with pytest.raises(PlanError, match="rank=4"):
        REF.check_message(plan, plan.digest, 4)
    with pytest.raises(PlanError, match="rank=4"):
        REF.ownership_mask(plan, 4)


def test_init_worker_rejects_before_allocating():
    run = run_spec(split=2)
    plan = REF.plan(run)
    other = REF.plan(run_spec(split=4))
    with pytest.raises(PlanError):
        REF.init_worker(other, run, rank=0, role="target", device="cpu", expected_digest=plan.digest)


def test_init_worker_allocates_its_mask():
    # A small budget keeps the CPU allocation tiny (torch.empty, a few MiB).
    run = run_spec(DEEPSEEK_V32, split=2, budget_bytes=8 * MiB, cache=CacheSpec(block_size=16))
    plan = REF.plan(run)
    cache = REF.init_worker(plan, run, rank=1, role="target", device="cpu", expected_digest=plan.digest)
    assert cache.rank == 1 and cache.split_rank == 1 and cache.n_blocks == plan.n_blocks
    owned = tuple(l.layer_id for l in cache.layers if l.owned)
    assert owned == tuple(range(1, 61, 2)) == plan.ranks[1].owned_full_layers


# ---- random hybrid models ---------------------------------------------------------


@st.composite
def hybrid_runs(draw):
    n_layers = draw(st.integers(1, 64))
    kinds = draw(st.lists(st.sampled_from(["full_attention", "linear_attention"]),
                          min_size=n_layers, max_size=n_layers))
    first_full = draw(st.integers(0, n_layers - 1))
    kinds[first_full] = "full_attention"
    model = replace(QWEN3_5_MOE, name="random", num_hidden_layers=n_layers, layer_types=tuple(kinds))
    tp = draw(st.sampled_from([2, 4, 8]))
    s = draw(st.sampled_from([d for d in (2, 4, 8) if d <= tp]))
    dp = draw(st.sampled_from([1, 2]))
    upstream = draw(st.booleans())
    return run_spec(model, world=tp * dp, dp=dp, split=s, budget_bytes=4 * GiB), upstream


@settings(max_examples=50, deadline=None)
@given(hybrid_runs())
def test_random_hybrid_plans(case):
    run, upstream = case
    plan = (OWNER_RULE if upstream else REF).plan(run)
    assert_coverage(plan)
    assert plan.n_blocks == independent_n_blocks(plan)
    owners = [len(plan.ranks[r].owned_full_layers) for r in plan.split_groups[0]]
    costs = [plan.ranks[r].estimated_bytes for r in range(plan.world_size)]
    # Minimal: one more block would overflow the costliest owning rank.
    worst = max(sum(plan.layer_bytes_per_block[l] for l in plan.ranks[r].owned_full_layers)
                for r in range(plan.world_size))
    assert (plan.n_blocks + 1) * (worst + plan.scratch_bytes_per_block) > plan.available_bytes
    assert max(costs) == plan.peak_bytes
    warned = any(note.startswith("the split raises the peak") for note in plan.notes)
    assert warned == (plan.peak_bytes > plan.uniform_peak_bytes)
    if not upstream:
        assert max(owners) - min(owners) <= 1
        # Every full layer costs the same here, so the split saves memory exactly when the
        # busiest owner's ceil(F / s) layers plus the scratch are fewer than all F layers.
        n_full, s = len(plan.full_layers), plan.split_size
        assert (plan.peak_bytes <= plan.uniform_peak_bytes) == (-(-n_full // s) + 1 <= n_full)


def test_plan_json_carries_the_capacity_figures():
    # Upstream KVCacheCapacity's figures beside the plan's keys (and what the engine log prints).
    out = REF.plan(run_spec(QWEN3_5_MOE, split=2)).to_json()
    figures = {k: out[k] for k in ("slot_size", "index_slot_size", "scale_slot_size", "linear_slot_size",
                                   "num_full_attention_layers", "num_linear_attention_layers",
                                   "num_linear_state_blocks", "linear_cache_bytes")}
    assert figures == {"slot_size": 1024, "index_slot_size": 0, "scale_slot_size": 0, "linear_slot_size": 274_432,
                       "num_full_attention_layers": 10, "num_linear_attention_layers": 30,
                       "num_linear_state_blocks": 988, "linear_cache_bytes": 30 * 988 * 274_432}
    assert out["linear_cache_bytes"] == out["linear_state_bytes"]
    dsa = REF.plan(run_spec(DEEPSEEK_V32, split=2)).to_json()
    assert (dsa["slot_size"], dsa["index_slot_size"], dsa["num_indexer_layers"]) == (1152, 256, 61)
