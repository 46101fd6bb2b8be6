"""``python -m harness.coverage fields [--record] [--check] [--field ID ...]``
``python -m harness.coverage mutant-configs``

Runs one field mutant per field (``implementations.mutants.fields``) against the TC cases of the default
matrix (``conf/matrix/ci.yaml``) until a case catches it, prints the table, and with ``--record`` writes
the first catches to ``harness/coverage/field_catches.json`` (what CI re-runs; ``python -m tools.docs_blocks``
then shows it in ``docs/coverage.md``: the command prints, a tool records). Exit status 1 when a field is
caught by no case. ``mutant-configs`` writes
``conf/implementation/mutant_*.yaml`` from the mutant registry (``harness.coverage.mutant_configs``;
a ``mutant_*.yaml`` it did not write is left alone, with a note). A mistake on the command line is one
``error:`` line (exit 2); Ctrl-C one line (exit 130), and no half-written record (written atomically).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional

from harness.coverage import fields, mutant_configs, render
from harness.usage import Parser, command


def _parser() -> argparse.ArgumentParser:
    p = Parser(prog="python -m harness.coverage", description=__doc__.split("\n\n")[1])
    p.add_argument("what", choices=["fields", "mutant-configs"], help="what to measure or write")
    p.add_argument("--record", action="store_true",
                   help="write harness/coverage/field_catches.json (python -m tools.docs_blocks then shows it)")
    p.add_argument("--check", action="store_true",
                   help="do not search: run each field's recorded case, which must still catch it (CI)")
    p.add_argument("--field", action="append", default=[], metavar="ID", help="only these fields (repeatable)")
    return p


@command
def main(argv: Optional[list[str]] = None) -> int:
    args = _parser().parse_args(argv)
    if args.what == "mutant-configs":
        for change in mutant_configs.write():
            if change.what == "left":
                print(f"note: left {change.path} as it is: not written by this command (its first line is not "
                      f"the generated header)", file=sys.stderr)
            else:
                print(f"{change.what} {change.path}", file=sys.stderr)
        return 0

    unknown = [f for f in args.field if f not in fields.record_keys()]
    if unknown:
        print(f"error: --field {unknown[0]!r}: allowed: {', '.join(fields.record_keys())}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    known = fields.recorded()
    if args.check:
        keys = args.field or fields.record_keys()
        failures = [f"{k}: no recorded catching case" for k in keys if not known.get(k)]
        for key in (k for k in keys if known.get(k)):
            why = fields.check_recorded(key, known[key])
            if why:
                failures.append(f"{key}: {why}")
        for line in failures:
            print(f"error: {line}", file=sys.stderr)
        print(f"{len(keys) - len(failures)} of {len(keys)} fields caught by their recorded case "
              f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
        return 1 if failures else 0
    matrix = fields.load()
    found = dict(known) if args.field else {}
    for field in args.field or fields.record_keys():
        found[field] = fields.first_catch(field, matrix, known=known.get(field),
                                          progress=lambda line: print(
                                              f"[{time.perf_counter() - start:6.1f}s] {line}", file=sys.stderr))
    table = render.field_table(found)
    print(table)
    print(f"wall time {time.perf_counter() - start:.1f} s", file=sys.stderr)
    if args.record:
        render.write_record(fields.RECORD, found)
        print(f"wrote {fields.RECORD}; python -m tools.docs_blocks shows it in docs/coverage.md", file=sys.stderr)
    return 0 if all(found.get(f) for f in fields.record_keys()) else 1


if __name__ == "__main__":  # the rank pools' forkserver imports this module as __mp_main__
    sys.exit(main())
