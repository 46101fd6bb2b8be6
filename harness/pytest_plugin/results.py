"""A case's result: its Allure labels, title and attachments, its result line (``--lw-results``, or the
``GivenCases`` that gave the session its cases), and the result
writes that failed (one ``error:`` line and exit status 1 at the end, ``harness.reporting.write_guard``)."""

from __future__ import annotations

import json
import os

import pytest

from harness.pytest_plugin import keys
from harness.pytest_plugin.parametrize import case_of
from harness.reporting import write_guard

_RECORDING = pytest.StashKey[bool]()
"""config: this session keeps its own record of failed writes (``write_guard.session_started``)."""


def pytest_configure(config) -> None:
    write_guard.session_started()  # python -m harness: a job's failed write is not the next job's exit status
    config.stash[_RECORDING] = True


def pytest_unconfigure(config) -> None:
    if config.stash.get(_RECORDING, False):
        write_guard.session_ended()


def pytest_collection_modifyitems(config, items) -> None:
    # harness.reporting.allure_labels (40 ms, python -X importtime): pytest --help and a bad option run no test
    from harness.reporting import allure_labels

    config.stash[keys.REPRESENTATIVE] = allure_labels.representatives(
        [case for case in map(case_of, items) if case is not None])
    for item in items:
        if case_of(item) is None:
            for mark in allure_labels.self_test_markers(item):
                item.add_marker(mark)


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    case = case_of(pyfuncitem)
    if case is not None and getattr(pyfuncitem.config.option, "allure_report_dir", None):
        # harness.reporting.allure_labels (40 ms, python -X importtime): pytest --help and a bad option run no test
        from harness.reporting import allure_labels

        allure_labels.apply_title(case, pyfuncitem.module.SUITE)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and call.excinfo is not None and getattr(item.config.option, "allure_report_dir", None):
        # harness.reporting.allure_labels (40 ms, python -X importtime): pytest --help and a bad option run no test
        from harness.reporting import allure_labels

        allure_labels.mark_origin(call.excinfo.value)  # the report's category comes from the exception
    case = case_of(item)
    if case is not None and call.when == "call":
        # harness.reporting.allure_labels (40 ms, python -X importtime): pytest --help and a bad option run no test
        from harness.reporting import allure_labels

        # Taken, not read: an item lives for the whole session, and a stash that kept every case's
        # facts (about 600 objects a case) made each of the worker's full garbage collections walk them all.
        stash = item.stash.get(keys.FACTS, {})
        if keys.FACTS in item.stash:
            del item.stash[keys.FACTS]
        unjudged = item.module.SUITE.not_judged(stash["facts"]) if stash.get("facts") else ()
        if unjudged:  # a JUnit property (harness.native_verdicts reads it); teardown's report carries it
            # harness.suites is imported already (the case's test module declares its SUITE with it)
            from harness.suites import NOT_JUDGED

            item.user_properties.append((NOT_JUDGED, "; ".join(unjudged)))
        if getattr(item.config.option, "allure_report_dir", None):  # charts cost time; only when reported
            representative = (case.tc, case.id) in item.config.stash.get(keys.REPRESENTATIVE, set())
            allure_labels.attach_results(item, case, stash.get("facts"), report, call.excinfo,
                                         representative=representative)
            if report.failed and call.excinfo is None and "XPASS(strict)" in str(report.longrepr):
                allure_labels.mark_xpass(str(report.longrepr).replace("[XPASS(strict)]", "").strip())
            if unjudged:
                allure_labels.mark_not_judged(unjudged)
        path = item.config.getoption("lw_results")
        given = item.config.stash.get(keys.GIVEN, None)
        if path or given is not None:
            # harness.suites.case_result imports the suites (67 ms, python -X importtime): a bad option runs no test
            from harness.suites.case_result import case_result

            line = case_result(item.module.SUITE, case, report, stash.get("facts"))
            if given is not None:
                given.results.append(line)
        if path:
            try:
                _append_result(path, line)
            except OSError as exc:  # this case's line is lost: fail this case, not the session
                report.outcome = "failed"
                report.longrepr = f"could not append this case's result to --lw-results {path}: {exc.strerror or exc}"
    return report


def _append_result(path: str, line: dict) -> None:
    text = json.dumps(line, default=str)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(text + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: collect the write failures a worker recorded."""
    output = getattr(node, "workeroutput", {})
    write_guard.extend(list(output.get(write_guard.WORKEROUTPUT_KEY, [])))


def pytest_sessionfinish(session) -> None:
    """The Allure environment first (``allure_env.finish``: its write may fail too), then the failed
    writes: handed to the controller by a worker, the exit status of the controller (1 when any)."""
    # allure_env is a plugin registered after this one: imported first here, pytest could not rewrite its asserts (a warning)
    from harness.pytest_plugin import allure_env

    config = session.config
    allure_env.finish(config)
    if hasattr(config, "workeroutput"):
        config.workeroutput[write_guard.WORKEROUTPUT_KEY] = write_guard.failures()
    elif write_guard.failures() and session.exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter) -> None:
    if write_guard.failures() and not hasattr(terminalreporter.config, "workerinput"):
        terminalreporter.write_line(write_guard.summary(), red=True)
