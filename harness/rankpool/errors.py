"""What the distributed runner raises in the parent (and what bodies may raise in a rank).

``RankFailure`` and ``RankTimeout`` are harness outcomes (a test fails); ``RankSkip``
is a verdict (the test is skipped); ``PoolUnavailable`` says this machine cannot host
the requested pool (the pytest layer skips with ``reason``). A wrong world size or
backend name is a user mistake and raises ``contract.errors.ConfigError``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Optional

REPO_PACKAGES = ("contract", "implementations", "harness", "testcases")
"""This repository's top-level packages: a frame in one of them is ours."""
PASS_THROUGH_MODULES = ("harness.pytest_plugin",)
"""Ours, but only hook wrappers every test runs through (and their package's modules): never where a failure
comes from."""
_PASS_THROUGH_PREFIXES = tuple(f"{name}." for name in PASS_THROUGH_MODULES)


@dataclass(frozen=True, kw_only=True)
class Origin:
    """Where a failure comes from, decided where it happens (from the exception, not its text)."""

    where: Optional[str]
    """The innermost frame of this repository's code, ``implementations/reference/layout.py:42``;
    None when no frame of ours ran (the failure is outside the repository)."""
    cause: str
    """One line: ``ValueError: bad block 7``, ``rank 2 (pid 9) exit code 3``."""

    @property
    def in_implementation(self) -> bool:
        """Raised by the implementation under test (``implementations/``) or by the contract it is built on
        (``contract/``: its parsers and bounded readers, which an implementation calls with its own input)."""
        return self.where is not None and self.where.startswith(("implementations/", "contract/"))


def origin_of(exc: BaseException) -> Origin:
    """The ``Origin`` of an exception: its own traceback's innermost frame in this repository's
    packages (by module name), and its type and first line."""
    where = None
    tb = exc.__traceback__
    while tb is not None:
        module = str(tb.tb_frame.f_globals.get("__name__", ""))
        if module.split(".", 1)[0] in REPO_PACKAGES and not module.startswith(_PASS_THROUGH_PREFIXES) \
                and module not in PASS_THROUGH_MODULES:
            filename = tb.tb_frame.f_code.co_filename
            tail = "/__init__.py" if os.path.basename(filename) == "__init__.py" else ".py"
            where = f"{module.replace('.', '/')}{tail}:{tb.tb_lineno}"
        tb = tb.tb_next
    lines = str(exc).strip().splitlines()
    return Origin(where=where, cause=f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__)


_DUMP_FRAME = re.compile(r'File "(.+)", line (\d+) in \S+')
"""A frame of a ``faulthandler`` dump (a crashed or hung rank has no exception object, only this)."""


def origin_of_dump(dump: str, cause: str) -> Origin:
    """The ``Origin`` of a crashed or hung rank from its ``faulthandler`` dump (most recent call
    first, one block per thread): the first frame in this repository's packages, in the thread
    that runs the body (through ``rank_main.serve``) when there is one."""
    threads = dump.split("\n\n")
    body = [t for t in threads if re.search(r"rank_main\.py\", line \d+ in serve$", t, re.M)]
    for match in _DUMP_FRAME.finditer("\n\n".join(body or threads)):
        parts = match.group(1).replace("\\", "/").split("/")
        if "site-packages" in parts:
            continue
        at = next((i for i, part in enumerate(parts) if part in REPO_PACKAGES), None)
        if at is not None:
            return Origin(where=f"{'/'.join(parts[at:])}:{match.group(2)}", cause=cause)
    return Origin(where=None, cause=cause)


class DistRunnerError(RuntimeError):
    """Base of the runner's own failures."""


class RankFailure(DistRunnerError):
    """A rank raised, exited, or (see ``RankTimeout``) hung during ``RankPool.run``.

    ``rank_errors`` maps rank -> formatted error text (traceback, exit code or stack);
    ``pool_rebuilt`` is False only when every rank reported cleanly (an agreed check
    failure, see ``RankContext.assert_all``) so the live group was kept.

    The message keeps the summary and the first failing rank's section only, marked
    (``>>> rank 2 raised: the failure <<<``); the other ranks' sections (peers that
    raised afterwards, idle ranks' stacks) are in ``other_ranks`` (the report attaches
    them once). ``failed_rank`` is that first rank (None for an agreed check), ``root`` what
    it did (``rank 2 raised``, ``agreed check``, ``rank 3 stack``) and ``origin`` where its
    failure comes from (``Origin``; set by the pool, which has each rank's exception or dump).
    """

    def __init__(
        self,
        message: str,
        *,
        rank_errors: Optional[Mapping[int, str]] = None,
        pool_rebuilt: bool = True,
    ) -> None:
        short, self.failed_rank, self.other_ranks, self.root = split_sections(message)
        self.origin: Optional[Origin] = None
        super().__init__(short)
        self.full_message = message
        self.rank_errors = dict(rank_errors or {})
        self.pool_rebuilt = pool_rebuilt


class RankTimeout(RankFailure):
    """``run`` did not finish within its timeout; the message holds each unfinished rank's stack."""


class RankSkip(Exception):
    """Raised by a body to skip (on the ranks) and re-raised by the parent with the same reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PoolUnavailable(DistRunnerError):
    """This machine cannot host the pool (e.g. NCCL asked for more ranks than it has cards)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CollectiveCheckFailed(AssertionError):
    """Raised on every rank by ``RankContext.assert_all`` when any rank's verdict is False."""


SECTION = re.compile(r"^--- (?:rank (\d+) )?([a-z][a-z ]*) ---$", re.M)
"""A section header of the runner's message: ``--- rank 2 raised ---``, ``--- agreed check ---``."""
ROOT_LABELS = ("exited", "raised", "agreed check", "stack")
"""Which section is the failure, in order: a dead rank, a raising rank, an agreed check, a hung rank."""


def split_sections(message: str) -> tuple[str, Optional[int], str, str]:
    """(summary + the failing rank's section, marked; that rank; every other section; what it did).

    A trailing note in parentheses (``(the ranks were killed; ...)``) stays in the summary.
    """
    found = list(SECTION.finditer(message))
    if not found:
        return message, None, "", ""
    head = message[: found[0].start()].rstrip("\n")
    sections = []
    for i, match in enumerate(found):
        end = found[i + 1].start() if i + 1 < len(found) else len(message)
        rank = int(match.group(1)) if match.group(1) is not None else None
        sections.append((rank, match.group(2), message[match.start() : end].rstrip("\n")))
    rank, label, last = sections[-1]
    note = ""
    lines = last.splitlines()
    if len(lines) > 1 and lines[-1].startswith("(") and lines[-1].endswith(")"):
        note = lines[-1]
        sections[-1] = (rank, label, "\n".join(lines[:-1]))
    rarity = _frame_rarity([text for _, label, text in sections if label == "stack"])
    root = min(range(len(sections)), key=lambda i: (ROOT_LABELS.index(sections[i][1])
                                                    if sections[i][1] in ROOT_LABELS else len(ROOT_LABELS),
                                                    rarity.get(sections[i][2], 0), i))
    root_rank, root_label, root_text = sections[root]
    body = root_text.split("\n", 1)[1] if "\n" in root_text else ""
    who = f"rank {root_rank} {root_label}" if root_rank is not None else root_label
    marked = f">>> {who}: the failure <<<\n{body}"
    others = "\n".join(text for i, (_, _, text) in enumerate(sections) if i != root)
    if others:
        marked += f"\n({len(sections) - 1} other rank section{'s' if len(sections) > 2 else ''} in other_ranks)"
    short = "\n".join(part for part in (head, marked, note) if part)
    return short, root_rank, others, who


_BODY_FRAME = re.compile(r'File "[^"]+", line \d+ in \S+')


def _frame_rarity(stacks: list[str]) -> dict[str, int]:
    """Per hung rank's stack: how many ranks stand at the same innermost frame. The hung rank is
    where few stand (its own code); its peers wait together in a collective."""
    frames = {text: (_BODY_FRAME.search(text).group(0) if _BODY_FRAME.search(text) else text) for text in stacks}
    counts: dict[str, int] = {}
    for frame in frames.values():
        counts[frame] = counts.get(frame, 0) + 1
    return {text: counts[frame] for text, frame in frames.items()}
