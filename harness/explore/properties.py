"""Ownership properties on every explored plan, as SGLang's layer-split tests state them
(``test_cp_cache_layer_split_ownership.py``: every layer covered exactly once, counts
balanced, ranks beyond the layer count own nothing), judged against ``harness.oracle``.

On an active plan, in every split group of the plan:

- each full-attention layer (the oracle's list) is owned by exactly one rank of the group,
  and no rank lists a linear-attention layer as owned (linear layers stay on every rank;
  the allocation side of that is TC-01's check);
- the owners' full-layer counts per split rank are the oracle's under the implementation's
  owner rule, and differ by at most one under the spec's round-robin;
- split ranks that own nothing (fewer full layers than s, or an owner rule that skips a
  rank) are named in the plan's notes (``IDLE_NOTE``), and no note names an idle rank
  when every split rank owns a layer.

Variants the spec predicts (``harness.suites.expectations.PREDICTIONS``) follow upstream's
owner rule ``layer_id % s``; their counts must be upstream's, so where that rule is
unbalanced the plan must be unbalanced exactly as predicted.
"""

from __future__ import annotations

import functools
import itertools
import re

from harness import oracle
from harness.oracle import SPEC_OWNER_RULE, UPSTREAM_OWNER_RULE
from harness.suites.expectations import PREDICTIONS, Problem

IDLE_NOTE = re.compile(r"split ranks \[([0-9, ]*)\] own no full-attention layer")
"""The plan note naming split ranks that own no full-attention layer (``KVPlan.notes``)."""


def owner_rule(implementation: str) -> str:
    """The oracle's owner rule an implementation is judged by: upstream's for the predicted variants."""
    return UPSTREAM_OWNER_RULE if implementation in PREDICTIONS else SPEC_OWNER_RULE


def expected_counts(run, implementation: str) -> dict[int, int]:
    """Split rank -> full layers it owns, by the oracle."""
    counts = _counts(tuple(oracle.expected_full_layers(run.model)), oracle.split_size(run), owner_rule(implementation))
    return dict(counts)  # (a copy: the kept one is never handed out)


@functools.lru_cache(maxsize=4096)
def _counts(full_layers: tuple, s: int, rule: str) -> dict[int, int]:
    """``expected_counts`` once per distinct full layers, s and owner rule: drawn models repeat a few hundred, and
    counting walked every layer of every plan."""
    owner = oracle.owner_of_layers(full_layers, s, rule)
    counts = dict.fromkeys(range(s), 0)
    for o in owner.values():
        if o in counts:
            counts[o] += 1
    return counts


def idle_in_notes(notes) -> list[list[int]]:
    """The split-rank lists of every idle note."""
    return [[int(x) for x in m.group(1).replace(" ", "").split(",") if x]
            for m in (IDLE_NOTE.search(n) for n in notes) if m]


def ownership_problems(plan, run, implementation: str) -> list[str]:
    """The properties above on an accepted plan (empty when the split is inactive)."""
    if not plan.active or oracle.split_size(run) == 1:
        return []
    full = set(oracle.expected_full_layers(run.model))
    want = expected_counts(run, implementation)
    by_rank = {rp.rank: rp for rp in plan.ranks}
    problems = []
    for group in plan.split_groups:
        members = [by_rank[r] for r in group if r in by_rank]
        owned = list(itertools.chain.from_iterable(rp.owned_full_layers for rp in members))
        held = set(owned)
        twice: dict[int, list[int]] = {}
        if len(held) < len(owned):  # a layer owned more than once: by whom (walked layer by layer only then)
            owners: dict[int, list[int]] = {}
            for rp in members:
                for layer in rp.owned_full_layers:
                    owners.setdefault(layer, []).append(rp.rank)
            twice = dict(sorted((l, rs) for l, rs in owners.items() if len(rs) > 1))
        missing = sorted(full.difference(held))
        linear = sorted(held - full)
        if missing or twice or linear:
            problems.append(Problem(f"split group {list(group)}: full layers without an owner {missing}, owned more "
                                    f"than once {twice}, owned but not full attention {linear} (each full layer "
                                    f"has exactly one owner in each split group; linear layers stay on every rank)",
                                    rule="coverage", rank=group[0]))
        got = {rp.split_rank: len(rp.owned_full_layers) for rp in members}
        if got != want:
            problems.append(Problem(f"split group {list(group)}: full layers per split rank {got}, the oracle's "
                                    f"{owner_rule(implementation)} gives {want}", rule="balance", rank=group[0]))
        elif owner_rule(implementation) == SPEC_OWNER_RULE and got and max(got.values()) - min(got.values()) > 1:
            problems.append(Problem(f"split group {list(group)}: owners' full-layer counts {got} differ by more "
                                    f"than one", rule="balance", rank=group[0]))
    idle = [r for r, n in sorted(want.items()) if n == 0]
    noted = idle_in_notes(plan.notes)
    if idle and idle not in noted:
        problems.append(Problem(f"split ranks {idle} own no full-attention layer ({len(full)} full layers, "
                                f"s={oracle.split_size(run)}) but the plan's notes {list(plan.notes)} do not name "
                                f"them", rule="notes"))
    if not idle and noted:
        problems.append(Problem(f"the plan's notes name idle split ranks {noted}, but every split rank owns a full "
                                f"layer ({want})", rule="notes"))
    return problems
