"""Reading an xLLM engine log: the lines ``llm_engine.cpp`` prints at upstream 494f293b5.

``LLMEngine::estimate_kv_cache_capacity`` prints, per worker::

    worker #0: available memory: 27.06 GB, total memory: 31.50 GB. Using max_memory_utilization: 0.8, max_cache_size: 0.00 B

and ``LLMEngine::allocate_kv_cache`` prints, per engine (target first, then a draft)::

    kv cache capacity: 12.34 GB, blocks: 1562, slot_size: 1152, index_slot_size: 256, indexer_layers: 61,
    scale_slot_size: 0, linear_slot_size: 0, linear_blocks: 2, linear_state_slots: 0,
    max_linear_state_cache_slots: 0, reserved_linear_bytes: 0.00 B, n_layers: 61, kv_cache_dtype: auto

(one line; any glog prefix before the message is ignored). Sizes go through upstream's
``readable_size`` (``%.2f`` of bytes / 1024^k with suffix B, KB, MB, GB, TB), so each is
read back as the closed interval of byte counts that print that way.
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, Iterator, Optional

SUFFIXES = ("B", "KB", "MB", "GB", "TB")
_SIZE = r"(\d+\.\d{2}) (B|KB|MB|GB|TB)"
WORKER_RE = re.compile(
    r"worker #(\d+): available memory: " + _SIZE + r", total memory: " + _SIZE
    + r"\. Using max_memory_utilization: ([0-9.eE+-]+), max_cache_size: " + _SIZE
)
CAPACITY_MARK = "kv cache capacity: "
CAPACITY_KEYS = (
    "blocks", "slot_size", "index_slot_size", "indexer_layers", "scale_slot_size", "linear_slot_size",
    "linear_blocks", "linear_state_slots", "max_linear_state_cache_slots", "reserved_linear_bytes",
    "n_layers", "kv_cache_dtype",
)
SIZE_KEYS = ("reserved_linear_bytes",)
TEXT_KEYS = ("kv_cache_dtype",)


class LogError(ValueError):
    """The log cannot be read as an xLLM engine log (unreadable, truncated, malformed)."""


@dataclass(frozen=True)
class Size:
    """A ``readable_size`` figure and the byte interval it stands for."""

    text: str
    lo: int
    hi: int

    def contains(self, value: int) -> bool:
        return self.lo <= value <= self.hi

    def overlaps(self, lo: int, hi: int) -> bool:
        return self.lo <= hi and lo <= self.hi


def readable_size(n_bytes: int) -> str:
    """Upstream ``util::readable_size`` (pretty_print.cpp at 494f293b5)."""
    size = float(n_bytes)
    index = 0
    while size >= 1024 and index < len(SUFFIXES) - 1:
        size /= 1024
        index += 1
    return f"{size:.2f} {SUFFIXES[index]}"


def size_interval(number: str, suffix: str) -> Size:
    """Every byte count ``readable_size`` prints as ``number suffix`` (closed interval)."""
    k = SUFFIXES.index(suffix)
    unit = 1024 ** k
    value = Fraction(number)
    half = Fraction(1, 200)
    lo = math.ceil((value - half) * unit)
    hi = math.floor((value + half) * unit)
    if k > 0:
        lo = max(lo, unit)  # a smaller count would print with the smaller suffix
    if k < len(SUFFIXES) - 1:
        hi = min(hi, 1024 * unit - 1)
    lo = max(lo, 0)
    return Size(text=f"{number} {suffix}", lo=lo, hi=hi)


@dataclass(frozen=True)
class WorkerLine:
    worker: int
    available: Size
    total: Size
    max_memory_utilization: float
    max_cache_size: Size
    line_no: int


@dataclass(frozen=True)
class CapacityLine:
    cache_size: Size
    figures: dict
    """key -> int, ``Size`` (reserved_linear_bytes) or str (kv_cache_dtype)."""
    line_no: int


@dataclass(frozen=True)
class EngineLog:
    path: str
    workers: tuple
    capacities: tuple


def parse_capacity(message: str, line_no: int, path: str) -> CapacityLine:
    body = message.split(CAPACITY_MARK, 1)[1].rstrip()
    parts = body.split(", ")
    head = re.fullmatch(_SIZE, parts[0].strip())
    if head is None:
        raise LogError(f"{path}:{line_no}: `kv cache capacity:` does not start with a size ({parts[0]!r})")
    figures = {}
    for part in parts[1:]:
        key, sep, value = part.partition(": ")
        if not sep:
            continue
        figures[key.strip()] = value.strip()
    missing = [k for k in CAPACITY_KEYS if k not in figures]
    if missing:
        raise LogError(f"{path}:{line_no}: `kv cache capacity:` line lacks {', '.join(missing)} (truncated log?)")
    out = {}
    for key in CAPACITY_KEYS:
        value = figures[key]
        if key in SIZE_KEYS:
            m = re.fullmatch(_SIZE, value)
            if m is None:
                raise LogError(f"{path}:{line_no}: {key}: {value!r} is not a readable_size figure")
            out[key] = size_interval(m.group(1), m.group(2))
        elif key in TEXT_KEYS:
            if not value:
                raise LogError(f"{path}:{line_no}: {key} is empty (truncated log?)")
            out[key] = value
        else:
            if not re.fullmatch(r"-?\d+", value):
                raise LogError(f"{path}:{line_no}: {key}: {value!r} is not an integer (truncated log?)")
            out[key] = int(value)
    return CapacityLine(cache_size=size_interval(head.group(1), head.group(2)), figures=out, line_no=line_no)


def parse_log_text(text: str, path: str = "<log>") -> EngineLog:
    """Every worker and capacity line of a log, in order; ``LogError`` if there is no capacity line."""
    return parse_log_lines(text.splitlines(), path)


def parse_log_lines(lines: Iterable[str], path: str = "<log>") -> EngineLog:
    """``parse_log_text`` over lines as they are read (an engine's INFO log may be gigabytes)."""
    workers, capacities = [], []
    for line_no, line in enumerate(lines, start=1):
        m = WORKER_RE.search(line)
        if m is not None:
            workers.append(WorkerLine(
                worker=int(m.group(1)), available=size_interval(m.group(2), m.group(3)),
                total=size_interval(m.group(4), m.group(5)), max_memory_utilization=float(m.group(6)),
                max_cache_size=size_interval(m.group(7), m.group(8)), line_no=line_no,
            ))
            continue
        if CAPACITY_MARK in line:
            capacities.append(parse_capacity(line[line.index(CAPACITY_MARK):], line_no, path))
    if not capacities:
        raise LogError(f"{path}: no `kv cache capacity:` line from llm_engine.cpp allocate_kv_cache (truncated log?)")
    return EngineLog(path=path, workers=tuple(workers), capacities=tuple(capacities))


MAX_LINE_CHARS = 1 << 16
"""Longer lines are cut to this (the lines read here are a few hundred characters)."""


def read_log(path: str) -> EngineLog:
    """Stream a regular file line by line (a FIFO or device is refused unread; memory stays bounded)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise LogError(f"cannot read log {path}: not a regular file (a directory, FIFO or device)")
        with open(path, encoding="utf-8", errors="replace") as handle:
            return parse_log_lines(_bounded_lines(handle), path)
    except OSError as exc:
        raise LogError(f"cannot read log {path}: {exc.strerror or exc}") from None


def _bounded_lines(handle) -> Iterator[str]:
    while True:
        line = handle.readline(MAX_LINE_CHARS)
        if not line:
            return
        while not line.endswith("\n"):  # an over-long line: keep its head, skip the rest of it
            rest = handle.readline(MAX_LINE_CHARS)
            if not rest or rest.endswith("\n"):
                break
        yield line


def worker_budget_interval(workers) -> Optional[tuple]:
    """The KV budget C the workers' lines imply (``estimate_kv_cache_capacity``): per worker
    available - int(total * (1 - max_memory_utilization)), capped by max_cache_size when > 0;
    the minimum over workers. None without worker lines."""
    lo = hi = None
    for w in workers:
        u = w.max_memory_utilization
        if u < 1.0:
            b_lo = int(w.total.lo * (1.0 - u)) - 1
            b_hi = int(w.total.hi * (1.0 - u)) + 1
        else:
            b_lo = b_hi = 0
        c_lo, c_hi = w.available.lo - b_hi, w.available.hi - b_lo
        if w.max_cache_size.hi > 0:
            c_lo, c_hi = min(c_lo, w.max_cache_size.lo), min(c_hi, w.max_cache_size.hi)
        lo = c_lo if lo is None else min(lo, c_lo)
        hi = c_hi if hi is None else min(hi, c_hi)
    return None if lo is None else (lo, hi)
