"""Open questions of the spec the explorer has found: configurations it reports, not fails.

Each entry is decided from the configuration by the oracle alone (never from the code
under test), and ``testcases/explore`` pins one minimal configuration of each, so an entry
that stops reproducing (the question settled, the oracle or the reference changed) fails
there and must be removed here.

``grouping_tie``: FEATURE 4 says split groups "maximise the worst link inside a group, ties
keeping upstream's consecutive order". The oracle reads it per group: the grouping whose
sorted vector of per-group worst links is largest (``oracle.best_partition``); the reference
keeps consecutive groups whenever their single worst link is as good as the best grouping's.
They differ when consecutive groups tie on the worst link but another grouping gives some
group a better one (4 cards on 3 PCIe switches under one bridge: {0,3} share a switch).
TC-03 then reports "consecutive groups are not optimal but were kept", and every check that
judges ownership by the spec's groups (TC-01, TC-07) reports the ranks whose position differs.

``capacity_gain_undefined``: split n_blocks / uniform n_blocks when the uniform count is 0.

``spec_over_uniform_peak``: TC-02's "split peak <= uniform peak" (the seed's) where FEATURE 6's
scratch rule makes the spec's own owners exceed it (a model with one full layer).
"""

from __future__ import annotations

from typing import Optional

from harness import oracle
from harness.suites.ownership import bottleneck, worst_link


def grouping_tie(run) -> Optional[str]:
    """Why the two readings of the grouping rule differ on ``run``, or None when they agree."""
    s = oracle.split_size(run)
    if s == 1 or oracle.expected_rejection(run) is not None:
        return None
    spec = oracle.expected_split_groups(run)
    if spec is None:
        return None
    p = run.parallel
    for tp_group in oracle.expected_split_groups_consecutive(p.world_size, p.dp_size, p.cp_size,
                                                             oracle.attn_tp_size(run)):
        inside = sorted(tuple(g) for g in spec if set(g) <= set(tp_group))
        consecutive = [tuple(tp_group[i:i + s]) for i in range(0, len(tp_group), s)]
        if inside != sorted(consecutive) and bottleneck(run, inside) == bottleneck(run, consecutive):
            return (f"grouping tie: TP group {list(tp_group)} on {run.hardware.topology.name}: consecutive groups "
                    f"{consecutive} (worst links {[worst_link(run, g) for g in consecutive]}) tie on the worst link "
                    f"with the oracle's {inside} ({[worst_link(run, g) for g in inside]}); FEATURE 4 reads either way")
        if len({worst_link(run, g) for g in inside}) > 1:  # another grouping may tie on the worst link alone
            return (f"grouping tie: TP group {list(tp_group)} on {run.hardware.topology.name}: the oracle's groups "
                    f"{inside} have unequal worst links {[worst_link(run, g) for g in inside]}: a grouping with the "
                    f"same worst link but worse others is as good under the worst-link-only reading")
    return None


def capacity_gain_undefined(run) -> Optional[str]:
    """FEATURE 6 defines the capacity gain as split n_blocks / uniform n_blocks; with a budget that holds a
    split block but no uniform one it is undefined: the oracle reports 0.0, the reference inf (which
    ``json.dumps`` writes as the non-JSON ``Infinity``)."""
    if oracle.split_size(run) == 1 or oracle.expected_rejection(run) is not None:
        return None
    if oracle.expected_estimation_rejection(run) is not None:
        return None
    n_blocks, uniform = oracle.expected_block_counts(run, oracle.run_budget_bytes(run))
    if n_blocks >= 1 and uniform == 0:
        return (f"capacity gain undefined: {n_blocks} split blocks but no uniform block fit the budget "
                f"({oracle.run_budget_bytes(run)} B); the oracle says 0.0, the reference inf")
    return None


def spec_over_uniform_peak(run) -> Optional[str]:
    """The seed's "split peak <= uniform peak" (TC-02) against FEATURE 6's own rule: every rank of an
    active split keeps a scratch layer, so with few full layers (one full layer at any s, say) the spec's
    round-robin itself puts its owners above the uniform allocation at the same n_blocks."""
    if oracle.split_size(run) == 1 or oracle.expected_rejection(run) is not None:
        return None
    if oracle.expected_estimation_rejection(run) is not None or oracle.expected_split_groups(run) is None:
        return None
    over = oracle.expected_ranks_over_uniform_peak(run)
    if over:
        return (f"spec over uniform peak: {len(oracle.expected_full_layers(run.model))} full layers at "
                f"s={oracle.split_size(run)}: the spec's own owners + scratch exceed the uniform peak on ranks "
                f"{[r for r, _ in over]} (by {over[0][1]} B on rank {over[0][0]})")
    return None


KNOWN = (grouping_tie, capacity_gain_undefined, spec_over_uniform_peak)
"""Every open question; ``open_question(run)`` asks each."""


def open_question(run) -> Optional[str]:
    for known in KNOWN:
        reason = known(run)
        if reason is not None:
            return reason
    return None
