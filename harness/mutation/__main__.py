"""``python -m harness.mutation [--out reports/mutation] [--first] [--mutant NAME ...] [--rows DIR]``

Runs every TC suite against the reference and each mutant on ``conf/matrix/ci.yaml``,
prints the kill matrix, and writes ``kill_matrix.md`` and ``kill_matrix.json`` under ``--out``
(``python -m tools.record_kill_matrix OUT`` records a run of every mutant into the docs).
Exit status 0 when the reference passes every case and every mutant is caught, else 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Optional

from contract import bounded_inputs
from contract.errors import ConfigError
from harness.files import check_writable, write_atomic
from harness.mutation import killmatrix, render
from harness.mutation.render import row_from_json
from harness.usage import Parser, command, fail


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m harness.mutation", description=__doc__.split("\n\n")[1])
    p.add_argument("--out", default="reports/mutation", help="output folder (default: reports/mutation)")
    p.add_argument("--first", action="store_true",
                   help="stop each mutant x TC at its first catching case (faster; counts become lower bounds)")
    p.add_argument("--mutant", action="append", default=[], metavar="NAME",
                   help="only these mutants (short name, repeatable); the reference row always runs")
    p.add_argument("--rows", default=None, metavar="DIR",
                   help="do not run: assemble the table from per-mutant row files (*.json) that "
                        "testcases/meta wrote with LW_MUTATION_ROWS=DIR")
    return p


def _read_rows(folder: Path):
    """The row files under ``folder``; a file that is not a whole row is one ``error:`` line naming it."""
    if not folder.is_dir():
        raise ConfigError("--rows", str(folder), "a folder of per-mutant row files (*.json)", "no such folder")
    rows = []
    for path in sorted(folder.glob("*.json")):
        data = bounded_inputs.loads_json(bounded_inputs.read_input_file(path, "--rows"), "--rows", source=str(path))
        try:
            rows.append(row_from_json(data))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError("--rows", str(path), "a row file as testcases/meta writes it (LW_MUTATION_ROWS)",
                              f"{type(exc).__name__}: {exc}") from None
    return rows


def _in_table_order(rows):
    """The reference first, then the mutants in ``MUTANTS`` order."""
    # implementations.mutants imports torch (3.1 s, python -X importtime): bad options and files are one line before it
    from harness.mutation.killmatrix import REFERENCE
    from implementations.mutants import MUTANTS

    order = [REFERENCE, *(cls.name for cls in MUTANTS.values())]
    return sorted(rows, key=lambda r: order.index(r.implementation) if r.implementation in order else len(order))


@command
def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    check_writable(Path(args.out), "--out")  # first (before torch is imported): a folder this process can write
    start = time.perf_counter()
    rows = _read_rows(Path(args.rows)) if args.rows else []  # the files first: a broken one costs no torch import
    # implementations.mutants imports torch (3.1 s, python -X importtime): bad options and files are one line before it
    from implementations.mutants import MUTANTS

    unknown = [m for m in args.mutant if m not in MUTANTS]
    if unknown:
        fail(f"--mutant {unknown[0]!r}: allowed: {', '.join(MUTANTS)}")
    if args.rows:
        rows = _in_table_order(rows)
        if not rows:
            fail(f"--rows {args.rows}: no row files (*.json) there")
    else:
        matrix = killmatrix.load()
        rows = []
        for name in (killmatrix.REFERENCE, *(args.mutant or MUTANTS)):
            rows.append(killmatrix.row(name, matrix=matrix, stop_at_first=args.first))
            r = rows[-1]
            print(f"[{time.perf_counter() - start:6.1f}s] {r.implementation}: caught by "
                  f"{', '.join(r.caught_by) or 'none'} ({r.seconds:.1f}s)", file=sys.stderr)
    elapsed = time.perf_counter() - start
    text = render.markdown(rows) + f"\nWall time: {elapsed:.1f} s ({'first catch' if args.first else 'every case'}).\n"
    print(text)
    out = Path(args.out)
    write_atomic(out / "kill_matrix.md", text)
    render.write_json(out / "kill_matrix.json", render.to_json(
        rows, matrix=killmatrix.MATRIX, stop_at_first=args.first, wall_s=round(elapsed, 2)))
    print(f"wrote {out / 'kill_matrix.md'} and {out / 'kill_matrix.json'}", file=sys.stderr)
    reference_ok = all(o.verdict == "pass" for r in rows if r.implementation == killmatrix.REFERENCE
                       for c in r.cells.values() for o in c.outcomes)
    all_caught = all(r.caught_by for r in rows if r.implementation != killmatrix.REFERENCE)
    return 0 if reference_ok and all_caught else 1


if __name__ == "__main__":  # the rank pools' forkserver imports this module as __mp_main__
    sys.exit(main())
