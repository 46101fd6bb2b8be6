"""Ctrl-C, SIGTERM and SIGHUP as one stop request: ``python -m harness`` stops between jobs, cleans up,
says what finished; ``python -m harness.reporting.report`` drops its staging folder.

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
from typing import Iterator, Optional

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


def _handler(signum, _frame) -> None:
    global _stop
    name = signal.Signals(signum).name
    if _stop is None:
        _stop = name
    raise StopRequested(name)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Install the handlers for the block (main thread only); restore the old ones after."""
    global _stop
    _stop = None
    old = {}
    try:
        for sig in HANDLED:
            if signal.getsignal(sig) == signal.SIG_IGN:  # ignored by whoever started us (nohup: SIGHUP): stays so
                continue
            old[sig] = signal.signal(sig, _handler)
    except ValueError:  # not the main thread: leave signals to whoever owns them
        pass
    try:
        yield
    finally:
        for sig, previous in old.items():
            signal.signal(sig, previous)
