"""FEATURE section 4: layer ownership, split groups (consecutive or topology-aware), rank placement on
nodes and cards, and the links between them."""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations, cycle
from typing import Optional, Sequence

from harness.oracle import readers
from harness.oracle.inputs import (
    GROUP_RULES,
    OWNER_RULES,
    SPEC_GROUP_RULE,
    SPEC_OWNER_RULE,
    UPSTREAM_GROUP_RULE,
    UPSTREAM_OWNER_RULE,
    attention_tp,
    attn_tp_size,
    split_size,
    upstream_split_size,
)
from harness.oracle.layers import expected_full_layers
from harness.oracle.memo import per_run_any_reserve

# ---- section 4: split groups and ownership -----------------------------------------------------


def expected_owner(full_layers, split_size: int) -> dict:
    """Section 4: round robin over full layers: the k-th full layer is owned by split rank k % s."""
    if type(split_size) is int and split_size >= 1:  # (the same dictionary, built in C: asked once per plan judged)
        return dict(zip(full_layers, cycle(range(split_size))))
    owner = {}
    for k, layer in enumerate(full_layers):
        owner[layer] = k % split_size
    return owner


def expected_upstream_owner(full_layers, split_size: int) -> dict:
    """Section 4: upstream xLLM's rule, layer_id % s (wrong on hybrid models)."""
    owner = {}
    for layer in full_layers:
        owner[layer] = layer % split_size
    return owner


def owner_of_layers(full_layers: Sequence[int], s: int, owner_rule: str = SPEC_OWNER_RULE) -> dict:
    """Section 4: full layer id -> owner split rank under ``owner_rule``."""
    if owner_rule == SPEC_OWNER_RULE:
        return expected_owner(full_layers, s)
    if owner_rule == UPSTREAM_OWNER_RULE:
        return expected_upstream_owner(full_layers, s)
    raise ValueError(f"owner_rule {owner_rule!r}; allowed: {', '.join(OWNER_RULES)}")


def global_rank(dp_rank: int, cp_rank: int, tp_rank: int, *, cp: int, tp: int) -> int:
    """Section 3: a rank's place in the world from its coordinates, ``dp_rank * (cp*tp) + cp_rank * tp + tp_rank``."""
    return dp_rank * (cp * tp) + cp_rank * tp + tp_rank


def expected_rank_coordinates(run, rank: int) -> tuple[int, int, int]:
    """Section 3: a global rank's (dp_rank, cp_rank, tp_rank), the inverse of ``global_rank``."""
    cp, tp = run.parallel.cp_size, attn_tp_size(run)
    return rank // (cp * tp), rank // tp % cp, rank % tp


@lru_cache(maxsize=1024)
def _tp_groups(world: int, dp: int, cp: int) -> tuple:
    """The attention TP groups (global ranks, in rank order), once per layout: shared tuples, read them only."""
    tp = attention_tp(world, dp, cp)
    return tuple(tuple(global_rank(dp_rank, cp_rank, tp_rank, cp=cp, tp=tp) for tp_rank in range(tp))
                 for dp_rank in range(dp) for cp_rank in range(cp))


def expected_split_groups_consecutive(world: int, dp: int, cp: int, s: int) -> list:
    """Section 4: consecutive groups of s ranks inside each attention TP group, in rank order
    (upstream ``get_layerwise_split_group``)."""
    return [list(g) for g in _consecutive_groups(world, dp, cp, s)]


@lru_cache(maxsize=1024)
def _consecutive_groups(world: int, dp: int, cp: int, s: int) -> tuple:
    """``expected_split_groups_consecutive`` as tuples, once per distinct layout (TC-03 asks for every plan; the
    public function's callers get lists of their own)."""
    return tuple(tp_group[start : start + s] for tp_group in _tp_groups(world, dp, cp)
                 for start in range(0, len(tp_group), s))


def link_score(link: str) -> int:
    """Section 4: how good a link is: NV# (more links better) > PIX > PXB > PHB > NODE > SYS >
    another node (``NET``). ``X`` (the same card) cannot join a split group: -1."""
    if link == "X":
        return -1
    if link.startswith("NV") and link[2:].isdigit():
        return 100 + int(link[2:])
    if link not in _LINK_ORDER:
        raise ValueError(f"unknown link {link!r}; allowed: X, PIX, PXB, PHB, NODE, SYS, NV#")
    return _LINK_ORDER[link]


_LINK_ORDER = {"PIX": 6, "PXB": 5, "PHB": 4, "NODE": 3, "SYS": 2, "NET": 1}
"""``link_score`` of the links that are not NV# or X."""


@per_run_any_reserve
def oracle_topology(run) -> readers.OracleTopology:
    """Section 4: the run's link matrix as the oracle reads it: the fixture named by
    ``hardware.topology.name`` in conf/topology (its own parser), else the RunSpec's matrix
    (synthetic topologies built in tests)."""
    topo = run.hardware.topology
    name = getattr(topo, "name", None)
    fixture = _fixture_topology(str(name)) if name else None
    if fixture is not None:
        return fixture
    return readers.OracleTopology(name=str(name), cards=tuple(topo.cards),
                                  links=tuple(tuple(r) for r in topo.links), source="run")


@lru_cache(maxsize=4096)  # (the explorer's random matrices have names of their own: each looked up once, not per ask)
def _fixture_topology(name: str) -> Optional[readers.OracleTopology]:
    """The shipped fixture ``name`` (read once per process: conf/topology is part of the checkout), or None."""
    for suffix in (".txt", ".yaml"):
        if (readers.TOPOLOGY_DIR / f"{name}{suffix}").is_file():
            return readers.load_topology(name)
    return None


def expected_rank_location(run, rank: int) -> tuple:
    """Section 4: (node, card) of a rank: node rank // num_cards, card ``placement[rank]``,
    else rank % num_cards."""
    return _location(rank, run.hardware.num_cards, _placement(run))


@per_run_any_reserve
def expected_rank_locations(run) -> tuple:
    """Section 4: ``expected_rank_location`` of every rank, in rank order, once per configuration (the card
    checks count the ranks on each card, TC-03 compares every rank's)."""
    num_cards, placement = run.hardware.num_cards, _placement(run)
    return tuple(_location(rank, num_cards, placement) for rank in range(run.parallel.world_size))


@per_run_any_reserve
def expected_ranks_per_card(run) -> dict:
    """Section 4: (node, card) -> how many ranks the placement puts on it (each keeps its own reserve). Shared
    between the checks that ask: read it, never change it."""
    counts: dict = {}
    for where in expected_rank_locations(run):
        counts[where] = counts.get(where, 0) + 1
    return counts


def _placement(run) -> Optional[tuple]:
    placement = getattr(run, "placement", None)
    return None if placement is None else tuple(placement)


def _location(rank: int, num_cards: int, placement: Optional[tuple]) -> tuple:
    return rank // num_cards, placement[rank] if placement is not None else rank % num_cards


def rank_link(run, a: int, b: int, links=None) -> str:
    """Section 4: the link between two ranks' cards (``NET`` across nodes, ``X`` same card). Not remembered: two
    lookups in the matrix cost less than a memo's (a group's worst link, which asks for each pair, is)."""
    links = oracle_topology(run).links if links is None else links
    return _link(a, b, links, run.hardware.num_cards, _placement(run))


def _link(a: int, b: int, links, num_cards: int, placement: Optional[tuple]) -> str:
    node_a, card_a = _location(a, num_cards, placement)
    node_b, card_b = _location(b, num_cards, placement)
    if node_a != node_b:
        return "NET"
    if card_a == card_b:
        return "X"
    forward, backward = links[card_a][card_b], links[card_b][card_a]
    return forward if link_score(forward) <= link_score(backward) else backward


def best_partition(members: Sequence[int], s: int, score) -> Optional[list]:
    """Section 4 (version 2.2), exact search: the partition of ``members`` into groups of s that comes
    first by the spec's one key: (1) the worst link of any group, then (2) the groups' own worst links
    sorted from worst to best, compared element by element (together: the ascending vector of per-group
    worst-link scores, lexicographically largest); (3) then upstream's consecutive grouping if it is
    among the best, else the partition whose groups, each sorted and listed by smallest member, come
    first lexicographically. The consecutive grouping is the lexicographically first of all partitions
    of the sorted members, so taking the first partition among the best is rule (3) whole. None when
    every partition puts two ranks of one group on one card (score < 0)."""
    members = sorted(members)
    if s == 1:
        return [[m] for m in members]
    n = len(members)
    if n % s:
        return None
    # each pair's score asked once; the search reads nothing else, so it is kept per distinct scores (the drawn
    # layouts' TP groups repeat a few hundred score patterns: about three searches in four saved)
    scores = tuple(score(members[i], members[j]) for i in range(n) for j in range(i + 1, n))
    try:
        groups = _best_positions(n, s, scores)
    except TypeError:  # a score that cannot be hashed: searched each time
        groups = _best_positions.__wrapped__(n, s, scores)
    return None if groups is None else [[members[k] for k in g] for g in groups]


@lru_cache(maxsize=4096)
def _best_positions(n: int, s: int, scores: tuple) -> Optional[tuple]:
    """``best_partition``'s search over positions 0..n-1 (the sorted members), ``scores`` each pair's (i < j) in
    row order: the first best partition by the spec's key, as groups of rising positions; None when none."""
    pair = [[None] * n for _ in range(n)]  # by position: the search reads pairs again and again
    flat = iter(scores)
    for i in range(n):
        for j in range(i + 1, n):
            pair[i][j] = next(flat)

    def group_score(group) -> int:  # (positions, rising)
        worst = None
        for i in range(len(group)):
            row = pair[group[i]]
            for j in range(i + 1, len(group)):
                value = row[group[j]]
                worst = value if worst is None else min(worst, value)
        return worst

    solved: dict = {}  # remaining positions (a bit mask) -> best; a dict, not a functools.cache made per call

    def solve(remaining: int):
        if not remaining:
            return (), ()
        if remaining in solved:
            return solved[remaining]
        rest = [k for k in range(n) if remaining >> k & 1]  # rising positions
        first, rest = rest[0], rest[1:]
        best = None
        for others in combinations(rest, s - 1):
            group = (first,) + others
            gs = group_score(group)
            if gs < 0:
                continue
            left = remaining
            for k in group:
                left &= ~(1 << k)
            sub = solve(left)
            if sub is None:
                continue
            vector = tuple(sorted(sub[0] + (gs,)))
            partition = (group,) + sub[1]
            if best is None or vector > best[0] or (vector == best[0] and partition < best[1]):
                best = (vector, partition)
        solved[remaining] = best
        return best

    result = solve((1 << n) - 1)  # positions in the sorted members: the same order, so the same first partition
    return None if result is None else result[1]


def expected_split_groups(run, *, rule: str = SPEC_GROUP_RULE) -> Optional[list]:
    """Section 4: the split groups (global ranks, in split-rank order) of every attention TP
    group: ``topology`` (the adaptation: ``best_partition``'s key per TP group) or
    ``consecutive`` (upstream). s = 1: one group per rank. None when no grouping keeps
    the ranks of each group on distinct cards."""
    groups = _split_groups(run, rule)
    return None if groups is None else [list(g) for g in groups]


def expected_split_group_tuples(run, *, rule: str = SPEC_GROUP_RULE) -> Optional[tuple]:
    """``expected_split_groups`` as tuples, the one answer per configuration shared by every caller (nothing
    copied: for a caller that only reads it, or asks whether there is a grouping at all)."""
    return _split_groups(run, rule)


@per_run_any_reserve
def _split_groups(run, rule: str) -> Optional[tuple]:
    """``expected_split_groups`` as tuples, once per configuration (every check asks again)."""
    p = run.parallel
    s = split_size(run) if rule == SPEC_GROUP_RULE else upstream_split_size(run)
    if rule == UPSTREAM_GROUP_RULE:
        return _consecutive_groups(p.world_size, p.dp_size, p.cp_size, s)
    if rule != SPEC_GROUP_RULE:
        raise ValueError(f"rule {rule!r}; allowed: {', '.join(GROUP_RULES)}")
    return _topology_groups(p.world_size, p.dp_size, p.cp_size, s, oracle_topology(run).links,
                            run.hardware.num_cards, _placement(run))


@lru_cache(maxsize=4096)
def _topology_groups(world: int, dp: int, cp: int, s: int, links, num_cards: int, placement) -> Optional[tuple]:
    """``expected_split_groups``'s search, once per distinct layout (every check asks again; the explorer's random
    link matrices and placements make thousands of layouts, the most recent kept)."""

    def score(a: int, b: int) -> int:  # (``best_partition`` asks each pair once)
        return link_score(_link(a, b, links, num_cards, placement))

    groups = []
    for tp_group in _tp_groups(world, dp, cp):
        part = best_partition(tp_group, s, score)
        if part is None:
            return None
        groups.extend(tuple(g) for g in part)
    return tuple(groups)


def expected_split_position(run, rank: int, *, rule: str = SPEC_GROUP_RULE) -> tuple:
    """Section 4: (index of the rank's split group, its split rank = position in that group)."""
    positions = _split_positions(run, rule)
    if positions is None:
        raise ValueError("no split grouping keeps each group's ranks on distinct cards")
    try:
        return positions[rank]
    except KeyError:
        raise ValueError(f"rank {rank} is not in any split group (world {run.parallel.world_size})") from None


@per_run_any_reserve
def _split_positions(run, rule: str) -> Optional[dict]:
    """rank -> ``expected_split_position`` of every rank the split groups hold (its first group and place), once
    per configuration and rule (every check asks rank by rank); None when no grouping is possible. Shared: read
    it, never change it."""
    groups = _split_groups(run, rule)
    if groups is None:
        return None
    positions: dict = {}
    for index, group in enumerate(groups):
        for position, rank in enumerate(group):
            if rank not in positions:
                positions[rank] = (index, position)
    return positions


def expected_owned_full_layers(run, split_rank: int, *, owner_rule: str = SPEC_OWNER_RULE) -> tuple:
    """Section 4: the full layers split rank ``split_rank`` owns (all of them when s = 1)."""
    full = expected_full_layers(run.model)
    s = split_size(run)
    if s == 1:
        return full
    return _owned_full_layers(tuple(full), s, owner_rule, split_rank)


@lru_cache(maxsize=4096)
def _owned_full_layers(full: tuple, s: int, owner_rule: str, split_rank: int) -> tuple:
    """``expected_owned_full_layers`` once per distinct layers, split size, rule and split rank (a pure function
    of them: every configuration of a model asks again, a report once per rank)."""
    owner = owner_of_layers(full, s, owner_rule)
    return tuple(layer for layer in full if owner[layer] == split_rank)


def expected_rank_owned_layers(run, rank: int, *, owner_rule: str = SPEC_OWNER_RULE, rule: str = SPEC_GROUP_RULE) -> tuple:
    """Sections 4 and 7: the full layers a global rank must allocate (from its position)."""
    if split_size(run) == 1:
        return expected_full_layers(run.model)
    owned = _owned_by_rank(run, owner_rule, rule)
    if owned is None or rank not in owned:
        expected_split_position(run, rank, rule=rule)  # raises, saying why the rank has no position
    return owned[rank]


@per_run_any_reserve
def _owned_by_rank(run, owner_rule: str, rule: str) -> Optional[dict]:
    """rank -> ``expected_rank_owned_layers`` of every rank with a split position (s > 1), once per configuration
    and rules (a report and the checks ask rank by rank); None when no grouping is possible. Shared: read it,
    never change it."""
    positions = _split_positions(run, rule)
    if positions is None:
        return None
    by_position: dict = {}  # split rank -> its layers: asked once per split rank, not per global rank
    out = {}
    for rank, (_, position) in positions.items():
        layers = by_position.get(position)
        if layers is None:
            layers = by_position[position] = expected_owned_full_layers(run, position, owner_rule=owner_rule)
        out[rank] = layers
    return out


@per_run_any_reserve
def expected_rank_rows(run) -> Optional[tuple]:
    """Sections 3-4, every rank at once: per global rank ((node, card), (dp_rank, cp_rank, tp_rank), its split
    group (a list of global ranks), its split rank, its owned full layers): what ``expected_rank_location``,
    ``expected_rank_coordinates``, ``expected_split_position`` and ``expected_rank_owned_layers`` say of it, once
    per configuration (a check comparing every rank of a plan asks for all of them). None when no grouping keeps
    each group's ranks on distinct cards."""
    groups = expected_split_groups(run)
    if groups is None:
        return None
    rows = []
    locations = expected_rank_locations(run)
    positions = _split_positions(run, SPEC_GROUP_RULE)
    # every rank's owned layers read from the one table (expected_rank_owned_layers asks it through the memo per rank)
    owned = _owned_by_rank(run, SPEC_OWNER_RULE, SPEC_GROUP_RULE) if split_size(run) > 1 else None
    full = expected_full_layers(run.model) if owned is None else None
    for r in range(run.parallel.world_size):
        if r not in positions:
            expected_split_position(run, r)  # raises, saying why
        index, position = positions[r]
        rows.append((locations[r], expected_rank_coordinates(run, r), groups[index],
                     position, tuple(full if owned is None else owned[r])))
    return tuple(rows)


def expected_upstream_worker_split_rank(run, rank: int) -> int:
    """Section 4: what upstream's worker computes: global ``rank % s``."""
    return rank % upstream_split_size(run)
