"""Record a run of ``harness.native_verdicts`` into the docs: ``docs/data/native_departures.json``, and (when the
run ran the TCs) ``docs/data/native_verdicts.json``, with their blocks of ``docs/native.md``.

    python -m harness.native_verdicts --tree T1 --tree T2 --out DIR      # judges the trees, prints, writes DIR
    python -m tools.record_native_verdicts DIR                            # records that run

The command prints and writes its ``--out`` folder (``departures.json``, ``verdicts.json``); this tool records,
from that folder only. A run with ``--roles-only`` records the departures alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from contract import bounded_inputs
from contract.errors import ConfigError
from harness import departures
from harness.native_verdicts import COLUMNS, DEPARTURE_COLUMNS, RUN_FILE
from tools import docs_blocks

RECORDER = "python -m tools.record_native_verdicts"


def _run(folder: Path) -> dict:
    """``verdicts.json`` of a run: its command, trees, rows and notes; a ``ConfigError`` naming what is wrong."""
    path = Path(folder) / RUN_FILE
    data = bounded_inputs.loads_json(bounded_inputs.read_input_file(path, "results_dir"), "results_dir",
                                     source=str(path))
    try:
        run = {"command": str(data["command"]), "trees": [str(t) for t in data["trees"]],
               "roles_only": bool(data["roles_only"]), "rows": [tuple(map(str, r)) for r in data["rows"]],
               "notes": [str(n) for n in data["notes"]]}
        at = data.get("measured")  # written by the run since it stamps its records; older runs: the checkout's
        run["stamp"] = {} if at is None else {
            "commit": str(at["commit"])[:12] + (docs_blocks.DIRTY if at["tracked_changes"] else ""),
            "date": str(at["date"])}
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError("results_dir", str(path), "a verdicts.json as python -m harness.native_verdicts --out "
                          "writes it", f"{type(exc).__name__}: {exc}") from None
    bad = [r for r in run["rows"] if len(r) != len(COLUMNS)]
    if bad:
        raise ConfigError("results_dir", str(path), f"rows of the {len(COLUMNS)} columns {', '.join(COLUMNS)}",
                          f"a row has {len(bad[0])}")
    return run


def native_records(folder: Path) -> list[docs_blocks.Record]:
    """The docs records of the run ``python -m harness.native_verdicts --out folder`` wrote: its departures, and
    its TC table unless it ran with ``--roles-only``. Both are built before either is written."""
    run = _run(folder)
    try:
        found = departures.load(Path(folder))
    except ValueError as exc:
        raise ConfigError("results_dir", str(folder), "a folder python -m harness.native_verdicts --out wrote",
                          str(exc)) from None
    command = f"{run['command']} && {RECORDER} {folder}"
    trees = ", ".join(run["trees"])
    records = []
    if not run["roles_only"]:
        records.append(docs_blocks.measured(
            "native_verdicts", command=command, columns=COLUMNS, rows=run["rows"],
            notes=[f"- {n}" for n in run["notes"]], **run["stamp"],
            provenance="each TC's standard case (world 4; TC-03 on the BI-V100 topology, TC-07 with the model's "
                       "draft) of each model and split size, judged by the spec; trees: " + trees))
    records.append(docs_blocks.measured(
        "native_departures", command=command, columns=DEPARTURE_COLUMNS,
        rows=[(t.tree, d.role, d.rule, d.tree, d.spec, d.function, ", ".join(d.cases), ", ".join(d.tcs))
              for t in found for d in t.departures], **run["stamp"],
        provenance="each role of each tree judged on its own against the oracle (harness.departures) on the "
                   "standard case of each model and split size, the model with its draft and TC-01's refusal "
                   "cases; trees: " + trees))
    return records


def main(argv: Optional[list[str]] = None) -> int:
    return docs_blocks.record_main(argv, prog=RECORDER, description=__doc__.split("\n\n")[0],
                                   folder_help="the folder python -m harness.native_verdicts --out wrote",
                                   records=native_records)


if __name__ == "__main__":
    raise SystemExit(main())
