"""Mutation self-test: the TC suites catch the mutants, and the reference passes them all.

Runs on the default matrix ``conf/matrix/ci.yaml`` through ``harness.mutation.killmatrix``
(the TC modules' own cases, bodies and checks, on this worker's rank pools). "Caught" means
what fails the pytest test: a case with problems or a failure. Each test computes its own
row, so the tests run in parallel under xdist; ``python -m harness.mutation`` builds the whole
table (or ``--rows DIR`` from the row files written here when ``LW_MUTATION_ROWS=DIR``).
A mutant's predicted TCs try first the case that catches it first in case order
(``harness.mutation.first_catch``), then, if that case passes, the others in order.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.config.schema import TC_IDS
from harness.mutation import killmatrix, render
from harness.mutation.first_catch import FIRST_CATCH
from implementations.mutants import MUTANTS

pytestmark = pytest.mark.meta

KNOWN_GAPS: dict[str, str] = {}
"""Mutants no TC catches yet, with the missing case. Strict xfail: closing the gap turns the
test XPASS, which fails until the entry is removed."""


def _publish(r: killmatrix.Row) -> None:
    """Attach the row to Allure; also write it to $LW_MUTATION_ROWS/<implementation>.json if set."""
    text = render.markdown([r], title=f"Kill matrix row: {r.implementation}")
    try:
        import allure

        allure.attach(text, name=f"kill matrix row {r.implementation}", attachment_type="text/markdown",
                      extension="md")
    except ImportError:  # allure-pytest is a dev dependency; the assertion does not need it
        pass
    folder = os.environ.get("LW_MUTATION_ROWS")
    if folder:
        render.write_json(Path(folder) / f"{r.implementation}.json", render.to_json([r])["rows"][0])


def _describe(r: killmatrix.Row) -> str:
    return render.markdown([r], title=r.implementation)


@pytest.mark.parametrize("name", list(MUTANTS), ids=list(MUTANTS))
def test_mutant_is_caught(name, request):
    """Caught by every TC its ``expected_catchers`` names (so by at least one)."""
    if name in KNOWN_GAPS:
        request.applymarker(pytest.mark.xfail(strict=True, reason=KNOWN_GAPS[name]))
    expected = MUTANTS[name].expected_catchers
    # Predicted catchers first, each up to its first catching case (the known one tried before the
    # others): the cheap path when all hold.
    r = killmatrix.row(name, tcs=expected, stop_at_first=True, first=FIRST_CATCH.get(name))
    missed = [tc for tc in expected if not r.cells[tc].caught]
    if missed:  # find out who else catches it, for the message
        rest = killmatrix.row(name, tcs=[tc for tc in TC_IDS if tc not in expected], stop_at_first=True)
        r = killmatrix.Row(implementation=r.implementation, cells={**r.cells, **rest.cells},
                           component=r.component, rule=r.rule, expected_catchers=r.expected_catchers)
    _publish(r)
    assert r.caught_by, f"mutant {name} survives every TC ({MUTANTS[name].rule})\n{_describe(r)}"
    assert not missed, (f"mutant {name} is not caught by {', '.join(missed)} although expected_catchers "
                        f"names it; caught by {', '.join(r.caught_by)}\n{_describe(r)}")


def test_reference_runs_every_catching_case():
    """The control: without it, "caught" would mean nothing. The kill matrix runs on the default matrix, whose
    TC tests (testcases/tc) run every case on the reference, so each recorded catching case also passes there;
    here: the reference is on that matrix's implementations axis and every recorded case is one of its cases."""
    matrix = killmatrix.load()
    assert killmatrix.REFERENCE in matrix.implementations
    keys = {tc: {killmatrix.case_key(c) for c in killmatrix.cases_for(tc, killmatrix.REFERENCE, matrix)}
            for tc in TC_IDS}
    unknown = [(name, tc, key) for name, by_tc in FIRST_CATCH.items() for tc, key in by_tc.items()
               if key not in keys[tc]]
    assert not unknown, f"recorded catching cases the {killmatrix.MATRIX} matrix does not run: {unknown}"


@pytest.mark.parametrize("tc", TC_IDS)
def test_every_tc_catches_a_mutant(tc):
    """No toothless suite: each TC is an expected catcher of at least one mutant outside KNOWN_GAPS,
    and ``test_mutant_is_caught`` fails unless every expected catcher really catches its mutant.
    (Running the mutants again here would repeat those runs.)"""
    predicted = sorted(n for n, cls in MUTANTS.items() if tc in cls.expected_catchers and n not in KNOWN_GAPS)
    assert predicted, (f"{tc} is no mutant's expected catcher: add a mutant of the rule it guards "
                       f"(implementations/mutants) or name {tc} in one that it catches")
