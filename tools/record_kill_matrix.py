"""Record a finished kill matrix into the docs: ``docs/data/kill_matrix.json`` and its block of ``docs/mutation.md``.

    python -m harness.mutation --first --out reports/mutation      # runs every mutant, prints the matrix
    python -m tools.record_kill_matrix reports/mutation             # records that run (its kill_matrix.json)

The mutation command prints and writes its results folder; this tool records, from that folder only. A run
of some mutants (``--mutant``) is refused: the docs show whole runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from contract import bounded_inputs
from contract.errors import ConfigError
from harness.mutation import killmatrix, render
from implementations.mutants import MUTANTS
from tools import docs_blocks

RESULTS = "kill_matrix.json"
"""What ``python -m harness.mutation`` writes under its ``--out`` folder."""


def kill_matrix_record(folder: Path) -> docs_blocks.Record:
    """The docs record of the kill matrix ``python -m harness.mutation`` wrote under ``folder``; a ``UserError``
    for a folder without one, a file of another shape, or a run that left a mutant out."""
    path = Path(folder) / RESULTS
    data = bounded_inputs.loads_json(bounded_inputs.read_input_file(path, "results_dir"), "results_dir",
                                     source=str(path))
    try:
        rows = [render.row_from_json(row) for row in data["rows"]]
        first, wall_s = bool(data["stop_at_first"]), float(data["wall_s"])
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError("results_dir", str(path), "a kill_matrix.json as python -m harness.mutation writes it",
                          f"{type(exc).__name__}: {exc}") from None
    ran = {r.implementation for r in rows}
    missing = [name for name in (killmatrix.REFERENCE, *(cls.name for cls in MUTANTS.values())) if name not in ran]
    if missing:
        raise ConfigError("results_dir", str(folder), "a run of every mutant (python -m harness.mutation without "
                          "--mutant): the docs show whole runs", f"the run left out {', '.join(missing[:4])}"
                          f"{' ...' if len(missing) > 4 else ''}")
    columns, cells, align = render.docs_table(rows)
    return docs_blocks.measured(
        "kill_matrix", command="python -m harness.mutation" + (" --first" if first else "")
        + f" --out {folder} && python -m tools.record_kill_matrix {folder}",
        columns=columns, rows=cells, align=align,
        notes=[f"Wall time: {wall_s:.0f} s ({'each cell stops at its first catching case' if first else 'every case'})."])


def main(argv: Optional[list[str]] = None) -> int:
    return docs_blocks.record_main(argv, prog="python -m tools.record_kill_matrix",
                                   description=__doc__.split("\n\n")[0], default=Path("reports/mutation"),
                                   folder_help="the folder python -m harness.mutation wrote (default: reports/mutation)",
                                   records=lambda folder: [kill_matrix_record(folder)])


if __name__ == "__main__":
    raise SystemExit(main())
