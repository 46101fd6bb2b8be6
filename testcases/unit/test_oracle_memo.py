"""``harness.oracle.memo.per_run``: one answer per configuration object, never a stale one."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from harness.oracle.memo import RUNS_REMEMBERED, per_run


@dataclass(frozen=True)
class _Run:
    budget: int


def _counting():
    calls = []

    @per_run
    def doubled(run, extra=0, *, times=2):
        calls.append(run)
        return run.budget * times + extra

    return doubled, calls


def test_a_frozen_run_is_answered_once_per_arguments():
    doubled, calls = _counting()
    run = _Run(budget=3)
    assert doubled(run) == doubled(run) == 6 and len(calls) == 1
    assert doubled(run, 1) == 7 and doubled(run, times=3) == 9 and len(calls) == 3
    other = replace(run, budget=4)  # an equal-looking variant is another configuration: asked anew
    assert doubled(other) == 8 and len(calls) == 4


def test_mutable_runs_and_unhashable_arguments_are_computed_each_time():
    doubled, calls = _counting()
    run = SimpleNamespace(budget=3)
    assert doubled(run) == 6
    run.budget = 5  # a stand-in that changes under its id must not get the old answer
    assert doubled(run) == 10 and len(calls) == 2
    frozen = _Run(budget=1)
    assert per_run(lambda r, xs: len(xs))(frozen, [1, 2]) == 2  # a list argument: computed, not remembered


def test_only_the_most_recent_runs_are_kept():
    doubled, calls = _counting()
    runs = [_Run(budget=b) for b in range(RUNS_REMEMBERED + 1)]
    for run in runs:
        doubled(run)
    doubled(runs[-1])
    assert len(calls) == len(runs)  # the latest is still remembered
    doubled(runs[0])
    assert len(calls) == len(runs) + 1  # the oldest was let go
