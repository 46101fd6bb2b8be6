"""A run's results folder is its own: claimed atomically before anything is written there.

Two runs given the same folder (``hydra.run.dir=X`` or ``hydra.sweep.dir=X`` twice, or a
folder an earlier run wrote) would overwrite each other's ``result.json`` and
``results.csv`` and mix their Allure results. So before Hydra writes into the folder,
``claim`` creates ``.lwsplit-run`` in it with ``O_CREAT | O_EXCL`` (one creator wins,
also across processes started at the same moment) and refuses a folder that already
holds one, or holds anything else: a run writes only into a new or empty folder.
The claim stays after the run, so the folder is then known to hold that run's results.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from implementations.errors import ConfigError

CLAIM_FILE = ".lwsplit-run"
ALLOWED = "a new or empty folder that no other run writes to"


def check_free(folder: Path, key: str, value: str) -> None:
    """Refuse ``folder`` early (before Hydra starts) when ``claim`` would: it holds a claim or anything else."""
    folder = Path(folder).absolute()
    if not folder.is_dir():
        return
    if (folder / CLAIM_FILE).exists():
        raise _taken(folder, key, value)
    _refuse_others(folder, key, value)


def _taken(folder: Path, key: str, value: str) -> ConfigError:
    return ConfigError(key, value, ALLOWED, f"{folder} holds another run's results, or a run is writing "
                                            f"there now ({CLAIM_FILE}); choose another folder")


def _refuse_others(folder: Path, key: str, value: str) -> None:
    others = sorted(p.name for p in folder.iterdir() if p.name != CLAIM_FILE)
    if others:
        shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
        raise ConfigError(key, value, ALLOWED, f"{folder} already holds {shown}; choose another folder")


def claim(folder: Path, key: str, value: str, *, fresh: bool = True) -> Path:
    """Make ``folder`` (created if missing) this process's own, or raise ``ConfigError`` naming ``key``.

    Refused: a folder holding another run's claim (a run is writing it, or wrote it), and with ``fresh``
    one holding any other entry (a user's files, results of a run from before claims). Without
    ``fresh`` (a sweep's job folder, where Hydra has just written ``.hydra/``) only the claim counts.
    Returns the claim file.
    """
    folder = Path(folder).absolute()
    marker = folder / CLAIM_FILE
    made = [d for d in (folder, *folder.parents) if not d.exists()]  # innermost first
    try:
        folder.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise _taken(folder, key, value) from None
    except OSError as exc:
        for directory in made:  # leave no empty folder behind
            try:
                directory.rmdir()
            except OSError:
                break
        raise ConfigError(key, value, "a writable directory for the results",
                          f"cannot write {folder}: {exc.strerror or exc}") from None
    try:
        if fresh:
            _refuse_others(folder, key, value)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fd = -1
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}, fh)
            fh.write("\n")
    except BaseException:
        if fd >= 0:
            os.close(fd)
        marker.unlink(missing_ok=True)
        raise
    return marker


def is_ours(folder: Path) -> bool:
    """Whether ``folder``'s claim was made by this process."""
    try:
        data = json.loads((Path(folder) / CLAIM_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("pid") == os.getpid() and data.get("host") == socket.gethostname()
