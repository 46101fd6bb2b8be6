"""Rank arithmetic, full-layer detection and the owner rules (FEATURE section 4), plain integers."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contract.errors import PlanError
from contract.specs import ParallelSpec
from implementations.reference import ReferenceImplementation, layers, layout
from implementations.upstream_owner_rule import UpstreamOwnerRuleImplementation
from testcases.unit._models import DEEPSEEK_V3, DEEPSEEK_V32, GLM_5, QWEN3_5_MOE, QWEN3_NEXT

pytestmark = pytest.mark.unit
REF = ReferenceImplementation()
UPSTREAM = UpstreamOwnerRuleImplementation()
QWEN35_FULL = (3, 7, 11, 15, 19, 23, 27, 31, 35, 39)  # FEATURE section 4


# ---- ranks and groups -------------------------------------------------------------


def test_rank_coords_match_layout_formula():
    parallel = ParallelSpec(world_size=16, dp_size=2, cp_size=2)
    tp = 4
    seen = set()
    for rank in range(16):
        dp_rank, cp_rank, tp_rank = layout.rank_coords(rank, parallel, tp)
        assert dp_rank * (2 * tp) + cp_rank * tp + tp_rank == rank
        assert 0 <= dp_rank < 2 and 0 <= cp_rank < 2 and 0 <= tp_rank < tp
        seen.add((dp_rank, cp_rank, tp_rank))
    assert len(seen) == 16


def test_tp_groups_dp2():
    groups = layout.tp_groups(ParallelSpec(world_size=8, dp_size=2), 4)
    assert groups == ((0, 1, 2, 3), (4, 5, 6, 7))


def test_tp_groups_cp2():
    groups = layout.tp_groups(ParallelSpec(world_size=8, cp_size=2), 4)
    assert groups == ((0, 1, 2, 3), (4, 5, 6, 7))


@pytest.mark.parametrize(
    "tp_group, s, expected",
    [
        ((4, 5, 6, 7), 2, ((4, 5), (6, 7))),
        ((0, 1, 2, 3), 4, ((0, 1, 2, 3),)),
        ((0, 1, 2, 3), 1, ((0,), (1,), (2,), (3,))),
    ],
)
def test_consecutive_split_groups(tp_group, s, expected):
    assert layout.consecutive_split_groups(tp_group, s) == expected


def test_split_positions():
    positions = layout.split_positions(((0, 1), (2, 3)))
    assert positions == {0: (0, 0), 1: (0, 1), 2: (1, 0), 3: (1, 1)}


# ---- which layers are full attention ----------------------------------------------


def test_qwen35_full_layers_every_fourth():
    assert layers.full_layers(QWEN3_5_MOE) == QWEN35_FULL
    assert len(layers.linear_layers(QWEN3_5_MOE)) == 30
    assert layers.full_layers(QWEN3_NEXT) == tuple(range(3, 48, 4))


def test_all_full_models():
    assert layers.full_layers(DEEPSEEK_V3) == tuple(range(61))
    assert layers.full_layers(GLM_5) == tuple(range(78))
    assert layers.indexer_layers(DEEPSEEK_V32) == tuple(range(61))
    assert layers.indexer_layers(DEEPSEEK_V3) == ()


@pytest.mark.parametrize("interval, expected", [(0, (0, 1, 2, 3, 4, 5)), (1, (0, 1, 2, 3, 4, 5)),
                                                 (2, (1, 3, 5)), (3, (2, 5)), (7, ())])
def test_interval_rule(interval, expected):
    model = replace(QWEN3_5_MOE, num_hidden_layers=6, full_attention_interval=interval)
    assert layers.full_layers(model) == expected


def test_layer_types_kinds():
    kinds = ("attention", "linear_attention", "indexed_attention", "full_attention", "linear_attention")
    model = replace(QWEN3_5_MOE, num_hidden_layers=5, layer_types=kinds, full_attention_interval=1)
    # Upstream's rule (FEATURE 4): full_attention / attention are full, every other value linear.
    assert layers.full_layers(model) == (0, 3)
    other = replace(model, layer_types=kinds[:4] + ("mamba",))
    assert layers.linear_layers(other) == (1, 2, 4)


# ---- owner rules ------------------------------------------------------------------


@pytest.mark.parametrize("s, counts", [(2, (5, 5)), (4, (3, 3, 2, 2))])
def test_reference_balances_qwen35(s, counts):
    owners = REF.assign_owners(QWEN35_FULL, s)
    tally = Counter(owner for _, owner in owners)
    assert tuple(tally[r] for r in range(s)) == counts
    assert [layer for layer, _ in owners] == list(QWEN35_FULL)
    assert [owner for _, owner in owners] == [k % s for k in range(10)]


@pytest.mark.parametrize("s, owner", [(2, 1), (4, 3)])
def test_upstream_rule_piles_qwen35_on_one_rank(s, owner):
    # FEATURE section 4: all full layers are odd, 3 mod 4, so one split rank owns all ten.
    owners = UPSTREAM.assign_owners(QWEN35_FULL, s)
    assert {o for _, o in owners} == {owner}


@pytest.mark.parametrize("s", [2, 4])
def test_rules_agree_on_all_full_models(s):
    full = layers.full_layers(DEEPSEEK_V32)
    assert REF.assign_owners(full, s) == UPSTREAM.assign_owners(full, s)


def test_owned_layers():
    owners = ((3, 0), (7, 1), (11, 0))
    assert layout.owned_layers(owners, 0) == (3, 11)
    assert layout.owned_layers(owners, 1) == (7,)
    assert layout.owned_layers(owners, 2) == ()


@pytest.mark.parametrize(
    "owners",
    [((3, 0), (7, 0)), ((3, 0), (3, 1), (7, 1), (11, 0)), ((3, 0), (7, 1), (11, 2))],
    ids=["missing", "twice", "bad-rank"],
)
def test_check_coverage_rejects(owners):
    with pytest.raises(PlanError):
        layout.check_coverage(owners, (3, 7, 11), 2)


def test_check_coverage_accepts_reference():
    layout.check_coverage(REF.assign_owners(QWEN35_FULL, 4), QWEN35_FULL, 4)


@settings(max_examples=50, deadline=None)
@given(
    full=st.lists(st.integers(0, 500), min_size=1, max_size=120, unique=True).map(lambda l: tuple(sorted(l))),
    s=st.integers(1, 8),
)
def test_round_robin_covers_once_and_balances(full, s):
    owners = REF.assign_owners(full, s)
    layout.check_coverage(owners, full, s)  # each full layer once, owner in range
    counts = [len(layout.owned_layers(owners, r)) for r in range(s)]
    assert sum(counts) == len(full)
    assert max(counts) - min(counts) <= 1
