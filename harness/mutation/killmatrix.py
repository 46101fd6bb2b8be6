"""The kill matrix: which TC suite catches which mutant, on the default matrix ``conf/matrix/ci.yaml``.

A TC *catches* an implementation when at least one of its cases reports problems
(``check`` non-empty) or fails (a rank failure or any other exception; a skip is not a
failure): exactly what fails the pytest test. Cases run in this process on the same
rank pools and with the same call convention as the TC tests (``harness.suites.execute``).
The reference must pass every case, or "caught" means nothing.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Optional

from harness.rankpool import PoolUnavailable, RankSkip, get_pool
from harness.suites import load_suite
from harness.suites.execute import pool_runner, run_case
from harness.suites.expectations import judge
from harness.suites.matrix import Matrix, load_matrix

MATRIX = "ci"
REFERENCE = "reference"
PASS, PROBLEMS, FAILED, SKIPPED = "pass", "problems", "failed", "skipped"
DETAIL_CHARS = 300


@dataclass(frozen=True, kw_only=True)
class CaseOutcome:
    case_id: str
    verdict: str
    """pass, problems (check found some), failed (raised), skipped."""
    detail: str = ""
    """First problem, the error's first line, or the skip reason."""
    seconds: float = 0.0

    @property
    def catches(self) -> bool:
        return self.verdict in (PROBLEMS, FAILED)


@dataclass(frozen=True, kw_only=True)
class Cell:
    """One implementation under one TC."""

    tc: str
    total_cases: int
    outcomes: tuple[CaseOutcome, ...]
    stopped_early: bool = False
    """True when evaluation stopped at the first catching case (the rest did not run)."""

    @property
    def caught(self) -> bool:
        return any(o.catches for o in self.outcomes)

    @property
    def kills(self) -> int:
        return sum(o.catches for o in self.outcomes)

    @property
    def first_catch(self) -> Optional[CaseOutcome]:
        return next((o for o in self.outcomes if o.catches), None)

    @property
    def seconds(self) -> float:
        return sum(o.seconds for o in self.outcomes)


@dataclass(frozen=True, kw_only=True)
class Row:
    """One implementation under every evaluated TC."""

    implementation: str
    """Config option: ``reference`` or ``mutant_<name>``."""
    cells: dict[str, Cell] = field(default_factory=dict)
    component: str = ""
    rule: str = ""
    expected_catchers: tuple[str, ...] = ()

    @property
    def caught_by(self) -> tuple[str, ...]:
        return tuple(tc for tc, cell in self.cells.items() if cell.caught)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.cells.values())


def suite_module(tc: str):
    """``TC-03`` -> ``harness.suites.tc03``, checked against ``harness.suites.Suite``."""
    return load_suite(tc)


def implementation_option(name: str) -> str:
    """A mutant's short name (``owner_off_by_one``), its option, or ``reference`` -> the config option."""
    # implementations.mutants imports torch (3.1 s, python -X importtime): reading and rendering a matrix need none of it
    from implementations.mutants import MUTANTS

    if name == REFERENCE or name.startswith("mutant_"):
        return name
    if name in MUTANTS:
        return MUTANTS[name].name
    raise ValueError(f"unknown implementation {name!r}; known: {REFERENCE}, {', '.join(sorted(MUTANTS))}")


def load(overrides: Iterable[str] = ()) -> Matrix:
    return load_matrix(MATRIX, list(overrides))


def cases_for(tc: str, implementation: str, matrix: Optional[Matrix] = None) -> list:
    """The TC's own cases on ``matrix`` with the implementations axis replaced by ``implementation``."""
    matrix = matrix or load()
    if tc not in matrix.tcs:
        return []
    narrowed = dataclasses.replace(matrix, implementations=[implementation_option(implementation)])
    return suite_module(tc).cases(narrowed)


def case_key(case) -> str:
    """The case's id without its implementation: one configuration, whichever implementation runs on it."""
    return key_of(case.id, case.implementation)


def key_of(case_id: str, implementation: str) -> str:
    """``case_key`` from a case id and the implementation option in it."""
    return case_id.replace(f"-{implementation}", "", 1)


def tried_first(cases: list, first: Optional[str]) -> list:
    """``cases`` with the one whose ``case_key`` is ``first`` moved to the front; the rest keep their order."""
    lead = [c for c in cases if first is not None and case_key(c) == first][:1]
    return lead + [c for c in cases if c not in lead]


def run_one(suite, case, pool_getter: Callable[..., Any] = get_pool) -> CaseOutcome:
    """Run one case; never raises for what the implementation does (only for interrupts)."""
    start = time.perf_counter()
    try:
        problems = judge(suite.TC, case.implementation, case.resolved.run,
                         run_case(suite, case, pool_runner(case, pool_getter)))
    except (RankSkip, PoolUnavailable) as exc:
        return CaseOutcome(case_id=case.id, verdict=SKIPPED, detail=exc.reason,
                           seconds=time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - any error fails the pytest test, so it catches
        text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
        return CaseOutcome(case_id=case.id, verdict=FAILED, detail=text[:DETAIL_CHARS],
                           seconds=time.perf_counter() - start)
    seconds = time.perf_counter() - start
    if problems:
        more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
        return CaseOutcome(case_id=case.id, verdict=PROBLEMS, detail=(problems[0] + more)[:DETAIL_CHARS],
                           seconds=seconds)
    return CaseOutcome(case_id=case.id, verdict=PASS, seconds=seconds)


def evaluate(implementation: str, tc: str, *, matrix: Optional[Matrix] = None, stop_at_first: bool = True,
             pool_getter: Callable[..., Any] = get_pool, first: Optional[str] = None) -> Cell:
    """Run ``tc``'s cases against ``implementation``; with ``stop_at_first``, until the first catch.

    ``first`` (a ``case_key``, with ``stop_at_first`` only) names the case to try before the others:
    the one known to catch (``harness.mutation.first_catch``). Whether the TC catches does not depend
    on it: when that case passes, the others run in order as without it.
    """
    suite = suite_module(tc)
    cases = cases_for(tc, implementation, matrix)
    outcomes = []
    for case in tried_first(cases, first) if stop_at_first else cases:
        outcomes.append(run_one(suite, case, pool_getter))
        if stop_at_first and outcomes[-1].catches:
            break
    return Cell(tc=tc, total_cases=len(cases), outcomes=tuple(outcomes),
                stopped_early=len(outcomes) < len(cases))


def row(implementation: str, *, tcs: Optional[Iterable[str]] = None, matrix: Optional[Matrix] = None,
        stop_at_first: bool = True, pool_getter: Callable[..., Any] = get_pool,
        first: Optional[Mapping[str, str]] = None) -> Row:
    """The kill-matrix row of ``implementation`` (every TC of the matrix unless ``tcs`` narrows it).

    The reference is always run on every case (``stop_at_first`` applies to mutants only).
    ``first`` maps a TC to the case to try first there (see ``evaluate``).
    """
    # implementations.mutants imports torch (3.1 s, python -X importtime): reading and rendering a matrix need none of it
    from implementations.mutants import MUTANTS

    option = implementation_option(implementation)
    matrix = matrix or load()
    stop = stop_at_first and option != REFERENCE
    cells = {tc: evaluate(option, tc, matrix=matrix, stop_at_first=stop, pool_getter=pool_getter,
                          first=(first or {}).get(tc))
             for tc in (tcs if tcs is not None else matrix.tcs)}
    cls = MUTANTS.get(option.removeprefix("mutant_")) if option != REFERENCE else None
    return Row(implementation=option, cells=cells,
               component=cls.component if cls else "", rule=cls.rule if cls else "",
               expected_catchers=tuple(cls.expected_catchers) if cls else ())


def full_matrix(*, matrix: Optional[Matrix] = None, stop_at_first: bool = False,
                pool_getter: Callable[..., Any] = get_pool,
                progress: Optional[Callable[[Row], None]] = None) -> list[Row]:
    """The reference row, then one row per mutant in registry order."""
    # implementations.mutants imports torch (3.1 s, python -X importtime): reading and rendering a matrix need none of it
    from implementations.mutants import MUTANTS

    matrix = matrix or load()
    rows = []
    for name in (REFERENCE, *MUTANTS):
        rows.append(row(name, matrix=matrix, stop_at_first=stop_at_first, pool_getter=pool_getter))
        if progress:
            progress(rows[-1])
    return rows
