"""Which layers a rank must own: the spec's split groups and positions (FEATURE 4), from the oracle.

Never taken from a worker or the plan: split groups are ``oracle.expected_split_groups``
(the parallel layout and the topology fixture, compared by FEATURE 4's grouping key: the
worst link inside any group, then each group's own, then upstream's consecutive groups if
among the best); a rank's split rank is its position in its own group (groups
rank-sorted), which differs from ``rank % s`` on regrouped topologies;
the owner of each full layer is the oracle's round-robin. The link names and their order
here only describe groups in messages (TC-03 shows the worst link inside each group).
"""

from __future__ import annotations

import itertools
from functools import cache
from typing import Iterable, Mapping, Optional

from harness import oracle
from harness.oracle import memo

SAME_CARD = "same card"
"""Two ranks of one group on one card: NCCL refuses it, so it ranks below every link."""


def link_rank(code: str) -> int:
    """Higher is better (``oracle.link_score``): NV<n> > PIX > PXB > PHB > NODE > SYS > NET; a
    single-rank group ("X", no link) above all, two ranks on one card below all."""
    if code == "X":
        return 1000
    if code == SAME_CARD:
        return -1
    return oracle.link_score(code)


def expected_placement(run) -> list[tuple[int, int]]:
    """(node, card) per rank (``oracle.expected_rank_locations``)."""
    return list(oracle.expected_rank_locations(run))


def link(run, a: int, b: int, links=None) -> str:
    """The link between two ranks' cards (``oracle.rank_link``, in ``links`` when the caller read the run's matrix
    already), ``SAME_CARD`` for one card."""
    code = oracle.rank_link(run, a, b, links)
    return SAME_CARD if code == "X" else code


def worst_link(run, group) -> str:
    """Worst link inside a group ("X" for a single rank); once per configuration and group (TC-03 asks for each
    group's several times: the worst over all groups, the grouping key, the messages)."""
    return _worst_link(run, tuple(group))


@memo.per_run_any_reserve
def _worst_link(run, group: tuple) -> str:
    # the run's matrix read once per group, not once per pair (a memo lookup each); a single rank reads none
    links = oracle.oracle_topology(run).links if len(group) > 1 else None
    codes = [link(run, a, b, links) for a, b in itertools.combinations(group, 2)]
    return min(codes, key=link_rank, default="X")


def expected_split_groups(run) -> Optional[tuple[tuple[int, ...], ...]]:
    """The spec's split groups over the whole world (``oracle.expected_split_groups``, the one
    owner of the grouping rule: FEATURE 4's key, ``oracle.best_partition``), each
    rank-sorted; None when no grouping keeps each group's ranks on distinct cards."""
    return _sorted_split_groups(run)


@memo.per_run_any_reserve
def _sorted_split_groups(run) -> Optional[tuple[tuple[int, ...], ...]]:
    """``expected_split_groups`` once per configuration (TC-03's checks ask for it per plan, each group sorted)."""
    groups = oracle.expected_split_groups(run)
    return None if groups is None else tuple(tuple(sorted(g)) for g in groups)


def expected_position(groups, rank: int) -> tuple[tuple[int, ...], int]:
    """(the rank's split group, its split rank = position in the rank-sorted group)."""
    group = next(tuple(sorted(g)) for g in groups if rank in g)
    return group, group.index(rank)


@cache
def _owner(full: tuple[int, ...], s: int) -> tuple[tuple[int, int], ...]:
    return tuple(oracle.expected_owner(full, s).items())


def expected_owned_full(run, groups, rank: int) -> list[int]:
    """Full layers ``rank`` of the target engine must own: all when not split, else those the
    round-robin gives its position in its split group."""
    full = tuple(oracle.expected_full_layers(run.model))
    s = oracle.split_size(run)
    if s == 1:
        return list(full)
    _, position = expected_position(groups, rank)
    return list(_owned_at(full, s, position))


@cache
def _owned_at(full: tuple[int, ...], s: int, position: int) -> tuple[int, ...]:
    """The full layers the round-robin gives split rank ``position`` (once per layers, s and position: every rank
    at that position of every group asks)."""
    return tuple(sorted(l for l, o in _owner(full, s) if o == position))


def groups_to_judge(run, plan_groups=()) -> tuple[Optional[tuple[tuple[int, ...], ...]], str]:
    """The split groups ownership is judged against (the spec's), and a problem if there are none.

    Never the plan's: a plan that groups differently is judged by the spec's groups, so its
    ranks own the wrong layers (TC-03 names the grouping itself)."""
    expected = expected_split_groups(run)
    if expected is not None:
        return expected, ""
    return None, (f"no split grouping keeps each group's ranks on distinct cards "
                  f"(plan split groups {[list(g) for g in plan_groups]})")


def layer_owners(full_layers: Iterable[int], owned_by_rank: Mapping[int, Optional[Iterable[int]]]) -> dict[int, list[int]]:
    """Each full layer -> the ranks of one split group that really own it (in ``owned_by_rank``'s order; a
    rank with None owns nothing). What TC-04 gathers over a real split subgroup and the unit tests'
    in-process engine both judge with ``not_owned_once``."""
    owned = {rank: tuple(layers or ()) for rank, layers in owned_by_rank.items()}
    return {layer: [rank for rank, layers in owned.items() if layer in layers] for layer in full_layers}


def not_owned_once(owners: Mapping[int, list[int]]) -> dict[int, list[int]]:
    """The layers of ``layer_owners`` owned by no rank or by several (FEATURE 4: in each split group every
    full layer is owned exactly once)."""
    return {layer: ranks for layer, ranks in owners.items() if len(ranks) != 1}
