"""Standard output while a command runs: a write that fails (``> /dev/full``: ENOSPC, EIO; a closed
descriptor) is told apart from a failed write elsewhere, and a gone reader never fails the exit flush."""

from __future__ import annotations

import errno
import os
from typing import Optional


class StdoutError(OSError):
    """Standard output could not be written (ENOSPC, EIO, ...): told apart from a failed write elsewhere."""


class GuardedStdout:
    """``sys.stdout`` while a command runs: a failed write or flush is a ``StdoutError``; all else passes through."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.error: Optional[StdoutError] = None
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

    def _failed(self, exc: OSError) -> StdoutError:
        error = StdoutError(exc.errno, exc.strerror)
        self.error = self.error or error
        return error

    def __getattr__(self, name):
        return getattr(self._stream, name)


def stdout_to_devnull(stream) -> None:
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
