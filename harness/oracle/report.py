"""FEATURE section 6: the report per rank (peak, mean, uniform peak, savings), and what section 4's
cards forbid outright."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from harness.oracle.capacity import expected_block_counts, expected_draft_rank_bytes, expected_rank_bytes
from harness.oracle.inputs import SPEC_OWNER_RULE, attn_tp_size, run_budget_bytes, split_size
from harness.oracle.layers import expected_full_layers, expected_indexer
from harness.oracle.layout import (
    _owned_by_rank,
    _owned_full_layers,
    expected_owner,
    expected_rank_locations,
    expected_rank_owned_layers,
    expected_ranks_per_card,
    expected_split_group_tuples,
)
from harness.oracle.memo import per_run, per_run_any_reserve
from harness.oracle.slots import (
    expected_full_bytes_per_block,
    expected_layer_bytes_per_block,
    expected_linear_state_bytes,
    expected_linear_state_bytes_per_slot,
    expected_linear_state_slots,
    expected_scratch_bytes_per_block,
    index_slot_bytes,
    kv_slot_bytes,
    scale_slot_bytes,
)

# ---- sections 4-7: a plan's layout fields -------------------------------------------------------

PLAN_FIELDS = ("model", "world_size", "dp_size", "cp_size", "attn_tp_size", "split_size", "active", "block_size",
               "kv_layout", "num_layers", "full_layers", "budget_bytes", "slot_size", "index_slot_size",
               "scale_slot_size", "num_indexer_layers", "linear_slot_size", "num_linear_state_blocks",
               "available_bytes", "layer_owner")
"""The plan's fields whose values ``expected_plan_fields`` gives, in that order."""


@per_run
def expected_plan_fields(run) -> tuple:
    """Sections 4-7: the spec's value of every layout field of a plan (``PLAN_FIELDS``, in order): the run's shape
    (world, dp, cp, attention TP, split size, active, block size, the profile's KV layout), the model's layers
    (``full_layers`` a tuple), the budget, the slot sizes of section 5, the linear state's blocks, the bytes
    available after it (budget - linear state) and the owner of each full layer ({} without an active split).
    One table per configuration, where a check asked some fifteen functions (each through its memo); the split
    groups and every rank's row are ``expected_split_groups`` and ``expected_rank_rows``. Shared: read it,
    never change it."""
    p, model, cache = run.parallel, run.model, run.cache
    tp, s = attn_tp_size(run), split_size(run)
    full = tuple(expected_full_layers(model))
    budget = run_budget_bytes(run)
    linear = expected_linear_state_bytes(model, cache, tp, budget)
    return (model.name, p.world_size, p.dp_size, p.cp_size, tp, s, s > 1, cache.block_size, run.hardware.kv_layout,
            model.num_hidden_layers, full, budget, kv_slot_bytes(model, cache, tp), index_slot_bytes(model, cache),
            scale_slot_bytes(model, cache, tp), len(full) if expected_indexer(model) else 0,
            expected_linear_state_bytes_per_slot(model, cache, tp), expected_linear_state_slots(model, cache, tp, budget),
            budget - linear, expected_owner(full, s) if s > 1 else {})


# ---- section 6: report per rank --------------------------------------------------------------


@dataclass(frozen=True)
class Report:
    """Section 6 "Report per rank" at one budget."""

    n_blocks: int
    uniform_n_blocks: int
    rank_bytes: tuple
    """Target KV of each global rank (owned + scratch when split, + linear state)."""
    draft_rank_bytes: int
    """The draft's KV on every rank (0 without a draft)."""
    peak_bytes: int
    mean_bytes: int
    uniform_peak_bytes: int
    """Every rank allocating every full layer at the same n_blocks, + linear state."""
    savings_bytes: int
    capacity_gain: Optional[float]
    """n_blocks / uniform_n_blocks at the same budget; None (JSON null, "n/a" in tables) when the budget
    holds a split block but no uniform one (version 2.2: never infinity or 0)."""
    linear_state_bytes: int = 0
    budget_bytes: int = 0
    rank_owned_layers: tuple = field(default_factory=tuple)


def expected_report(run, budget_bytes: Optional[int] = None, *, owner_rule: str = SPEC_OWNER_RULE,
                    rule: str = "topology") -> Report:
    """Section 6: per-rank estimates, peak, mean, uniform peak, savings and capacity gain."""
    return _report(run, run_budget_bytes(run) if budget_bytes is None else budget_bytes, owner_rule, rule)


@per_run_any_reserve
def _report(run, budget: int, owner_rule: str, rule: str) -> Report:
    """``expected_report`` with every argument given (one answer per configuration however it is asked)."""
    tp = attn_tp_size(run)
    n_blocks, uniform = expected_block_counts(run, budget, owner_rule=owner_rule)
    linear = expected_linear_state_bytes(run.model, run.cache, tp, budget)
    owned = _every_rank_owned_layers(run, owner_rule, rule)
    by_layers: dict = {}  # id -> bytes: one memo lookup per distinct owned tuple (a split rank's, shared), not per rank
    for layers in owned:
        if id(layers) not in by_layers:
            by_layers[id(layers)] = expected_rank_bytes(run, n_blocks, layers, budget_bytes=budget)
    ranks = tuple(by_layers[id(layers)] for layers in owned)
    peak = max(ranks)
    uniform_peak = n_blocks * expected_full_bytes_per_block(run.model, run.cache, tp) + linear
    return Report(
        n_blocks=n_blocks, uniform_n_blocks=uniform, rank_bytes=ranks,
        draft_rank_bytes=expected_draft_rank_bytes(run, n_blocks) if getattr(run, "draft", None) is not None else 0,
        peak_bytes=peak, mean_bytes=sum(ranks) // len(ranks), uniform_peak_bytes=uniform_peak,
        savings_bytes=uniform_peak - peak, capacity_gain=expected_capacity_gain(n_blocks, uniform),
        linear_state_bytes=linear, budget_bytes=budget, rank_owned_layers=owned,
    )


def _every_rank_owned_layers(run, owner_rule: str, rule: str) -> tuple:
    """``expected_rank_owned_layers`` of every global rank, in rank order, read from the one table per configuration
    (``_owned_by_rank``) where the report asked rank by rank (two memo lookups each)."""
    world = run.parallel.world_size
    if split_size(run) == 1:
        return (expected_full_layers(run.model),) * world
    table = _owned_by_rank(run, owner_rule, rule)
    try:
        return tuple(table[r] for r in range(world))
    except (KeyError, TypeError):  # no grouping (None), or a rank without a position: asked rank by rank, it raises why
        return tuple(expected_rank_owned_layers(run, r, owner_rule=owner_rule, rule=rule) for r in range(world))


def expected_capacity_gain(n_blocks: int, uniform_n_blocks: int) -> Optional[float]:
    """Section 6: split n_blocks / uniform n_blocks at the same budget; undefined (None) when the uniform
    allocation fits no block, and the plan then carries a note saying so (``GAIN_UNDEFINED_NOTE``)."""
    return n_blocks / uniform_n_blocks if uniform_n_blocks > 0 else None


GAIN_UNDEFINED_NOTE = "the uniform allocation fits no block"
"""Section 6: what a plan's note says when its capacity gain is undefined (null)."""
RAISES_PEAK_NOTE = "the split raises the peak"
"""Section 6: the note of a plan whose split cannot lower the peak (``expected_split_raises_peak``)."""


def expected_split_raises_peak(run) -> bool:
    """Section 6: the split lowers the peak only where the largest owner's bytes plus the scratch do not
    exceed all full layers' bytes (per block; the draft's D and the linear state are the same on both
    sides). False when the split is not active."""
    s = split_size(run)
    if s == 1:
        return False
    tp = attn_tp_size(run)
    full = expected_full_layers(run.model)
    per_layer = expected_layer_bytes_per_block(run.model, run.cache, tp)
    owner = expected_owner(full, s)
    owned = [0] * s  # each split rank's bytes, summed in one pass over the layers (not one pass per rank)
    for layer in full:
        owned[owner[layer]] += per_layer[layer]
    largest = max(owned)
    return largest + expected_scratch_bytes_per_block(run.model, run.cache, tp) > sum(per_layer[l] for l in full)


def expected_notes(run, budget_bytes: Optional[int] = None) -> tuple:
    """Section 6: the notes a plan must carry (``RAISES_PEAK_NOTE``, ``GAIN_UNDEFINED_NOTE``), in that order."""
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    notes = [RAISES_PEAK_NOTE] if expected_split_raises_peak(run) else []
    n_blocks, uniform = expected_block_counts(run, budget)
    if split_size(run) > 1 and uniform == 0 and n_blocks >= 1:
        notes.append(GAIN_UNDEFINED_NOTE)
    return tuple(notes)


def expected_ranks_over_uniform_peak(run, budget_bytes: Optional[int] = None, *,
                                     owner_rule: str = SPEC_OWNER_RULE, rule: str = "topology") -> list:
    """Section 4: [(rank, bytes above the uniform peak)] for every rank whose estimate exceeds
    the uniform allocation at the same n_blocks (what upstream's ``layer_id % s`` does to a
    hybrid model: the predicted problem an expected failure names). Empty when none does."""
    report = expected_report(run, budget_bytes, owner_rule=owner_rule, rule=rule)
    return [(rank, b - report.uniform_peak_bytes) for rank, b in enumerate(report.rank_bytes)
            if b > report.uniform_peak_bytes]


def expected_card_bytes(run, budget_bytes: Optional[int] = None, *, owner_rule: str = SPEC_OWNER_RULE) -> dict:
    """Section 4: (node, card) -> planned bytes of every rank placed on it (target + draft),
    to compare with the card's HBM (no card may be oversubscribed). Shared: read it, never change it."""
    return _card_bytes(run, run_budget_bytes(run) if budget_bytes is None else budget_bytes, owner_rule)


@per_run_any_reserve  # (no rank's bytes read the reserve: the explorer's fitted reserve and the card check share it)
def _card_bytes(run, budget: int, owner_rule: str) -> dict:
    """``expected_card_bytes`` with every argument given, once per configuration."""
    report = expected_report(run, budget, owner_rule=owner_rule)
    out = {}
    for where, b in zip(expected_rank_locations(run), report.rank_bytes):
        out[where] = out.get(where, 0) + b + report.draft_rank_bytes
    return out


@per_run
def spec_refuses_cards(run) -> Optional[str]:
    """Section 4: why the spec forbids this placement outright, from its own numbers; None if it does not.

    A lower bound per rank (the smallest split rank's bytes at the spec's block count)
    is enough: if even that overfills a card's HBM with its reserve, no plan can fit.
    """
    s = split_size(run)
    if s > 1 and expected_split_group_tuples(run) is None:
        return "no split grouping keeps each TP group's split groups on distinct cards"
    hw = run.hardware
    n_blocks, _ = expected_block_counts(run, run_budget_bytes(run))
    full = expected_full_layers(run.model)
    # each split rank's layers from the shared tuples of _owned_full_layers (the round robin of expected_owner)
    least = min(expected_rank_bytes(run, n_blocks, _owned_full_layers(full, s, SPEC_OWNER_RULE, r)) for r in range(s))
    for card, count in sorted(expected_ranks_per_card(run).items()):
        if count * (least + hw.reserved_bytes_per_card) > hw.hbm_bytes_per_card:
            return (f"node {card[0]} card {card[1]} holds {count} ranks: at least {count} x ({least} B KV + "
                    f"{hw.reserved_bytes_per_card} B reserved) > HBM {hw.hbm_bytes_per_card} B")
    return None
