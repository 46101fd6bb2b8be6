"""Comparing an engine log's figures with what FEATURE.md (through ``harness.oracle``) predicts.

Figures that do not depend on the budget (slot sizes, layer counts, dtype) must match
exactly. The budget C itself is known only as the interval ``readable_size`` printed,
unless the config fixes it (``cache.kv_budget_bytes=...``); the figures that depend on
it (linear_blocks, reserved_linear_bytes, blocks) agree when some C in that interval
gives the engine's numbers together. Linear-state slots are monotone in C, so the
interval is cut into pieces of constant slots (binary search) and the block count is
monotone inside each piece.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from harness import oracle
from harness.conformance.log import CapacityLine, EngineLog, Size, readable_size, worker_budget_interval

MAX_PIECES = 10_000


@dataclass(frozen=True)
class Figure:
    engine: str
    name: str
    logged: str
    expected: str
    agree: Optional[bool]
    """None: shown for information, not judged."""


def _range_text(lo: int, hi: int) -> str:
    return str(lo) if lo == hi else f"{lo}..{hi}"


def _first_at_least(f: Callable[[int], int], lo: int, hi: int, target: int) -> int:
    """Smallest C in [lo, hi] with f(C) >= target (f non-decreasing); hi + 1 if none."""
    if f(hi) < target:
        return hi + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if f(mid) >= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _pieces(slots_of: Callable[[int], int], lo: int, hi: int) -> list:
    """[(slots, c_lo, c_hi)] covering [lo, hi] with constant slots in each piece."""
    out = []
    start = lo
    while start <= hi and len(out) < MAX_PIECES:
        k = slots_of(start)
        end = _first_at_least(slots_of, start, hi, k + 1) - 1
        out.append((k, start, end))
        start = end + 1
    return out


def check_engine(run, line: CapacityLine, budget: tuple, role: str) -> list:
    """The figures of one ``kv cache capacity`` line (role ``target`` or ``draft``)."""
    lo, hi = budget
    index = 0 if role == "target" else 1

    def capacity(c: int):
        return oracle.expected_capacities(run, c)[index]

    at_lo = capacity(lo)
    f = line.figures
    figures = []

    def exact(name: str, logged, expected):
        figures.append(Figure(role, name, str(logged), str(expected), logged == expected))

    exact("slot_size", f["slot_size"], at_lo.slot_size)
    exact("index_slot_size", f["index_slot_size"], at_lo.index_slot_size)
    exact("indexer_layers", f["indexer_layers"], at_lo.num_indexer_layers)
    exact("scale_slot_size", f["scale_slot_size"], at_lo.scale_slot_size)
    exact("linear_slot_size", f["linear_slot_size"], at_lo.linear_slot_size)
    exact("n_layers", f["n_layers"], at_lo.n_layers)
    exact("kv_cache_dtype", f["kv_cache_dtype"], run.cache.kv_cache_dtype)
    exact("max_linear_state_cache_slots", f["max_linear_state_cache_slots"], oracle.max_linear_state_cache_slots(run.cache))

    model = run.model if role == "target" else run.draft
    has_linear = oracle.has_linear_attention_layers(model)

    def slots_of(c: int) -> int:
        return capacity(c).num_linear_state_blocks

    pieces = _pieces(slots_of, lo, hi)
    k_lo, k_hi = pieces[0][0], pieces[-1][0]
    logged_k = f["linear_blocks"]
    exact_k = k_lo <= logged_k <= k_hi
    figures.append(Figure(role, "linear_blocks", str(logged_k), _range_text(k_lo, k_hi), exact_k))
    state = f["linear_state_slots"]
    want_state = (k_lo, k_hi) if has_linear else (0, 0)
    figures.append(Figure(role, "linear_state_slots", str(state), _range_text(*want_state),
                          want_state[0] <= state <= want_state[1]))

    linear_lo, linear_hi = capacity(lo).linear_cache_bytes, capacity(hi).linear_cache_bytes
    reserved: Size = f["reserved_linear_bytes"]
    figures.append(Figure(role, "reserved_linear_bytes", f"{reserved.text} ({reserved.lo}..{reserved.hi} B)",
                          f"{_range_text(linear_lo, linear_hi)} B ({readable_size(linear_lo)})",
                          reserved.overlaps(linear_lo, linear_hi)))

    chosen = [p for p in pieces if p[0] == logged_k] or pieces
    blocks = f["blocks"]
    ranges = [(capacity(c_lo).n_blocks, capacity(c_hi).n_blocks) for _, c_lo, c_hi in chosen]
    agree = any(a <= blocks <= b for a, b in ranges)
    want = ", ".join(_range_text(a, b) for a, b in ranges[:3]) + (" ..." if len(ranges) > 3 else "")
    figures.append(Figure(role, "blocks", str(blocks), want, agree))
    return figures


def budget_interval(run, log: EngineLog) -> tuple:
    """(lo, hi, figures): the per-rank budget C to judge with, and the cache_size figures."""
    target = log.capacities[0]
    figures = []
    override = int(getattr(run.cache, "kv_budget_bytes", 0) or 0)
    if override > 0:
        figures.append(Figure("target", "cache_size", f"{target.cache_size.text} ({target.cache_size.lo}..{target.cache_size.hi} B)",
                              f"{override} B (cache.kv_budget_bytes)", target.cache_size.contains(override)))
        lo = hi = override
    else:
        lo, hi = target.cache_size.lo, target.cache_size.hi
        figures.append(Figure("target", "cache_size", target.cache_size.text,
                              f"{lo}..{hi} B (taken from the log)", None))
    workers = worker_budget_interval(log.workers)
    if workers is not None:
        w_lo, w_hi = workers
        figures.append(Figure("workers", "cache_size", f"{w_lo}..{w_hi} B from {len(log.workers)} worker line(s)",
                              f"{lo}..{hi} B", w_lo <= hi and lo <= w_hi))
    return lo, hi, figures


def check(run, log: EngineLog) -> list:
    """Every figure of the log against the spec, target first, then the draft if any."""
    figures = []
    rejection = oracle.expected_rejection(run)
    if rejection is not None:
        return [Figure("target", "startup", "engine started",
                       f"refused: {rejection.field}: {rejection.reason}", False)]
    engines = 2 if getattr(run, "draft", None) is not None else 1
    if len(log.capacities) < engines:
        from harness.conformance.log import LogError

        raise LogError(f"{log.path}: {len(log.capacities)} `kv cache capacity:` line(s), the config has "
                       f"{engines} engines (target + draft); truncated log?")
    lo, hi, budget_figures = budget_interval(run, log)
    figures += budget_figures
    figures += check_engine(run, log.capacities[0], (lo, hi), "target")
    if engines == 2:
        figures += check_engine(run, log.capacities[1], (lo, hi), "draft")
    return figures


def render(figures: list, log: EngineLog, overrides) -> str:
    lines = [f"conformance: {log.path} against FEATURE.md ({' '.join(overrides) or 'default config'})"]
    if len(log.capacities) > 2:
        lines.append(f"note: {len(log.capacities)} capacity lines; the first is the target, the second the draft")
    width = max(len(f.logged) for f in figures)
    lines.append(f"{'engine':<8} {'figure':<30} {'engine log':<{width}}  {'spec':<28} verdict")
    for f in figures:
        verdict = "-" if f.agree is None else ("agree" if f.agree else "DISAGREE")
        lines.append(f"{f.engine:<8} {f.name:<30} {f.logged:<{width}}  {f.expected:<28} {verdict}")
    bad = [f"{f.engine}.{f.name}" for f in figures if f.agree is False]
    judged = sum(1 for f in figures if f.agree is not None)
    lines.append(f"result: DISAGREE on {', '.join(bad)}" if bad else f"result: agree ({judged} figures)")
    return "\n".join(lines)
