"""Reading an xLLM engine log: the lines upstream 494f293b5 prints while it starts an engine.

Each line is read behind its glog prefix ``Lmmdd hh:mm:ss.uuuuuu tid file:line] `` (with or
without the year: ``F20261201 ...`` or ``F1201 ...``); a line without a prefix is read as a
bare message. The messages, with where upstream prints them at 494f293b5:

- ``Block info, block_size: B, n_local_kv_heads: H, head_dim: D, n_layers: L, dtype: T[,
  kv_cache_dtype: K]`` (``llm_engine.cpp:273``; ``vlm_engine.cpp:162`` has no kv_cache_dtype);
- ``worker #i: available memory: S, total memory: S. Using max_memory_utilization: U,
  max_cache_size: S`` (``llm_engine.cpp:482``), and the VLM engine's ``..., encoder_cache_reserved:
  S`` (``vlm_engine.cpp:233``; Qwen3.5 runs through it), which the engine subtracts from C;
- ``kv cache capacity: S, blocks: N, ...`` (``llm_engine.cpp:554``, ``vlm_engine.cpp:292``): the
  12-key line of builds after v0.10.1 (494f293b5), the released v0.10.0 / v0.10.1 10-key line
  (``TEN_KEY_FORMAT``), or the released v0.9.x lines ``kv cache capacity: S, blocks: N, slot_size:
  N, n_layers: N[, kv_cache_dtype: K]``;
- ``Initializing <k|v|indexer|conv|ssm> cache with shape: [d0 d1 ...]`` and ``Initializing indexer
  cache scale with shape: [...]`` (``kv_cache_shape.cpp:184-205``, ``SHAPE_FORMATS``: upstream's string
  literals; glog prints a ``std::vector`` space separated);
- ``Successfully initialized kv cache`` (``llm_engine.cpp:202``);
- a refusal: any ``F`` line, ``Check failed: ...`` (a CHECK) or a ``LOG(FATAL)`` message; also
  ``Failed to initialize kv cache`` (``llm_engine.cpp:199``) and the VLM engine's ``Failed to allocate
  kv cache`` (``vlm_engine.cpp:124``), ``E`` lines: it did not start. A fatal line after ``Successfully
  initialized kv cache`` is a failure of the running engine, kept apart (``runtime_fatals``);
- the layerwise flags a launcher's echoed command line or a flag dump prints (``LAYERWISE_FLAG_RE``).

Sizes go through upstream's ``readable_size`` (``util/pretty_print.cpp``: ``%.2f`` of bytes /
1024^k with suffix B, KB, MB, GB, TB), so each is read back as the closed interval of byte
counts that print that way. A file may hold several starts (a restart appended): a start
begins at a glog ``Log file created at:`` header, or where an engine's first lines (``Block
info``, ``worker #``) follow a capacity line or a refusal; only the last start is kept.

Lines are read as real runs leave them (``unwrap_line``): behind a container runtime's timestamp
(a CRI file's partial records joined), ``kubectl logs --prefix`` or a syslog prefix, without
``--colorlogtostderr``'s colour codes or OSC sequences, after a BOM; each piece of a file in the
encoding it is in (UTF-8, bad bytes replaced, or UTF-16: ``_decoded_lines``). A process's rotated
glog files are read as one log (``process_groups``). A
file's last line without its end of line (the engine killed while printing it) is a
``CutLine``: named, never read as figures. A capacity line's shapes carry where the log ends
when ``print_shapes`` may not have finished (no later line of its thread). Memory stays
bounded: refusal lines past ``MAX_KEPT_LINES`` are counted, not kept; more engine lines than
``MAX_ENGINE_LINES`` in one start are refused. Of several logs (one per node), those with no
engine line at all are nodes without the engine (upstream's assistant masters).
"""

from __future__ import annotations

import math
import os
import re
import stat
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, Iterable, Iterator, NamedTuple, Optional

SUFFIXES = ("B", "KB", "MB", "GB", "TB")
MAX_NUMBER_DIGITS = 20
"""Longest integer part read from a log (a readable_size number is at most 4 digits, a count 19)."""
_INT = re.compile(rf"-?\d{{1,{MAX_NUMBER_DIGITS}}}")
_SIZE = r"(\d{1,20}\.\d{2}) (B|KB|MB|GB|TB)"
GLOG_PREFIX = re.compile(
    r"^([IWEF])(\d{4})?(\d{4}) (\d{2}:\d{2}:\d{2}\.\d{6}) +(\S+) ([^\s:\]]+):(\d{1,9})\] ?(.*)$"
)
"""glog's prefix: severity, [yyyy]mmdd, time, thread id, file:line (``log_year_in_prefix`` either way)."""
_FLOAT = r"(-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[-+]?inf|[-+]?nan)"
TERMINAL_ESCAPE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\|$)|\x1b[@-Z\\-_]")
"""What a terminal acts on: colour and other CSI sequences (``--colorlogtostderr``), OSC sequences (a window
title: ``ESC ] ... BEL`` or ``ESC ] ... ESC \\``, or to the line's end) and two-character escapes."""
KUBECTL_PREFIX = re.compile(r"^\[[a-z]+/[^\s\]/]+/[^\s\]]+\] ")
"""``kubectl logs --prefix``: ``[pod/<pod>/<container>] `` before each line (before ``--timestamps``' time)."""
CONTAINER_PREFIX = re.compile(
    r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:?\d{2}) (?:(stdout|stderr) ([FP]) )?"
)
"""What a container runtime puts before each line: ``kubectl logs --timestamps`` (an RFC 3339 time) and a
CRI log file (``<time> <stream> <F|P> <line>``: ``P`` a partial record that the next record of its stream
continues, ``F`` the record that ends the line)."""
SYSLOG_PREFIX = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ [^\s:\[\]]+(?:\[\d+\])?: ")
"""A syslog line's prefix (RFC 3164: ``Mon DD HH:MM:SS host prog[pid]: ``)."""
SYSLOG_HOST_PROG = re.compile(r"^\S+ [^\s:\[\]]+(?:\[\d+\])?: ")
"""After an RFC 3339 time, rsyslog's ``host prog[pid]: `` (removed only before a glog prefix)."""
LAYERWISE_FLAG_RE = re.compile(
    r"(?:^|[\s'\"])--(no)?(enable_layerwise_split|layerwise_split_size)(?:=([^\s'\",;]*)|\s+(\d+)(?=[\s'\",;]|$))?"
)
"""The layerwise flags as an echoed command line or a flag dump prints them (``--layerwise_split_size=2``,
``--layerwise_split_size 2``, ``--enable_layerwise_split``, ``--noenable_layerwise_split``)."""
GLOG_FILE_NAME = re.compile(r"^(.+\.log\.(?:INFO|WARNING|ERROR|FATAL))\.(\d{8}-\d{6})\.(\d+)$")
"""glog's file name ``<program>.<host>.<user>.log.<SEVERITY>.<yyyymmdd-hhmmss>.<pid>``: a new file of the same
program, severity and pid is a rotation of the same process's log."""
HEADER_TIME = re.compile(r"^Log file created at: (\d{4})/(\d{2})/\d{2} ")
WORKER_MARK = "worker #"
WORKER_RE = re.compile(
    r"worker #(\d{1,20}): available memory: " + _SIZE + r", total memory: " + _SIZE
    + r"\. Using max_memory_utilization: (\S+), max_cache_size: " + _SIZE
    + r"(?:, encoder_cache_reserved: " + _SIZE + r")?"
)
BLOCK_INFO_MARK = "Block info, "
CAPACITY_MARK = "kv cache capacity: "
SHAPE_FORMATS = {
    "k": "Initializing k cache with shape: [",
    "v": "Initializing v cache with shape: [",
    "indexer": "Initializing indexer cache with shape: [",
    "indexer cache scale": "Initializing indexer cache scale with shape: [",
    "conv": "Initializing conv cache with shape: [",
    "ssm": "Initializing ssm cache with shape: [",
}
"""``print_shapes`` (``kv_cache_shape.cpp:184-205`` at 494f293b5): cache -> the string literal before the
shape, as it stands in upstream's source; the shape and ``]`` follow."""
SHAPE_RE = re.compile("(" + "|".join(re.escape(text) for text in SHAPE_FORMATS.values()) + r")([^\]]*)\]$")
SHAPE_WORDS = " with shape: ["
"""What every ``print_shapes`` line has (a line with it that reads as none of ``SHAPE_FORMATS`` is not read)."""
SUCCESS_MARK = "Successfully initialized kv cache"
FAILED_MARKS = {
    "Failed to initialize kv cache": "llm_engine.cpp:199",
    "Failed to allocate kv cache": "vlm_engine.cpp:124",
}
"""LOG(ERROR) after ``allocate_kv_cache`` returned false (allocation failed without a CHECK): the engine does
not start. Message -> where upstream 494f293b5 prints it."""
FILE_HEADER = "Log file created at:"
ENGINE_FILES = ("llm_engine.cpp", "vlm_engine.cpp")
"""Where upstream prints the capacity, worker and Block info lines."""

FULL_KEYS = (
    "blocks", "slot_size", "index_slot_size", "indexer_layers", "scale_slot_size", "linear_slot_size",
    "linear_blocks", "linear_state_slots", "max_linear_state_cache_slots", "reserved_linear_bytes",
    "n_layers", "kv_cache_dtype",
)
TEN_KEY_FORMAT = "released 10-key (v0.10.0, v0.10.1)"
"""The released v0.10.x line: 10 of the 12 keys, in the 12-key line's order (which two it lacks is not read
from v0.10.x's source: any two but blocks, slot_size and n_layers; see docs/conformance.md)."""
TEN_KEY_REQUIRED = ("blocks", "slot_size", "n_layers")
CAPACITY_FORMATS = {
    "12-key (builds after v0.10.1, upstream 494f293b5)": FULL_KEYS,
    "released 5-key (v0.9.x)": ("blocks", "slot_size", "n_layers", "kv_cache_dtype"),
    "released 4-key (older v0.9.x)": ("blocks", "slot_size", "n_layers"),
}
"""The capacity lines builds print: name -> the keys after the size, in order (and ``TEN_KEY_FORMAT``)."""
CAPACITY_KEYS = FULL_KEYS
SIZE_KEYS = ("reserved_linear_bytes",)
TEXT_KEYS = ("kv_cache_dtype",)
BLOCK_INFO_KEYS = ("block_size", "n_local_kv_heads", "head_dim", "n_layers", "dtype", "kv_cache_dtype")
BLOCK_INFO_INT_KEYS = ("block_size", "n_local_kv_heads", "head_dim", "n_layers")


class LogError(ValueError):
    """The log cannot be read as an xLLM engine log (unreadable, cut, malformed)."""


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


@dataclass(frozen=True, kw_only=True)
class Where:
    """A line of a log file."""

    path: str
    line_no: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line_no}"


@dataclass(frozen=True, kw_only=True)
class WorkerLine:
    worker: int
    available: Size
    total: Size
    max_memory_utilization: float
    max_cache_size: Size
    encoder_cache_reserved: Optional[Size]
    """The VLM engine's reserve (``vlm_engine.cpp``), None on the LLM engine's line."""
    where: Where


@dataclass(frozen=True, kw_only=True)
class CapacityLine:
    cache_size: Size
    figures: dict
    """key -> int, ``Size`` (reserved_linear_bytes) or str (kv_cache_dtype); only the keys the line has."""
    format: str
    """A name of ``CAPACITY_FORMATS``."""
    where: Where
    shapes: tuple = ()
    """``ShapeLine``s printed after this line (this engine's ``print_shapes``)."""
    shapes_end: Optional[Where] = None
    """None when ``print_shapes`` finished (a later line of its thread follows its lines); else the line the
    log ends at, with shapes still to come: a shape not among ``shapes`` may be after the end, not missing."""

    @property
    def line_no(self) -> int:
        return self.where.line_no

    @property
    def lacks(self) -> tuple:
        """The 12-key line's keys this line does not print."""
        return tuple(k for k in FULL_KEYS if k not in self.figures)


@dataclass(frozen=True, kw_only=True)
class BlockInfoLine:
    figures: dict
    where: Where


@dataclass(frozen=True, kw_only=True)
class ShapeLine:
    cache: str
    """A key of ``SHAPE_FORMATS``: k, v, indexer, indexer cache scale, conv or ssm."""
    shape: tuple
    where: Where


@dataclass(frozen=True, kw_only=True)
class FatalLine:
    """A refusal: glog severity F (a failed CHECK or LOG(FATAL))."""

    message: str
    source: str
    """``file:line`` from the glog prefix ('' without one)."""
    stamp: str = ""
    """``[yyyy]mmdd hh:mm:ss.uuuuuu`` from the glog prefix ('' without one), as printed."""
    time: Optional[tuple] = None
    """(year or None, mmdd, ``hh:mm:ss.uuuuuu``): the stamp read as a time (a stamp without the year takes it
    from the file's ``Log file created at:`` header), or, for a line without a stamp, the time of the last
    stamped line before it in its file; None when no line before it has one. Orders refusals across logs."""
    where: Where
    cut: bool = False
    """The file ends inside this line: the message may lack its end."""


@dataclass(frozen=True, kw_only=True)
class CutLine:
    """A file's last line without its end of line (the engine was killed while printing it): never read as
    figures, since its last value may lack digits."""

    where: Where
    kind: str
    """What it begins like: ``kv cache capacity:``, worker, ``Block info``, shape, refusal or other."""
    detail: str = ""
    """How it is cut when not by a missing end of line (a CRI log ending in a partial record)."""


@dataclass(frozen=True, kw_only=True)
class EngineLog:
    """The last start of one or more log files, merged in the order given."""

    path: str
    workers: tuple = ()
    capacities: tuple = ()
    block_infos: tuple = ()
    fatals: tuple = ()
    """The first ``MAX_KEPT_LINES`` refusal lines of each log's judged start, earliest first."""
    fatal_count: int = 0
    """All refusal lines of the judged starts (``fatals`` keeps a bounded number)."""
    succeeded: bool = False
    starts: tuple = ()
    """(path, number of starts in it, line where the judged start begins); 0 starts: no engine line."""
    others: tuple = ()
    """``EngineLog``s of the other logs with capacity lines of their own (another process's engine): each
    judged as its own engine start."""
    skipped: tuple = ()
    """Lines without a glog prefix that look like an engine line but do not read as one (the first
    ``MAX_KEPT_LINES``; named in the output)."""
    skipped_count: int = 0
    cuts: tuple = ()
    """``CutLine``s: a log's last line that the file ends inside."""
    judged_from: str = ""
    """The log the figures come from (several logs: the first with capacity lines)."""
    first_stamp: str = ""
    """The glog time of the first line of ``judged_from``'s judged start ('' without a prefix)."""
    first_time: Optional[tuple] = None
    """``first_stamp`` read as ``FatalLine.time`` is."""
    success_time: Optional[tuple] = None
    """The time of ``Successfully initialized kv cache`` (the earliest, of several logs)."""
    runtime_fatals: tuple = ()
    """Fatal lines after the start completed (``Successfully initialized kv cache`` before them in their start,
    or a later time on another log): failures of the running engine, not start-up refusals (the first
    ``MAX_KEPT_LINES``)."""
    runtime_fatal_count: int = 0
    loose_shapes: tuple = ()
    """(path, ``ShapeLine``s): shape lines a log prints before any capacity line of its own (a worker
    process's ``print_shapes``): judged against the engine's capacity line."""
    flags: tuple = ()
    """(flag, value, ``Where``): the layerwise flags an echoed command line or flag dump in the judged start
    printed (the last of each)."""

    @property
    def restarted(self) -> tuple:
        return tuple(s for s in self.starts if s[1] > 1)

    @property
    def without_engine(self) -> tuple:
        """Logs with no engine line at all (a node that runs no engine): read for refusals only."""
        return tuple(s[0] for s in self.starts if s[1] == 0)

    @property
    def flag_text(self) -> str:
        """The layerwise flags of ``flags`` as a command line (``--layerwise_split_size=2 ...``)."""
        return " ".join(f"--{name}={value}" for name, value, _ in self.flags)


MAX_KEPT_LINES = 16
"""Refusal lines and skipped lines kept per start (the rest are counted): a log of a million
``Check failed`` lines is read in bounded memory."""
MAX_ENGINE_LINES = 16_384
"""Worker, capacity, Block info and shape lines one start may hold (a world of 4,096 ranks and a
draft prints 8,192 worker lines); more is not one engine's start."""


@dataclass
class _Start:
    first_line: int
    workers: list = field(default_factory=list)
    capacities: list = field(default_factory=list)
    shapes: dict = field(default_factory=dict)
    shapes_done: set = field(default_factory=set)
    """Indexes of capacity lines whose ``print_shapes`` is known to have finished."""
    shape_thread: Optional[str] = None
    """The thread printing shapes right now (None: none; '' no glog prefix)."""
    engine_lines: int = 0
    block_infos: list = field(default_factory=list)
    fatals: list = field(default_factory=list)
    fatal_count: int = 0
    runtime_fatals: list = field(default_factory=list)
    runtime_fatal_count: int = 0
    succeeded: bool = False
    success_time: Optional[tuple] = None
    skipped: list = field(default_factory=list)
    skipped_count: int = 0
    cut: Optional[CutLine] = None
    last_line: int = 0
    first_stamp: str = ""
    first_time: Optional[tuple] = None
    first_path: str = ""
    last_path: str = ""
    flags: dict = field(default_factory=dict)

    def ended(self) -> bool:
        return bool(self.capacities or self.fatals)

    def count_engine_line(self, where: Where) -> None:
        self.engine_lines += 1
        if self.engine_lines > MAX_ENGINE_LINES:
            raise LogError(f"{where}: more than {MAX_ENGINE_LINES} worker, capacity, Block info and shape lines in "
                           "one start: not the log of one engine start")

    def add_fatal(self, fatal: FatalLine) -> None:
        if self.succeeded:  # the start had completed: a failure of the running engine
            self.runtime_fatal_count += 1
            if len(self.runtime_fatals) < MAX_KEPT_LINES:
                self.runtime_fatals.append(fatal)
            return
        self.fatal_count += 1
        if len(self.fatals) < MAX_KEPT_LINES:
            self.fatals.append(fatal)

    def add_skipped(self, where: Where) -> None:
        self.skipped_count += 1
        if len(self.skipped) < MAX_KEPT_LINES:
            self.skipped.append(where)


def split_glog(line: str) -> tuple:
    """(severity or '', ``file:line`` or '', source file or '', message, ``[yyyy]mmdd hh:mm:ss.uuuuuu`` or '')."""
    m = GLOG_PREFIX.match(line)
    if m is None:
        return "", "", "", line, ""
    return m.group(1), f"{m.group(6)}:{m.group(7)}", m.group(6), m.group(8), f"{m.group(2) or ''}{m.group(3)} {m.group(4)}"


def _thread(line: str) -> str:
    """The glog prefix's thread id ('' without a prefix)."""
    m = GLOG_PREFIX.match(line)
    return m.group(5) if m else ""


def _int(text: str, what: str, where: Where) -> int:
    text = text.strip()
    if not _INT.fullmatch(text):
        raise LogError(f"{where}: {what}: {text[:40]!r} is not an integer of at most {MAX_NUMBER_DIGITS} digits")
    return int(text)


def parse_capacity(message: str, where: Where) -> CapacityLine:
    """A ``kv cache capacity:`` message in one of ``CAPACITY_FORMATS``; ``LogError`` naming what it has and lacks."""
    body = message.split(CAPACITY_MARK, 1)[1].rstrip()
    parts = body.split(", ")
    head = re.fullmatch(_SIZE, parts[0].strip())
    if head is None:
        raise LogError(f"{where}: `kv cache capacity:` does not start with a readable_size figure ({parts[0][:40]!r})")
    figures: dict = {}
    order = []
    for part in parts[1:]:
        key, sep, value = part.partition(": ")
        key = key.strip()
        if not sep or not re.fullmatch(r"[a-z_]{1,64}", key):
            raise LogError(f"{where}: `kv cache capacity:` has {part[:40]!r}, not `key: value`")
        if key in figures:
            raise LogError(f"{where}: `kv cache capacity:` repeats key {key} ({figures[key]!r} and {value.strip()!r})")
        figures[key] = value.strip()
        order.append(key)
    fmt = next((name for name, keys in CAPACITY_FORMATS.items() if tuple(order) == keys), None)
    if fmt is None and _is_ten_key_line(order):
        fmt = TEN_KEY_FORMAT
    if fmt is None:
        known = "; ".join(f"{name}: {', '.join(keys)}" for name, keys in CAPACITY_FORMATS.items())
        lacks = [k for k in FULL_KEYS if k not in figures]
        unknown = [k for k in order if k not in FULL_KEYS]
        raise LogError(
            f"{where}: `kv cache capacity:` line has keys {', '.join(order) or 'none'}"
            + (f"; unknown {', '.join(unknown)}" if unknown else "")
            + (f"; lacks {', '.join(lacks)} of the 12-key line" if lacks else "")
            + f"; the formats builds print: {known}; {TEN_KEY_FORMAT}: 10 of the 12-key line's keys in its order")
    out: dict = {}
    for key in order:
        value = figures[key]
        if key in SIZE_KEYS:
            m = re.fullmatch(_SIZE, value)
            if m is None:
                raise LogError(f"{where}: {key}: {value[:40]!r} is not a readable_size figure")
            out[key] = size_interval(m.group(1), m.group(2))
        elif key in TEXT_KEYS:
            if not re.fullmatch(r"[A-Za-z0-9_]{1,32}", value):
                raise LogError(f"{where}: {key}: {value[:40]!r} is not a dtype name")
            out[key] = value
        else:
            out[key] = _int(value, key, where)
    return CapacityLine(cache_size=size_interval(head.group(1), head.group(2)), figures=out, format=fmt, where=where)


def _is_ten_key_line(order: list) -> bool:
    """10 of the 12 keys, in the 12-key line's order, ``TEN_KEY_REQUIRED`` among them (``TEN_KEY_FORMAT``)."""
    return (len(order) == 10 and all(k in FULL_KEYS for k in order) and all(k in order for k in TEN_KEY_REQUIRED)
            and [k for k in FULL_KEYS if k in order] == list(order))


def capacity_format_keys(fmt: str, line: Optional[CapacityLine] = None) -> tuple:
    """The keys a capacity format prints (the 10-key line: the ones ``line`` has)."""
    if fmt == TEN_KEY_FORMAT:
        return tuple(line.figures) if line is not None else ()
    return CAPACITY_FORMATS[fmt]


def parse_worker(message: str, where: Where) -> WorkerLine:
    m = WORKER_RE.fullmatch(message.rstrip())
    if m is None:
        raise LogError(f"{where}: not upstream's worker line (llm_engine.cpp:482 / vlm_engine.cpp:233 at 494f293b5): "
                       f"{message[:120]!r}")
    text = m.group(6)
    if not re.fullmatch(_FLOAT, text):
        raise LogError(f"{where}: max_memory_utilization: {text[:40]!r} is not a number")
    utilization = float(text)
    if not math.isfinite(utilization):
        raise LogError(f"{where}: max_memory_utilization: {text[:40]!r} is not a finite number")
    return WorkerLine(
        worker=int(m.group(1)), available=size_interval(m.group(2), m.group(3)),
        total=size_interval(m.group(4), m.group(5)), max_memory_utilization=utilization,
        max_cache_size=size_interval(m.group(7), m.group(8)),
        encoder_cache_reserved=size_interval(m.group(9), m.group(10)) if m.group(9) else None, where=where,
    )


def parse_block_info(message: str, where: Where) -> BlockInfoLine:
    figures: dict = {}
    for part in message[len(BLOCK_INFO_MARK):].rstrip().split(", "):
        key, sep, value = part.partition(": ")
        if not sep or key not in BLOCK_INFO_KEYS or key in figures:
            raise LogError(f"{where}: not upstream's `Block info` line (llm_engine.cpp:273 / vlm_engine.cpp:162): "
                           f"{part[:40]!r}")
        figures[key] = _int(value, key, where) if key in BLOCK_INFO_INT_KEYS else value.strip()
    lacking = [k for k in BLOCK_INFO_KEYS[:5] if k not in figures]
    if lacking:
        raise LogError(f"{where}: `Block info` line lacks {', '.join(lacking)}")
    return BlockInfoLine(figures=figures, where=where)


_SHAPE_CACHE = {text: cache for cache, text in SHAPE_FORMATS.items()}


def parse_shape(message: str, where: Where) -> Optional[ShapeLine]:
    m = SHAPE_RE.fullmatch(message.rstrip())
    if m is None:
        return None
    cache = _SHAPE_CACHE[m.group(1)]
    dims = [d for d in re.split(r"[,\s]+", m.group(2).strip()) if d]
    return ShapeLine(cache=cache, shape=tuple(_int(d, f"{cache} cache shape", where) for d in dims), where=where)


def _line_kind(severity: str, message: str) -> str:
    """What a (cut) line begins like, for the message that names it."""
    if severity == "F" or message.startswith("Check failed: "):
        return "refusal"
    for mark, kind in ((CAPACITY_MARK, "`kv cache capacity:`"), (WORKER_MARK, "worker"),
                       (BLOCK_INFO_MARK, "`Block info`"), ("Initializing ", "shape")):
        if message.startswith(mark):
            return kind
    return "other"


class _Line(NamedTuple):
    """One line as the log means it: unwrapped (``unwrap_line``), CRI partial records joined."""

    where: Where
    text: str
    cut: bool
    """The file ends inside it (no end of line, or a CRI partial record no final record ends)."""
    continues: bool = False
    """A line of a rotated file that continues the process's previous file (its glog header opens no start)."""
    detail: str = ""


def unwrap_line(line: str) -> tuple:
    """(the line without terminal escapes, a byte order mark and what ``kubectl logs --prefix``, a container
    runtime (``--timestamps``, a CRI file) and syslog put before it; the CRI stream or ''; the CRI tag F, P or '')."""
    if "\x1b" in line:  # --colorlogtostderr wraps W/E/F lines in colour codes; a terminal title is an OSC sequence
        line = TERMINAL_ESCAPE.sub("", line)
    if line.startswith("\ufeff"):
        line = line.lstrip("\ufeff")
    if line.startswith("["):
        m = KUBECTL_PREFIX.match(line)
        if m:
            line = line[m.end():]
    stream = tag = ""
    if line[:1].isdigit():
        m = CONTAINER_PREFIX.match(line)
        if m:
            stream, tag = m.group(1) or "", m.group(2) or ""
            line = line[m.end():]
            host = SYSLOG_HOST_PROG.match(line) if not tag else None
            if host and GLOG_PREFIX.match(line[host.end():]):
                line = line[host.end():]
    elif line[3:4] == " " and line[:1].isupper():
        m = SYSLOG_PREFIX.match(line)
        if m:
            line = line[m.end():]
    return line, stream, tag


_WRAPPED = frozenset("\x1b\ufeff[0123456789ADFJMNOS")
"""What a line that ``unwrap_line`` changes may begin with (ESC, a BOM, ``[``, a digit, a month's initial),
besides a line with ESC anywhere."""
CRI_CUT = "a CRI partial (P) record that no final (F) record ends"


def _logical_lines(entries: Iterable[tuple]) -> Iterator[_Line]:
    """(path, line number, raw line, continues) -> ``_Line``s; a CRI ``P`` record is joined with the records of
    its stream up to the ``F`` one (at the line of its first record); a stream that ends in ``P`` is cut."""
    partial: dict = {}
    for path, line_no, raw, continues in entries:
        line = raw.rstrip("\r\n")
        ended = len(line) != len(raw)
        if line[:1] in _WRAPPED or "\x1b" in line:
            line, stream, tag = unwrap_line(line)
        else:
            stream = tag = ""
        where = Where(path=path, line_no=line_no)
        if tag == "P" and ended:
            first, head = partial.get(stream, (where, ""))
            partial[stream] = (first, (head + line)[:MAX_LINE_CHARS])
            continue
        if tag and stream in partial:
            where, head = partial.pop(stream)
            line = (head + line)[:MAX_LINE_CHARS]
        # only the file's last line can lack its end of line; NUL bytes after it (a crash) are no line
        yield _Line(where, line, not ended and bool(line.strip("\x00 \t")), continues)
    for where, text in partial.values():
        if text.strip("\x00 \t"):
            yield _Line(where=where, text=text, cut=True, detail=CRI_CUT)


class _Clock:
    """Reads glog stamps of one file as times: (year or None, mmdd, ``hh:mm:ss.uuuuuu``). A stamp without the
    year takes the year of the file's ``Log file created at:`` header, and the next one after a December line
    followed by a January one."""

    def __init__(self) -> None:
        self.year: Optional[int] = None
        self.month = 0
        self.date = ""
        self.mmdd = 0
        self.stamp = ""
        """The last stamped line's stamp (what an unstamped line after it is ordered by)."""

    def header(self, line: str) -> None:
        m = HEADER_TIME.match(line)
        if m:
            self.year, self.month, self.date = int(m.group(1)), int(m.group(2)), ""

    def see(self, stamp: str) -> None:
        """A line with ``stamp`` ('' for none) was read."""
        if not stamp:
            return
        self.stamp = stamp
        date = stamp[:stamp.index(" ")]
        if date == self.date:
            return
        self.date, self.mmdd = date, int(date[-4:])
        month = self.mmdd // 100
        if len(date) == 8:
            self.year = int(date[:4])
        elif self.year is not None and month < self.month:
            self.year += 1
        self.month = month

    def time(self) -> Optional[tuple]:
        """The time of the last line seen: its stamp's, else the last stamped line's (None: none yet)."""
        if not self.stamp:
            return None
        return (self.year, self.mmdd, self.stamp[self.stamp.index(" ") + 1:])


def comparable(times: Iterable[Optional[tuple]]) -> Callable[[tuple], tuple]:
    """A sort key over ``_Clock`` times: with the year when every time has one, else by month, day and time."""
    with_year = all(t[0] is not None for t in times if t is not None)
    return (lambda t: t) if with_year else (lambda t: t[1:])


def _read_flags(line: str, where: Where, flags: dict) -> None:
    """The layerwise flags ``line`` echoes (a launcher's command line, a flag dump) into ``flags``."""
    for m in LAYERWISE_FLAG_RE.finditer(line):
        negated, name, value, spaced = m.groups()
        if name == "enable_layerwise_split":
            value = "false" if negated else (value or "true")
        elif negated:
            continue  # --nolayerwise_split_size is no flag
        else:
            value = value if value is not None else spaced
            if not value:
                continue
        flags[name] = (value, where)


def _starts(items: Iterable[_Line], path: str) -> tuple:
    """(the last start, how many starts the input holds)."""
    start = _Start(first_line=1)
    count = 0
    seen_any = False
    clock = _Clock()
    recent_flags: dict = {}  # flags since the last engine line: a restart's command line comes before its start
    for item in items:
        line, where, cut = item.text, item.where, item.cut
        start.last_line, start.last_path = where.line_no, where.path
        if line.startswith(FILE_HEADER):
            clock.header(line)
            if item.continues:  # the next file of a rotated log: the same start goes on
                continue
        severity, source, source_file, message, stamp = split_glog(line)
        clock.see(stamp)
        if "layerwise_split" in line and severity not in ("E", "F") and "Check failed: " not in message:
            _read_flags(line, where, recent_flags)  # a refusal's advice (`set --x=1`) is no command line
        engine_line = not source_file or source_file in ENGINE_FILES
        opens = (line.startswith(FILE_HEADER)
                 or (engine_line and message.startswith((BLOCK_INFO_MARK, WORKER_MARK)) and start.ended())
                 or (engine_line and message.startswith(BLOCK_INFO_MARK) and start.workers))
        if opens:
            if seen_any:
                count += 1
                start = _Start(first_line=where.line_no, last_line=where.line_no, first_path=where.path)
            if line.startswith(FILE_HEADER):
                continue
        if stamp and not start.first_stamp:
            start.first_stamp, start.first_time = stamp, clock.time()
        is_shape = message.startswith("Initializing ") and SHAPE_WORDS in message
        if start.shape_thread is not None and not is_shape and not cut and line.strip():  # a cut line may be a shape
            thread = _thread(line)
            if thread == start.shape_thread or not start.shape_thread:  # print_shapes' thread went on
                start.shapes_done.add(len(start.capacities) - 1)
                start.shape_thread = None
        failed_init = severity == "E" and message.strip() in FAILED_MARKS and engine_line
        if severity == "F" or failed_init or (not severity and message.startswith("Check failed: ")):
            start.add_fatal(FatalLine(message=message.strip(), source=source, stamp=stamp, time=clock.time(),
                                      where=where, cut=cut))
            seen_any = True
            continue
        if cut:  # its last value may lack digits: named, never read as a figure
            kind = _line_kind(severity, message)
            if (engine_line and (severity or kind != "other")) or is_shape:
                start.cut = CutLine(where=where, kind=kind, detail=item.detail)
                seen_any = True
            continue
        if not engine_line and not is_shape:
            continue
        try:
            read = _read_line(start, message, where)
        except LogError:
            if severity:  # a glog line of the engine's files
                raise
            start.add_skipped(where)  # text without a glog prefix that only looks like an engine line
            continue
        if read and is_shape:
            start.shape_thread = _thread(line)
        if read and start.succeeded and start.success_time is None:
            start.success_time = clock.time()
        if read:
            start.flags.update(recent_flags)
            recent_flags.clear()
        seen_any = seen_any or read
    start.flags.update(recent_flags)
    return start, count + (1 if seen_any else 0)


def _read_line(start: _Start, message: str, where: Where) -> bool:
    """Record one engine message in ``start``; False when it is none of the lines read here."""
    if message.startswith(CAPACITY_MARK):
        start.count_engine_line(where)
        start.capacities.append(parse_capacity(message, where))
    elif message.startswith(WORKER_MARK) and ": available memory: " in message:
        start.count_engine_line(where)
        start.workers.append(parse_worker(message, where))
    elif message.startswith(BLOCK_INFO_MARK):
        start.count_engine_line(where)
        start.block_infos.append(parse_block_info(message, where))
    elif message.startswith("Initializing ") and SHAPE_WORDS in message:
        shape = parse_shape(message, where)
        if shape is None:
            return False
        start.count_engine_line(where)
        start.shapes.setdefault(len(start.capacities) - 1, []).append(shape)
    elif message.strip() == SUCCESS_MARK:
        start.succeeded = True
    else:
        return False
    return True


def _no_engine_line(paths: str) -> LogError:
    return LogError(f"{paths}: no xLLM engine line (no `kv cache capacity:`, worker, `Block info` or refusal line "
                    "of llm_engine.cpp / vlm_engine.cpp at 494f293b5); empty, binary or another log?")


def _engine_log(items: Iterable[_Line], path: str, required: bool) -> EngineLog:
    """The last start of one process's log (its lines in order). A log with no engine line is a ``LogError``
    when ``required``, else an ``EngineLog`` of 0 starts (read for refusals: none)."""
    start, count = _starts(items, path)
    if count == 0:
        if required:
            raise _no_engine_line(path)
        return EngineLog(path=path, starts=((path, 0, 0),))
    end = start.cut.where if start.cut else Where(path=start.last_path or path, line_no=start.last_line)
    last = len(start.capacities) - 1
    capacities = tuple(
        CapacityLine(cache_size=c.cache_size, figures=c.figures, format=c.format, where=c.where,
                     shapes=tuple(start.shapes.get(i, ())),
                     shapes_end=None if (i < last or i in start.shapes_done) else end)
        for i, c in enumerate(start.capacities)
    )
    first = start.first_line if start.first_path in ("", path) else f"{start.first_path}:{start.first_line}"
    return EngineLog(path=path, workers=tuple(start.workers), capacities=capacities,
                     block_infos=tuple(start.block_infos), fatals=tuple(start.fatals), fatal_count=start.fatal_count,
                     succeeded=start.succeeded, starts=((path, count, first),),
                     skipped=tuple(start.skipped), skipped_count=start.skipped_count,
                     cuts=(start.cut,) if start.cut else (), judged_from=path, first_stamp=start.first_stamp,
                     first_time=start.first_time, success_time=start.success_time,
                     runtime_fatals=tuple(start.runtime_fatals), runtime_fatal_count=start.runtime_fatal_count,
                     loose_shapes=((path, tuple(start.shapes[-1])),) if start.shapes.get(-1) else (),
                     flags=tuple((name, value, where) for name, (value, where) in start.flags.items()))


def parse_log_lines(lines: Iterable[str], path: str = "<log>", required: bool = True) -> EngineLog:
    """The last start of one log, read as its lines come (an engine's INFO log may be gigabytes). A log
    with no engine line is a ``LogError`` when ``required``, else an ``EngineLog`` of 0 starts."""
    entries = ((path, n, raw, False) for n, raw in enumerate(lines, start=1))
    return _engine_log(_logical_lines(entries), path, required)


def parse_log_text(text: str, path: str = "<log>") -> EngineLog:
    """``parse_log_lines`` over a string (each line keeps its end of line, so a cut last line shows)."""
    return parse_log_lines(text.splitlines(keepends=True), path)


def merge_logs(logs: Iterable[EngineLog]) -> EngineLog:
    """Several logs of one run (one per node or process): refusals from any (the earliest by time; lines
    without a time after the timed ones, in the order given); capacity, worker and Block info lines from
    the first log that has capacity lines, and every other log with capacity lines of its own as one of
    ``others`` (judged as its own engine); without any, the workers of all logs. A fatal line of a log
    that is later than the time the start completed (``Successfully initialized kv cache``) is a runtime
    failure. A log with no engine line (upstream's other nodes run an assistant master: no engine) adds
    nothing; ``LogError`` when no log has one, or when two logs echo different layerwise flags."""
    logs = list(logs)
    if all(log.starts and log.starts[0][1] == 0 for log in logs):
        raise _no_engine_line(", ".join(log.path for log in logs))
    with_capacity = [log for log in logs if log.capacities]
    first = with_capacity[0] if with_capacity else None
    successes = [log.success_time for log in logs if log.success_time is not None]
    all_fatals = [f for log in logs for f in log.fatals]
    key = comparable([*successes, *(f.time for f in all_fatals)])
    done = min(successes, key=key) if successes else None
    started = {log.path for log in logs if log.succeeded}
    refusals, late = [], []
    for log in logs:
        for f in log.fatals:
            after = (done is not None and log.path not in started and f.time is not None
                     and key(f.time) > key(done))
            (late if after else refusals).append(f)
    timed = sorted((f for f in refusals if f.time is not None), key=lambda f: key(f.time))  # stable: in-file order
    fatals = timed + [f for f in refusals if f.time is None]
    runtime = [f for log in logs for f in log.runtime_fatals] + late
    flags: dict = {}
    for log in logs:
        for name, value, where in log.flags:
            seen = flags.setdefault(name, (value, where))
            if seen[0] != value:
                raise LogError(f"--{name}: {seen[0]!r} at {seen[1]} but {value!r} at {where}: the logs echo two "
                               "command lines; give each run's logs apart, or the flags with --gflags")
    return EngineLog(
        path=", ".join(log.path for log in logs),
        workers=first.workers if first else tuple(w for log in logs for w in log.workers),
        capacities=first.capacities if first else (),
        block_infos=first.block_infos if first else tuple(b for log in logs for b in log.block_infos),
        fatals=tuple(fatals),
        fatal_count=sum(log.fatal_count for log in logs) - len(late),
        succeeded=any(log.succeeded for log in logs),
        starts=tuple(s for log in logs for s in log.starts),
        others=tuple(with_capacity[1:]),
        skipped=tuple(w for log in logs for w in log.skipped)[:MAX_KEPT_LINES],
        skipped_count=sum(log.skipped_count for log in logs),
        cuts=tuple(c for log in logs for c in log.cuts),
        judged_from=first.path if first else "",
        first_stamp=first.first_stamp if first else "",
        first_time=first.first_time if first else None,
        success_time=done,
        runtime_fatals=tuple(runtime[:MAX_KEPT_LINES]),
        runtime_fatal_count=sum(log.runtime_fatal_count for log in logs) + len(late),
        loose_shapes=tuple(item for log in logs for item in log.loose_shapes),
        flags=tuple((name, value, where) for name, (value, where) in flags.items()),
    )


MAX_LINE_CHARS = 1 << 16
"""Longer lines are cut to this (the lines read here are a few hundred characters)."""
BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


def _guess_encoding(piece: bytes, current: str) -> str:
    """The encoding a piece of a file (up to a ``\\n`` byte) is in: UTF-16 when NUL bytes fill one byte of
    most characters (ASCII text in UTF-16), UTF-8 when it holds no NUL byte at all; else ``current``."""
    if len(piece) < 4:
        return current
    odd, even = piece[1::2].count(0), piece[0::2].count(0)
    if odd * 3 >= len(piece) // 2 and even * 4 <= odd:
        return "utf-16-le"
    if even * 3 >= len(piece) // 2 and odd * 4 <= even:
        return "utf-16-be"
    if not odd and not even:
        return "utf-8"
    return current


def _decoded_lines(raw) -> Iterator[str]:
    """A binary file's lines as text, each piece (up to a ``\\n`` byte) decoded in the encoding it is in: a
    UTF-16 start with a UTF-8 restart appended (or the reverse) reads as both. A byte order mark at a piece's
    start says the encoding; else ``_guess_encoding``. Bad bytes are replaced; lines end at ``\\n``, ``\\r\\n``
    or a lone ``\\r``; a line past ``MAX_LINE_CHARS`` keeps its head (memory stays bounded)."""
    encoding = "utf-8"
    pending = ""
    skipping = False  # inside an over-long line: its head was kept, the rest is dropped up to its end
    while True:
        piece = raw.readline(MAX_LINE_CHARS)
        if not piece:
            break
        if encoding == "utf-8" and not pending and piece[-1:] == b"\n" and not _SLOW_BYTES.search(piece):
            yield piece.decode("utf-8", errors="replace")  # the common case: one whole UTF-8 line
            continue
        for bom, name in BOMS:
            if piece.startswith(bom):
                encoding, piece = name, piece[len(bom):]
                break
        else:
            encoding = _guess_encoding(piece, encoding)
        if encoding == "utf-16-le" and piece.endswith(b"\n") and raw.peek(1)[:1] == b"\x00":
            piece += raw.read(1)
        if encoding != "utf-8" and piece[:1] == b"\x00" and len(piece) % 2:
            piece = piece[1:]  # the NUL half of a UTF-16-LE end of line read before the switch
        text = piece.decode(encoding, errors="replace")
        for part in _LINE_END.split(text):
            if not part:
                continue
            if part in ("\n", "\r\n") or (part == "\r"):
                if skipping:
                    skipping = False
                    yield pending + "\n"
                else:
                    yield pending + part
                pending = ""
                continue
            if skipping:
                continue
            pending += part
            if len(pending) > MAX_LINE_CHARS:
                pending, skipping = pending[:MAX_LINE_CHARS], True
    if pending:
        yield pending


_LINE_END = re.compile(r"(\r\n|\n|\r)")
_SLOW_BYTES = re.compile(rb"[\x00\r\xef\xfe\xff]")
"""Bytes after which a piece takes ``_decoded_lines``' whole path: NUL (UTF-16), CR (a line end inside), and
the first bytes of the byte order marks."""


def _open_lines(path: str) -> Iterator[str]:
    """The lines of a regular file (a FIFO or device is refused unread; a compressed file by its magic)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise LogError(f"cannot read log {path}: not a regular file (a directory, FIFO or device)")
    with open(path, "rb") as raw:
        magic = raw.peek(4)[:4]
        for head, kind in COMPRESSED:
            if magic.startswith(head):
                raise LogError(f"cannot read log {path}: {kind}-compressed (a rotated log?): decompress it first")
        yield from _decoded_lines(raw)


def read_log(path: str, required: bool = True) -> EngineLog:
    """Stream a regular file line by line (memory stays bounded); ``required``: a log with no engine line is a
    ``LogError`` (else an ``EngineLog`` of 0 starts)."""
    return read_process_log([path], required)


def read_process_log(paths: list, required: bool = True) -> EngineLog:
    """One process's log: ``paths`` its glog files in order (a rotated log: each later file continues the
    one before; its header opens no new start)."""
    name = paths[0] if len(paths) == 1 else f"{paths[0]} (+{len(paths) - 1} rotated)"

    def entries():
        for index, path in enumerate(paths):
            try:
                for n, raw in enumerate(_open_lines(path), start=1):
                    yield path, n, raw, index > 0
            except OSError as exc:
                raise LogError(f"cannot read log {path}: {exc.strerror or exc}") from None

    return _engine_log(_logical_lines(entries()), name, required)


COMPRESSED = ((b"\x1f\x8b", "gzip"), (b"\x28\xb5\x2f\xfd", "zstd"), (b"BZh", "bzip2"), (b"\xfd7zX", "xz"))


def process_groups(paths: list) -> list:
    """``paths`` grouped by process: glog's files of one program, severity and pid
    (``GLOG_FILE_NAME``) are one group in their time order, at the place of the first; any other file
    is a group of its own."""
    groups: dict = {}
    for path in paths:
        m = GLOG_FILE_NAME.match(os.path.basename(path))
        key = (m.group(1), m.group(3)) if m else path
        groups.setdefault(key, []).append((m.group(2) if m else "", path))
    return [[p for _, p in sorted(files)] for files in groups.values()]


def read_logs(paths: Iterable[str]) -> EngineLog:
    """One run's logs (one per node or process; a process's rotated glog files joined); one of them at least
    must have an engine line; a file given twice (also through a link) is refused (its lines would count
    twice)."""
    paths = list(paths)
    seen: dict = {}
    for path in paths:
        try:
            info = os.stat(path)
        except OSError:
            continue  # read_log says why
        first = seen.setdefault((info.st_dev, info.st_ino), path)
        if first != path or paths.count(path) > 1:
            raise LogError(f"log {path} is given twice" + (f" (also as {first})" if first != path else "")
                           + ": each node's or process's log once")
    groups = process_groups(paths)
    if len(groups) == 1:
        return merge_logs([read_process_log(groups[0])])
    return merge_logs([read_process_log(g, required=False) for g in groups])


def worker_budget(w: WorkerLine) -> tuple:
    """The KV budget C one worker's line implies (``estimate_kv_cache_capacity``): available -
    int64(total * (1 - max_memory_utilization)) when utilization < 1, capped by max_cache_size
    when > 0, minus the VLM engine's encoder_cache_reserved."""
    u = w.max_memory_utilization
    if u < 1.0:
        b_lo = int(w.total.lo * (1.0 - u)) - 1
        b_hi = int(w.total.hi * (1.0 - u)) + 1
    else:
        b_lo = b_hi = 0
    c_lo, c_hi = w.available.lo - b_hi, w.available.hi - b_lo
    if w.max_cache_size.hi > 0:
        c_lo, c_hi = min(c_lo, w.max_cache_size.lo), min(c_hi, w.max_cache_size.hi)
    if w.encoder_cache_reserved is not None:
        c_lo, c_hi = c_lo - w.encoder_cache_reserved.hi, c_hi - w.encoder_cache_reserved.lo
    return c_lo, c_hi


def worker_budget_interval(workers) -> Optional[tuple]:
    """The minimum over workers of ``worker_budget``; None without worker lines."""
    lo = hi = None
    for w in workers:
        c_lo, c_hi = worker_budget(w)
        lo = c_lo if lo is None else min(lo, c_lo)
        hi = c_hi if hi is None else min(hi, c_hi)
    return None if lo is None else (lo, hi)
