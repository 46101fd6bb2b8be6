"""Write a file so a reader sees the old content or the whole new one, never a part.

The one atomic writer of the harness (results, sweep summaries, the kill matrix, the report's
trend files, benchmark figures): the data goes to a temporary file beside the target, then
``os.replace`` puts it in place. The temporary file is made with mode 0666 less the umask, as
any file the harness writes (0644 under the usual umask), and is removed on any failure (a
full disk, a file-size limit, an interrupt), so no ``.<name>.*.tmp`` is ever left behind.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Union

_TEMP_ATTEMPTS = 100


def write_atomic(path: Union[str, Path], data: Union[str, bytes]) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file beside it; returns ``path``."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = None
    try:
        fd, tmp = _temp_beside(path)
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


def _temp_beside(path: Path) -> tuple[int, Path]:
    """A new file ``.<name>.<random>.tmp`` beside ``path``, opened for writing; the OS applies the umask to
    0666 (``tempfile.mkstemp`` would make it 0600, and reading the umask means changing it for a moment)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TEMP_ATTEMPTS):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temporary name beside {path}")
