"""What every harness command does with a user's mistake: one line on stderr, exit 2.

``UserError`` (wrong override, bad file, invalid plan) is the user's input, not a
bug, so it prints ``error: <message>`` and no traceback. Anything else is a bug
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import errno
import functools
import importlib
import os
import sys
from contextlib import contextmanager
from typing import Callable, Iterator, NoReturn, Optional, Sequence, TypeVar

from contract.errors import ImplementationFailure, UserError
from harness.signals import signals_deferred  # noqa: F401  (its owner; kept importable from here)

USAGE_EXIT_CODE = 2
"""The exit status for a user error (argparse uses 2 for usage errors too)."""

INTERRUPTED_EXIT_CODE = 130
"""128 + SIGINT, as a shell reports a process Ctrl-C ended."""

F = TypeVar("F", bound=Callable[..., object])


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


def docs_writer():
    """``tools.docs_blocks``, the writer of the docs' generated blocks, for a command's ``--docs``: the project's
    own tooling, in a checkout only (the wheel ships no ``tools/``); without it, one ``error:`` line."""
    try:
        return importlib.import_module("tools.docs_blocks")
    except ModuleNotFoundError as exc:
        if exc.name not in ("tools", "tools.docs_blocks"):
            raise
        fail("--docs writes the docs of a checkout (tools/docs_blocks.py); run the command from one")


def check_working_directory() -> None:
    """A command reads relative paths (overrides, results folders) against the working directory: one that
    was deleted (or unmounted) under the shell is said plainly, not blamed on the overrides."""
    try:
        os.getcwd()
    except FileNotFoundError:
        fail("the working directory no longer exists (deleted or unmounted); cd into an existing folder "
             "and run the command again")


class Parser(argparse.ArgumentParser):
    """``argparse`` whose usage errors are one ``error:`` line (no usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        fail(f"{message} (see {self.prog} --help)")


FAILURE_EXIT_CODE = 1
"""The exit status when the code under test failed (``ImplementationFailure``): not a usage error."""


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
        guard = sys.stdout = _GuardedStdout(saved)
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
            _stdout_to_devnull(saved)
            raise SystemExit(1) from None
        except KeyboardInterrupt:  # Ctrl-C where the command has no handler of its own: a line, not a traceback
            say_error("interrupted (SIGINT); what was under way did not finish")
            raise SystemExit(INTERRUPTED_EXIT_CODE) from None
        except _StdoutError as exc:
            _stdout_to_devnull(saved)
            say_error(f"cannot write to standard output: {exc.strerror or exc}")
            raise SystemExit(1) from None
        finally:
            if isinstance(sys.stdout, _GuardedStdout):
                sys.stdout = saved

    return wrapper  # type: ignore[return-value]


class _StdoutError(OSError):
    """Standard output could not be written (ENOSPC, EIO, ...): told apart from a failed write elsewhere."""


class _GuardedStdout:
    """``sys.stdout`` while a command runs: a failed write or flush is a ``_StdoutError``; all else passes through."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.error: Optional[_StdoutError] = None
        """The first failed write, kept: the command ends with it even if a caller swallowed it."""

    def write(self, text):
        if self._stream is None:  # the process was started with stdout closed (``>&-``)
            raise self._failed(OSError(errno.EBADF, "it is closed"))
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self):
        if self._stream is None:
            return None
        try:
            return self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: OSError) -> _StdoutError:
        error = _StdoutError(exc.errno, exc.strerror)
        self.error = self.error or error
        return error

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _stdout_to_devnull(stream) -> None:
    """Point the process's stdout at devnull, so the interpreter's exit flush cannot fail again."""
    if stream is None:
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, stream.fileno())
    except (OSError, ValueError, AttributeError):  # a stream without a descriptor (a test's capture)
        pass
    finally:
        os.close(devnull)


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
