"""A finished sweep as a table: rows from the jobs' ``result.json``, then CSV, Markdown and PNG.

Pure builders: result dicts in, ``str``/``bytes`` out (``harness.app.callback`` does
the reading and writing). Every job is a row, whatever its status: a failed,
rejected or missing job shows its status (marked) and message instead of numbers, and
the chart marks it at its split size. Jobs are numbered from 1 everywhere (the progress
lines, the table, the CSV); ``job_dir`` names the job's directory (Hydra numbers those
from 0).
"""

from __future__ import annotations

import csv
import io
from collections import OrderedDict
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from harness.app import status as st
from harness.app.progress import counts_text, job_label
from implementations.units import MIB

COLUMNS = (
    "job", "job_dir", "status", "mode", "model", "implementation", "hardware", "parallel", "layerwise", "split_size",
    "world_size", "n_blocks", "uniform_n_blocks", "peak_bytes", "uniform_peak_bytes", "savings_bytes",
    "capacity_gain", "measured_peak_bytes", "same_capacity_peak_bytes", "measured_same_capacity_peak_bytes",
    "full_layers", "peak_layers", "limit_layers", "kv_budget_bytes", "layer_bytes_per_block", "linear_state_bytes",
    "passed", "failed", "error", "skipped", "xfailed", "xpassed", "duration_s", "overrides", "message",
)
_COUNT_KEYS = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


def row(result: Mapping[str, Any]) -> dict:
    """One flat row (``COLUMNS``) of one job's result; numbers are None where the job has none."""
    job = result.get("job") or {}
    cfg = result.get("config") or {}
    plan = result.get("plan") or {}
    measured = result.get("measured") or {}
    counts = result.get("counts") or {}
    out: dict = {c: None for c in COLUMNS}
    num = job.get("num")
    out.update(
        job=num + 1 if isinstance(num, int) else None,
        job_dir=Path(job["dir"]).name if job.get("dir") else (str(num) if isinstance(num, int) else None),
        status=result.get("status", st.ERROR),
        mode=result.get("mode"),
        overrides=job_label(job.get("overrides") or []),
        message=" ".join(str(result.get("message") or result.get("plan_error") or "").split()),
        duration_s=result.get("duration_s"),
    )
    for key in ("model", "implementation", "hardware", "parallel", "layerwise", "split_size", "world_size"):
        out[key] = cfg.get(key)
    if cfg.get("hbm_mib_per_card") is not None:
        out["kv_budget_bytes"] = (cfg["hbm_mib_per_card"] - cfg["reserved_mib_per_card"]) * MIB
    for key in ("n_blocks", "uniform_n_blocks", "peak_bytes", "uniform_peak_bytes", "savings_bytes",
                "capacity_gain", "same_capacity_peak_bytes", "full_layers", "peak_layers", "limit_layers",
                "layer_bytes_per_block", "linear_state_bytes"):
        out[key] = plan.get(key)
    ranks = [r.get("measured_bytes") for r in measured.get("ranks") or [] if r.get("measured_bytes") is not None]
    out["measured_peak_bytes"] = max(ranks) if ranks else None
    n_blocks, linear = measured.get("n_blocks"), plan.get("linear_state_bytes")
    if ranks and n_blocks and linear is not None and plan.get("uniform_n_blocks"):
        per_block = (out["measured_peak_bytes"] - linear) // n_blocks
        out["measured_same_capacity_peak_bytes"] = per_block * plan["uniform_n_blocks"] + linear
    if result.get("mode") == "suite":
        for key in _COUNT_KEYS:
            out[key] = int(counts.get(key, 0))
    return out


def rows(results: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Rows sorted by model, implementation, hardware, parallel, split size (jobs without a config last)."""
    def key(r: dict):
        return (r["model"] is None, r["model"] or "", r["implementation"] or "", r["hardware"] or "",
                r["parallel"] or "", r["split_size"] or 0, r["job"] if r["job"] is not None else -1)
    return sorted((row(r) for r in results), key=key)


def failed(rows_: Sequence[Mapping[str, Any]]) -> list[dict]:
    return [r for r in rows_ if st.is_failure(r["status"])]


# ---- CSV ------------------------------------------------------------------------------------


def to_csv(rows_: Sequence[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows_:
        writer.writerow({c: "" if r.get(c) is None else r[c] for c in COLUMNS})
    return buffer.getvalue()


# ---- Markdown -------------------------------------------------------------------------------


def _mib(n_bytes: Optional[int]) -> str:
    return "" if n_bytes is None else f"{n_bytes / MIB:,.1f}"


def _num(value: Any, digits: int = 2) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else f"{value:.{digits}f}"
    return str(value)


def _cell(text: Any) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= 200 else text[:197] + "..."


HARDWARE_NAMES = {"cpu": "CPU simulation", "bi_v100": "Iluvatar BI-V100", "cuda_generic": "CUDA cards"}
"""How a hardware profile reads in a title."""


def budget_lines(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """One sentence per hardware profile of the sweep: HBM, the reserve assumed, the KV budget."""
    seen: OrderedDict[str, str] = OrderedDict()
    for result in results:
        cfg = result.get("config") or {}
        name = cfg.get("hardware")
        if name is None or name in seen:
            continue
        hbm, reserved = cfg["hbm_mib_per_card"], cfg["reserved_mib_per_card"]
        seen[name] = (f"Hardware `{name}`: {hbm:,} MiB per card, {reserved:,} MiB reserved for weights, "
                      f"activations and runtime, so {hbm - reserved:,} MiB of KV cache per rank (one rank per card); "
                      f"block_size {cfg.get('block_size')}, KV dtype {cfg.get('kv_cache_dtype')}.")
    return list(seen.values())


def hardware_title(results: Sequence[Mapping[str, Any]]) -> str:
    """``CPU simulation, 128 MiB of KV per rank`` (one part per hardware profile of the sweep)."""
    parts: OrderedDict[str, str] = OrderedDict()
    for result in results:
        cfg = result.get("config") or {}
        name = cfg.get("hardware")
        if name is None or name in parts or cfg.get("hbm_mib_per_card") is None:
            continue
        budget = cfg["hbm_mib_per_card"] - cfg["reserved_mib_per_card"]
        parts[name] = f"{HARDWARE_NAMES.get(name, name)}, {budget:,} MiB of KV per rank"
    return "; ".join(parts.values()) or "no job composed a configuration"


def _status_cell(status: str) -> str:
    return f"**✗ {status}**" if st.is_failure(status) else status


def _job_cell(r: Mapping[str, Any]) -> str:
    """The job number, linked to its directory (relative to the sweep's)."""
    if r["job"] is None:
        return ""
    return f"[{r['job']}]({r['job_dir']}/)" if r.get("job_dir") else str(r["job"])


def to_markdown(rows_: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]] = (),
                title: str = "Sweep results", command: str = "", allure_report: str = "") -> str:
    """A heading (with the hardware and KV budget), the command, the KV budget per hardware profile,
    the status tally, the combined Allure report and one row per job (failures marked)."""
    varying = [c for c in ("hardware", "parallel") if len({r[c] for r in rows_ if r[c] is not None}) > 1]
    suite = any(r["mode"] == "suite" for r in rows_)
    header = ["job", "model", "implementation", *varying, "s", "status",
              "peak KV MiB/rank", "uniform MiB (same n_blocks)", "n_blocks", "uniform n_blocks", "capacity gain",
              "peak (layers)", "limit: full layers / s + 1 scratch (layers)"]
    if suite:
        header += ["measured peak MiB", "tests"]
    header.append("note")
    lines = [f"# {title}: {hardware_title(results)}" if results else f"# {title}", ""]
    if command:
        lines += [f"`{command}`", ""]
    lines += budget_lines(results)
    tally: OrderedDict[str, int] = OrderedDict()
    for r in rows_:
        tally[r["status"]] = tally.get(r["status"], 0) + 1
    lines += ["", f"{len(rows_)} job{'' if len(rows_) == 1 else 's'}: " + ", ".join(f"{n} {s}" for s, n in tally.items()) + "."]
    if allure_report:
        lines += ["", f"Allure report of every job's tests: [{allure_report}]({allure_report})"]
    lines.append("")
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" if h in ("model", "implementation", "status", "note", *varying) else "---:"
                                for h in header) + "|")
    for r in rows_:
        gain = r["capacity_gain"]
        cells = [_job_cell(r), r["model"] or "", r["implementation"] or "", *(r[c] or "" for c in varying),
                 _num(r["split_size"]), _status_cell(r["status"]), _mib(r["peak_bytes"]), _mib(r["uniform_peak_bytes"]),
                 _num(r["n_blocks"]), _num(r["uniform_n_blocks"]), "" if gain is None else f"{gain:.2f}x",
                 _num(r["peak_layers"]), _num(r["limit_layers"])]
        if suite:
            counts = {k: r[k] for k in _COUNT_KEYS if r.get(k)}
            cells += [_mib(r["measured_peak_bytes"]), counts_text(counts) if r["mode"] == "suite" else ""]
        note = r["message"] if r["status"] != st.PLANNED and r["status"] != st.PASSED else ""
        if r["model"] is None:
            note = f"{r['overrides']}: {note}" if note else r["overrides"]
        cells.append(note)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


# ---- PNG ------------------------------------------------------------------------------------


def _series(rows_: Sequence[Mapping[str, Any]]) -> OrderedDict[tuple, list[dict]]:
    """Rows with numbers (failed ones too) grouped into lines: (model, implementation, hardware, parallel)
    -> rows by split size."""
    plotted = [r for r in rows_ if r["same_capacity_peak_bytes"] is not None and r["split_size"] is not None]
    series: OrderedDict[tuple, list[dict]] = OrderedDict()
    for r in plotted:
        series.setdefault((r["model"], r["implementation"], r["hardware"], r["parallel"]), []).append(r)
    for points in series.values():
        points.sort(key=lambda r: r["split_size"])
    return series


def _at_uniform_blocks(r: Mapping[str, Any], layers: float) -> Optional[float]:
    """MiB a rank holds with ``layers`` full layers at the uniform (s = 1) block count."""
    if r.get("layer_bytes_per_block") is None or r.get("uniform_n_blocks") is None:
        return None
    return (layers * r["layer_bytes_per_block"] * r["uniform_n_blocks"] + (r.get("linear_state_bytes") or 0)) / MIB


def chart_title(rows_: Sequence[Mapping[str, Any]], title: str) -> str:
    """``<title>: CPU simulation, 128 MiB of KV per rank``."""
    parts: OrderedDict[str, str] = OrderedDict()
    for r in rows_:
        if r["hardware"] and r["kv_budget_bytes"] is not None and r["hardware"] not in parts:
            parts[r["hardware"]] = (f"{HARDWARE_NAMES.get(r['hardware'], r['hardware'])}, "
                                    f"{r['kv_budget_bytes'] / MIB:,.0f} MiB of KV per rank")
    return f"{title}: {'; '.join(parts.values())}" if parts else title


def to_png(rows_: Sequence[Mapping[str, Any]], title: str = "Per-rank KV cache against split size") -> bytes:
    """Two panels against split size s, one line per model (colour) and implementation (line style):
    the peak rank's KV MiB for the uniform (s = 1) block count with the uniform peak (dashed), the
    spec's limit (dotted, full layers / s + 1 scratch) and the KV budget (red); and the capacity gain.
    Measured peaks are hollow diamonds on top; a failed job is a red cross at its split size (on the
    axis when it has no numbers)."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    series = _series(rows_)
    keys = list(series)
    models = list(dict.fromkeys(k[0] for k in keys))
    impls = list(dict.fromkeys(k[1] for k in keys))
    varying = [i for i in (1, 2, 3) if len({k[i] for k in keys}) > 1]
    colours = colormaps["tab10"].colors
    styles = ("-", "--", ":", "-.")
    figure = Figure(figsize=(13, 5.6), dpi=100)
    FigureCanvasAgg(figure)
    peak_ax, gain_ax = figure.subplots(1, 2)
    failed_label = "failed job (number)"
    for key, points in series.items():
        label = key[0] + (f" ({', '.join(str(key[i]) for i in varying)})" if varying else "")
        colour = colours[models.index(key[0]) % len(colours)]
        style = styles[impls.index(key[1]) % len(styles)]
        xs = [r["split_size"] for r in points]
        peak_ax.plot(xs, [r["same_capacity_peak_bytes"] / MIB for r in points], style, marker="o", color=colour,
                     label=label, zorder=3)
        gain_ax.plot(xs, [r["capacity_gain"] for r in points], style, marker="o", color=colour, label=label, zorder=3)
        uniform = _at_uniform_blocks(points[0], points[0]["full_layers"] or 0) if points[0]["full_layers"] else None
        if uniform is not None:
            peak_ax.axhline(uniform, color=colour, linestyle=(0, (6, 3)), linewidth=1, alpha=0.7, zorder=1)
        limit = [(r["split_size"], _at_uniform_blocks(r, r["limit_layers"])) for r in points
                 if r["limit_layers"] is not None and _at_uniform_blocks(r, r["limit_layers"]) is not None]
        if limit:
            peak_ax.plot(*zip(*limit), linestyle=":", marker="_", markersize=16, color=colour, linewidth=1.5,
                         alpha=0.9, zorder=2)
        measured = [(r["split_size"], r["measured_same_capacity_peak_bytes"] / MIB) for r in points
                    if r["measured_same_capacity_peak_bytes"] is not None]
        if measured:
            peak_ax.plot(*zip(*measured), "D", color=colour, markerfacecolor="none", markersize=11,
                         markeredgewidth=2, zorder=6)
        for r in points:
            if st.is_failure(r["status"]):
                for ax, y in ((peak_ax, r["same_capacity_peak_bytes"] / MIB), (gain_ax, r["capacity_gain"])):
                    ax.plot([r["split_size"]], [y], "X", color="#d00000", markersize=13, zorder=7)
                    ax.annotate(f"job {r['job']}: {r['status']}", (r["split_size"], y), textcoords="offset points",
                                xytext=(8, 8), color="#d00000", fontsize="small")
    no_numbers = [r for r in rows_ if r["same_capacity_peak_bytes"] is None and st.is_failure(r["status"])]
    for r in no_numbers:
        if r["split_size"] is not None:
            peak_ax.plot([r["split_size"]], [0], "X", color="#d00000", markersize=13, zorder=7, clip_on=False)
            peak_ax.annotate(f"job {r['job']}: {r['status']}, no numbers", (r["split_size"], 0),
                             textcoords="offset points", xytext=(8, 6), color="#d00000", fontsize="small")
    budgets = sorted({r["kv_budget_bytes"] for r in rows_ if r["kv_budget_bytes"] is not None and r["same_capacity_peak_bytes"] is not None})
    for budget in budgets:
        peak_ax.axhline(budget / MIB, color="#c00000", linewidth=1.5, zorder=1)
    ticks = sorted({r["split_size"] for points in series.values() for r in points}
                   | {r["split_size"] for r in no_numbers if r["split_size"] is not None})
    for ax, ylabel in ((peak_ax, "MiB per rank"), (gain_ax, "n_blocks / uniform n_blocks")):
        ax.set_xlabel("layerwise split size s")
        ax.set_ylabel(ylabel)
        if ticks:
            ax.set_xticks(ticks)
        ax.grid(True, alpha=0.3)
    peak_ax.set_ylim(bottom=0)
    peak_ax.set_title("peak per-rank KV for the s = 1 block count")
    gain_ax.set_title("capacity gain at the same budget")
    if series or no_numbers:
        if series:
            gain_ax.legend(fontsize="small", title="model", loc="upper left")
        keys_legend = [
            Line2D([], [], color="grey", marker="o", label="estimated (plan)"),
            Line2D([], [], color="grey", marker="D", markerfacecolor="none", linestyle="none", markersize=9,
                   markeredgewidth=2, label="measured on the ranks"),
            Line2D([], [], color="grey", linestyle=(0, (6, 3)), label="uniform, s = 1 (every full layer)"),
            Line2D([], [], color="grey", linestyle=":", label="spec limit: full layers / s + 1 scratch"),
            Line2D([], [], color="#c00000", label="KV budget per rank"),
            Line2D([], [], color="#d00000", marker="X", linestyle="none", markersize=10, label=failed_label),
        ]
        figure.legend(handles=keys_legend, loc="lower center", ncol=6, fontsize="small", frameon=False)
    else:
        peak_ax.text(0.5, 0.5, "no job produced numbers", ha="center", va="center", transform=peak_ax.transAxes)
    figure.suptitle(chart_title(rows_, title))
    figure.tight_layout(rect=(0, 0.06, 1, 1))
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
