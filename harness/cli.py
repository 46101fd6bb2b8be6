"""What every harness command does with a user's mistake: one line on stderr, exit 2.

``UserError`` (wrong override, bad file, invalid plan) is the user's input, not a
bug, so it prints ``error: <message>`` and no traceback. Anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import functools
import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator, NoReturn, Sequence, TypeVar

from implementations.errors import UserError

USAGE_EXIT_CODE = 2
"""The exit status for a user error (argparse uses 2 for usage errors too)."""

F = TypeVar("F", bound=Callable[..., object])


def fail(message: object) -> NoReturn:
    """Print ``error: <message>`` on one line and exit 2."""
    line = " ".join(str(message).split())
    print(f"error: {line}", file=sys.stderr)
    raise SystemExit(USAGE_EXIT_CODE)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a ``UserError`` raised inside the block into ``fail``."""
    try:
        yield
    except UserError as exc:
        fail(exc)


def command(func: F) -> F:
    """Decorator for a ``main``: user errors become one line and exit 2.

    A reader that goes away (``python -m harness.plan | head -1``) is not an error of
    ours: the rest of the output is dropped quietly (Python's documented recipe for
    SIGPIPE: point stdout at devnull so the exit flush cannot fail again), exit 1.
    """

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        try:
            with user_errors():
                return func(*args, **kwargs)
        except BrokenPipeError:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise SystemExit(1) from None

    return wrapper  # type: ignore[return-value]


def join_flag_values(argv: Sequence[str], flag: str = "--gflags") -> list[str]:
    """``--gflags "--x=1"``: glue the value on, since argparse reads a leading ``--`` as an option."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == flag and i + 1 < len(argv):
            out.append(f"{flag}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out
