"""The decorator every command's ``main`` wears: user errors, a gone reader, unwritable stdout, Ctrl-C."""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

from harness.usage.error_line import INTERRUPTED_EXIT_CODE, say_error, user_errors
from harness.usage.stdout_guard import GuardedStdout, StdoutError, stdout_to_devnull
from harness.usage.working_directory import check_working_directory

F = TypeVar("F", bound=Callable[..., object])


def command(func: F) -> F:
    """Decorator for a ``main``: user errors become one line and exit 2.

    A reader that goes away (``python -m harness.plan | head -1``) is not an error of
    ours: the rest of the output is dropped quietly (Python's documented recipe for
    SIGPIPE: point stdout at devnull so the exit flush cannot fail again), exit 1.
    Standard output that cannot be written otherwise (``> /dev/full``: ENOSPC, EIO) is
    one ``error:`` line on stderr and exit 1, no traceback: what was printed is flushed
    here, before the interpreter's exit flush could fail where nothing reports it.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        check_working_directory()
        saved = sys.stdout
        guard = sys.stdout = GuardedStdout(saved)
        try:
            try:
                with user_errors():
                    result = func(*args, **kwargs)
            finally:
                guard.flush()
            if guard.error is not None:  # a write that failed where something caught it (a Hydra callback)
                raise guard.error
            return result
        except BrokenPipeError:
            stdout_to_devnull(saved)
            raise SystemExit(1) from None
        except KeyboardInterrupt:  # Ctrl-C where the command has no handler of its own: a line, not a traceback
            say_error("interrupted (SIGINT); what was under way did not finish")
            raise SystemExit(INTERRUPTED_EXIT_CODE) from None
        except StdoutError as exc:
            stdout_to_devnull(saved)
            say_error(f"cannot write to standard output: {exc.strerror or exc}")
            raise SystemExit(1) from None
        finally:
            if isinstance(sys.stdout, GuardedStdout):
                sys.stdout = saved

    return wrapper  # type: ignore[return-value]
