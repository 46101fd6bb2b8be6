"""One line per job, as a sweep goes: ``[3/9] model=qwen3_5_moe layerwise.split_size=2: 7 passed, 1 xfailed (4.1 s)``."""

from __future__ import annotations

from typing import Mapping, Sequence

from contract.units import MIB
from harness.app import status as st
from harness.plan import gain_text

COUNT_ORDER = ("failed", "error", "passed", "skipped", "xfailed", "xpassed")
"""pytest's summary order (errors after failures, so a failure is read first)."""


def job_label(overrides: Sequence[str]) -> str:
    return " ".join(overrides) if overrides else "(defaults)"


def counts_text(counts: Mapping[str, int]) -> str:
    """``7 passed, 1 xfailed``; ``no tests`` when empty."""
    keys = [k for k in COUNT_ORDER if counts.get(k)] + sorted(k for k in counts if k not in COUNT_ORDER and counts[k])
    return ", ".join(f"{counts[k]} {k}" for k in keys) or "no tests"


def outcome_text(result: Mapping) -> str:
    """What a job came to, in a few words."""
    status = result.get("status", st.ERROR)
    message = " ".join(str(result.get("message") or "").split())
    if status == st.PLANNED:
        plan = result.get("plan") or {}
        return (f"n_blocks {plan.get('n_blocks')} (uniform {plan.get('uniform_n_blocks')}), "
                f"peak {plan.get('peak_bytes', 0) / MIB:.1f} MiB/rank, gain {gain_text(plan.get('capacity_gain'))}")
    if status == st.REJECTED:
        return f"rejected: {message}"
    if status in (st.PASSED, st.FAILED):
        text = counts_text(result.get("counts") or {})
        return text if status == st.PASSED else f"FAILED {text}"
    return f"{status.upper()}: {message}" if message else status.upper()


def job_line(index: int, total: int, overrides: Sequence[str], result: Mapping) -> str:
    line = f"[{index}/{total}] {job_label(overrides)}: {outcome_text(result)}"
    if result.get("duration_s") is not None:
        line += f" ({result['duration_s']:.1f} s)"
    if st.is_failure(result.get("status", st.ERROR)) and result.get("log"):
        line += f" -> {result['log']}"
    return line


def start_line(index: int, total: int, overrides: Sequence[str]) -> str:
    return f"[{index}/{total}] {job_label(overrides)} ..."


def say(line: str) -> None:
    """A progress line on stdout, flushed. A stdout that cannot be written (full, gone) is no job's error:
    the line is dropped, the work goes on, and the command says so at its end (``harness.usage.command``)."""
    try:
        print(line, flush=True)
    except OSError:
        pass
