"""A glog CHECK that fired in a tree's code: its condition read from the tree's source, and the harness field
it guards (``contract.upstream_checks``: matched on the CHECK's own source text)."""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from contract.errors import ConfigError, PlanError, UserError
from contract.upstream_checks import check_of_condition
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.tree.files import ROLES, TreeMap

CONTEXT_LINES = 8
"""Lines after a CHECK's own line that ``check_condition`` reads for a condition spanning lines."""
MASTER_ROLES = ("master", "layout", "worker_checks", "allocation_checks", "indexer_checks")
"""CHECKs in these roles' files are startup rules (``ConfigError``); the rest are planning (``PlanError``)."""
PORT_MASTER_ROLES = ("validation", "worker_checks", "allocation_checks")
"""The same for a manifest's roles: a CHECK in the validation, worker_checks or allocation_checks role's file is a
startup rule."""


@dataclass(frozen=True, kw_only=True)
class Check:
    """A CHECK that fired in the tree's code: where, its condition as written, glog's message; ``unquoted``
    says why the condition could not be read (then it is empty)."""

    file: str
    line: int
    condition: str
    message: str
    unquoted: str = ""

    @property
    def where(self) -> str:
        return f"{Path(self.file).name}:{self.line}"


def check_condition(file: str, line: int, roots: Sequence[object]) -> tuple[str, str]:
    """(the CHECK statement's condition at ``file:line``: the macro and its parenthesised arguments, ""), or
    ("", why it is not quoted). The file name is the tree's to report (glog's ``__FILE__``, ``#line``), so
    only a regular file whose real path is inside ``roots`` (folders, or files: what the build compiled) is
    read: opened without blocking and without following a last link (a FIFO or device is never read),
    at most ``cachefs.MAX_SOURCE_BYTES``, and no further than the lines needed."""
    if not os.path.isabs(file) or "\0" in file:
        return "", f"{file!r} is not an absolute path"
    real = os.path.realpath(file)
    if not any(cachefs.inside(real, os.path.realpath(str(r))) for r in roots):
        return "", f"{file} is outside the tree and the build folder"
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return "", f"{file}: {exc.strerror}"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return "", f"{file} is not a regular file"
        want, limit = max(line, 1) + CONTEXT_LINES, cachefs.MAX_SOURCE_BYTES
        data, newlines = bytearray(), 0
        while newlines < want and len(data) < limit:
            chunk = os.read(fd, min(1 << 16, limit - len(data)))
            if not chunk:
                break
            data += chunk
            newlines += chunk.count(b"\n")
    except OSError as exc:
        return "", f"{file}: {exc.strerror}"
    finally:
        os.close(fd)
    if newlines < line and len(data) >= limit:
        return "", f"line {line} of {file} is not within its first {limit >> 20} MiB"
    lines = data.decode("utf-8", errors="replace").splitlines()
    text = "\n".join(lines[max(line - 1, 0):line + CONTEXT_LINES])
    m = re.search(r"\b(?:P?CHECK\w*|LOG)\s*\(", text)
    if m is None:
        return (text.splitlines()[0].strip() if text else ""), ""
    depth, i = 0, m.end() - 1
    for i in range(m.end() - 1, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            break
    return " ".join(text[m.start():i + 1].split()), ""


def rule_of(check: Check) -> tuple[str, str]:
    """(field, allowed) of the CHECK (``contract.upstream_checks``: by its condition, else glog's message);
    ``implementation`` for a CHECK no row names."""
    row = check_of_condition(check.condition, check.message)
    if row is None:
        return "implementation", "a configuration the tree's CHECKs accept"
    return row.field, row.allowed


def field_of(check: Check) -> Optional[str]:
    name = rule_of(check)[0]
    return None if name == "implementation" else name


def refusal(tree: TreeMap, check: Check) -> UserError:
    """The ``UserError`` for a CHECK that fired in ``tree``'s code: the field it guards, the CHECK's place and
    text; a ``ConfigError`` for a startup rule's file (``MASTER_ROLES``, ``PORT_MASTER_ROLES``), else a
    ``PlanError``."""
    name, allowed = rule_of(check)
    if tree.port:
        roles = [name for name, role in tree.manifest.roles.items()
                 if role.present and str(tree.root / role.file) == check.file]
        # a file playing the worker and its start-up checks: a CHECK naming a field is the start-up rule's
        cls = ConfigError if roles and (roles[0] in PORT_MASTER_ROLES or ("worker_checks" in roles and
                                                                         name != "implementation")) else PlanError
    else:
        roles = [r for r in (*ROLES, "worker_checks", "allocation_checks", "indexer_checks")
                 if str(tree.path(r)) == check.file]
        cls = ConfigError if roles and roles[0] in MASTER_ROLES else PlanError
    detail = (f"CHECK at {check.where} (its condition not quoted: {check.unquoted})" if check.unquoted
              else f"CHECK at {check.where} `{check.condition}`")
    if check.message:
        detail += f": {check.message.splitlines()[-1]}"
    return cls(name, check.where, allowed, detail)
