"""Figures in the docs have one source: the command that measures them.

A figure a command measures (the sweep's figures table, the kill matrix, the benchmarks,
the fault table) lives in two files only: its record, ``docs/data/<name>.json`` (the
table, and the date, machine, commit and command that measured it), and the block of its
docs page between ``<!-- generated:<name> -->`` and ``<!-- /generated:<name> -->``,
rendered from that record by ``render``. The measuring commands write both with
``--docs`` (a plain run leaves the docs alone); nobody types a figure into a page.
``testcases/unit/test_docs_blocks.py`` fails when a page's block is not what ``render``
makes of its record.

    python -m tools.docs_blocks                 # re-render every block from its record (or source)
    python -m tools.docs_blocks --check         # list stale blocks; exit 1 if any

The product's commands print and write their results folder; a recorder of ``tools/`` records that folder
into the docs through ``record_main`` (the one entry point they share): ``python -m tools.record_figures DIR``
(a finished sweep), ``python -m tools.record_kill_matrix DIR`` (a whole kill matrix),
``python -m tools.record_native_verdicts DIR`` (``harness.native_verdicts --out DIR``).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib
import json
import os
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from harness import procfs
from harness.files import check_output_file, write_atomic, write_json_atomic
from harness.paths import DOCS_DATA_DIR, DOCS_DIR, REPO_ROOT
from harness.reporting.allure_meta import git_commit
from harness.usage import Parser, command, fail, signals_deferred

PAGES = {
    "figures": "figures.md",
    "bench_planning": "benchmarks.md",
    "bench_runner_overhead": "benchmarks.md",
    "bench_collectives": "benchmarks.md",
    "bench_test_groups": "benchmarks.md",
    "bench_test_cpu": "benchmarks.md",
    "bench_native": "benchmarks.md",
    "bench_explore_native": "benchmarks.md",
    "bench_compose": "benchmarks.md",
    "kill_matrix": "mutation.md",
    "faults": "faults.md",
    "bench_explore": "explore.md",
    "native_verdicts": "native.md",
    "native_departures": "native.md",
}
"""Each generated block of measured figures and the page (under ``docs/``) that shows it."""

DERIVED = {
    "coverage_fields": ("coverage.md", "harness.coverage.render:fields_block"),
    "coverage_rules": ("coverage.md", "harness.coverage.render:rules_block"),
}
"""Blocks rendered from committed sources instead of a measurement record: name -> (page, the
``module:function`` that returns the block's Markdown, saying which command rewrites it).
Same markers, same writer and the same staleness check as the measured blocks."""

_BLOCK = "<!-- generated:{name} -->\n{body}<!-- /generated:{name} -->"


@dataclass(frozen=True, kw_only=True)
class Record:
    """One measured table and how it was measured."""

    name: str
    """The block's name (a key of ``PAGES``)."""
    command: str
    """The command that measures it again and writes this record and the block (a benchmark's ``--docs``, or a
    product command and the recorder of its results folder)."""
    date: str
    """UTC date of the measurement, ``YYYY-MM-DD``."""
    machine: str
    """Where it was measured (cores, CPU, Python, torch)."""
    commit: str
    """The harness's git commit it was measured at."""
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    align: str = ""
    """Per column ``l`` or ``r`` (default: left)."""
    provenance: str = ""
    """Anything the reader must know about where the figures come from."""
    notes: tuple[str, ...] = ()
    """Lines printed under the table (measured facts, not prose)."""

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, data: dict) -> Record:
        values = dict(data)
        values["columns"] = tuple(values["columns"])
        values["rows"] = tuple(tuple(str(c) for c in row) for row in values["rows"])
        values["notes"] = tuple(values.get("notes", ()))
        return cls(**values)


def _check_name(name: str) -> None:
    if name not in PAGES:
        raise ValueError(f"generated block {name!r}: allowed: {', '.join(PAGES)}")


def record_path(name: str, data_dir: Path = DOCS_DATA_DIR) -> Path:
    _check_name(name)
    return data_dir / f"{name}.json"


def load(name: str, data_dir: Path = DOCS_DATA_DIR) -> Record:
    return Record.from_json(json.loads(record_path(name, data_dir).read_text(encoding="utf-8")))


def machine() -> str:
    """This machine in one line: cores, CPU model, Python and torch versions."""
    cpu = procfs.cpu_model() or platform.processor() or platform.machine()
    try:
        from importlib.metadata import version

        torch = f", torch {version('torch')}"
    except Exception:  # no torch installed: the line says nothing about it
        torch = ""
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}{torch}"


DIRTY = " with uncommitted changes"
"""Appended to a record's commit when tracked files differ from it: the figures are not that commit's."""


def checkout_commit(repo_dir: Path = REPO_ROOT) -> str:
    """The checkout's commit (12 hex digits, ``unknown`` without git), plus ``DIRTY`` when a tracked
    file differs from it."""


    commit = git_commit(repo_dir)[:12]
    if commit == "unknown":
        return commit
    try:
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo_dir,
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return commit
    return commit + DIRTY if status.returncode == 0 and status.stdout.strip() else commit


def measured(name: str, *, command: str, columns: Sequence[str], rows: Sequence[Sequence[Any]],
             align: str = "", notes: Sequence[str] = (), provenance: str = "", commit: Optional[str] = None,
             date: Optional[str] = None) -> Record:
    """A record of figures measured now, on this machine, at this checkout's commit (said to
    have uncommitted changes when it has); ``commit`` and ``date`` where the command that measured them
    (in this process's machine) said when and at which commit it ran."""
    _check_name(name)
    return Record(name=name, command=command,
                  date=date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                  machine=machine(), commit=commit or checkout_commit(), columns=tuple(columns),
                  rows=tuple(tuple(str(c) for c in row) for row in rows), align=align,
                  notes=tuple(notes), provenance=provenance)


def render(record: Record) -> str:
    """The block's Markdown: where the figures come from, the table, the notes."""
    origin = f"Measured {record.date} on {record.machine}, commit {record.commit}, by `{record.command}`"
    lines = [f"_{origin}{'; ' + record.provenance if record.provenance else ''}._", ""]
    lines.append("| " + " | ".join(record.columns) + " |")
    align = record.align.ljust(len(record.columns), "l")
    lines.append("|" + "|".join("---:" if a == "r" else "---" for a in align[:len(record.columns)]) + "|")
    for row in record.rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|").replace("\n", " ") for c in row) + " |")
    if record.notes:
        lines += [""] + list(record.notes)
    return "\n".join(lines) + "\n"


def _pattern(name: str) -> re.Pattern:
    return re.compile(re.escape(f"<!-- generated:{name} -->") + r"\n(.*?)" + re.escape(f"<!-- /generated:{name} -->"),
                      re.DOTALL)


def block_text(page_text: str, name: str) -> Optional[str]:
    """What a page holds between the block's markers, or None without them."""
    found = _pattern(name).search(page_text)
    return found.group(1) if found else None


def missing_markers(page: Path, names: Sequence[str]) -> Optional[str]:
    """Why ``page`` cannot take the blocks ``names`` (None: it can): unreadable, or without a block's markers."""
    try:
        text = page.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot be read ({getattr(exc, 'strerror', None) or exc})"
    missing = [name for name in names if block_text(text, name) is None]
    if missing:
        return f"has no <!-- generated:{missing[0]} --> ... <!-- /generated:{missing[0]} --> markers"
    return None


def write_block(page: Path, name: str, body: str) -> None:
    """Replace the block ``name`` in ``page`` by ``body``, atomically; ``ValueError`` without its markers."""

    text = page.read_text(encoding="utf-8")
    if block_text(text, name) is None:
        raise ValueError(f"{page}: no <!-- generated:{name} --> ... <!-- /generated:{name} --> markers")
    new = _pattern(name).sub(lambda _: _BLOCK.format(name=name, body=body), text, count=1)
    if new != text:
        write_atomic(page, new)


def publish(record: Record, *, docs_dir: Path = DOCS_DIR) -> Path:
    """Write ``record`` (``docs/data/<name>.json``), then its block into its page; the page's path."""

    write_json_atomic(record_path(record.name, docs_dir / "data"), record.to_json())
    page = docs_dir / PAGES[record.name]
    write_block(page, record.name, render(record))
    return page


def publish_all(records: Sequence[Record], *, docs_dir: Path = DOCS_DIR) -> list[Path]:
    """Each of ``records`` and its page's block, all or none: every page's markers and every record's file
    checked before anything is written (one ``error:`` line else), signals held while they are written."""
    for record in records:
        page = docs_dir / PAGES[record.name]
        why = missing_markers(page, [record.name])
        if why is not None:
            fail(f"{page} {why}; nothing was written")
        check_output_file(record_path(record.name, docs_dir / "data"), "docs")
    with signals_deferred():
        return [publish(record, docs_dir=docs_dir) for record in records]


@command
def record_main(argv: Optional[Sequence[str]], *, prog: str, description: str, folder_help: str,
                records: Callable[[Path], Sequence[Record]], default: Optional[Path] = None) -> int:
    """The entry point every recorder shares: one argument, the folder a product command wrote; ``records``
    reads it (a ``UserError`` for a folder it cannot record: one ``error:`` line, exit 2); ``publish_all``."""
    parser = Parser(prog=prog, description=description)
    parser.add_argument("results_dir", type=Path, nargs="?" if default is not None else None, default=default,
                        help=folder_help)
    args = parser.parse_args(argv)
    found = records(args.results_dir)
    for page, record in zip(publish_all(found), found):
        print(f"wrote {page} and {record_path(record.name)}")
    return 0


def render_derived(name: str) -> str:
    """The Markdown of a ``DERIVED`` block, from its renderer."""

    module, _, function = DERIVED[name][1].partition(":")
    return getattr(importlib.import_module(module), function)()


def stale(docs_dir: Path = DOCS_DIR) -> list[str]:
    """Blocks whose page does not hold what ``render`` makes of their record, or what a derived
    block's renderer makes (or that lack a record or markers)."""
    problems = []
    for name, (page_name, source) in DERIVED.items():
        page = docs_dir / page_name
        shown = block_text(page.read_text(encoding="utf-8"), name) if page.is_file() else None
        if shown is None:
            problems.append(f"{name}: {page} has no generated:{name} block")
        elif shown != render_derived(name):
            problems.append(f"{name}: {page} differs from what {source} renders; run python -m tools.docs_blocks")
    for name, page_name in PAGES.items():
        page = docs_dir / page_name
        data = record_path(name, docs_dir / "data")
        if not data.is_file():
            problems.append(f"{name}: no record {data}")
            continue
        shown = block_text(page.read_text(encoding="utf-8"), name) if page.is_file() else None
        if shown is None:
            problems.append(f"{name}: {page} has no generated:{name} block")
        elif shown != render(load(name, docs_dir / "data")):
            problems.append(f"{name}: {page} differs from its record; run python -m tools.docs_blocks")
    return problems


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs_blocks", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="list stale blocks; exit 1 if any")
    args = parser.parse_args(argv)
    if args.check:
        problems = stale()
        for line in problems:
            print(line)
        return 1 if problems else 0
    for name, page in PAGES.items():
        write_block(DOCS_DIR / page, name, render(load(name)))
    for name, (page, _) in DERIVED.items():
        write_block(DOCS_DIR / page, name, render_derived(name))
    print(f"rendered {len(PAGES)} blocks from {DOCS_DATA_DIR} and {len(DERIVED)} from their sources")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
