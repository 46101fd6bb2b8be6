"""A drawn configuration as a file of its ``RunSpec``, and the command that plans it.

The spec is written as data (``harness.config.spec_file``: every field, the link matrix
included), named by its content, in a folder only this user can write; the printed command
``python -m harness.plan --table --run-spec FILE implementation=...`` reads that very spec
back (``testcases/explore`` checks it is the one explored).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import stat
import tempfile
from functools import cache
from pathlib import Path
from typing import Optional, Sequence

from contract.specs import RunSpec
from harness.config import spec_file

TOPOLOGY_FOLDER = "lwsplit-explore"
"""Prefix of the per-user folder under the temp folder that holds the spec files of printed commands
(``lwsplit-explore-<uid>``, mode 0700)."""


def private_folder() -> Path:
    """This user's folder for the spec files of printed commands: ``<tmp>/lwsplit-explore-<uid>``, made with mode 0700, and
    used only while it is a real folder (not a link) owned by this user that nobody else can enter or write;
    else (another user made one at that name) a fresh private folder from ``mkdtemp``."""
    base = Path(tempfile.gettempdir())
    folder = base / f"{TOPOLOGY_FOLDER}-{os.getuid()}"
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return _fresh_folder(str(base))
    try:
        st = os.lstat(folder)
    except OSError:
        st = None
    if st is None or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return _fresh_folder(str(base))
    return folder


@cache
def _fresh_folder(base: str) -> Path:
    """One private folder per temp folder and process, made by ``mkdtemp`` (mode 0700, a new name)."""
    return Path(tempfile.mkdtemp(prefix=f"{TOPOLOGY_FOLDER}-", dir=base))


def _read_own(path: Path) -> Optional[str]:
    """The text of ``path`` when it is a regular file (a link is not followed), else None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, encoding="utf-8", errors="replace") as f:
        return f.read() if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None


def spec_name(run: RunSpec) -> str:
    """The spec file's name: ``run-<digest of its text>.json``."""
    return f"run-{hashlib.sha256(spec_file.to_text(run).encode()).hexdigest()[:16]}.json"


def spec_path(run: RunSpec, folder: Optional[Path] = None) -> Path:
    """``run`` written as a spec file (content-addressed: the same spec, the same file), in ``folder`` or this
    user's private folder, atomically and readable by this user only (``spec_file.write``: a temporary file
    created anew beside it, then renamed into place), so the file is never half-written and no link is
    written through."""
    folder = Path(folder) if folder is not None else private_folder()
    path, text = folder / spec_name(run), spec_file.to_text(run)
    if _read_own(path) == text:
        return path
    return spec_file.write(path, run)


def command(run: RunSpec, implementation: Sequence[str], *, folder: Optional[Path] = None) -> str:
    """``python -m harness.plan --table --run-spec FILE <implementation overrides>``, quoted for a POSIX shell."""
    words = ["--table", spec_file.OPTION, str(spec_path(run, folder)), *implementation]
    return "python -m harness.plan " + " ".join(shlex.quote(w) for w in words)
