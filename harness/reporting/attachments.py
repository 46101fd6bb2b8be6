"""What a reviewer sees attached to a TC in the Allure report.

Builders (``layout_*``, ``memory_chart_png``, ``config_yaml``, ``rank_log_text``) are
pure: plain values in, ``str``/``bytes`` out, no allure. The ``attach_*`` functions
only hand a builder's output to ``allure.attach``. allure, matplotlib and omegaconf
are imported when first needed.

A layout is a plain mapping (JSON-friendly, so it can travel from the ranks)::

    {"ranks": [0, 1, 2, 3], "layers": [0, 1, ..., 39],
     "full_layers": [3, 7, ...], "owned": {0: [3, 19, 35], 1: [7, 23, 39], ...}}

Rank keys of ``owned`` may be ints or their strings (as after a JSON round trip).
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from implementations.units import MIB as MiB

OWN, SCRATCH, LINEAR = "own", "scratch", "linear"


# ---- layout table ---------------------------------------------------------------------

DEPARTS = "≠ spec"
FOLD_EDGE = 2
"""Matching rows kept either side of a folded run."""
FOLD_MIN = 2 * FOLD_EDGE + 3
"""Runs of rows that match the spec at least this long are folded."""


def _layers_of(mapping: Mapping[Any, Any], rank: int) -> set[int]:
    layers = mapping.get(rank, mapping.get(str(rank), ()))
    return {int(layer) for layer in layers}


def _owned_by(layout: Mapping[str, Any], rank: int) -> set[int]:
    return _layers_of(layout["owned"], rank)


def _kind(layer: int, full: set[int], owned: set[int]) -> str:
    if layer not in full:
        return LINEAR
    return OWN if layer in owned else SCRATCH


def layout_grid(layout: Mapping[str, Any]) -> tuple[list[int], list[tuple[int, list[tuple[str, Optional[str]]]]]]:
    """(ranks, rows): per layer, per rank (implementation's cell, spec's cell or None when they agree).

    A full layer a rank does not own is served from that rank's scratch layer; linear
    (GDN) layers are held by every rank. The spec's cells come from ``expected_owned``
    and ``expected_full_layers`` (the oracle); without them nothing is marked.
    """
    ranks = [int(rank) for rank in layout["ranks"]]
    full = {int(layer) for layer in layout["full_layers"]}
    owned = {rank: _owned_by(layout, rank) for rank in ranks}
    expected = layout.get("expected_owned")
    spec_full = {int(layer) for layer in layout.get("expected_full_layers", layout["full_layers"])}
    spec = {rank: _layers_of(expected, rank) for rank in ranks} if expected is not None else None
    rows = []
    for layer in layout["layers"]:
        layer = int(layer)
        cells = []
        for rank in ranks:
            got = _kind(layer, full, owned[rank])
            want = _kind(layer, spec_full, spec[rank]) if spec is not None else got
            cells.append((got, None if want == got else want))
        rows.append((layer, cells))
    return ranks, rows


def _cell_text(cell: tuple[str, Optional[str]]) -> str:
    got, want = cell
    return got if want is None else f"{got} {DEPARTS}: {want}"


def layout_cells(layout: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per layer, one column per rank; cells own / scratch / linear,
    ``own ≠ spec: scratch`` where the implementation departs from the spec."""
    ranks, grid = layout_grid(layout)
    header = ["layer"] + [f"rank {rank}" for rank in ranks]
    return header, [[str(layer)] + [_cell_text(c) for c in cells] for layer, cells in grid]


def departures(layout: Mapping[str, Any]) -> int:
    """Cells where the implementation's layout differs from the spec's."""
    _, grid = layout_grid(layout)
    return sum(want is not None for _, cells in grid for _, want in cells)


def fold_runs(grid: Sequence[tuple[int, Any]], departs: Sequence[bool]) -> list[tuple[str, list]]:
    """Blocks of rows: ``("rows", rows)`` shown, ``("fold", rows)`` a long run that matches the spec."""
    blocks: list[tuple[str, list]] = []
    i = 0
    while i < len(grid):
        j = i
        while j < len(grid) and departs[j] == departs[i]:
            j += 1
        run = list(grid[i:j])
        if not departs[i] and len(run) >= FOLD_MIN:
            blocks += [("rows", run[:FOLD_EDGE]), ("fold", run[FOLD_EDGE:-FOLD_EDGE]), ("rows", run[-FOLD_EDGE:])]
        else:
            blocks.append(("rows", run))
        i = j
    return [b for b in blocks if b[1]]


def layout_markdown(layout: Mapping[str, Any]) -> str:
    header, rows = layout_cells(layout)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def layout_csv(layout: Mapping[str, Any]) -> str:
    header, rows = layout_cells(layout)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


_CELL_COLOURS = {OWN: "#c6efce", SCRATCH: "#ffeb9c", LINEAR: "#dde4ee"}
_DEPART_COLOUR = "#ff9b9b"
_STYLE = (
    "<style>body{font:13px sans-serif}table{border-collapse:collapse}"
    "td,th{border:1px solid #999;padding:2px 8px;text-align:center}"
    f"td.bad{{background:{_DEPART_COLOUR};font-weight:bold}}"
    "tr.fold td{background:#f4f4f4;text-align:left;font-style:italic}"
    "details summary{cursor:pointer}.note{margin:4px 0}</style>"
)


def _html_row(layer: int, cells: Sequence[tuple[str, Optional[str]]]) -> str:
    out = [f"<th>{layer}</th>"]
    for got, want in cells:
        if want is None:
            out.append(f"<td style='background:{_CELL_COLOURS[got]}'>{got}</td>")
        else:
            out.append(f"<td class='bad' title='implementation {got}, spec {want}'>{got} {DEPARTS}: {want}</td>")
    return "<tr>" + "".join(out) + "</tr>"


def _fold_row(ranks: Sequence[int], rows: Sequence[tuple[int, Any]]) -> str:
    counts = []
    for i, rank in enumerate(ranks):
        own = sum(cells[i][0] == OWN for _, cells in rows)
        counts.append(f"rank {rank} owns {own}")
    inner = "".join(_html_row(layer, cells) for layer, cells in rows)
    summary = (f"layers {rows[0][0]}&ndash;{rows[-1][0]}: {len(rows)} layers as the spec says "
               f"({', '.join(counts)}); click to show")
    return (f"<tr class='fold'><td colspan='{len(ranks) + 1}'><details><summary>{summary}</summary>"
            f"<table>{inner}</table></details></td></tr>")


def layout_html(layout: Mapping[str, Any], title: Optional[str] = None) -> str:
    """The table, departures from the spec in red, long runs that match the spec folded."""
    ranks, grid = layout_grid(layout)
    departs = [any(want is not None for _, want in cells) for _, cells in grid]
    title = title or layout.get("title") or "KV layout: owner of each layer per rank"
    checked = layout.get("expected_owned") is not None
    bad = sum(departs)
    if not checked:
        note = "No spec layout to compare with (the spec refuses this configuration)."
    elif bad:
        note = f"{bad} of {len(grid)} layers depart from the spec (red: implementation &ne; spec: spec's cell)."
    else:
        note = f"All {len(grid)} layers match the spec (owners from the spec's round-robin, FEATURE section 4)."
    split = layout.get("split_ranks") or {}
    head = "".join(
        f"<th>rank {rank}" + (f"<br><small>split rank {split.get(rank, split.get(str(rank)))}</small>"
                              if split else "") + "</th>" for rank in ranks)
    totals = ""
    if checked:
        spec = layout["expected_owned"]
        cells = []
        for rank in ranks:
            got, want = len(_owned_by(layout, rank)), len(_layers_of(spec, rank))
            cls = " class='bad'" if got != want else ""
            cells.append(f"<td{cls}>{got} / {want}</td>")
        totals = "<tr><th>owned full layers<br><small>impl / spec</small></th>" + "".join(cells) + "</tr>"
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>", _STYLE, "</head><body>",
        f"<h3>{html.escape(title)}</h3><p class='note'>{note}</p><table>",
        f"<tr><th>layer</th>{head}</tr>", totals,
    ]
    for kind, rows in fold_runs(grid, departs):
        if kind == "fold":
            parts.append(_fold_row(ranks, rows))
        else:
            parts += [_html_row(layer, cells) for layer, cells in rows]
    parts.append("</table></body></html>")
    return "\n".join(p for p in parts if p) + "\n"


# ---- per-rank memory chart --------------------------------------------------------------


def memory_chart_png(
    ranks: Sequence[int],
    *,
    estimated_bytes: Sequence[int],
    measured_bytes: Optional[Sequence[int]] = None,
    spec_bytes: Optional[Sequence[int]] = None,
    uniform_bytes: Optional[int | Sequence[int]] = None,
    budget_bytes: Optional[int] = None,
    draft_measured_bytes: Optional[Sequence[int]] = None,
    draft_estimated_bytes: Optional[Sequence[int]] = None,
    draft_spec_bytes: Optional[Sequence[int]] = None,
    title: str = "Per-rank KV memory",
) -> bytes:
    """Bars per rank in MiB (the implementation's estimate and the measured bytes; a draft's
    bytes stacked on the target's), a black tick per rank for the spec's bytes, and lines
    for the spec's uniform (no split) peak and the KV budget. The legend sits below the axes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    n = len(ranks)
    for label, values in (("estimated_bytes", estimated_bytes), ("measured_bytes", measured_bytes),
                          ("spec_bytes", spec_bytes), ("draft_measured_bytes", draft_measured_bytes),
                          ("draft_estimated_bytes", draft_estimated_bytes), ("draft_spec_bytes", draft_spec_bytes)):
        if values is not None and len(values) != n:
            raise ValueError(f"{label}: {len(values)} values for {n} ranks")
    bars = [("estimated (implementation)", estimated_bytes, draft_estimated_bytes, "#7aa6d6")]
    if measured_bytes is not None:
        bars.append(("measured", measured_bytes, draft_measured_bytes, "#3a7d44"))
    figure = Figure(figsize=(max(5.0, 1.1 * n + 3), 4.2), dpi=80)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    width = 0.8 / len(bars)
    for i, (label, values, draft, colour) in enumerate(bars):
        xs = [r + (i - (len(bars) - 1) / 2) * width for r in range(n)]
        axes.bar(xs, [v / MiB for v in values], width=width, label=f"target, {label}", color=colour)
        if draft is not None:
            axes.bar(xs, [v / MiB for v in draft], width=width, bottom=[v / MiB for v in values],
                     label=f"draft, {label}", color=colour, alpha=0.45, hatch="//", edgecolor="white")
    if spec_bytes is not None:
        total = [t + (d if draft_spec_bytes is not None else 0)
                 for t, d in zip(spec_bytes, draft_spec_bytes or [0] * n)]
        label = "spec (oracle)" + (": target + draft" if draft_spec_bytes is not None else "")
        for r, value in enumerate(total):
            axes.hlines(value / MiB, r - 0.45, r + 0.45, colors="black", linewidth=2.5,
                        label=label if r == 0 else None, zorder=5)
    if uniform_bytes is not None and not isinstance(uniform_bytes, int):
        uniform_bytes = max(uniform_bytes)  # one value per rank (older views): the same on every rank
    if uniform_bytes is not None:
        axes.axhline(uniform_bytes / MiB, color="#7f3fbf", linestyle="--", linewidth=1.5,
                     label=f"uniform at the same n_blocks (spec): {uniform_bytes / MiB:,.1f} MiB")
    if budget_bytes is not None:
        axes.axhline(budget_bytes / MiB, color="#c00000", linewidth=1.5,
                     label=f"KV budget per rank: {budget_bytes / MiB:,.1f} MiB")
    axes.set_xticks(range(n), [f"rank {rank}" for rank in ranks])
    axes.set_ylabel("MiB")
    axes.set_title(title, fontsize="medium")
    axes.margins(y=0.12)
    axes.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2, frameon=False)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


# ---- config and logs ----------------------------------------------------------------------


def config_yaml(config: Any) -> str:
    """YAML of a composed config (DictConfig, dict or structured dataclass); strings pass through."""
    if isinstance(config, str):
        return config
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(config)


def rank_log_text(rank: int, text: str) -> str:
    body = text if text.endswith("\n") else text + "\n"
    return f"===== rank {rank} =====\n{body}"


# ---- allure.attach wrappers ----------------------------------------------------------------


def attach_layout(layout: Mapping[str, Any], name: str = "layout", *, csv: bool = True) -> None:
    """The layout as an HTML table (rendered inline; marks and folds) and, with ``csv``, every row as CSV."""
    import allure

    allure.attach(layout_html(layout), name=f"{name} (table)", attachment_type=allure.attachment_type.HTML)
    if csv:
        allure.attach(layout_csv(layout), name=f"{name}.csv", attachment_type=allure.attachment_type.CSV)


def attach_memory_chart(ranks: Sequence[int], *, name: str = "per-rank KV memory", **series) -> None:
    """Keyword arguments are those of ``memory_chart_png``."""
    import allure

    allure.attach(memory_chart_png(ranks, **series), name=name, attachment_type=allure.attachment_type.PNG)


def attach_config(config: Any, name: str = "composed config") -> None:
    import allure

    allure.attach(config_yaml(config), name=name, attachment_type=allure.attachment_type.YAML)


def rank_failure_texts(rank_errors: Mapping[int, str], failed_rank: Optional[int],
                       other_ranks: str = "") -> list[tuple[str, str]]:
    """(name, text): the failing rank's log first, marked, then one text with every other rank's."""
    ranks = sorted(rank_errors, key=int)
    first = failed_rank if failed_rank is not None and failed_rank in rank_errors else (ranks[0] if ranks else None)
    out = []
    if first is not None:
        out.append((f"rank {first} log: the failure", rank_log_text(int(first), rank_errors[first])))
    rest = [r for r in ranks if r != first]
    if rest:  # the runner's own sections when it gave them (the same texts, with what each rank did)
        body = other_ranks.rstrip() + "\n" if other_ranks else "".join(rank_log_text(int(r), rank_errors[r]) for r in rest)
        out.append((f"other ranks ({', '.join(str(r) for r in rest)})", body))
    return out


def attach_rank_failure(rank_errors: Mapping[int, str], failed_rank: Optional[int] = None,
                        other_ranks: str = "") -> None:
    """Two text attachments at most (``RankFailure``): the failing rank's, then the others'."""
    import allure

    for name, text in rank_failure_texts(rank_errors, failed_rank, other_ranks):
        allure.attach(text, name=name, attachment_type=allure.attachment_type.TEXT)
