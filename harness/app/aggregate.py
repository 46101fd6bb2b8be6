"""A finished sweep as a table: rows from the jobs' ``result.json``, then CSV, Markdown and PNG.

Pure builders: result dicts in, ``str``/``bytes`` out (``harness.app.callback`` does
the reading and writing). Every job is a row, whatever its status: a failed,
rejected or missing job shows its status and message instead of numbers.
"""

from __future__ import annotations

import csv
import io
from collections import OrderedDict
from typing import Any, Mapping, Optional, Sequence

from harness.app import status as st
from harness.app.progress import counts_text, job_label
from implementations.units import MIB

COLUMNS = (
    "job", "status", "mode", "model", "implementation", "hardware", "parallel", "layerwise", "split_size",
    "world_size", "n_blocks", "uniform_n_blocks", "peak_bytes", "uniform_peak_bytes", "savings_bytes",
    "capacity_gain", "measured_peak_bytes", "same_capacity_peak_bytes", "measured_same_capacity_peak_bytes",
    "full_layers", "peak_layers", "limit_layers", "kv_budget_bytes",
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
    out.update(
        job=job.get("num"),
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
                "capacity_gain", "same_capacity_peak_bytes", "full_layers", "peak_layers", "limit_layers"):
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


def to_markdown(rows_: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]] = (),
                title: str = "Sweep results", command: str = "") -> str:
    """A heading, the command, the KV budget per hardware profile, the status tally and one row per job."""
    varying = [c for c in ("hardware", "parallel") if len({r[c] for r in rows_ if r[c] is not None}) > 1]
    suite = any(r["mode"] == "suite" for r in rows_)
    header = ["job", "model", "implementation", *varying, "s", "status",
              "peak KV MiB/rank", "uniform MiB (same n_blocks)", "n_blocks", "uniform n_blocks", "capacity gain",
              "peak (layers)", "limit: full layers / s + 1 scratch (layers)"]
    if suite:
        header += ["measured peak MiB", "tests"]
    header.append("note")
    lines = [f"# {title}", ""]
    if command:
        lines += [f"`{command}`", ""]
    lines += budget_lines(results)
    tally: OrderedDict[str, int] = OrderedDict()
    for r in rows_:
        tally[r["status"]] = tally.get(r["status"], 0) + 1
    lines += ["", f"{len(rows_)} job{'' if len(rows_) == 1 else 's'}: " + ", ".join(f"{n} {s}" for s, n in tally.items()) + ".", ""]
    lines.append("| " + " | ".join(header) + " |")
    lines.append("|" + "|".join("---" if h in ("model", "implementation", "status", "note", *varying) else "---:"
                                for h in header) + "|")
    for r in rows_:
        gain = r["capacity_gain"]
        cells = [_num(r["job"]), r["model"] or "", r["implementation"] or "", *(r[c] or "" for c in varying),
                 _num(r["split_size"]), r["status"], _mib(r["peak_bytes"]), _mib(r["uniform_peak_bytes"]),
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
    """Plotted rows grouped into lines: (model, implementation, hardware, parallel) -> rows by split size."""
    plotted = [r for r in rows_ if r["same_capacity_peak_bytes"] is not None and r["split_size"] is not None
               and not st.is_failure(r["status"])]
    series: OrderedDict[tuple, list[dict]] = OrderedDict()
    for r in plotted:
        series.setdefault((r["model"], r["implementation"], r["hardware"], r["parallel"]), []).append(r)
    for points in series.values():
        points.sort(key=lambda r: r["split_size"])
    return series


def to_png(rows_: Sequence[Mapping[str, Any]], title: str = "Per-rank KV cache against split size") -> bytes:
    """Two panels against split size s, one line per model (colour) and implementation (line style):
    the peak rank's KV MiB for the uniform (s = 1) block count, and the capacity gain."""
    from matplotlib import colormaps
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    series = _series(rows_)
    keys = list(series)
    models = list(dict.fromkeys(k[0] for k in keys))
    impls = list(dict.fromkeys(k[1] for k in keys))
    varying = [i for i in (1, 2, 3) if len({k[i] for k in keys}) > 1]
    colours = colormaps["tab10"].colors
    styles = ("-", "--", ":", "-.")
    figure = Figure(figsize=(12, 5), dpi=100)
    FigureCanvasAgg(figure)
    peak_ax, gain_ax = figure.subplots(1, 2)
    for key, points in series.items():
        label = key[0] + (f" ({', '.join(str(key[i]) for i in varying)})" if varying else "")
        colour = colours[models.index(key[0]) % len(colours)]
        style = styles[impls.index(key[1]) % len(styles)]
        xs = [r["split_size"] for r in points]
        peak_ax.plot(xs, [r["same_capacity_peak_bytes"] / MIB for r in points], style, marker="o", color=colour,
                     label=label)
        measured = [(r["split_size"], r["measured_same_capacity_peak_bytes"] / MIB) for r in points
                    if r["measured_same_capacity_peak_bytes"] is not None]
        if measured:
            peak_ax.plot(*zip(*measured), "x", color=colour, markersize=10)
        gain_ax.plot(xs, [r["capacity_gain"] for r in points], style, marker="o", color=colour, label=label)
    ticks = sorted({r["split_size"] for points in series.values() for r in points})
    for ax, ylabel in ((peak_ax, "MiB per rank (x: measured)"), (gain_ax, "n_blocks / uniform n_blocks")):
        ax.set_xlabel("layerwise split size s")
        ax.set_ylabel(ylabel)
        if ticks:
            ax.set_xticks(ticks)
        ax.grid(True, alpha=0.3)
    peak_ax.set_title("peak per-rank KV for the s = 1 block count")
    gain_ax.set_title("capacity gain at the same budget")
    if series:
        gain_ax.legend(fontsize="small")
    else:
        peak_ax.text(0.5, 0.5, "no job produced numbers", ha="center", va="center", transform=peak_ax.transAxes)
    figure.suptitle(title)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
