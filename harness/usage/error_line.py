"""A user's mistake as one ``error:`` line on stderr, and the exit statuses a command ends with."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Iterator, NoReturn

from contract.errors import ImplementationFailure, UserError

USAGE_EXIT_CODE = 2
"""The exit status for a user error (argparse uses 2 for usage errors too)."""

FAILURE_EXIT_CODE = 1
"""The exit status when the code under test failed (``ImplementationFailure``): not a usage error."""

INTERRUPTED_EXIT_CODE = 130
"""128 + SIGINT, as a shell reports a process Ctrl-C ended."""


def say_error(message: object) -> None:
    """Print ``error: <message>`` on one line of stderr (for a command that then returns its own status)."""
    print(f"error: {one_line(message)}", file=sys.stderr, flush=True)


def one_line(message: object) -> str:
    """``message`` on one line, as a terminal shows it: whitespace runs are one space, and what a terminal
    would act on or cannot show (an escape sequence's ESC, a carriage return, an undecodable byte of the
    command line) is written as its Python escape (``\\x1b``, ``\\udcff``)."""
    text = " ".join(str(message).split())
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def fail(message: object) -> NoReturn:
    """Print ``error: <message>`` on one line and exit 2."""
    say_error(message)
    raise SystemExit(USAGE_EXIT_CODE)


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn a ``UserError`` raised inside the block into ``fail``; an ``ImplementationFailure`` (the code
    under test exited, crashed, hung) into one ``error:`` line and exit 1."""
    try:
        yield
    except UserError as exc:
        fail(exc)
    except ImplementationFailure as exc:
        say_error(exc)
        raise SystemExit(FAILURE_EXIT_CODE) from None
