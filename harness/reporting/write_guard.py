"""A failed write of a result or an Allure file costs that file, never the session's other outcomes.

allure-pytest writes each result as it finishes; an ``OSError`` there (disk full, a
read-only mount appearing mid-run) would stop pytest with INTERNALERROR and lose
every outcome so far. ``guard_allure_writes`` wraps the writer's methods (before
allure-pytest registers its writer) so a failure is recorded instead; the plugin
prints one ``error:`` line per kind at the end and makes the exit status non-zero.
Under xdist the workers' records travel to the controller in ``workeroutput``.
"""

from __future__ import annotations

import functools
from typing import Callable

WORKEROUTPUT_KEY = "lw_write_failures"

_failures: list[str] = []


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


def _guarded(method: Callable, what: str) -> Callable:
    @functools.wraps(method)  # keeps allure's hookimpl marker, so the wrapper is still the hook
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except OSError as exc:
            record(f"Allure {what} in {getattr(self, '_report_dir', '?')}", exc)
            return None

    wrapper.__lw_guarded__ = True
    return wrapper


def guard_allure_writes() -> None:
    """Wrap ``AllureFileLogger``'s writers once per process (idempotent)."""
    try:
        from allure_commons.logger import AllureFileLogger
    except ImportError:  # allure-pytest absent: nothing to guard
        return
    for name, what in (("_report_item", "result"), ("report_attached_file", "attachment"),
                       ("report_attached_data", "attachment")):
        method = getattr(AllureFileLogger, name, None)
        if method is not None and not getattr(method, "__lw_guarded__", False):
            setattr(AllureFileLogger, name, _guarded(method, what))
