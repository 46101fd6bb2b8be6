"""ILU topology mapping: link matrices, rank placement, topology-aware split groups.

Link matrices are parsed by the neutral ``implementations.formats`` (``nvidia-smi
topo -m`` / ``ixsmi topo -m`` text or YAML, into a ``specs.Topology``). This module
places ranks on (node, card), and cuts each attention TP group into split groups that
maximise the worst link inside a group, ties keeping upstream's consecutive
groups (FEATURE section 4). Pure Python: no torch, no process groups.
"""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Sequence

from implementations.errors import ConfigError, PlanError, TopologyError
from implementations.formats import (  # noqa: F401  (the shared topology text parsing)
    _NV_BASE_SCORE,
    _NV_RE,
    _PCIE_SCORES,
    _SELF_SCORE,
    ALLOWED_CODES,
    FIELD,
    LINK_CODES,
    TOPOLOGY_SUFFIXES,
    _is_code,
    available_topologies,
    flat_topology,
    load_topology,
    parse_topo_text,
)
from implementations.specs import RunSpec, Topology

EXACT_SEARCH_MAX_RANKS = 8
"""Largest TP group searched exhaustively when the link matrix is not a tree."""


def link_score(code: str) -> int:
    """Rank of a link code: higher is better (X > NV12 > NV4 > PIX > ... > SYS > NET)."""
    if code == "X":
        return _SELF_SCORE
    if code in _PCIE_SCORES:
        return _PCIE_SCORES[code]
    match = _NV_RE.fullmatch(code) if isinstance(code, str) else None
    if match:
        return _NV_BASE_SCORE + int(match.group(1))
    raise TopologyError(FIELD, code, ALLOWED_CODES)


# ---------------------------------------------------------------- placement


def place_ranks(run: RunSpec) -> tuple[tuple[int, int], ...]:
    """(node, card) of every global rank: node = rank // num_cards, card from placement."""
    hw = run.hardware
    num_cards, topo = hw.num_cards, hw.topology
    if num_cards != len(topo.cards) or num_cards < 1:
        raise TopologyError(
            "hardware.num_cards", num_cards,
            f"must equal the number of cards in topology {topo.name!r} ({len(topo.cards)}: "
            f"{' '.join(topo.cards) or 'none'}) and be >= 1",
        )
    world = run.parallel.world_size
    if run.placement is None:
        cards = [rank % num_cards for rank in range(world)]
    else:
        cards = list(run.placement)
        if len(cards) != world:
            raise TopologyError(
                "placement", run.placement,
                f"needs one card index per rank: {world} entries (parallel.world_size)",
                f"got {len(cards)}",
            )
        for rank, card in enumerate(cards):
            if isinstance(card, bool) or not isinstance(card, int) or not 0 <= card < num_cards:
                raise TopologyError(
                    "placement", run.placement,
                    f"card indices must be integers in 0..{num_cards - 1} (hardware.num_cards={num_cards})",
                    f"rank {rank} -> card {card!r}",
                )
    return tuple((rank // num_cards, card) for rank, card in enumerate(cards))


def link(topology: Topology, placement: Sequence[tuple[int, int]], rank_a: int, rank_b: int) -> str:
    """Link code between two ranks: the topology cell on one node, NET across nodes."""
    (node_a, card_a), (node_b, card_b) = placement[rank_a], placement[rank_b]
    if node_a != node_b:
        return "NET"
    return topology.links[card_a][card_b]


def worst_link(group: Sequence[int], placement: Sequence[tuple[int, int]], topology: Topology) -> str:
    """Worst link inside one group (X for a one-rank group)."""
    codes = [link(topology, placement, a, b) for a, b in itertools.combinations(group, 2)]
    return min(codes, key=link_score, default="X")


# ---------------------------------------------------------------- split groups


def form_split_groups(
    tp_group: tuple[int, ...],
    split_size: int,
    placement: Sequence[tuple[int, int]],
    topology: Topology,
) -> tuple[tuple[int, ...], ...]:
    """Cut one attention TP group into groups of ``split_size`` with the best worst link.

    Upstream's consecutive groups are returned unchanged when they are already
    optimal and put no two ranks on one card; otherwise the groups are rank-sorted
    inside and ordered by their first rank.
    """
    n, s = len(tp_group), split_size
    if isinstance(s, bool) or not isinstance(s, int) or s < 1 or n % s:
        raise ConfigError("layerwise.split_size", s, f"must be >= 1 and divide the attention TP size {n}")
    consecutive = tuple(tuple(tp_group[i:i + s]) for i in range(0, n, s))
    if s == 1:
        return consecutive
    where = [placement[rank] for rank in tp_group]
    _require_distinct_cards_possible(tp_group, where, s)
    scores = [[link_score(link(topology, placement, a, b)) for b in tp_group] for a in tp_group]
    consecutive_idx = [list(range(i, i + s)) for i in range(0, n, s)]
    incumbent = _bottleneck(consecutive_idx, scores) if _distinct_cards(consecutive_idx, where) else 0

    by_levels = _best_on_tree(scores, where, s)
    if by_levels is not None:
        level, groups = by_levels
        if incumbent >= level:
            return consecutive
    elif n <= EXACT_SEARCH_MAX_RANKS:
        groups = _exact_search(scores, where, s, incumbent)
        if groups is None:
            return consecutive
    elif incumbent:
        return consecutive
    else:  # large non-tree matrix and consecutive shares a card: any valid grouping
        groups = _chunk(list(range(n)), where, s)
    ranked = [tuple(sorted(tp_group[i] for i in group)) for group in groups]
    return tuple(sorted(ranked))


def _require_distinct_cards_possible(tp_group, where, s: int) -> None:
    # A valid grouping exists iff no card holds more ranks than there are groups.
    (card, count), = Counter(where).most_common(1)
    if count > len(tp_group) // s:
        ranks = [r for r, w in zip(tp_group, where) if w == card]
        raise TopologyError(
            "placement", tuple(tp_group),
            f"no card may hold two ranks of one split group (NCCL refuses duplicate devices); "
            f"with split size {s} a card may hold at most {len(tp_group) // s} ranks of this TP group",
            f"node {card[0]} card {card[1]} holds ranks {ranks}",
        )


def _distinct_cards(groups, where) -> bool:
    return all(len({where[i] for i in group}) == len(group) for group in groups)


def _bottleneck(groups, scores) -> int:
    return min(scores[a][b] for group in groups for a, b in itertools.combinations(group, 2))


def _best_on_tree(scores, where, s: int):
    """Optimal (level, groups) when "link >= level" is an equivalence at each level tried.

    That holds for PCIe trees (ultrametric matrices). Returns None as soon as a
    level's relation is not an equivalence, so the caller searches instead.
    """
    n = len(scores)
    levels = sorted({scores[a][b] for a, b in itertools.combinations(range(n), 2) if where[a] != where[b]},
                    reverse=True)
    for level in levels:
        buckets: list[list[int]] = []
        for i in range(n):
            home = next((b for b in buckets if scores[i][b[0]] >= level), None)
            if home is None:
                buckets.append([i])
            else:
                home.append(i)
        label = {i: k for k, bucket in enumerate(buckets) for i in bucket}
        if any((scores[a][b] >= level) != (label[a] == label[b])
               for a, b in itertools.combinations(range(n), 2)):
            return None
        if all(len(b) % s == 0 and max(Counter(where[i] for i in b).values()) <= len(b) // s
               for b in buckets):
            return level, [group for bucket in buckets for group in _chunk(bucket, where, s)]
    return None  # not reached after _require_distinct_cards_possible


def _chunk(members: list[int], where, s: int) -> list[list[int]]:
    """Consecutive chunks of s; if one repeats a card, deal card by card round-robin instead."""
    chunks = [members[i:i + s] for i in range(0, len(members), s)]
    if _distinct_cards(chunks, where):
        return chunks
    k = len(members) // s
    dealt = sorted(members, key=lambda i: (where[i], i))  # same-card ranks contiguous, <= k of each
    return [sorted(dealt[g::k]) for g in range(k)]


def _exact_search(scores, where, s: int, incumbent: int):
    """Best grouping strictly better than ``incumbent``, or None (small non-tree groups)."""
    best: list = [incumbent, None]

    def extend(remaining: tuple[int, ...], chosen: list[list[int]], floor: int) -> None:
        if not remaining:
            best[0], best[1] = floor, [list(g) for g in chosen]
            return
        first, rest = remaining[0], remaining[1:]
        for mates in itertools.combinations(rest, s - 1):
            group = (first, *mates)
            if len({where[i] for i in group}) < s:
                continue
            worst = min(floor, min(scores[a][b] for a, b in itertools.combinations(group, 2)))
            if worst <= best[0]:
                continue
            chosen.append(list(group))
            extend(tuple(i for i in rest if i not in mates), chosen, worst)
            chosen.pop()

    extend(tuple(range(len(scores))), [], _SELF_SCORE)
    return best[1]


# ---------------------------------------------------------------- card checks


def check_cards(
    split_groups: Sequence[Sequence[int]],
    placement: Sequence[tuple[int, int]],
    per_rank_bytes: dict[int, int],
    hbm_bytes_per_card: int,
    reserved_bytes_per_card: int,
) -> None:
    """Refuse two ranks of one split group on a card, or a card whose plan exceeds its HBM."""
    for group in split_groups:
        seen: dict[tuple[int, int], int] = {}
        for rank in group:
            node, card = placement[rank]
            if (node, card) in seen:
                raise TopologyError(
                    "placement", tuple(group),
                    "no card may hold two ranks of one split group (NCCL refuses duplicate devices)",
                    f"ranks {seen[(node, card)]} and {rank} are both on node {node} card {card}",
                )
            seen[(node, card)] = rank
    on_card: dict[tuple[int, int], list[int]] = {}
    for rank in sorted(per_rank_bytes):
        on_card.setdefault(tuple(placement[rank]), []).append(rank)
    for (node, card), ranks in sorted(on_card.items()):
        kv_bytes = sum(per_rank_bytes[r] for r in ranks)
        total_bytes = kv_bytes + reserved_bytes_per_card * len(ranks)
        if total_bytes > hbm_bytes_per_card:
            raise PlanError(
                "hardware.reserved_bytes_per_card", reserved_bytes_per_card,
                f"each card's planned memory must fit hardware.hbm_bytes_per_card={hbm_bytes_per_card}",
                f"node {node} card {card} holds ranks {ranks}: KV {kv_bytes} B + reserved "
                f"{len(ranks)} x {reserved_bytes_per_card} B = {total_bytes} B > {hbm_bytes_per_card} B",
            )
