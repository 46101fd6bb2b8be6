"""A finished sweep as a table: rows from the jobs' ``result.json``, then CSV, Markdown and an SVG chart.

Pure builders: result dicts in, ``str`` out (``harness.app.callback`` does
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

from contract.units import MIB
from harness.app import own_tests, tree_departures
from harness.app import status as st
from harness.app.progress import counts_text, job_label
from harness.plan import GAIN_UNDEFINED, gain_text
from harness.reporting import svg
from harness.suites import NOT_JUDGED

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


def _gain_cell(r: Mapping[str, Any], text) -> Any:
    """The capacity gain's cell: ``text(gain)``; ``n/a`` where the job planned but the gain is undefined
    (FEATURE 6: no uniform block fits, JSON null); empty where the job has no plan."""
    gain = r.get("capacity_gain")
    if gain is not None:
        return text(gain)
    return GAIN_UNDEFINED if r.get("n_blocks") is not None else ""



def to_csv(rows_: Sequence[Mapping[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    for r in rows_:
        cells = {c: "" if r.get(c) is None else r[c] for c in COLUMNS}
        cells["capacity_gain"] = _gain_cell(r, lambda gain: gain)
        writer.writerow(cells)
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


def _cell(text: Any, limit: int = 200) -> str:
    text = " ".join(str(text).split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit - 3] + "..."


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
        cells = [_job_cell(r), r["model"] or "", r["implementation"] or "", *(r[c] or "" for c in varying),
                 _num(r["split_size"]), _status_cell(r["status"]), _mib(r["peak_bytes"]), _mib(r["uniform_peak_bytes"]),
                 _num(r["n_blocks"]), _num(r["uniform_n_blocks"]), _gain_cell(r, gain_text),
                 _num(r["peak_layers"]), _num(r["limit_layers"])]
        if suite:
            counts = {k: r[k] for k in _COUNT_KEYS if r.get(k)}
            cells += [_mib(r["measured_peak_bytes"]), counts_text(counts) if r["mode"] == "suite" else ""]
        note = r["message"] if r["status"] != st.PLANNED and r["status"] != st.PASSED else ""
        if r["model"] is None:
            note = f"{r['overrides']}: {note}" if note else r["overrides"]
        cells.append(note)
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    lines += verdict_lines(results)
    return "\n".join(lines) + "\n"


_BROKEN = ("failed", "error", "xpassed")


def tc_verdict(tc: Mapping[str, Any]) -> tuple[str, str]:
    """(verdict, first broken rule) of one TC of a job (``result["tcs"][TC]``): ``fail`` with the first
    failing case's own words and figures and how many cases failed, ``pass``, or the counts when nothing
    passed or failed (skipped, expected failures); then each check its cases did not judge, and why, once."""
    verdict, why = _tc_verdict(tc)
    unjudged = list(dict.fromkeys(n for c in tc.get("cases") or () for n in c.get(NOT_JUDGED) or ()))
    return verdict, "; ".join([why, *unjudged] if why else unjudged)


def _tc_verdict(tc: Mapping[str, Any]) -> tuple[str, str]:
    counts = {k: v for k, v in (tc.get("counts") or {}).items() if v}
    broken = sum(counts.get(k, 0) for k in _BROKEN)
    if broken:
        cases = [c for c in tc.get("cases") or () if c.get("outcome") in ("failed", "xpassed")]
        first = cases[0] if cases else {}
        reason = first.get("reason") or (str(first.get("message") or "").strip().splitlines() or [""])[0]
        total = sum(counts.values())
        where = f"{first['case']}: " if first.get("case") else ""
        detail = f"{broken} of {total} case{'' if total == 1 else 's'} broken"
        return "fail", f"{where}{reason} ({detail})" if reason else detail
    if counts.get("passed"):
        return "pass", counts_text(counts)
    return counts_text(counts), _predicted_text(tc)


def _predicted_text(tc: Mapping[str, Any]) -> str:
    """For a TC whose cases only failed as the spec predicted: the first prediction, and how many others."""
    reasons = list(dict.fromkeys(c["predicted"] for c in tc.get("cases") or ()
                                 if c.get("outcome") == "xfailed" and c.get("predicted")))
    if not reasons:
        return ""
    more = f" (+{len(reasons) - 1} other prediction{'' if len(reasons) == 2 else 's'})" if len(reasons) > 1 else ""
    return f"as predicted: {reasons[0]}{more}"


def verdict_lines(results: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per suite job and TC, pass or fail with the first broken rule and its figures; a C++ tree's own
    tests (its manifest's ``tests``) on the job's first row, beside the TCs."""
    jobs = [r for r in results if r.get("tcs")]
    if not jobs:
        return []

    lines = [*tree_departures.lines(jobs), "", "## Verdicts per job and TC", "",
             "| job | model | implementation | s | TC | verdict | first broken rule and its figures |",
             "|---:|---|---|---:|---|---|---|"]
    for result in sorted(jobs, key=lambda r: (r.get("job") or {}).get("num", -1)):
        num = (result.get("job") or {}).get("num")
        cfg = result.get("config") or {}
        head = ["" if num is None else str(num + 1), cfg.get("model") or "", cfg.get("implementation") or "",
                _num(cfg.get("split_size"))]
        own = result.get("own_tests")
        if own:
            cells = (*head, "its own tests", own_tests.verdict(own), own.get("summary", ""))
            lines.append("| " + " | ".join(_cell(c, 600) for c in cells) + " |")
        for tc, entry in result["tcs"].items():
            verdict, why = tc_verdict(entry)
            cells = (*head, tc, f"**✗ {verdict}**" if verdict == "fail" else verdict, why)
            lines.append("| " + " | ".join(_cell(c, 600) for c in cells) + " |")
    return lines


FIGURES_COLUMNS = ("model", "implementation", "s", "peak KV MiB/rank", "uniform MiB (same n_blocks)", "n_blocks",
                   "uniform n_blocks", "capacity gain", "peak (layers)", "limit (layers)", "note")


def figures_table(rows_: Sequence[Mapping[str, Any]]) -> tuple[tuple[str, ...], list[list[str]], str]:
    """(columns, cells, alignment) of the docs' figures table: one row per job of a plan sweep
    (``tools.docs_blocks`` records it; the note says why a job has no numbers)."""
    cells = []
    for r in rows_:
        note = r.get("message") or "" if r.get("status") not in (st.PLANNED, st.PASSED) else ""
        cells.append([_cell(c) for c in (
            r.get("model") or "", r.get("implementation") or "", _num(r.get("split_size")), _mib(r.get("peak_bytes")),
            _mib(r.get("uniform_peak_bytes")), _num(r.get("n_blocks")), _num(r.get("uniform_n_blocks")),
            _gain_cell(r, gain_text), _num(r.get("peak_layers")), _num(r.get("limit_layers")), note)])
    return FIGURES_COLUMNS, cells, "llrrrrrrrrl"


# ---- chart ------------------------------------------------------------------------------------


def chart_series(rows_: Sequence[Mapping[str, Any]]) -> OrderedDict[tuple, list[dict]]:
    """Rows with numbers (failed ones too) grouped into lines: (model, implementation, hardware, parallel)
    -> rows by split size."""
    plotted = [r for r in rows_ if r["same_capacity_peak_bytes"] is not None and r["split_size"] is not None]
    series: OrderedDict[tuple, list[dict]] = OrderedDict()
    for r in plotted:
        series.setdefault((r["model"], r["implementation"], r["hardware"], r["parallel"]), []).append(r)
    for points in series.values():
        points.sort(key=lambda r: r["split_size"])
    return series


def mib_at_uniform_blocks(r: Mapping[str, Any], layers: float) -> Optional[float]:
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


def to_svg(rows_: Sequence[Mapping[str, Any]], title: str = "Per-rank KV cache against split size") -> str:
    """Two panels against split size s, one line per model (colour) and implementation (line style):
    the peak rank's KV MiB for the uniform (s = 1) block count with the uniform peak (dashed), the
    spec's limit (dotted, full layers / s + 1 scratch) and the KV budget (red); and the capacity gain.
    Measured peaks are hollow diamonds on top; a failed job is a red cross at its split size (on the
    axis when it has no numbers). An SVG document (``harness.reporting.svg``: no plotting library)."""
    series = chart_series(rows_)
    keys = list(series)
    models = list(dict.fromkeys(k[0] for k in keys))
    impls = list(dict.fromkeys(k[1] for k in keys))
    varying = [i for i in (1, 2, 3) if len({k[i] for k in keys}) > 1]
    no_numbers = [r for r in rows_ if r["same_capacity_peak_bytes"] is None and st.is_failure(r["status"])]
    budgets = sorted({r["kv_budget_bytes"] for r in rows_
                      if r["kv_budget_bytes"] is not None and r["same_capacity_peak_bytes"] is not None})
    splits = sorted({r["split_size"] for points in series.values() for r in points}
                    | {r["split_size"] for r in no_numbers if r["split_size"] is not None})

    def uniform_of(points):
        first = points[0]
        return mib_at_uniform_blocks(first, first["full_layers"]) if first["full_layers"] else None

    def limit_of(points):
        return [(r["split_size"], v) for r in points if r["limit_layers"] is not None
                and (v := mib_at_uniform_blocks(r, r["limit_layers"])) is not None]

    peaks = [r["same_capacity_peak_bytes"] / MIB for points in series.values() for r in points]
    peaks += [r["measured_same_capacity_peak_bytes"] / MIB for points in series.values() for r in points
              if r["measured_same_capacity_peak_bytes"] is not None]
    peaks += [u for points in series.values() if (u := uniform_of(points)) is not None]
    peaks += [v for points in series.values() for _, v in limit_of(points)] + [b / MIB for b in budgets]
    gains = [r["capacity_gain"] for points in series.values() for r in points if r["capacity_gain"] is not None]

    width, height, top, plot_h = 1300, 560, 64, 380
    panels = {"peak": (80, 540), "gain": (730, 540)}  # x of the axes' left edge, width
    x_lo, x_hi = (min(splits), max(splits)) if splits else (1, 2)
    pad = max((x_hi - x_lo) * 0.06, 0.5)
    y_peak = svg.ticks(0.0, max(peaks + [1e-9]) * 1.05)
    y_gain = svg.ticks(min(gains) - 0.05 * (max(gains) - min(gains) or 1), max(gains) + 0.05 * (max(gains) - min(gains) or 1)) \
        if gains else [0.0, 1.0]
    scales = {}
    for name, ys in (("peak", y_peak), ("gain", y_gain)):
        left, w = panels[name]
        scales[name] = (svg.Scale(x_lo - pad, x_hi + pad, left, left + w), svg.Scale(ys[0], ys[-1], top + plot_h, top))

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'font-family="{svg.FONT}" font-size="12">', f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="24" text-anchor="middle" font-size="15">{svg.text(chart_title(rows_, title))}</text>']
    for name, ys, heading, ylabel in (("peak", y_peak, "peak per-rank KV for the s = 1 block count", "MiB per rank"),
                                      ("gain", y_gain, "capacity gain at the same budget",
                                       "n_blocks / uniform n_blocks")):
        left, w = panels[name]
        sx, sy = scales[name]
        out.append(f'<text x="{left + w / 2}" y="{top - 10}" text-anchor="middle" font-size="13">{svg.text(heading)}</text>')
        for v in ys:
            out.append(f'<line x1="{left}" x2="{left + w}" y1="{sy(v):.1f}" y2="{sy(v):.1f}" stroke="#e6e6e6"/>')
            out.append(f'<text x="{left - 6}" y="{sy(v) + 4:.1f}" text-anchor="end">{svg.label(v)}</text>')
        for s in splits:
            out.append(f'<line x1="{sx(s):.1f}" x2="{sx(s):.1f}" y1="{top}" y2="{top + plot_h}" stroke="#e6e6e6"/>')
            out.append(f'<text x="{sx(s):.1f}" y="{top + plot_h + 16}" text-anchor="middle">{s}</text>')
        out.append(f'<rect x="{left}" y="{top}" width="{w}" height="{plot_h}" fill="none" stroke="black"/>')
        out.append(f'<text x="{left + w / 2}" y="{top + plot_h + 34}" text-anchor="middle">layerwise split size s</text>')
        out.append(f'<text x="{left - 52}" y="{top + plot_h / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 {left - 52} {top + plot_h / 2})">{svg.text(ylabel)}</text>')
    peak_x, peak_y = scales["peak"]
    gain_x, gain_y = scales["gain"]
    left, w = panels["peak"]
    for budget in budgets:
        out.append(f'<line class="budget" x1="{left}" x2="{left + w}" y1="{peak_y(budget / MIB):.1f}" '
                   f'y2="{peak_y(budget / MIB):.1f}" stroke="#c00000" stroke-width="1.5"/>')
    legend = []
    for key, points in series.items():
        name = key[0] + (f" ({', '.join(str(key[i]) for i in varying)})" if varying else "")
        colour = svg.PALETTE[models.index(key[0]) % len(svg.PALETTE)]
        dash = svg.DASHES[impls.index(key[1]) % len(svg.DASHES)]
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        legend.append((name, colour, dash_attr))
        uniform = uniform_of(points)
        if uniform is not None:
            out.append(f'<line class="uniform" x1="{left}" x2="{left + w}" y1="{peak_y(uniform):.1f}" '
                       f'y2="{peak_y(uniform):.1f}" stroke="{colour}" stroke-dasharray="6 3" opacity="0.7"/>')
        limit = limit_of(points)
        if limit:
            out.append(_polyline("limit", name, [(peak_x(s), peak_y(v)) for s, v in limit], colour, ' stroke-dasharray="2 3"'))
            out += [f'<line class="limit-mark" x1="{peak_x(s) - 8:.1f}" x2="{peak_x(s) + 8:.1f}" y1="{peak_y(v):.1f}" '
                    f'y2="{peak_y(v):.1f}" stroke="{colour}" stroke-width="1.5"/>' for s, v in limit]
        for panel, sx, sy, value in (("peak", peak_x, peak_y, lambda r: r["same_capacity_peak_bytes"] / MIB),
                                     ("gain", gain_x, gain_y, lambda r: r["capacity_gain"])):
            xy = [(sx(r["split_size"]), sy(value(r))) for r in points if value(r) is not None]
            out.append(_polyline("series", name, xy, colour, dash_attr, panel=panel))
            out += [f'<circle class="point" data-panel="{panel}" cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{colour}"/>'
                    for x, y in xy]
        for r in points:
            if r["measured_same_capacity_peak_bytes"] is not None:
                x, y = peak_x(r["split_size"]), peak_y(r["measured_same_capacity_peak_bytes"] / MIB)
                out.append(f'<polygon class="measured" points="{x:.1f},{y - 7:.1f} {x + 7:.1f},{y:.1f} {x:.1f},{y + 7:.1f} '
                           f'{x - 7:.1f},{y:.1f}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for r in points:
            if st.is_failure(r["status"]):
                out += _failed(r, peak_x(r["split_size"]), peak_y(r["same_capacity_peak_bytes"] / MIB), f"job {r['job']}: {r['status']}")
                if r["capacity_gain"] is not None:
                    out += _failed(r, gain_x(r["split_size"]), gain_y(r["capacity_gain"]), f"job {r['job']}: {r['status']}")
    for r in no_numbers:
        if r["split_size"] is not None:
            out += _failed(r, peak_x(r["split_size"]), peak_y(0.0), f"job {r['job']}: {r['status']}, no numbers")
    if series:
        gl, _ = panels["gain"]
        out.append(f'<text x="{gl + 12}" y="{top + 18}" font-weight="bold">model</text>')
        for i, (name, colour, dash_attr) in enumerate(legend):
            y = top + 36 + 18 * i
            out.append(f'<line x1="{gl + 12}" x2="{gl + 40}" y1="{y - 4}" y2="{y - 4}" stroke="{colour}" '
                       f'stroke-width="2"{dash_attr}/>')
            out.append(f'<text class="legend" x="{gl + 46}" y="{y}">{svg.text(name)}</text>')
    if series or no_numbers:
        keys_legend = (("estimated (plan)", '<line x1="{x}" x2="{x2}" y1="{y}" y2="{y}" stroke="grey" stroke-width="2"/>'
                        '<circle cx="{xm}" cy="{y}" r="4" fill="grey"/>'),
                       ("measured on the ranks", '<polygon points="{xm},{ya} {xb},{y} {xm},{yb} {xc},{y}" fill="none" '
                        'stroke="grey" stroke-width="2"/>'),
                       ("uniform, s = 1 (every full layer)", '<line x1="{x}" x2="{x2}" y1="{y}" y2="{y}" stroke="grey" '
                        'stroke-dasharray="6 3"/>'),
                       ("spec limit: full layers / s + 1 scratch", '<line x1="{x}" x2="{x2}" y1="{y}" y2="{y}" '
                        'stroke="grey" stroke-dasharray="2 3"/>'),
                       ("KV budget per rank", '<line x1="{x}" x2="{x2}" y1="{y}" y2="{y}" stroke="#c00000" '
                        'stroke-width="1.5"/>'),
                       ("failed job (number)", '<path d="M{xc2},{ya2} L{xd2},{yb2} M{xc2},{yb2} L{xd2},{ya2}" '
                        'stroke="#d00000" stroke-width="3"/>'))
        for i, (name, mark) in enumerate(keys_legend):  # two rows of three, below the panels
            x, y = 80 + (i % 3) * 400, height - 44 + 22 * (i // 3)
            out.append(mark.format(x=x, x2=x + 28, xm=x + 14, xb=x + 20, xc=x + 8, y=y, ya=y - 6, yb=y + 6,
                                   xc2=x + 9, xd2=x + 19, ya2=y - 5, yb2=y + 5))
            out.append(f'<text class="key" x="{x + 34}" y="{y + 4}">{svg.text(name)}</text>')
    else:
        out.append(f'<text class="empty" x="{left + w / 2}" y="{top + plot_h / 2}" text-anchor="middle">'
                   f'no job produced numbers</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _polyline(kind: str, name: str, xy: Sequence[tuple[float, float]], colour: str, dash_attr: str,
              panel: str = "peak") -> str:
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    return (f'<polyline class="{kind}" data-panel="{panel}" data-label="{name}" points="{points}" fill="none" '
            f'stroke="{colour}" stroke-width="2"{dash_attr}/>')


def _failed(r: Mapping[str, Any], x: float, y: float, note: str) -> list[str]:
    return [f'<path class="failed" data-job="{r["job"]}" d="M{x - 7:.1f},{y - 7:.1f} L{x + 7:.1f},{y + 7:.1f} '
            f'M{x - 7:.1f},{y + 7:.1f} L{x + 7:.1f},{y - 7:.1f}" stroke="#d00000" stroke-width="3"/>',
            f'<text class="failed-note" x="{x + 10:.1f}" y="{y - 10:.1f}" fill="#d00000" font-size="11">'
            f'{svg.text(note)}</text>']
