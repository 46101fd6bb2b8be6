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
from typing import Any

from implementations.units import MIB as MiB

OWN, SCRATCH, LINEAR = "own", "scratch", "linear"


# ---- layout table ---------------------------------------------------------------------


def _owned_by(layout: Mapping[str, Any], rank: int) -> set[int]:
    owned = layout["owned"]
    layers = owned.get(rank, owned.get(str(rank), ()))
    return {int(layer) for layer in layers}


def layout_cells(layout: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """(header, rows): one row per layer, one column per rank; cells own / scratch / linear.

    A full layer a rank does not own is served from that rank's scratch layer; linear
    (GDN) layers are held by every rank.
    """
    ranks = [int(rank) for rank in layout["ranks"]]
    full = {int(layer) for layer in layout["full_layers"]}
    owned = {rank: _owned_by(layout, rank) for rank in ranks}
    header = ["layer"] + [f"rank {rank}" for rank in ranks]
    rows = []
    for layer in layout["layers"]:
        layer = int(layer)
        row = [str(layer)]
        for rank in ranks:
            if layer not in full:
                row.append(LINEAR)
            elif layer in owned[rank]:
                row.append(OWN)
            else:
                row.append(SCRATCH)
        rows.append(row)
    return header, rows


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


def layout_html(layout: Mapping[str, Any], title: str = "KV layout: owner of each layer per rank") -> str:
    header, rows = layout_cells(layout)
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        "<style>table{border-collapse:collapse;font:13px sans-serif}"
        "td,th{border:1px solid #999;padding:2px 8px;text-align:center}</style></head><body>",
        f"<h3>{html.escape(title)}</h3><table>",
        "<tr>" + "".join(f"<th>{html.escape(cell)}</th>" for cell in header) + "</tr>",
    ]
    for row in rows:
        cells = [f"<th>{html.escape(row[0])}</th>"]
        cells += [f"<td style='background:{_CELL_COLOURS[cell]}'>{cell}</td>" for cell in row[1:]]
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</table></body></html>")
    return "\n".join(parts) + "\n"


# ---- per-rank memory chart --------------------------------------------------------------


def memory_chart_png(
    ranks: Sequence[int],
    *,
    estimated_bytes: Sequence[int],
    measured_bytes: Sequence[int] | None = None,
    uniform_bytes: Sequence[int] | None = None,
    title: str = "Per-rank KV memory",
) -> bytes:
    """Grouped bars per rank, in MiB: split estimated, split measured, uniform (any given)."""
    # An explicit Agg canvas: no pyplot, no global backend switch, no display needed.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = [("split, estimated", estimated_bytes)]
    if measured_bytes is not None:
        series.append(("split, measured", measured_bytes))
    if uniform_bytes is not None:
        series.append(("uniform", uniform_bytes))
    for label, values in series:
        if len(values) != len(ranks):
            raise ValueError(f"{label}: {len(values)} values for {len(ranks)} ranks")

    figure = Figure(figsize=(max(4.0, 1.2 * len(ranks) + 2), 3.5), dpi=100)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    width = 0.8 / len(series)
    for i, (label, values) in enumerate(series):
        xs = [r + (i - (len(series) - 1) / 2) * width for r in range(len(ranks))]
        axes.bar(xs, [v / MiB for v in values], width=width, label=label)
    axes.set_xticks(range(len(ranks)), [f"rank {rank}" for rank in ranks])
    axes.set_ylabel("MiB")
    axes.set_title(title)
    axes.legend(fontsize="small")
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


def attach_layout(layout: Mapping[str, Any], name: str = "layout") -> None:
    """The layout as an HTML table (rendered inline) and as CSV (Allure shows it as a table)."""
    import allure

    allure.attach(layout_html(layout), name=f"{name} (table)", attachment_type=allure.attachment_type.HTML)
    allure.attach(layout_csv(layout), name=f"{name}.csv", attachment_type=allure.attachment_type.CSV)


def attach_memory_chart(ranks: Sequence[int], *, name: str = "per-rank KV memory", **series) -> None:
    """Keyword arguments are those of ``memory_chart_png``."""
    import allure

    allure.attach(memory_chart_png(ranks, **series), name=name, attachment_type=allure.attachment_type.PNG)


def attach_config(config: Any, name: str = "composed config") -> None:
    import allure

    allure.attach(config_yaml(config), name=name, attachment_type=allure.attachment_type.YAML)


def attach_rank_logs(rank_logs: Mapping[int, str], name: str = "rank {rank} log") -> None:
    """One text attachment per rank, in rank order (e.g. ``RankFailure.rank_errors``)."""
    import allure

    for rank in sorted(rank_logs, key=int):
        allure.attach(
            rank_log_text(int(rank), rank_logs[rank]),
            name=name.format(rank=rank),
            attachment_type=allure.attachment_type.TEXT,
        )
