"""Record a finished sweep's figures into the docs: ``docs/data/figures.json`` and its block of ``docs/figures.md``.

    python -m harness -m ...                      # the sweep (prints and writes its results.csv)
    python -m tools.record_figures DIR            # record that sweep's figures (DIR holds results.csv)

The sweep prints; this tool records, with the app's own table builder (``harness.app.aggregate``) and the
docs' writer (``tools.docs_blocks``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any, Optional

from harness.app.aggregate import figures_table
from harness.plan import GAIN_UNDEFINED
from tools import docs_blocks


def sweep_record(sweep_dir: Path) -> docs_blocks.Record:
    """The figures table of a finished sweep, from its ``results.csv`` (``harness.app.aggregate``)."""
    csv_path = sweep_dir / "results.csv"
    if not csv_path.is_file():
        raise ValueError(f"{sweep_dir}: no results.csv (a finished sweep's folder, e.g. multirun/<date>/<time>)")
    with open(csv_path, newline="", encoding="utf-8") as fh:
        rows = [{k: None if k == "capacity_gain" and v == GAIN_UNDEFINED else _typed(v) for k, v in r.items()}
                for r in csv.DictReader(fh)]  # an undefined gain (FEATURE 6) is written n/a: read back as null
    md = sweep_dir / "results.md"
    command = next((line.strip("`") for line in md.read_text(encoding="utf-8").splitlines()
                    if line.startswith("`")), "") if md.is_file() else ""
    columns, cells, align = figures_table(rows)
    return docs_blocks.measured("figures", command=f"{command or 'python -m harness -m ...'} "
                                       f"&& python -m tools.record_figures <sweep dir>",
                    columns=columns, rows=cells, align=align)


def _typed(text: str) -> Any:
    if text == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.record_figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_dir", type=Path, help="the sweep's folder (holds results.csv)")
    args = parser.parse_args(argv)
    try:
        record = sweep_record(args.sweep_dir)
    except ValueError as exc:
        print(f"error: sweep_dir: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {docs_blocks.publish(record)} and {docs_blocks.record_path('figures')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
