"""Files every command writes: in place atomically, and into folders checked writable before the work.

The one atomic writer of the harness (results, sweep summaries, the kill matrix, the report's
trend files, benchmark figures): the data goes to a temporary file beside the target, then
``os.replace`` puts it in place. The temporary file is made with mode 0666 less the umask, as
any file the harness writes (0644 under the usual umask), and is removed on any failure (a
full disk, a file-size limit, an interrupt), so no ``.<name>.*.tmp`` is ever left behind.

``check_writable`` / ``check_output_file``: an output folder or file a command was given is made
and probed before the command works, so a path it cannot write is one ``error:`` line at the start
(a ``ConfigError`` naming the option), not a traceback at the end.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence, Union

from contract.errors import ConfigError

_TEMP_ATTEMPTS = 100


def write_atomic(path: Union[str, Path], data: Union[str, bytes], *, mode: int = 0o666) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file beside it; returns ``path``.
    ``mode`` less the umask is the file's mode (0o600: a file only its owner reads)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        fd, tmp = _temp_beside(path, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(payload)
        os.replace(tmp, path)
    except BaseException:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise
    return path


def write_json_atomic(path: Union[str, Path], value: Any) -> Path:
    return write_atomic(path, json.dumps(value, indent=2, default=str) + "\n")


def _temp_beside(path: Path, mode: int = 0o666) -> tuple[int, Path]:
    """A new file ``.<name>.<random>.tmp`` beside ``path``, opened for writing; the OS applies the umask to
    ``mode`` (``tempfile.mkstemp`` would make it 0600, and reading the umask means changing it for a moment)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TEMP_ATTEMPTS):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")


def check_writable(path: Path, key: str, value: Optional[str] = None) -> list[Path]:
    """Create ``path`` (and parents) and write a probe file there; ``ConfigError`` if that fails.

    Afterwards ``path`` itself is removed if this created it (its name may hold the start
    time, so the run may write elsewhere). Parents this created stay on success, since the
    run writes under them, and are returned (outermost first); after a failure everything
    this created is removed again.
    Runs started together share parents (``reports/sweeps/<date>``): one that vanishes
    while this creates the chain (another run's failed check removed it) is made again.
    """
    path = Path(path).absolute()
    value = str(path) if value is None else value
    created: list[Path] = []
    try:
        for attempt in range(_CREATE_ATTEMPTS):
            try:
                _make_chain(path, key, value, created)
                break
            except FileNotFoundError:
                if attempt == _CREATE_ATTEMPTS - 1:
                    raise
        with tempfile.TemporaryFile(dir=path):
            pass
    except BaseException as exc:  # also a signal (KeyboardInterrupt): no folder of ours is left behind
        remove_empty(created)
        if not isinstance(exc, OSError):
            raise
        raise ConfigError(key, value, "a writable directory for the results",
                          f"cannot write {path}: {exc.strerror or exc}") from None
    if path in created:
        remove_empty([path])
    return [d for d in dict.fromkeys(created) if d != path]


def check_output_file(path: Path, key: str) -> Path:
    """A file a command writes at the end, checked before it works: not a folder, in a folder it can write
    (made now if missing, as ``check_writable`` does). ``ConfigError`` naming ``key`` otherwise."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(key, str(path), "a file to write", "it is a folder")
    check_writable(path.absolute().parent, key, str(path))
    return path


def remove_empty(directories: Sequence[Path]) -> None:
    """Remove ``directories`` (outermost first) innermost first, each only if empty."""
    for directory in reversed(directories):
        try:
            directory.rmdir()
        except OSError:
            pass


_CREATE_ATTEMPTS = 5


def _make_chain(path: Path, key: str, value: str, created: list[Path]) -> None:
    """Create the missing directories down to ``path``, appending each one this made to ``created``."""
    missing, existing = [], path
    while not existing.exists():
        missing.append(existing)
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(key, value, "a writable directory for the results", f"{existing} is not a directory")
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:  # a run started at the same moment made it: theirs, not ours to remove
            if not directory.is_dir():
                raise
            continue
        created.append(directory)
