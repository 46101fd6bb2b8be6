"""Which layers a rank must own: the spec's split groups and positions, computed here (FEATURE 4).

Never taken from a worker or the plan: split groups follow from the parallel layout
and the topology fixture (maximise the worst link inside each group, ties keeping
upstream's consecutive groups); a rank's split rank is its position in its own group
(groups rank-sorted), which differs from ``rank % s`` on regrouped topologies; the
owner of each full layer is the oracle's round-robin. The link ranking and the brute
force over partitions are this module's own (TC-03 judges the plan's groups with them).
"""

from __future__ import annotations

import itertools
from functools import cache
from typing import Optional

from harness import oracle

_PCIE_WORST_FIRST = ("NET", "SYS", "NODE", "PHB", "PXB", "PIX")
SAME_CARD = "same card"
"""Two ranks of one group on one card: NCCL refuses it, so it ranks below every link."""


def link_rank(code: str) -> tuple[int, int]:
    """Higher is better: X > NV<n> (more links better) > PIX > PXB > PHB > NODE > SYS > NET."""
    if code == "X":
        return (3, 0)
    if code == SAME_CARD:
        return (0, 0)
    if code.startswith("NV") and code[2:].isdigit():
        return (2, int(code[2:]))
    if code in _PCIE_WORST_FIRST:
        return (1, _PCIE_WORST_FIRST.index(code))
    raise ValueError(f"unknown link code {code!r}")


def code_of(score: tuple[int, int]) -> str:
    tier, value = score
    return {3: "X", 2: f"NV{value}", 0: SAME_CARD}.get(tier) or _PCIE_WORST_FIRST[value]


def expected_placement(run) -> list[tuple[int, int]]:
    """(node, card) per rank: RunSpec.placement, else rank % num_cards on node rank // num_cards."""
    n = run.hardware.num_cards
    cards = list(run.placement) if run.placement is not None else [r % n for r in range(run.parallel.world_size)]
    return [(r // n, card) for r, card in enumerate(cards)]


def _link(run, where, a: int, b: int) -> str:
    if where[a] == where[b]:
        return SAME_CARD
    if where[a][0] != where[b][0]:
        return "NET"
    return run.hardware.topology.links[where[a][1]][where[b][1]]


def worst_link(run, where, group) -> str:
    """Worst link inside a group ("X" for a single rank)."""
    codes = [_link(run, where, a, b) for a, b in itertools.combinations(group, 2)]
    return min(codes, key=link_rank, default="X")


def bottleneck(run, where, groups) -> tuple[int, int]:
    return min((link_rank(worst_link(run, where, g)) for g in groups), default=link_rank("X"))


def partitions(members: tuple[int, ...], s: int):
    """Every partition of ``members`` into groups of ``s`` (each group in ascending order)."""
    if not members:
        yield []
        return
    first, rest = members[0], members[1:]
    for mates in itertools.combinations(rest, s - 1):
        remaining = tuple(r for r in rest if r not in mates)
        for tail in partitions(remaining, s):
            yield [(first, *mates), *tail]


def _valid(where, groups) -> bool:
    return all(len({where[r] for r in g}) == len(g) for g in groups)


def best_bottleneck(run, where, tp_group, s: int) -> Optional[tuple[int, int]]:
    """Best worst-link over partitions whose groups use distinct cards; None if none exists."""
    best = None
    for groups in partitions(tuple(tp_group), s):
        if not _valid(where, groups):
            continue
        score = bottleneck(run, where, groups)
        if best is None or score > best:
            best = score
    return best


def tp_groups(run) -> list[list[int]]:
    par = run.parallel
    return oracle.expected_split_groups_consecutive(par.world_size, par.dp_size, par.cp_size,
                                                    oracle.attn_tp_size(run))


def best_groupings(run, tp_group, s: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every optimal partition of one TP group; just the consecutive one when it is optimal (ties keep it)."""
    where = expected_placement(run)
    consecutive = tuple(tuple(tp_group[i:i + s]) for i in range(0, len(tp_group), s))
    best = best_bottleneck(run, where, tp_group, s)
    if best is None:
        return []
    if _valid(where, consecutive) and bottleneck(run, where, consecutive) == best:
        return [consecutive]
    return [tuple(g) for g in partitions(tuple(tp_group), s) if _valid(where, g) and bottleneck(run, where, g) == best]


def expected_split_groups(run) -> Optional[tuple[tuple[int, ...], ...]]:
    """The spec's split groups over the whole world, or None when the spec leaves a choice
    (two optimal non-consecutive groupings) or no grouping is valid."""
    s = oracle.split_size(run)
    out: list[tuple[int, ...]] = []
    for tp_group in tp_groups(run):
        if s == 1:
            out.extend((r,) for r in tp_group)
            continue
        options = best_groupings(run, tp_group, s)
        if len(options) != 1:
            return None
        out.extend(tuple(sorted(g)) for g in options[0])
    return tuple(out)


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
    return sorted(l for l, o in _owner(full, s) if o == position)


def groups_to_judge(run, plan_groups) -> tuple[Optional[tuple[tuple[int, ...], ...]], str]:
    """The split groups ownership is judged against, and a problem if there are none.

    The spec's own groups when it fixes them; where it leaves a choice between optimal
    groupings, the plan's groups only if they are one of those choices (TC-03 judges that).
    """
    expected = expected_split_groups(run)
    if expected is not None:
        return expected, ""
    s = oracle.split_size(run)
    plan = tuple(tuple(sorted(g)) for g in plan_groups)
    for tp_group in tp_groups(run):
        inside = tuple(sorted(g for g in plan if set(g) <= set(tp_group)))
        if inside not in {tuple(sorted(tuple(sorted(g)) for g in o)) for o in best_groupings(run, tp_group, s)}:
            return None, f"plan split groups {list(plan)} are not an optimal grouping of TP group {tp_group}"
    return plan, ""
