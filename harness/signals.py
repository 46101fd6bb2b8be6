"""Ctrl-C, SIGTERM and SIGHUP as one stop request: ``python -m harness`` stops between jobs, cleans up,
says what finished; ``python -m harness.reporting.report`` drops its staging folder. ``signals_deferred``
holds them instead while files that belong together are written. Both install through ``handlers``.

pytest turns a KeyboardInterrupt inside a job into exit code 2 and returns, and
Hydra's local launcher would then start the next job. So the app's handler records
that a stop was asked for before raising KeyboardInterrupt; the job runner checks
``stop_requested()`` after pytest returns and re-raises, which ends the sweep.
SIGTERM and SIGHUP become the same KeyboardInterrupt, so every ``finally`` runs:
rank pools close, temp folders go, and reports are only ever renamed into place.
A signal the starting process ignored stays ignored (``nohup python -m harness ...``: closing the
terminal does not stop the sweep).
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Iterator, Optional, Sequence

HANDLED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

_stop: Optional[str] = None


class StopRequested(KeyboardInterrupt):
    """A signal asked the app to stop; ``signal_name`` says which."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name


def stop_requested() -> Optional[str]:
    """The name of the signal that asked to stop (``SIGINT``...), or None."""
    return _stop


def exit_code(signal_name: str) -> int:
    """128 + the signal number, as a shell reports a process ended by it."""
    return 128 + int(getattr(signal, signal_name, signal.SIGINT))


def request_stop(signum, _frame) -> None:
    """The handler ``stop_on_signals`` installs: records the first signal's name and raises ``StopRequested``."""
    global _stop
    name = signal.Signals(signum).name
    if _stop is None:
        _stop = name
    raise StopRequested(name)


@contextmanager
def handlers(signals: Sequence[int], handler) -> Iterator[None]:
    """The one installer of signal handlers: ``handler`` for each of ``signals`` during the block, the old
    ones back after. A signal the starting process ignored stays ignored (``nohup``); in a thread other than
    the main one nothing is installed (signals belong to the main thread) and the block runs."""
    old = {}
    try:
        for sig in signals:
            if signal.getsignal(sig) == signal.SIG_IGN:  # ignored by whoever started us (nohup: SIGHUP): stays so
                continue
            old[sig] = signal.signal(sig, handler)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        pass
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Install the stop handlers for the block (main thread only); restore the old ones after."""
    global _stop
    _stop = None
    with handlers(HANDLED, request_stop):
        yield


@contextmanager
def signals_deferred(signals: Sequence[int] = (signal.SIGINT, signal.SIGTERM)) -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while the block writes files that belong together (a record and the page
    showing it): a signal that came meanwhile is acted on when the block ends, so it never stops the
    command between the two. In a thread other than the main one signals cannot be held: the block runs."""
    received: list[int] = []
    try:
        with handlers(signals, lambda signum, _frame: received.append(signum)):
            yield
    finally:
        if received:
            signal.raise_signal(received[0])
