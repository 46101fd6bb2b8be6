"""The session's matrix as test parameters: ``lw_case`` per TC module, the level and TC markers, and the
session header's line for cases the key overrides leave out."""

from __future__ import annotations

import pytest

from harness.pytest_plugin import keys


def pytest_configure(config) -> None:
    # harness.suites and the config schema (57 ms, python -X importtime): a bad --lw-* option is one line without them
    from harness.config.schema import TC_IDS

    for name, text in (("L1", "level 1 of the seed test plan"), ("L2", "level 2 of the seed test plan")):
        config.addinivalue_line("markers", f"{name}: {text}")
    for tc in TC_IDS:
        config.addinivalue_line("markers", f"{tc.lower().replace('-', '')}: {tc} of the seed test plan")


def removed_case_lines(matrix) -> list[str]:
    """The session header's line naming the cases the matrix's configuration keys leave out (none: no line).
    Keys that only choose or locate the implementation remove no case (``Matrix.config_keys``)."""
    # harness.suites and the config schema (57 ms, python -X importtime): a bad --lw-* option is one line without them
    from harness.suites import removed_by_keys

    removed = removed_by_keys(matrix)
    if not removed:
        return []
    return [f"lw-matrix: the key overrides {' '.join(matrix.config_keys())} already break a startup rule of "
            f"FEATURE 3, so {len(removed)} refusal cases are left out: "
            + ", ".join(f"{tc}[{case_id}]" for tc, case_id in removed)]


def pytest_report_header(config) -> list[str]:
    if keys.MATRIX not in config.stash:
        return []
    return removed_case_lines(config.stash[keys.MATRIX])


def pytest_generate_tests(metafunc) -> None:
    if "lw_case" not in metafunc.fixturenames:
        return
    suite = metafunc.module.SUITE
    matrix = metafunc.config.stash[keys.MATRIX]
    cases = suite.cases(matrix) if suite.TC in matrix.tcs else []
    metafunc.parametrize("lw_case", cases, ids=[c.id for c in cases], indirect=True)


def pytest_collection_modifyitems(config, items) -> None:
    # A TC the matrix does not apply to has no cases: not generated (deselected), rather than
    # pytest's "got empty parameter set" skip.
    empty = [item for item in items if _has_empty_case(item)]
    if empty:
        items[:] = [item for item in items if not _has_empty_case(item)]
        config.hook.pytest_deselected(items=empty)
    for item in items:
        case = case_of(item)
        if case is None:
            continue
        suite = item.module.SUITE
        item.add_marker(getattr(pytest.mark, suite.LEVEL))
        item.add_marker(getattr(pytest.mark, suite.TC.replace("-", "").lower()))


def case_of(item):
    """The item's ``lw_case``, or None (not a TC test, or an empty parameter set)."""
    # harness.suites and the config schema (57 ms, python -X importtime): a bad --lw-* option is one line without them
    from harness.suites.case import Case

    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("lw_case") if callspec else None
    return case if isinstance(case, Case) else None  # an empty parameter set holds NOTSET


def _has_empty_case(item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "lw_case" in callspec.params and case_of(item) is None


@pytest.fixture
def lw_case(request):
    """The case, with its Allure labels (predicted failures are judged by the test: expectations.judge)."""
    # harness.reporting.allure_labels (40 ms, python -X importtime): pytest --help and a bad option run no test
    from harness.reporting import allure_labels

    case = request.param
    suite = request.module.SUITE
    resolved = case.resolved
    allure_labels.apply(case, suite, resolved)
    return case
