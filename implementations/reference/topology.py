"""ILU topology mapping: link matrices, rank placement, topology-aware split groups.

Link matrices are parsed by the neutral ``contract.topology_text`` (``nvidia-smi
topo -m`` / ``ixsmi topo -m`` text or YAML, into a ``specs.Topology``). This module
places ranks on (node, card), and cuts each attention TP group into split groups by
FEATURE section 4's one key: the worst link inside any group, then every group's worst
link from worst to best, then upstream's consecutive groups if they are among the best,
else the lexicographically first grouping. Pure Python: no torch, no process groups.
"""

from __future__ import annotations

import itertools
from collections import Counter
from functools import lru_cache
from typing import Optional, Sequence

from contract.errors import ConfigError, PlanError, TopologyError
from contract.specs import RunSpec, Topology
from contract.topology_text import (  # noqa: F401  (the shared topology text parsing)
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


def _code_score(code) -> int:
    """``link_score``, remembered per code string (an NV<n> code's regular expression, per pair of ranks)."""
    return _remembered_score(code) if isinstance(code, str) else link_score(code)


@lru_cache(maxsize=256)
def _remembered_score(code: str) -> int:
    return link_score(code)


_NET_SCORE = link_score("NET")
"""Two ranks on different nodes (``link``)."""


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
    """Cut one attention TP group into groups of ``split_size`` by FEATURE 4's one key (``_form_split_groups``),
    once per distinct TP group, split size, placement and topology: every plan of one layout asks again."""
    if type(split_size) is int and split_size == 1:  # one-rank groups (a third of the asks): no placement hashed
        return tuple((rank,) for rank in tp_group)
    try:
        return _form_split_groups(tuple(tp_group), split_size, tuple(placement), topology)
    except TypeError:  # arguments that cannot be hashed: worked out each time
        return _form_split_groups.__wrapped__(tuple(tp_group), split_size, tuple(placement), topology)


@lru_cache(maxsize=1024, typed=True)
def _form_split_groups(
    tp_group: tuple[int, ...],
    split_size: int,
    placement: tuple[tuple[int, int], ...],
    topology: Topology,
) -> tuple[tuple[int, ...], ...]:
    """Cut one attention TP group into groups of ``split_size`` by FEATURE 4's one key.

    Best first: (1) the worst link of any group; (2) then the groups' own worst links sorted
    from worst to best, element by element; (3) then upstream's consecutive groups if they are
    among the best (returned unchanged), else the grouping whose groups, rank-sorted and listed
    by their first rank, come first lexicographically.
    """
    n, s = len(tp_group), split_size
    if isinstance(s, bool) or not isinstance(s, int) or s < 1 or n % s:
        raise ConfigError("layerwise.split_size", s, f"must be >= 1 and divide the attention TP size {n}")
    consecutive = tuple(tuple(tp_group[i:i + s]) for i in range(0, n, s))
    if s == 1:
        return consecutive
    where = [placement[rank] for rank in tp_group]
    _require_distinct_cards_possible(tp_group, where, s)
    order = sorted(range(n), key=lambda i: tp_group[i])  # index i of the search = the i-th smallest rank
    located = [where[i] for i in order]
    links = topology.links
    # each pair's ``link_score(link(...))``, inlined: the calls were most of the search's cost on a small group
    scores = tuple(tuple(_NET_SCORE if node_a != node_b else _code_score(links[card_a][card_b])
                         for node_b, card_b in located)
                   for node_a, card_a in located)
    cards = tuple(where[i] for i in order)
    consecutive_idx = tuple(tuple(order.index(tp_group.index(r)) for r in group) for group in consecutive)
    best_groups = _searched_grouping(scores, _card_labels(cards), s, consecutive_idx)
    if best_groups is _NO_GROUPING:
        raise TopologyError("placement", cards, "no grouping keeps each split group on distinct cards")
    if best_groups is None:
        return consecutive
    ranks = sorted(tp_group)
    return tuple(tuple(ranks[i] for i in group) for group in best_groups)


def _card_labels(cards: tuple) -> tuple[int, ...]:
    """Each index's card as the first index on that card: the search reads only which indices share a card, so
    layouts alike but for their card and node numbers share one search (about 130 patterns in 290 searches)."""
    first: dict = {}
    return tuple(first.setdefault(card, i) for i, card in enumerate(cards))


_NO_GROUPING = ("no grouping",)
"""``_searched_grouping``'s answer where no grouping keeps every group on distinct cards."""


@lru_cache(maxsize=1024)
def _searched_grouping(scores: tuple, cards: tuple, s: int, consecutive_idx: tuple) -> Optional[tuple]:
    """Keys (1) to (3) of FEATURE 4 on the indices (0 = the smallest rank): None where the consecutive groups
    ``consecutive_idx`` are among the best, else the best groups of indices, or ``_NO_GROUPING``."""
    if _distinct_cards(consecutive_idx, cards):
        mine = grouping_key(consecutive_idx, scores)
        if mine[0] == _best_pair(scores, cards):  # every group already on the best link there is
            return None
    found = _best_grouping_by_levels(scores, cards, s)
    if found is None:
        return _NO_GROUPING
    best_key, best_groups = found
    if _distinct_cards(consecutive_idx, cards) and grouping_key(consecutive_idx, scores) == best_key:
        return None
    return best_groups


def grouping_key(groups, scores) -> tuple[int, ...]:
    """Keys (1) and (2) of FEATURE 4: every group's worst link score, sorted from worst to best
    (the larger tuple is the better grouping)."""
    return tuple(sorted(min(scores[a][b] for a, b in itertools.combinations(g, 2)) for g in groups))


def _best_pair(scores, cards) -> int:
    """The best link between two ranks on distinct cards: no group's worst link can exceed it."""
    n = len(scores)
    return max((scores[a][b] for a, b in itertools.combinations(range(n), 2) if cards[a] != cards[b]), default=-1)


def _best_grouping_by_levels(scores: tuple, cards: tuple, s: int) -> Optional[tuple]:
    """Key (1) first: the best link level every group can reach, tried from the best down; the search at
    that level (groups below it left out) then decides keys (2) and (3). None where no level has a grouping."""
    n = len(scores)
    levels = sorted({scores[a][b] for a, b in itertools.combinations(range(n), 2) if cards[a] != cards[b]},
                    reverse=True)
    for level in levels:
        found = _best_grouping(scores, cards, s, level)
        if found is not None:
            return found
    return None


@lru_cache(maxsize=256)
def _best_grouping(scores: tuple, cards: tuple, s: int, floor: int) -> Optional[tuple]:
    """(key, groups) of the best grouping of indices 0..n-1 into groups of s on distinct cards whose every
    group's worst link is at least ``floor``, the lexicographically first among equals, or None; memoised
    on the indices still to place (a bit mask)."""
    n = len(scores)
    memo: dict[int, Optional[tuple]] = {0: ((), ())}

    def best(mask: int) -> Optional[tuple]:
        if mask in memo:
            return memo[mask]
        first = (mask & -mask).bit_length() - 1
        rest = [i for i in range(first + 1, n) if mask >> i & 1]
        found = None
        for mates in itertools.combinations(rest, s - 1):
            group = (first, *mates)
            if len({cards[i] for i in group}) < s:
                continue
            worst = min(scores[a][b] for a, b in itertools.combinations(group, 2))
            if worst < floor:
                continue
            sub = best(mask & ~sum(1 << i for i in group))
            if sub is None:
                continue
            key = tuple(sorted((*sub[0], worst)))
            groups = (group, *sub[1])
            if found is None or key > found[0] or (key == found[0] and groups < found[1]):
                found = (key, groups)
        memo[mask] = found
        return found

    return best((1 << n) - 1)


def _require_distinct_cards_possible(tp_group, where, s: int) -> None:
    # A valid grouping exists iff no card holds more ranks than there are groups.
    if len(set(where)) == len(where):  # one rank per card (most placements): nothing to count
        return
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
    if _one_rank_per_card(placement, per_rank_bytes) and (
            not per_rank_bytes or max(per_rank_bytes.values()) + reserved_bytes_per_card <= hbm_bytes_per_card):
        return  # each card holds one rank, and the fullest fits: the walk below (its first error) is for the rest
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


_TUPLE, _INT = {tuple}, {int}


def _one_rank_per_card(placement: Sequence[tuple[int, int]], per_rank_bytes: dict[int, int]) -> bool:
    """Every rank of ``per_rank_bytes`` (whole numbers of bytes) on a card of its own: each an index of
    ``placement`` (0 to its length - 1), whose (node, card) tuples are all distinct. Most plans: their card check
    is then one comparison (the walk over the cards in order was about 1% of a plan-level draw)."""
    try:
        if set(map(type, placement)) != _TUPLE or len(set(placement)) != len(placement):
            return False
    except TypeError:  # (an entry that cannot be hashed)
        return False
    ranks = per_rank_bytes.keys()
    return not ranks or (set(map(type, ranks)) == _INT and set(map(type, per_rank_bytes.values())) == _INT
                         and min(ranks) >= 0 and max(ranks) < len(placement))
