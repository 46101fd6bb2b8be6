"""Block counts and per-rank memory estimate (FEATURE section 6). Plain integers in, integers out.

``*_bytes_per_block`` is what one KV block costs across the layers named;
``available_bytes`` is the per-rank KV budget after the linear-state reservation.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

from contract.errors import PlanError

LINEAR_STATE_PADDING_SLOTS = 2
"""Upstream ``kPaddingLinearStateBlocks``: linear-state slots always reserved."""
LINEAR_STATE_FULL_KV_MEMORY_RATIO = 0.9
"""Upstream ``kLinearStateFullKvMemoryRatio``: with prefix cache, linear state gets 0.9 / 1.9 of C."""


def max_linear_state_slots(budget_bytes: int, linear_bytes_per_slot: int, full_bytes_per_block: int) -> int:
    """Upstream ``max_linear_state_blocks``: the most linear-state slots the budget allows.

    ``linear_bytes_per_slot`` is L * ls (all linear layers), ``full_bytes_per_block``
    the uniform F: cap = max(2, min((C - 1) // (L*ls), (C + 2F) // (L*ls + F))).
    """
    pad = LINEAR_STATE_PADDING_SLOTS
    if linear_bytes_per_slot <= 0:
        return pad
    by_budget = (budget_bytes - 1) // linear_bytes_per_slot
    balanced = (budget_bytes + pad * full_bytes_per_block) // (linear_bytes_per_slot + full_bytes_per_block)
    return max(min(by_budget, balanced), pad)


def linear_state_slots(*, budget_bytes: int, num_linear_layers: int, linear_slot_bytes: int,
                       full_bytes_per_block: int, max_seqs_per_batch: int,
                       max_linear_state_cache_slots: int, enable_prefix_cache: bool) -> int:
    """Upstream ``calculate_linear_state_blocks`` (FEATURE section 5): slots per linear layer."""
    pad = LINEAR_STATE_PADDING_SLOTS
    if num_linear_layers <= 0 or linear_slot_bytes <= 0:
        return pad
    per_slot = num_linear_layers * linear_slot_bytes
    cap = max_linear_state_slots(budget_bytes, per_slot, full_bytes_per_block)
    if max_linear_state_cache_slots > 0:
        requested = max_linear_state_cache_slots + pad
        if requested > cap:
            raise PlanError(
                "cache.max_linear_state_cache_slots", max_linear_state_cache_slots,
                f"at most {cap - pad} (the linear-state slots the budget holds, less {pad} padding)",
                f"{max_linear_state_cache_slots} + {pad} = {requested} slots > cap {cap} = max({pad}, "
                f"min(({budget_bytes} - 1) // {per_slot}, ({budget_bytes} + {pad} * {full_bytes_per_block}) "
                f"// ({per_slot} + {full_bytes_per_block})))",
            )
        return requested
    if not enable_prefix_cache:
        return max(min(max_seqs_per_batch + pad, cap), pad)
    fraction = LINEAR_STATE_FULL_KV_MEMORY_RATIO / (1.0 + LINEAR_STATE_FULL_KV_MEMORY_RATIO)
    auto = max(int(float(budget_bytes) * fraction / per_slot), pad)  # upstream's double arithmetic
    return min(auto, cap)


def check_linear_reservation(*, budget_bytes: int, linear_state_bytes: int, linear_bytes_per_slot: int,
                             max_seqs_per_batch: int) -> None:
    """Upstream CHECK: the linear-state reservation leaves room for full-attention KV."""
    if linear_state_bytes <= 0 or budget_bytes > linear_state_bytes:
        return
    most = budget_bytes // linear_bytes_per_slot - LINEAR_STATE_PADDING_SLOTS
    allowed = (f"less than {most}" if most > 0 else
               f"any value: the budget holds fewer than {LINEAR_STATE_PADDING_SLOTS} linear-state slots; "
               "raise cache.kv_budget_bytes or lower hardware.reserved_bytes_per_card")
    raise PlanError(
        "cache.max_seqs_per_batch", max_seqs_per_batch, allowed,
        f"linear state {linear_state_bytes} B >= per-rank KV budget {budget_bytes} B "
        f"({linear_bytes_per_slot} B per slot over all linear layers)",
    )


def full_bytes_per_block(*, block_size: int, num_full_layers: int, slot_bytes: int, scale_slot_bytes: int,
                         num_indexer_layers: int, index_slot_bytes: int) -> int:
    """Upstream ``standard_full_cache_block_size_in_bytes``: the uniform F of all full layers."""
    return block_size * (max(num_full_layers, 1) * (slot_bytes + scale_slot_bytes)
                         + num_indexer_layers * index_slot_bytes)


def uniform_bytes_per_block(layer_bytes_per_block: Sequence[int], additional_bytes_per_block: int = 0) -> int:
    """Uniform allocation: every rank holds every full layer (plus the draft's, if any)."""
    return sum(layer_bytes_per_block) + additional_bytes_per_block


def owner_costs(
    layer_bytes_per_block: Sequence[int],
    layer_owner: Iterable[tuple[int, int]],
    *,
    scratch_bytes_per_block: int,
    additional_bytes_per_block: int = 0,
) -> dict[int, int]:
    """Split: bytes per block of each split rank that owns at least one full layer.

    cost(r) = owned layers + one scratch layer + the draft's ``additional``.
    """
    owned: dict[int, int] = {}
    for layer_id, owner in layer_owner:
        owned[owner] = owned.get(owner, 0) + layer_bytes_per_block[layer_id]
    extra = scratch_bytes_per_block + additional_bytes_per_block
    return {r: b + extra for r, b in sorted(owned.items())}


def block_count(available_bytes: int, costs_per_block: Iterable[int]) -> int:
    """The common block count: min over ranks of available // cost (0 if nothing fits)."""
    costs = list(costs_per_block)
    if not costs:
        raise PlanError("layerwise.split_size", "no split rank owns a full-attention layer",
                        "1 for a model without full-attention layers (upstream: No layerwise split rank owns a "
                        "model layer.)")
    if min(costs) <= 0:
        raise PlanError("model", f"{min(costs)} KV bytes per block",
                        "at least one full-attention layer holding KV (bytes per block > 0)")
    return max(0, min(available_bytes // c for c in costs))


def require_blocks(n_blocks: int, *, budget_bytes: int, linear_state_bytes: int, bytes_per_block: int) -> None:
    """PlanError unless at least one block fits, naming the budget and what one block needs."""
    if n_blocks >= 1:
        return
    available = budget_bytes - linear_state_bytes
    raise PlanError(
        "hardware.reserved_bytes_per_card",
        f"per-rank KV budget {budget_bytes} B",
        f"a budget holding one block: linear state {linear_state_bytes} B "
        f"+ {bytes_per_block} B per block > budget",
        f"available {available} B after the linear-state reservation; lower "
        "hardware.reserved_bytes_per_card, cache.block_size or cache.max_seqs_per_batch",
    )


def rank_bytes(n_blocks: int, owned_bytes_per_block: int, scratch_bytes_per_block: int,
               linear_state_bytes: int) -> int:
    """What one rank allocates for the target: n_blocks * (owned + scratch) + linear state."""
    return n_blocks * (owned_bytes_per_block + scratch_bytes_per_block) + linear_state_bytes


def owned_bytes_per_block(layer_bytes_per_block: Sequence[int], owned_full_layers: Iterable[int]) -> int:
    return sum(map(layer_bytes_per_block.__getitem__, owned_full_layers))  # (each owned layer's, summed in C)


def peak_bytes(per_rank_bytes: Mapping[int, int]) -> int:
    return max(per_rank_bytes.values())


def mean_bytes(per_rank_bytes: Mapping[int, int]) -> int:
    """Mean over ranks, rounded down to a whole byte."""
    return sum(per_rank_bytes.values()) // len(per_rank_bytes)


RAISES_PEAK_NOTE = "the split raises the peak"
"""FEATURE 6: the note of a plan whose busiest owner plus the scratch outweigh all full layers."""
GAIN_UNDEFINED_NOTE = "the uniform allocation fits no block"
"""FEATURE 6: the note of a plan whose capacity gain is undefined (null)."""


def capacity_gain(n_blocks: int, uniform_n_blocks: int) -> Optional[float]:
    """Split blocks / uniform blocks at the same budget; None (undefined: JSON null, never inf or 0)
    when the uniform allocation fits no block (FEATURE 6)."""
    return n_blocks / uniform_n_blocks if uniform_n_blocks > 0 else None

