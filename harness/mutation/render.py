"""The kill matrix as Markdown (README, Allure) and JSON (machines), written with the harness's one atomic
writer (``harness.files``)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Optional

from harness.config.schema import TC_IDS
from harness.files import write_json_atomic
from harness.mutation.killmatrix import REFERENCE, CaseOutcome, Cell, Row

LEGEND = (
    "Cell: cases of that TC that catch the implementation (problems or failure) / cases run; "
    "**bold** = caught; `*` = the mutant's `expected_catchers` names this TC; "
    "`+` after the count = stopped at the first catch; `·` = not evaluated. "
    "The reference row is the control: every case must pass."
)


def cell_text(r: Row, tc: str) -> str:
    cell = r.cells.get(tc)
    mark = "*" if tc in r.expected_catchers else ""
    if cell is None:
        return f"·{mark}"
    ran = len(cell.outcomes)
    count = f"{cell.kills}/{ran}{'+' if cell.stopped_early else ''}"
    return f"**{count}**{mark}" if cell.caught else f"{count}{mark}"


def _name(r: Row) -> str:
    return r.implementation if r.implementation == REFERENCE else r.implementation.removeprefix("mutant_")


def _verdict(r: Row) -> str:
    if r.implementation == REFERENCE:
        bad = [o for c in r.cells.values() for o in c.outcomes if o.verdict != "pass"]
        return "passes all" if not bad else f"FAILS {len(bad)}"
    missed = [tc for tc in r.expected_catchers if tc in r.cells and not r.cells[tc].caught]
    if not r.caught_by:
        return "SURVIVES"
    return "caught" + (f" (missed by expected {', '.join(missed)})" if missed else "")


def markdown(rows: list[Row], *, tcs: Optional[tuple[str, ...]] = None, title: str = "Kill matrix",
             details: bool = True) -> str:
    tcs = tcs or tuple(tc for tc in TC_IDS if any(tc in r.cells for r in rows))
    lines = [f"### {title}", "", LEGEND, "",
             "| implementation | component | " + " | ".join(tcs) + " | verdict | s |",
             "|---|---|" + "---:|" * len(tcs) + "---|---:|"]
    for r in rows:
        cells = " | ".join(cell_text(r, tc) for tc in tcs)
        lines.append(f"| {_name(r)} | {r.component or 'control'} | {cells} | {_verdict(r)} | {r.seconds:.1f} |")
    if details:
        lines += ["", "First catch per mutant (TC, case, first problem or error):", ""]
        for r in rows:
            if r.implementation == REFERENCE:
                bad = [(tc, o) for tc, c in r.cells.items() for o in c.outcomes if o.verdict != "pass"]
                for tc, o in bad:
                    lines.append(f"- reference {o.verdict} in {tc} [{o.case_id}]: {o.detail}")
                continue
            for tc in r.caught_by[:1]:
                o = r.cells[tc].first_catch
                lines.append(f"- **{_name(r)}** ({r.rule}) -> {tc} [{o.case_id}]: {o.verdict}: {o.detail}")
            if not r.caught_by:
                lines.append(f"- **{_name(r)}** ({r.rule}): not caught by any TC")
    return "\n".join(lines) + "\n"


def docs_table(rows: list[Row]) -> tuple[tuple[str, ...], list[list[str]], str]:
    """(columns, cells, alignment) of the kill matrix as docs/mutation.md shows it (``tools.docs_blocks``)."""
    tcs = tuple(tc for tc in TC_IDS if any(tc in r.cells for r in rows))
    cells = [[_name(r), r.component or "control", *(cell_text(r, tc) for tc in tcs), _verdict(r)] for r in rows]
    return ("implementation", "component", *tcs, "verdict"), cells, "ll" + "r" * len(tcs) + "l"


def to_json(rows: list[Row], **meta) -> dict:
    out = []
    for r in rows:
        d = asdict(r)
        d["caught_by"] = list(r.caught_by)
        d["seconds"] = round(r.seconds, 3)
        for tc, cell in r.cells.items():
            d["cells"][tc].update(caught=cell.caught, kills=cell.kills)
        out.append(d)
    return {**meta, "rows": out}


def row_from_json(d: dict) -> Row:
    """Inverse of one entry of ``to_json``'s rows (for tables assembled from per-mutant row files)."""
    cells = {}
    for tc, c in d["cells"].items():
        outcomes = tuple(CaseOutcome(**o) for o in c["outcomes"])
        cells[tc] = Cell(tc=c["tc"], total_cases=c["total_cases"], outcomes=outcomes,
                         stopped_early=c["stopped_early"])
    return Row(implementation=d["implementation"], cells=cells, component=d["component"], rule=d["rule"],
               expected_catchers=tuple(d["expected_catchers"]))


def write_json(path: Path, data: dict) -> None:
    write_json_atomic(path, data)
