"""The seed test plan (TC-01..TC-07) as rank bodies plus parent-side checks.

``testcases/tc/test_tcNN_*.py`` are thin pytest wrappers around these modules, and
``python -m harness`` runs those same pytest files, so there is one copy of the test
logic. Data flows one way: Case (config) -> RunSpec + plan -> rank bodies on a live
process group -> per-rank facts (frozen dataclasses, ``harness.suites.facts``) -> checks
in the parent -> Allure/results.

Every TC module satisfies ``Suite``; ``load_suite`` imports one and checks it.
"""

from __future__ import annotations

import importlib
from typing import Any, Optional, Protocol, runtime_checkable

from harness.config.schema import TC_IDS

TC_MODULES = {tc: f"harness.suites.tc{tc.removeprefix('TC-')}" for tc in TC_IDS}
"""Each TC id's suite module (``TC-05`` -> ``harness.suites.tc05``)."""


@runtime_checkable
class Suite(Protocol):
    """What a TC module declares (module-level names). The hooks have defaults in ``common``."""

    TC: str
    LEVEL: str
    TITLE: str

    def cases(self, matrix) -> list:
        """The TC's cases on a matrix (``harness.suites.case.Case``)."""

    def body(self, ctx, run, impl_cfg, *args) -> Any:
        """Rank side: runs on every rank of the pool, returns that rank's facts (picklable)."""

    def check(self, facts: list, run) -> list[str]:
        """Parent side: the problems found in the ranks' facts (empty: pass)."""

    def report_view(self, facts: list) -> dict:
        """Layout/memory figures for reports."""

    def summarize(self, facts: list) -> dict:
        """Numbers a sweep aggregates."""

    def missing_baseline(self, run) -> Optional[str]:
        """A reason to skip the case (nothing recorded to compare with), or None."""

    def separate_draft(self, case) -> bool:
        """True when the body's draft engine runs on its own ranks (an extra body argument)."""

    def world_size(self, case) -> int:
        """Rank processes the case needs (the plan's world unless the TC needs more)."""


def check_suite(module) -> Suite:
    """``module`` if it satisfies ``Suite``; TypeError naming what it lacks otherwise."""
    members = [n for n in Suite.__annotations__] + [
        n for n in ("cases", "body", "check", "report_view", "summarize", "missing_baseline", "separate_draft",
                    "world_size")]
    lacks = [n for n in members if not hasattr(module, n)]
    lacks += [n for n in members[3:] if hasattr(module, n) and not callable(getattr(module, n))]
    if lacks or not isinstance(module, Suite):
        raise TypeError(f"{module.__name__} is not a harness.suites.Suite: lacks or mistypes {', '.join(lacks)}")
    return module


def load_suite(tc: str) -> Suite:
    """``TC-03`` -> the checked module ``harness.suites.tc03``."""
    if tc not in TC_MODULES:
        raise ValueError(f"unknown TC {tc!r}; known: {', '.join(TC_MODULES)}")
    return check_suite(importlib.import_module(TC_MODULES[tc]))


def removed_by_keys(matrix) -> list:
    """[(TC id, case id)] of the cases the matrix's configuration keys (``Matrix.config_keys``) leave out: a
    refusal case those keys already make the spec refuse for another rule. Each TC module may declare
    ``removed_by_keys(matrix)`` (its case ids); keys that only choose the implementation remove none."""
    out = []
    for tc in matrix.tcs:
        hook = getattr(load_suite(tc), "removed_by_keys", None)
        out += [(tc, case_id) for case_id in (hook(matrix) if hook is not None else ())]
    return out
