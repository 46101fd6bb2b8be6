"""Record a finished sweep's figures into the docs: ``docs/data/figures.json`` and its block of ``docs/figures.md``.

    python -m harness -m ...                      # the sweep (prints and writes its results.csv)
    python -m tools.record_figures DIR            # record that sweep's figures (DIR holds results.csv)

The sweep prints; this tool records, with the app's own table builder (``harness.app.aggregate``) and the
docs' writer (``tools.docs_blocks``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Optional

from contract.errors import ConfigError
from harness.app.aggregate import figures_table
from harness.plan import GAIN_UNDEFINED
from tools import docs_blocks


def sweep_record(sweep_dir: Path) -> docs_blocks.Record:
    """The figures table of a finished sweep, from its ``results.csv`` (``harness.app.aggregate``); a
    ``ConfigError`` for a folder without one."""
    csv_path = sweep_dir / "results.csv"
    if not csv_path.is_file():
        raise ConfigError("results_dir", str(sweep_dir), "a finished sweep's folder (e.g. multirun/<date>/<time>)",
                          "it holds no results.csv")
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
    return docs_blocks.record_main(argv, prog="python -m tools.record_figures", description=__doc__.split("\n\n")[0],
                                   folder_help="the sweep's folder (holds results.csv)",
                                   records=lambda folder: [sweep_record(folder)])


if __name__ == "__main__":
    raise SystemExit(main())
