"""Rank and group arithmetic, and who owns each full-attention layer (FEATURE section 4).

Pure integers, no process groups. Ranks are laid out
``dp_rank * (cp * tp) + cp_rank * tp + tp_rank``.
"""

from __future__ import annotations

import itertools

from contract.errors import PlanError
from contract.specs import ParallelSpec


def rank_coords(rank: int, parallel: ParallelSpec, attn_tp_size: int) -> tuple[int, int, int]:
    """(dp_rank, cp_rank, tp_rank) of a global rank."""
    tp = attn_tp_size
    return rank // (parallel.cp_size * tp), (rank // tp) % parallel.cp_size, rank % tp


def tp_groups(parallel: ParallelSpec, attn_tp_size: int) -> tuple[tuple[int, ...], ...]:
    """Global ranks of each attention TP group, ordered by (dp_rank, cp_rank)."""
    tp = attn_tp_size
    return tuple(
        tuple(range(first, first + tp)) for first in range(0, parallel.world_size, tp)
    )


def consecutive_split_groups(tp_group: tuple[int, ...], split_size: int) -> tuple[tuple[int, ...], ...]:
    """Upstream ``get_layerwise_split_group``: consecutive runs of ``split_size`` ranks."""
    return tuple(tuple(tp_group[i:i + split_size]) for i in range(0, len(tp_group), split_size))


def round_robin_owners(full_layers: tuple[int, ...], split_size: int) -> tuple[tuple[int, int], ...]:
    """The reference rule: the k-th full-attention layer is owned by split rank k % s."""
    if type(split_size) is int and split_size >= 1:  # k % s for k = 0, 1, ... paired in C, not a tuple per layer
        return tuple(zip(full_layers, itertools.cycle(range(split_size))))
    return tuple((layer_id, k % split_size) for k, layer_id in enumerate(full_layers))


def layer_id_owners(full_layers: tuple[int, ...], split_size: int) -> tuple[tuple[int, int], ...]:
    """Upstream xLLM's literal rule ``owner = layer_id % s`` (unbalanced on hybrid models)."""
    return tuple((layer_id, layer_id % split_size) for layer_id in full_layers)


def owned_layers(layer_owner: tuple[tuple[int, int], ...], split_rank: int) -> tuple[int, ...]:
    """Full layers a split rank owns, ascending."""
    return tuple(sorted(layer_id for layer_id, owner in layer_owner if owner == split_rank))


def owned_by_split_rank(layer_owner: tuple[tuple[int, int], ...], split_size: int) -> dict[int, tuple[int, ...]]:
    """Split rank -> ``owned_layers`` of it, for every split rank 0..s-1, in one pass over the owners."""
    owned: dict[int, list[int]] = {r: [] for r in range(split_size)}
    for layer_id, owner in layer_owner:
        if owner in owned:
            owned[owner].append(layer_id)
    return {r: tuple(sorted(layers)) for r, layers in owned.items()}


def split_positions(split_groups: tuple[tuple[int, ...], ...]) -> dict[int, tuple[int, int]]:
    """rank -> (index of its split group, its split rank)."""
    return {rank: (g, pos) for g, group in enumerate(split_groups) for pos, rank in enumerate(group)}


def check_coverage(layer_owner: tuple[tuple[int, int], ...], full_layers: tuple[int, ...],
                   split_size: int) -> None:
    """Inside a split group every full layer has exactly one owner, a valid split rank."""
    ids = [layer_id for layer_id, _ in layer_owner]
    if sorted(ids) != sorted(full_layers) or len(set(ids)) != len(ids):
        raise PlanError("layer_owner", ids, f"each full-attention layer {list(full_layers)} exactly once")
    bad = [(layer_id, owner) for layer_id, owner in layer_owner if not 0 <= owner < split_size]
    if bad:
        raise PlanError("layer_owner", bad, f"owner split ranks in 0..{split_size - 1}")
