"""A run's results folder is its own: claimed atomically before anything is written there.

Two runs given the same folder (``hydra.run.dir=X`` or ``hydra.sweep.dir=X`` twice, or a
folder an earlier run wrote) would overwrite each other's ``result.json`` and
``results.csv`` and mix their Allure results. So before Hydra writes into the folder,
``claim`` creates ``.lwsplit-run`` in it with ``O_CREAT | O_EXCL`` (one creator wins,
also across processes started at the same moment) and refuses a folder that already
holds one, or holds anything else: a run writes only into a new or empty folder.
The claim stays after the run, so the folder is then known to hold that run's results.

A claim records the process that made it (host, pid, the pid's start time since boot, the boot). A
claim whose process is gone (killed outright: SIGKILL, a power cut), or whose pid now names another
process, is stale: it no longer says a run is writing there. It is taken over with a note, and the folder
is then judged as any other: a run still writes only into a folder holding nothing else (what the gone
run left stays, and is refused by name). A claim of another host, or one that cannot be read, is never
judged stale: it is refused as before.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import stat
import sys
import time
from pathlib import Path
from typing import Optional

from contract.errors import ConfigError
from harness import procfs

CLAIM_FILE = ".lwsplit-run"
ALLOWED = "a new or empty folder that no other run writes to"


def check_free(folder: Path, key: str, value: str) -> None:
    """Refuse ``folder`` early (before Hydra starts) when ``claim`` would: it holds a claim or anything else."""
    folder = Path(folder).absolute()
    if not folder.is_dir():
        return
    marker = folder / CLAIM_FILE
    if os.path.lexists(marker) and _stale(marker) is None:
        raise _taken(folder, key, value)
    _refuse_others(folder, key, value)


def _taken(folder: Path, key: str, value: str) -> ConfigError:
    return ConfigError(key, value, ALLOWED, f"{folder} holds another run's results, or a run is writing "
                                            f"there now ({CLAIM_FILE}); choose another folder")


def _refuse_others(folder: Path, key: str, value: str) -> None:
    others = sorted(p.name for p in folder.iterdir() if not p.name.startswith(CLAIM_FILE))
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
            fd = _create(marker)
        except FileExistsError:
            if _stale(marker) is None:
                raise _taken(folder, key, value) from None
            if fresh:  # what the gone run left besides its claim: refused, and its claim left as it is
                _refuse_others(folder, key, value)
            fd, gone = _take_over(marker)
            if gone is None:
                raise _taken(folder, key, value) from None
            print(f"note: {folder}: the run that claimed it (pid {gone.get('pid')}, started "
                  f"{_when(gone.get('started'))}) is gone without finishing; this run takes the folder over",
                  file=sys.stderr, flush=True)
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
            json.dump(_identity(), fh)
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


def _create(marker: Path) -> int:
    return os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)


def _identity() -> dict:
    """What a claim records of the process making it: enough to tell later whether it still runs."""
    me = procfs.stat()
    return {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
            "pid_start": me.starttime if me is not None else None, "boot_id": procfs.boot_id()}


def _when(started: object) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(started)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "at an unknown time"


def _read(marker: Path) -> Optional[tuple[bytes, dict]]:
    try:  # a regular file, not followed through a link, never blocking on a FIFO
        fd = os.open(marker, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None
            raw = fh.read(4096)
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError):
        return None
    return (raw, data) if isinstance(data, dict) else None


def _stale(marker: Path) -> Optional[tuple[bytes, dict]]:
    """The claim's bytes and data when its process is gone (stale), else None (running, another host's,
    or a claim that says too little to tell)."""
    found = _read(marker)
    if found is None:
        return None
    data = found[1]
    pid = data.get("pid")
    if data.get("host") != socket.gethostname() or isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        return None

    boot = procfs.boot_id()
    if data.get("boot_id") and boot and data["boot_id"] != boot:
        return found  # the machine restarted since: no process of that boot runs
    if procfs.stat() is None:  # no /proc: ask the kernel whether the pid exists
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return found
        except OSError:
            return None
        return None
    proc = procfs.stat(pid)
    if proc is None or proc.zombie:
        return found
    recorded = data.get("pid_start")
    if isinstance(recorded, int) and not isinstance(recorded, bool) and recorded != proc.starttime:
        return found  # the pid now names another process
    return None


def _take_over(marker: Path) -> tuple[int, Optional[dict]]:
    """Replace a stale claim by this process's, once, even with several runs trying at the same moment:
    under a lock beside the claim the takers go one at a time, and each judges the claim anew (the first
    one's claim is not stale for the next). A run claiming without the lock can only create the claim where
    there is none: between the removal and the creation it may win, and this one is refused.
    Returns (the new claim's descriptor, the stale claim's data), or (-1, None) when not taken over."""
    lock = marker.with_name(f"{CLAIM_FILE}.lock")
    try:
        lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
                          0o644)
    except OSError:
        return -1, None
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        found = _stale(marker)
        if found is None:
            return -1, None
        try:
            os.unlink(marker)
            return _create(marker), found[1]
        except OSError:  # gone meanwhile, or a run claiming without the lock made its claim first
            return -1, None
    finally:
        try:
            os.unlink(lock)  # while held: a taker waiting on the old one then finds the new claim, not stale
        except OSError:
            pass
        os.close(lock_fd)
