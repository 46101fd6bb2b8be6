"""A drawn configuration as overrides in the harness vocabulary, and as a ready command.

Every field of the drawn ``RunSpec`` is written out (``model.<field>=``, ``cache.<field>=``,
...) on top of a shipped option of each group, so the command composes exactly the
configuration that was explored (``testcases/explore`` checks this by composing it). A
random link matrix is written to a YAML file named by its content in a folder only this user
can write (``hardware.topology=<path>``); shipped fixtures are named.
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import stat
import tempfile
from functools import cache
from pathlib import Path
from typing import Optional, Sequence

from contract.specs import RunSpec, Topology
from contract.units import MIB
from harness.explore.strategies import RANDOM_TOPOLOGY_PREFIX
from harness.files import write_atomic

TOPOLOGY_FOLDER = "lwsplit-explore"
"""Prefix of the per-user folder under the temp folder that holds the random link matrices of printed
commands (``lwsplit-explore-<uid>``, mode 0700)."""
BASE_OPTIONS = {"model": "deepseek_v32", "draft": "deepseek_mtp", "parallel": "tp4", "layerwise": "off"}
"""The shipped option each group starts from; every field is then overridden."""


def value_text(value) -> str:
    """A value as a Hydra override writes it: ``null``, ``true``, ``[a,b]``, ``2.0``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(value_text(v) for v in value) + "]"
    return str(value)


def _fields(prefix: str, spec) -> list[str]:
    return [f"{prefix}.{f.name}={value_text(getattr(spec, f.name))}" for f in dataclasses.fields(spec)]


def private_folder() -> Path:
    """This user's folder for drawn link matrices: ``<tmp>/lwsplit-explore-<uid>``, made with mode 0700, and
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


def topology_file(topology: Topology, folder: Optional[Path] = None) -> Path:
    """Write a drawn link matrix as a YAML topology (content-addressed: the same matrix, the same file), in
    ``folder`` or this user's private folder, atomically and readable by this user only
    (``harness.files.write_atomic``: a temporary file created anew beside it, then renamed into place), so
    the file is never half-written and no link is written through."""
    folder = Path(folder) if folder is not None else private_folder()
    path = folder / f"{topology.name}.yaml"
    rows = "\n".join("  - [" + ", ".join(row) + "]" for row in topology.links)
    text = f"name: {topology.name}\ncards: [{', '.join(topology.cards)}]\nlinks:\n{rows}\n"
    if _read_own(path) == text:
        return path
    return write_atomic(path, text, mode=0o600)


def overrides(run: RunSpec, implementation: Sequence[str], *, folder: Optional[Path] = None) -> list[str]:
    """The overrides composing ``run`` under ``implementation`` (``implementation=<name>`` plus any
    ``implementation.*`` keys)."""
    hw = run.hardware
    topology = hw.topology.name
    if topology.startswith(RANDOM_TOPOLOGY_PREFIX):
        topology = str(topology_file(hw.topology, folder))
    out = [f"model={BASE_OPTIONS['model']}", *_fields("model", run.model)]
    if run.draft is None:
        out.append("draft=none")
    else:
        out += [f"draft={BASE_OPTIONS['draft']}", *_fields("draft", run.draft)]
    out += [f"parallel={BASE_OPTIONS['parallel']}", *_fields("parallel", run.parallel),
            f"layerwise={BASE_OPTIONS['layerwise']}", *_fields("layerwise", run.layerwise),
            *_fields("cache", run.cache),
            f"hardware={hw.name}", f"hardware.num_cards={hw.num_cards}", f"hardware.topology={topology}",
            f"hardware.reserved_mib_per_card={hw.reserved_bytes_per_card // MIB}"]
    if run.placement is not None:
        out.append(f"placement={value_text(run.placement)}")
    return out + list(implementation)


def command(run: RunSpec, implementation: Sequence[str], *, folder: Optional[Path] = None) -> str:
    """``python -m harness.plan --table <overrides>``, quoted for a POSIX shell."""
    return "python -m harness.plan --table " + " ".join(shlex.quote(o) for o in overrides(run, implementation,
                                                                                          folder=folder))
