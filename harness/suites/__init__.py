"""The seed test plan (TC-01..TC-07) as rank bodies plus parent-side checks.

``testcases/tc/test_tcNN_*.py`` are thin pytest wrappers around these modules, and
``python -m harness`` runs those same pytest files, so there is one copy of the test
logic. Data flows one way: Case (config) -> RunSpec + plan -> rank bodies on a live
process group -> per-rank facts (frozen dataclasses, ``harness.suites.facts``) -> checks
in the parent -> Allure/results.

Every TC module declares one ``SUITE = Suite(...)``: its id, level, title, cases, body and
check, plus the hooks where it departs from the defaults ``Suite`` gives (this class is
the one place a hook and its default are declared). ``load_suite`` imports a TC module
and returns its checked ``SUITE``.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

from harness.config.schema import TC_IDS
from harness.suites.facts import summarize
from harness.suites.views import report_view

TC_MODULES = {tc: f"harness.suites.tc{tc.removeprefix('TC-')}" for tc in TC_IDS}
"""Each TC id's suite module (``TC-05`` -> ``harness.suites.tc05``)."""


# ---- the defaults of the hooks a TC may leave out ----------------------------------------------


def no_missing_baseline(run) -> Optional[str]:
    return None


def no_separate_draft(case) -> bool:
    return False


def plan_world_size(case) -> int:
    return case.world_size


def removes_no_case(matrix) -> tuple:
    return ()


def predicts_nothing(*args) -> None:
    return None


NOT_JUDGED = "not_judged"
"""Where a case's checks not judged (``Suite.not_judged``) go: its result line's key and its JUnit property (the notes
joined by ``; ``)."""


def judges_everything(facts) -> tuple:
    return ()


def never(run) -> bool:
    return False


@dataclass(frozen=True, kw_only=True)
class Suite:
    """What a TC declares (``SUITE`` in its module). ``cases``, ``body`` and ``check`` are its own; every
    other hook has its default here, so a new hook is one field of this class."""

    TC: str
    LEVEL: str
    TITLE: str
    cases: Callable[[Any], list]
    """The TC's cases on a matrix (``harness.suites.case.Case``)."""
    body: Callable[..., Any]
    """Rank side: ``body(ctx, run, impl_cfg, *args)`` runs on every rank of the pool, returns that rank's
    facts (picklable; a module-level function, so that it reaches the ranks by name)."""
    check: Callable[[list, Any], list]
    """Parent side: ``check(facts, run)``, the problems found in the ranks' facts (empty: pass)."""
    report_view: Callable[[list], dict] = report_view
    """Layout/memory figures for reports (``harness.suites.views``)."""
    summarize: Callable[[list], dict] = summarize
    """Numbers a sweep aggregates (``harness.suites.facts.summarize``)."""
    missing_baseline: Callable[[Any], Optional[str]] = no_missing_baseline
    """``missing_baseline(run)``: a reason to skip the case (nothing recorded to compare with), or None."""
    separate_draft: Callable[[Any], bool] = no_separate_draft
    """``separate_draft(case)``: True when the body's draft engine runs on its own ranks (an extra body
    argument)."""
    world_size: Callable[[Any], int] = plan_world_size
    """``world_size(case)``: rank processes the case needs (the plan's world unless the TC needs more)."""
    removed_by_keys: Callable[[Any], Any] = removes_no_case
    """``removed_by_keys(matrix)``: ids of the refusal cases the matrix's configuration keys leave out
    (``harness.suites.removed_by_keys``)."""
    # What the TC's check finds on a variant the spec predicts to fail (``harness.suites.expectations``):
    predict_owner_rule: Callable[..., Any] = predicts_nothing
    """``predict_owner_rule(effect: expectations.OwnerRuleEffect) -> Optional[Prediction]``: the problems
    upstream's owner rule ``layer_id % s`` alone makes the check find, on a config it still plans."""
    predict_upstream_layout: Callable[..., Any] = predicts_nothing
    """``predict_upstream_layout(run) -> Optional[Prediction]``: the problems upstream's layout (its
    consecutive split groups, its worker split rank ``rank % s``) makes the check find, on a config both
    upstream and the spec accept and split (the owner rule's are added to them)."""
    predict_upstream_unsplit: Callable[..., Any] = predicts_nothing
    """``predict_upstream_unsplit(run) -> Optional[Prediction]``: the problems of upstream splitting a config
    the spec leaves unsplit (the enable flag off: upstream has none)."""
    predict_no_card_check: Callable[..., Any] = predicts_nothing
    """``predict_no_card_check(run) -> Optional[Prediction]``: the problems a tree with no card check (upstream's
    compiled tree) makes the check find where the spec refuses its placement or upstream's groups put two ranks
    of a group on one card (TC-03: its card problem, naming that the tree has no such check)."""
    passes_any_refusal: Callable[[Any], bool] = never
    """``passes_any_refusal(run)``: True where the check passes any UserError (TC-03: a placement the spec
    refuses), so no upstream refusal or layout is predicted."""

    not_judged: Callable[[list], tuple] = judges_everything
    """``not_judged(facts) -> tuple[str, ...]``: checks of the TC the case's implementation gives nothing to judge,
    each saying why in the implementation's own terms (TC-04: a compiled tree's plan note): shown beside the verdict
    (the case's result line, Allure, results.md, ``harness.native_verdicts``), never a problem and never a pass."""

    @property
    def description(self) -> str:
        """The TC module's docstring: what the TC checks and how (reports show it)."""
        return importlib.import_module(TC_MODULES[self.TC]).__doc__ or ""

    def __post_init__(self) -> None:
        if self.TC not in TC_IDS:
            raise TypeError(f"Suite TC {self.TC!r}; allowed: {', '.join(TC_IDS)}")
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name[0].islower() and not callable(value):
                raise TypeError(f"Suite {self.TC}: hook {f.name} is not callable ({value!r})")


def check_suite(module) -> Suite:
    """The ``SUITE`` a TC module declares; TypeError naming the module when it declares none."""
    suite = getattr(module, "SUITE", None)
    if not isinstance(suite, Suite):
        raise TypeError(f"{module.__name__} is not a TC module: it declares no SUITE = harness.suites.Suite(...) "
                        f"(found {type(suite).__name__})")
    return suite


def load_suite(tc: str) -> Suite:
    """``TC-03`` -> the checked ``SUITE`` of ``harness.suites.tc03``."""
    if tc not in TC_MODULES:
        raise ValueError(f"unknown TC {tc!r}; known: {', '.join(TC_MODULES)}")
    suite = check_suite(importlib.import_module(TC_MODULES[tc]))
    if suite.TC != tc:
        raise TypeError(f"{TC_MODULES[tc]} declares SUITE of {suite.TC}, not {tc}")
    return suite


def removed_by_keys(matrix) -> list:
    """[(TC id, case id)] of the cases the matrix's configuration keys (``Matrix.config_keys``) leave out: a
    refusal case those keys already make the spec refuse for another rule. Each TC may declare
    ``removed_by_keys(matrix)`` (its case ids); keys that only choose the implementation remove none."""
    return [(tc, case_id) for tc in matrix.tcs for case_id in load_suite(tc).removed_by_keys(matrix)]
