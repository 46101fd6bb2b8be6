"""A failed write of a result or an Allure file costs that file, never the session's other outcomes.

allure-pytest writes each result as it finishes; an ``OSError`` there (disk full, a
read-only mount appearing mid-run) would stop pytest with INTERNALERROR and lose
every outcome so far. ``guard_allure_writes`` registers hook wrappers with
allure-commons' public plugin manager around its writer hooks (``report_result``,
``report_container``, ``report_attached_file``, ``report_attached_data``,
``report_globals``), so a failure is recorded instead; the plugin prints one
``error:`` line per kind at the end and makes the exit status non-zero.
Under xdist the workers' records travel to the controller in ``workeroutput``.
"""

from __future__ import annotations

import os

WORKEROUTPUT_KEY = "lw_write_failures"

_failures: list[str] = []
"""The failed writes of the pytest session under way (``session_started``)."""
_enclosing: list[list[str]] = []
"""The records of the sessions around it (pytest run in-process inside a test), each back when its inner one ends."""


def session_started() -> None:
    """A pytest session's records start empty: ``python -m harness`` runs one session per job in a process, and a
    job's failed write makes that job's exit status 1, not every later job's."""
    global _failures
    _enclosing.append(_failures)
    _failures = []


def session_ended() -> None:
    """The records of the session around the one that ended (none outside a session)."""
    global _failures
    _failures = _enclosing.pop() if _enclosing else []


def record(what: str, exc: OSError) -> None:
    _failures.append(f"{what}: {exc.strerror or exc}")


def failures() -> list[str]:
    return list(_failures)


def extend(more: list[str]) -> None:
    _failures.extend(more)


def summary() -> str:
    """One line naming how many writes failed and the first of them."""
    first = _failures[0]
    more = f" (and {len(_failures) - 1} more)" if len(_failures) > 1 else ""
    return f"error: {len(_failures)} result file(s) could not be written; first: {first}{more}"


def _guard(what: str):
    """The body of a hook wrapper: the wrapped writers' result, or None and a record when one raised ``OSError``."""
    try:
        return (yield)
    except OSError as exc:
        where = f" in {os.path.dirname(exc.filename)}" if exc.filename else ""
        record(f"Allure {what}{where}", exc)
        return None


GUARD_NAME = "lwsplit-write-guard"
"""The guard's name in allure-commons' plugin manager."""


def allure_write_guard():
    """A plugin for allure-commons' plugin manager that wraps every writer hook with ``_guard``."""
    # optional here: a session without allure-pytest never registers the guard (``guard_allure_writes``)
    from allure_commons import hookimpl

    class AllureWriteGuard:
        @hookimpl(wrapper=True)
        def report_result(self, result):
            return (yield from _guard("result"))

        @hookimpl(wrapper=True)
        def report_container(self, container):
            return (yield from _guard("result"))

        @hookimpl(wrapper=True)
        def report_attached_file(self, source, file_name):
            return (yield from _guard("attachment"))

        @hookimpl(wrapper=True)
        def report_attached_data(self, body, file_name):
            return (yield from _guard("attachment"))

        @hookimpl(wrapper=True)
        def report_globals(self, globals_item):
            return (yield from _guard("result"))

    return AllureWriteGuard()


def guard_allure_writes(manager=None) -> None:
    """Register the guard with allure-commons' plugin manager (or ``manager``) once per process."""
    if manager is None:
        try:
            # optional here: a session without allure-pytest has nothing to guard
            from allure_commons import plugin_manager as manager
        except ImportError:  # allure-pytest absent: nothing to guard
            return
    if manager.get_plugin(GUARD_NAME) is None:
        manager.register(allure_write_guard(), name=GUARD_NAME)
