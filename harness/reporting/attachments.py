"""What a reviewer sees attached to a TC in the Allure report.

Builders (``layout_*``, ``memory_chart_svg``, ``config_yaml``, ``rank_log_text``) are
pure: plain values in, ``str`` out, no allure. The ``attach_*`` functions only hand a
builder's output to ``allure.attach``. allure and omegaconf are imported when first needed.

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

import allure
from omegaconf import OmegaConf

from contract.units import MIB as MiB
from harness.reporting import svg

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


_TARGET_COLOURS = {"estimated (implementation)": "#7aa6d6", "measured": "#3a7d44"}
_SPEC_COLOUR, _UNIFORM_COLOUR, _BUDGET_COLOUR = "#000000", "#7f3fbf", "#c00000"


def memory_chart_svg(
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
) -> str:
    """Bars per rank in MiB (the implementation's estimate and the measured bytes; a draft's
    bytes stacked on the target's, lighter and hatched), a black tick per rank for the spec's
    bytes, and lines for the spec's uniform (no split) peak and the KV budget; the legend sits
    below the axes. An SVG document: drawn here, no plotting library (a report renders it
    inline; a case that attaches one pays microseconds, not a plotting library's import)."""
    n = len(ranks)
    for label, values in (("estimated_bytes", estimated_bytes), ("measured_bytes", measured_bytes),
                          ("spec_bytes", spec_bytes), ("draft_measured_bytes", draft_measured_bytes),
                          ("draft_estimated_bytes", draft_estimated_bytes), ("draft_spec_bytes", draft_spec_bytes)):
        if values is not None and len(values) != n:
            raise ValueError(f"{label}: {len(values)} values for {n} ranks")
    if uniform_bytes is not None and not isinstance(uniform_bytes, int):
        uniform_bytes = max(uniform_bytes)  # one value per rank (older views): the same on every rank
    bars = [("estimated (implementation)", estimated_bytes, draft_estimated_bytes)]
    if measured_bytes is not None:
        bars.append(("measured", measured_bytes, draft_measured_bytes))
    spec_total = None
    if spec_bytes is not None:
        spec_total = [t + (d if draft_spec_bytes is not None else 0)
                      for t, d in zip(spec_bytes, draft_spec_bytes or [0] * n)]

    tops = [v + (d[i] if d is not None else 0) for _, values, d in bars for i, v in enumerate(values)]
    tops += list(spec_total or []) + [b for b in (uniform_bytes, budget_bytes) if b is not None]
    y_ticks = svg.ticks(0.0, max([t / MiB for t in tops] + [1e-9]) * 1.12)

    left, right, top, plot_h, slot = 64, 16, 34, 230, 88
    width = max(700, slot * n + 240)  # two legend columns of the longest labels
    plot_w = width - left - right
    legend = _memory_legend(bars, spec_total is not None, draft_spec_bytes is not None, uniform_bytes, budget_bytes)
    legend_rows = (len(legend) + 1) // 2
    height = top + plot_h + 30 + 18 * legend_rows + 8

    def x(position: float) -> float:  # rank r's bars are centred on r
        return left + plot_w * (position + 0.5) / n

    y = svg.Scale(0.0, y_ticks[-1], top + plot_h, top)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="{svg.FONT}" font-size="11">',
           '<defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
           'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="white" stroke-width="2"/>'
           '</pattern></defs>',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" font-size="13">{html.escape(title)}</text>']
    for value in y_ticks:  # grid and y ticks
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y(value):.1f}" y2="{y(value):.1f}" '
                   f'stroke="#e0e0e0"/>')
        out.append(f'<text x="{left - 6}" y="{y(value) + 4:.1f}" text-anchor="end">{svg.label(value)}</text>')
    out.append(f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">MiB</text>')
    width_each = 0.8 / len(bars)
    for i, (label, values, draft) in enumerate(bars):
        colour = _TARGET_COLOURS[label]
        for r in range(n):
            centre = r + (i - (len(bars) - 1) / 2) * width_each
            x0, w = x(centre - width_each / 2), plot_w * width_each / n
            base = values[r] / MiB
            out.append(_bar("target", label, ranks[r], x0, y(base), w, y(0) - y(base), colour))
            if draft is not None:
                extra = draft[r] / MiB
                out.append(_bar("draft", label, ranks[r], x0, y(base + extra), w, y(base) - y(base + extra),
                                colour, opacity=0.45))
                out.append(f'<rect x="{x0:.1f}" y="{y(base + extra):.1f}" width="{w:.1f}" '
                           f'height="{y(base) - y(base + extra):.1f}" fill="url(#hatch)"/>')
    if spec_total is not None:
        for r, value in enumerate(spec_total):
            out.append(f'<line class="spec" data-rank="{ranks[r]}" x1="{x(r - 0.45):.1f}" x2="{x(r + 0.45):.1f}" '
                       f'y1="{y(value / MiB):.1f}" y2="{y(value / MiB):.1f}" stroke="{_SPEC_COLOUR}" '
                       f'stroke-width="2.5"/>')
    if uniform_bytes is not None:
        out.append(f'<line class="uniform" x1="{left}" x2="{left + plot_w}" y1="{y(uniform_bytes / MiB):.1f}" '
                   f'y2="{y(uniform_bytes / MiB):.1f}" stroke="{_UNIFORM_COLOUR}" stroke-width="1.5" '
                   f'stroke-dasharray="6 4"/>')
    if budget_bytes is not None:
        out.append(f'<line class="budget" x1="{left}" x2="{left + plot_w}" y1="{y(budget_bytes / MiB):.1f}" '
                   f'y2="{y(budget_bytes / MiB):.1f}" stroke="{_BUDGET_COLOUR}" stroke-width="1.5"/>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" stroke="black"/>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" stroke="black"/>')
    for r, rank in enumerate(ranks):
        out.append(f'<text x="{x(r):.1f}" y="{top + plot_h + 16}" text-anchor="middle">rank {rank}</text>')
    for k, (text, swatch) in enumerate(legend):
        lx = left + (k % 2) * (plot_w / 2)
        ly = top + plot_h + 34 + 18 * (k // 2)
        out.append(swatch.format(x=lx, y=ly - 9, mid=ly - 4))
        out.append(f'<text class="legend" x="{lx + 22:.1f}" y="{ly:.1f}">{html.escape(text)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _bar(part: str, label: str, rank: int, x0: float, y0: float, w: float, h: float, colour: str,
         opacity: float = 1.0) -> str:
    return (f'<rect class="bar" data-part="{part}" data-series="{html.escape(label)}" data-rank="{rank}" '
            f'x="{x0:.1f}" y="{y0:.1f}" width="{w:.1f}" height="{max(h, 0.0):.1f}" fill="{colour}" '
            f'fill-opacity="{opacity}"/>')


def _memory_legend(bars, spec: bool, spec_has_draft: bool, uniform_bytes, budget_bytes) -> list[tuple[str, str]]:
    """(label, swatch template with {x}, {y}, {mid}) for each thing drawn."""
    out = []
    for label, _, draft in bars:
        colour = _TARGET_COLOURS[label]
        out.append((f"target, {label}", f'<rect x="{{x}}" y="{{y}}" width="16" height="10" fill="{colour}"/>'))
        if draft is not None:
            out.append((f"draft, {label}", f'<rect x="{{x}}" y="{{y}}" width="16" height="10" fill="{colour}" '
                        'fill-opacity="0.45"/>'))
    if spec:
        out.append(("spec (oracle)" + (": target + draft" if spec_has_draft else ""),
                    f'<rect x="{{x}}" y="{{mid}}" width="16" height="2.5" fill="{_SPEC_COLOUR}"/>'))
    if uniform_bytes is not None:
        out.append((f"uniform at the same n_blocks (spec): {uniform_bytes / MiB:,.1f} MiB",
                    f'<rect x="{{x}}" y="{{mid}}" width="16" height="1.5" fill="{_UNIFORM_COLOUR}"/>'))
    if budget_bytes is not None:
        out.append((f"KV budget per rank: {budget_bytes / MiB:,.1f} MiB",
                    f'<rect x="{{x}}" y="{{mid}}" width="16" height="1.5" fill="{_BUDGET_COLOUR}"/>'))
    return out


# ---- config and logs ----------------------------------------------------------------------


def config_yaml(config: Any) -> str:
    """YAML of a composed config (DictConfig, dict or structured dataclass); strings pass through."""
    if isinstance(config, str):
        return config

    return OmegaConf.to_yaml(config)


def rank_log_text(rank: int, text: str) -> str:
    body = text if text.endswith("\n") else text + "\n"
    return f"===== rank {rank} =====\n{body}"


# ---- allure.attach wrappers ----------------------------------------------------------------


def attach_layout(layout: Mapping[str, Any], name: str = "layout", *, csv: bool = True) -> None:
    """The layout as an HTML table (rendered inline; marks and folds) and, with ``csv``, every row as CSV."""
    allure.attach(layout_html(layout), name=f"{name} (table)", attachment_type=allure.attachment_type.HTML)
    if csv:
        allure.attach(layout_csv(layout), name=f"{name}.csv", attachment_type=allure.attachment_type.CSV)


def attach_memory_chart(ranks: Sequence[int], *, name: str = "per-rank KV memory", **series) -> None:
    """Keyword arguments are those of ``memory_chart_svg``."""
    allure.attach(memory_chart_svg(ranks, **series), name=name, attachment_type=allure.attachment_type.SVG)


def attach_config(config: Any, name: str = "composed config") -> None:
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
    for name, text in rank_failure_texts(rank_errors, failed_rank, other_ranks):
        allure.attach(text, name=name, attachment_type=allure.attachment_type.TEXT)
