"""Comparing an engine log with what FEATURE.md (through ``harness.oracle``) predicts.

First the engine's answer: did it refuse (a ``Check failed`` / ``LOG(FATAL)`` line, also after
the capacity line) and for which rule, or did it start? That is judged against the oracle's
startup rule (``expected_rejection`` under the adaptation's semantics,
``expected_upstream_rejection`` under upstream's) and its estimation rule
(``expected_estimation_rejection``). Each upstream check message is mapped to the config field
it guards (``contract.upstream_checks``, with its place in upstream 494f293b5).

When the engine started and the spec accepts, every figure it printed is judged. Figures that
do not depend on the budget (slot sizes, layer counts, dtype, Block info, tensor shapes) must
match exactly. The budget C itself is known only as the interval ``readable_size`` printed,
unless the config fixes it (``cache.kv_budget_bytes=...``); the figures that depend on it
(linear_blocks, reserved_linear_bytes, blocks) agree when some C in that interval gives the
engine's numbers together. Linear-state slots are monotone in C, so the interval is cut into
pieces of constant slots (binary search) and the block count is monotone inside each piece.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, replace
from typing import Callable, Optional

from contract.upstream_checks import check_of_message
from contract.upstream_tensors import PRINTED_CACHES, harness_names
from harness import oracle
from harness.conformance.log import (
    MAX_KEPT_LINES,
    SHAPE_FORMATS,
    CapacityLine,
    EngineLog,
    FatalLine,
    LogError,
    Size,
    capacity_format_keys,
    comparable,
    readable_size,
    worker_budget_interval,
)

MAX_PIECES = 10_000

SHAPE_TENSORS = {cache: harness_names(getter) for cache, getter in PRINTED_CACHES.items()}
"""A ``print_shapes`` line -> the oracle's tensor names it is (GQA or MLA), from upstream's names
(``contract.upstream_tensors``)."""
ORDER = list(SHAPE_FORMATS)
"""The order ``print_shapes`` prints its lines in."""
PRINTED_TENSORS = tuple(name for names in SHAPE_TENSORS.values() for name in names)
"""Every tensor ``print_shapes`` prints, by the oracle's name."""
TORCH_PRINT_NAMES = {"BFloat16": "bfloat16", "Half": "float16", "Float": "float32", "Char": "int8",
                     "Float8_e4m3fn": "float8_e4m3fn", "Float8_e5m2": "float8_e5m2"}
"""How ``<< torch::ScalarType`` prints a dtype -> the torch name the oracle uses."""


@dataclass(frozen=True)
class Figure:
    engine: str
    name: str
    logged: str
    expected: str
    agree: Optional[bool]
    """None: shown for information, not judged."""


def refusal_field(message: str) -> tuple:
    """(field, upstream place) an upstream check message guards (``contract.upstream_checks``); (None, '') for
    another check."""
    row = check_of_message(message)
    return (row.field, row.where) if row is not None else (None, "")


def _same_field(logged: Optional[str], expected: str) -> bool:
    if logged is None:
        return False
    if logged == "index_n_heads":  # the worker's check names no engine: the target's or the draft's
        return expected.endswith(".index_n_heads")
    return logged == expected


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


def owner_rule(semantics: str) -> str:
    """Upstream's ``layer_id % s`` under upstream semantics, the spec's round robin otherwise."""
    return oracle.UPSTREAM_OWNER_RULE if semantics == "upstream" else oracle.SPEC_OWNER_RULE


def check_engine(run, line: CapacityLine, budget: tuple, role: str, semantics: str = "adaptation") -> list:
    """The figures of one ``kv cache capacity`` line (role ``target`` or ``draft``): the keys it has."""
    lo, hi = budget
    index = 0 if role == "target" else 1
    rule = owner_rule(semantics)

    def capacity(c: int):
        return oracle.expected_capacities(run, c, owner_rule=rule)[index]

    at_lo = capacity(lo)
    f = line.figures
    figures = [Figure(role, "format", line.format, ", ".join(capacity_format_keys(line.format, line)), None)]
    if line.lacks:
        figures.append(Figure(role, "not in this line", ", ".join(line.lacks), "-", None))

    def exact(name: str, expected):
        if name in f:
            figures.append(Figure(role, name, str(f[name]), str(expected), f[name] == expected))

    exact("slot_size", at_lo.slot_size)
    exact("index_slot_size", at_lo.index_slot_size)
    exact("indexer_layers", at_lo.num_indexer_layers)
    exact("scale_slot_size", at_lo.scale_slot_size)
    exact("linear_slot_size", at_lo.linear_slot_size)
    exact("n_layers", at_lo.n_layers)
    exact("kv_cache_dtype", run.cache.kv_cache_dtype)
    exact("max_linear_state_cache_slots", oracle.max_linear_state_cache_slots(run.cache))

    model = run.model if role == "target" else run.draft
    has_linear = oracle.has_linear_attention_layers(model)
    pieces = _pieces(lambda c: capacity(c).num_linear_state_blocks, lo, hi)
    k_lo, k_hi = pieces[0][0], pieces[-1][0]
    chosen = pieces
    if "linear_blocks" in f:
        logged_k = f["linear_blocks"]
        figures.append(Figure(role, "linear_blocks", str(logged_k), _range_text(k_lo, k_hi), k_lo <= logged_k <= k_hi))
        chosen = [p for p in pieces if p[0] == logged_k] or pieces
    if "linear_state_slots" in f:
        state = f["linear_state_slots"]
        want_state = (k_lo, k_hi) if has_linear else (0, 0)
        figures.append(Figure(role, "linear_state_slots", str(state), _range_text(*want_state),
                              want_state[0] <= state <= want_state[1]))
    if "reserved_linear_bytes" in f:
        linear_lo, linear_hi = capacity(lo).linear_cache_bytes, capacity(hi).linear_cache_bytes
        reserved: Size = f["reserved_linear_bytes"]
        figures.append(Figure(role, "reserved_linear_bytes", f"{reserved.text} ({reserved.lo}..{reserved.hi} B)",
                              f"{_range_text(linear_lo, linear_hi)} B ({readable_size(linear_lo)})",
                              reserved.overlaps(linear_lo, linear_hi)))
    blocks = f["blocks"]
    ranges = [(capacity(c_lo).n_blocks, capacity(c_hi).n_blocks) for _, c_lo, c_hi in chosen]
    agree = any(a <= blocks <= b for a, b in ranges)
    want = ", ".join(_range_text(a, b) for a, b in ranges[:3]) + (" ..." if len(ranges) > 3 else "")
    figures.append(Figure(role, "blocks", str(blocks), want, agree))
    figures += check_shapes(run, line, role, at_lo if "linear_blocks" not in f else None)
    return figures


def check_shapes(run, line: CapacityLine, role: str, at_lo) -> list:
    """The ``Initializing <x> cache with shape`` lines after a capacity line against the oracle's
    tensor specs at the logged block count (dim 0 = n_blocks) and linear-state slots."""
    if not line.shapes:  # print_shapes had not run when the log ended, or the build prints none
        return [Figure(role, "cache shapes", f"no shape line after {line.where}", "not judged", None)]
    n_blocks = line.figures["blocks"]
    tp = oracle.attn_tp_size(run)
    if role == "target":
        specs = dict(oracle.expected_full_layer_tensors(run, n_blocks))
        if oracle.has_linear_attention_layers(run.model):
            slots = line.figures["linear_blocks"] if at_lo is None else at_lo.num_linear_state_blocks
            specs.update(oracle.linear_layer_tensor_specs(run.model, run.cache, tp, slots))
    else:
        specs = dict(oracle.expected_draft_layer_tensors(run, n_blocks))
    specs = {name: spec for name, spec in specs.items() if name in PRINTED_TENSORS}
    figures = []
    seen = set()
    printed = [ORDER.index(shape.cache) for shape in line.shapes if shape.cache in ORDER]
    last_printed = max(printed, default=-1)
    for shape in line.shapes:
        names = [n for n in SHAPE_TENSORS[shape.cache] if n in specs]
        logged = "[" + ", ".join(map(str, shape.shape)) + "]"
        if not names:
            figures.append(Figure(role, f"{shape.cache} cache shape", logged, "no such tensor", False))
            continue
        seen.add(names[0])
        want = specs[names[0]].shape
        figures.append(Figure(role, f"{shape.cache} cache shape", logged,
                              "[" + ", ".join(map(str, want)) + "]", tuple(shape.shape) == tuple(want)))
    for name in sorted(set(specs) - seen):
        want = str(list(specs[name].shape))
        position = next(ORDER.index(cache) for cache, names in SHAPE_TENSORS.items() if name in names)
        if line.shapes_end is not None and position > last_printed:  # print_shapes prints in ORDER
            figures.append(Figure(role, f"{name} cache shape", f"not in the log (it ends at {line.shapes_end})",
                                  want, None))
        else:
            figures.append(Figure(role, f"{name} cache shape", "not printed", want, False))
    return figures


def check_block_info(run, log: EngineLog, engines: int) -> list:
    """``Block info`` lines (one per engine, in init order) against the config and the oracle."""
    figures = []
    for index, info in enumerate(log.block_infos[:engines]):
        role = "target" if index == 0 else "draft"
        model = run.model if index == 0 else run.draft
        f = info.figures
        logged_dtype = TORCH_PRINT_NAMES.get(f.get("dtype"), f.get("dtype"))
        expected = {"block_size": (run.cache.block_size, f.get("block_size")),
                    "kv_cache_dtype": (run.cache.kv_cache_dtype, f.get("kv_cache_dtype")),
                    "dtype": (oracle.torch_dtype_name(model.dtype), logged_dtype)}
        if role == "target" and model.attention != "mla":
            expected["n_local_kv_heads"] = (oracle.n_local_kv_heads(model, oracle.attn_tp_size(run)),
                                            f.get("n_local_kv_heads"))
            expected["head_dim"] = (model.head_dim, f.get("head_dim"))
            expected["n_layers"] = (model.num_hidden_layers, f.get("n_layers"))
        for name in ("block_size", "n_local_kv_heads", "head_dim", "n_layers", "dtype", "kv_cache_dtype"):
            if name not in f:
                continue
            if name in expected:
                want, got = expected[name]
                figures.append(Figure(role, f"Block info {name}", str(f[name]), str(want), got == want))
            else:  # MLA's args carry query heads here, and a draft's layer count is the draft engine's own
                figures.append(Figure(role, f"Block info {name}", str(f[name]), "-", None))
    return figures


def check_workers(run, log: EngineLog, engines: int) -> list:
    """Worker ids: each engine prints ``worker #0`` .. ``#world-1`` once (``estimate_kv_cache_capacity``)."""
    if not log.workers:
        return []
    world = run.parallel.world_size
    runs, current = [], []
    for w in log.workers:
        if w.worker in current:
            runs.append(current)
            current = []
        current.append(w.worker)
    runs.append(current)
    logged = " | ".join(",".join(f"#{i}" for i in r[:8]) + (" ..." if len(r) > 8 else "") for r in runs[:4])
    logged += " ..." if len(runs) > 4 else ""
    agree = len(runs) == engines and all(r == list(range(world)) for r in runs)
    return [Figure("workers", "worker ids", f"{len(log.workers)} lines: {logged}",
                   f"#0..#{world - 1} once per engine ({engines} engine{'s' if engines > 1 else ''}, world {world})",
                   agree)]


def budget_interval(run, log: EngineLog, target: Optional[CapacityLine] = None) -> tuple:
    """(lo, hi, figures): the per-rank budget C to judge with (``target``'s, by default the first capacity
    line's), and the cache_size figures."""
    target = target or log.capacities[0]
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
        vlm = any(w.encoder_cache_reserved is not None for w in log.workers)
        figures.append(Figure("workers", "cache_size", f"{w_lo}..{w_hi} B from {len(log.workers)} worker line(s)"
                              + (" less encoder_cache_reserved" if vlm else ""),
                              f"{lo}..{hi} B", w_lo <= hi and lo <= w_hi))
    return lo, hi, figures


def _engine_budget(run, log: EngineLog) -> tuple:
    """(lo, hi) of the budget the engine estimated with: the config's, else the capacity line's,
    else the workers' lines, else the hardware profile's."""
    override = int(getattr(run.cache, "kv_budget_bytes", 0) or 0)
    if override > 0:
        return override, override
    if log.capacities:
        return log.capacities[0].cache_size.lo, log.capacities[0].cache_size.hi
    workers = worker_budget_interval(log.workers)
    if workers is not None:
        return workers
    budget = oracle.run_budget_bytes(run)
    return budget, budget


def expected_refusals(run, log: EngineLog, semantics: str) -> tuple:
    """(kind, [Rejection], accepts): kind ``startup`` or ``estimation``; the rejections the spec gives
    at some budget the log allows; ``accepts``: whether some budget it allows starts the engine."""
    startup = oracle.expected_upstream_rejection(run) if semantics == "upstream" else oracle.expected_rejection(run)
    if startup is not None:
        return "startup", [startup], False
    lo, hi = _engine_budget(run, log)
    found, accepts = [], False
    for budget in sorted({lo, hi}):
        rejection = oracle.expected_estimation_rejection(run, max(budget, 0))
        if rejection is None:
            accepts = True
        elif rejection not in found:
            found.append(rejection)
    return "estimation", found, accepts


def _refusal_text(fatal: FatalLine) -> str:
    field, where = refusal_field(fatal.message)
    rule = f"{field} ({where})" if field else "a check the spec does not name"
    return f"refused at {fatal.where} ({fatal.source or 'no glog prefix'}): {fatal.message[:160]} -> {rule}"


def _cut_text(log: EngineLog) -> str:
    """`` mid-line, inside a <kind> line at <where> (a cut log),`` when a log ends mid-line, else ''."""
    return "".join(f" mid-line, inside a {c.kind} line at {c.where} ({c.detail or 'a cut log'}),"
                   for c in log.cuts[:1])


def check_memory_flags(memory: dict, log: EngineLog) -> list:
    """``--max_memory_utilization`` / ``--max_cache_size`` as given against what every worker line printed
    (``llm_engine.cpp:482``: the utilization as a C++ stream prints a double, the cap as readable_size)."""
    figures = []
    for name, value in sorted(memory.items()):
        want = f"--{name}={value}"
        if not log.workers:
            figures.append(Figure("workers", name, "no worker line", want, None))
            continue
        if name == "max_memory_utilization":
            printed = sorted({w.max_memory_utilization for w in log.workers})
            logged = ", ".join(f"{u:g}" for u in printed)
            agree = printed == [float(f"{value:.6g}")]  # std::ostream's default precision: 6 significant digits
        else:
            sizes = sorted({w.max_cache_size.text for w in log.workers})
            logged = ", ".join(sizes)
            agree = all(w.max_cache_size.contains(value) for w in log.workers)
        figures.append(Figure("workers", name, logged, want, agree))
    return figures


def log_flag_notes(log: EngineLog) -> list:
    """The layerwise flags read from an echoed command line in the log, and where."""
    if not log.flags:
        return []
    return ["layerwise flags read from the log's command line: "
            + " ".join(f"--{name}={value} ({where})" for name, value, where in log.flags)]


def flag_notes(flags) -> list:
    """What ``engine_flags`` read from the engine's flags besides the layerwise ones, and what it did not."""
    out = []
    if flags.read:
        out.append("engine flags read: " + " ".join(flags.read))
    if flags.memory:
        out.append("engine flags judged against the worker lines: "
                   + " ".join(f"--{k}={v}" for k, v in sorted(flags.memory.items())))
    if flags.unread:
        names = " ".join(f"--{n}" for n in flags.unread[:12]) + (" ..." if len(flags.unread) > 12 else "")
        out.append(f"engine flags not read (they do not change the KV plan, or an override names it): {names}")
    return out


def check(run, log: EngineLog, semantics: str = "adaptation", memory: Optional[dict] = None) -> list:
    """The engine's answer (refused or started) against the spec, then, when both say it starts,
    every figure of the log: target first, then the draft if any (and the memory flags given,
    ``check_memory_flags``)."""
    engines = 2 if getattr(run, "draft", None) is not None else 1
    kind, refusals, accepts = expected_refusals(run, log, semantics)
    fatal = log.fatals[0] if log.fatals else None
    spec_text = " or ".join(f"refused: {r.field}: {r.reason}" for r in refusals)
    if fatal is not None:
        field, _ = refusal_field(fatal.message)
        if fatal.cut and field is None:
            raise LogError(f"{fatal.where}: the file ends inside the refusal line the verdict needs "
                           f"({fatal.message[:80]!r}): its rule cannot be read from a cut line")
        if refusals:
            agree = any(_same_field(field, r.field) for r in refusals)
            return [Figure("engine", f"{kind} refusal", _refusal_text(fatal), spec_text, agree)]
        return [Figure("engine", "startup", _refusal_text(fatal), "starts (the spec refuses nothing here)", False)]
    if not log.capacities:
        raise LogError(f"{log.path}: the judged start has neither a `kv cache capacity:` line nor a refusal "
                       f"(`F... Check failed:` / LOG(FATAL)): the log ends{_cut_text(log)} before the engine "
                       "allocated its KV cache")
    if not accepts:
        return [Figure("engine", f"{kind} refusal", f"started ({len(log.capacities)} capacity line(s))", spec_text, False)]
    if len(log.capacities) < engines:
        raise LogError(f"{log.path}: {len(log.capacities)} `kv cache capacity:` line(s) in the judged start and no "
                       f"refusal, the config has {engines} engines (target + draft): the log ends{_cut_text(log)} "
                       "before the draft's line")
    figures = [Figure("engine", "startup", "started", "starts", True)]
    figures += started_figures(run, log, engines, semantics, memory)
    for other in log.others:  # another process's own engine: its lines judged as its own start
        if len(other.capacities) < engines:
            raise LogError(f"{other.path}: {len(other.capacities)} `kv cache capacity:` line(s) and the config has "
                           f"{engines} engines (target + draft): the log ends{_cut_text(other)} before the draft's line")
        name = os.path.basename(other.path)
        figures += [replace(f, engine=f"{name}:{f.engine}") for f in started_figures(run, other, engines, semantics,
                                                                                     memory)]
    figures += check_loose_shapes(run, log, engines, semantics)
    return figures


def check_loose_shapes(run, log: EngineLog, engines: int, semantics: str) -> list:
    """Shape lines a log prints before any capacity line of its own (a worker process's ``print_shapes``: at
    494f293b5 the MTP worker prints its draft's) against the engine's capacity line: the draft's when the
    config has one, else the target's; named by their log."""
    role = "draft" if engines == 2 else "target"
    line = log.capacities[engines - 1]
    at_lo = oracle.expected_capacities(run, _engine_budget(run, log)[0], owner_rule=owner_rule(semantics))[engines - 1]
    figures = []
    for path, shapes in log.loose_shapes:
        judged = check_shapes(run, replace(line, shapes=shapes, shapes_end=None), role,
                              at_lo if "linear_blocks" not in line.figures else None)
        figures += [replace(f, engine=f"{os.path.basename(path)}:{f.engine}") for f in judged]
    return figures


def started_figures(run, log: EngineLog, engines: int, semantics: str, memory: Optional[dict]) -> list:
    """Every figure of one engine's started log: budget, workers, memory flags, Block info, then each
    capacity line and its shapes. Capacity lines past the ``engines`` one start prints (a second target
    line) are judged too, each at its own budget, as ``target#2`` (``draft#2``) and so on."""
    lo, hi, figures = budget_interval(run, log)
    figures += check_workers(run, log, engines)
    figures += check_memory_flags(memory or {}, log)
    figures += check_block_info(run, log, engines)
    for index, line in enumerate(log.capacities):
        role = "target" if index % engines == 0 else "draft"
        group = index // engines
        if group and role == "target":
            lo, hi, budget_figures = budget_interval(run, log, line)
            figures += [replace(f, engine=f"{f.engine}#{group + 1}") for f in budget_figures if f.engine == "target"]
        judged = check_engine(run, line, (lo, hi), role, semantics)
        figures += [replace(f, engine=f"{f.engine}#{group + 1}") for f in judged] if group else judged
    if engines == 1:
        figures.append(Figure("target", "Successfully initialized kv cache", "seen" if log.succeeded else "not seen",
                              "llm_engine.cpp:202 (the VLM engine does not print it)", None))
    return figures


def notes(log: EngineLog, semantics_line: str) -> list:
    out = [semantics_line]
    if len(log.starts) > 1 and log.judged_from:
        others = [s[0] for s in log.starts if s[0] != log.judged_from]
        out.append(f"figures from {log.judged_from} (the log with the engine's capacity lines); "
                   f"{', '.join(others)} read for refusals")
    for path in log.without_engine:
        out.append(f"{path} has no engine line (a node that runs no engine, as upstream's assistant masters): "
                   "no refusal there")
    for path, count, first in log.restarted:
        out.append(f"{path} holds {count} starts (a restart appended); judging the last, from line {first}")
    for cut in log.cuts:
        how = f" ({cut.detail})" if cut.detail else ""
        out.append(f"{cut.where}: the file ends inside this {cut.kind} line{how} (cut log): the line is not read")
    for line in log.capacities:
        if line.shapes_end is not None and line.shapes:
            out.append(f"the log ends at {line.shapes_end} while the shapes after {line.where} were printed: "
                       "shapes after the last one printed are not judged")
    for engine_log in (log, *log.others):
        if len(engine_log.capacities) > 2:
            out.append(f"{len(engine_log.capacities)} capacity lines in one start of {engine_log.judged_from}: the "
                       "first is the target's, with a draft the second the draft's; each further one is judged too "
                       "(target#2, draft#2, ...)")
    for other in log.others:
        out.append(f"{other.path} has capacity lines of its own (another process's engine): judged too, its "
                   f"figures named {os.path.basename(other.path)}:...")
    if log.runtime_fatal_count:
        first = log.runtime_fatals[0]
        out.append(f"{log.runtime_fatal_count} fatal line(s) after the start completed (`Successfully initialized kv "
                   f"cache`): a failure of the running engine, not a start-up refusal; not judged (first: "
                   f"{first.where}: {first.message[:100]})")
    if log.skipped:
        out.append(f"{log.skipped_count} line(s) without a glog prefix look like engine lines but do not read as one "
                   f"(first: {log.skipped[0]}); not read")
    if log.fatals and log.first_time is not None and log.fatals[0].time is not None:
        judged = log.fatals[0]
        key = comparable([judged.time, log.first_time])
        if key(judged.time) < key(log.first_time):
            out.append(f"the refusal judged ({judged.where}, {judged.stamp}) is older than the judged start of "
                       f"{log.judged_from} ({log.first_stamp}): a line of an earlier run? (judged as this run's)")
    untimed = [f for f in log.fatals if f.time is None]
    if untimed and len(untimed) < len(log.fatals):
        out.append(f"{len(untimed)} refusal line(s) without a glog time before them in their file (first: "
                   f"{untimed[0].where}) are ordered after the timed ones")
    if log.fatal_count > 1:
        kept = "" if log.fatal_count == len(log.fatals) else f" (of the first {MAX_KEPT_LINES} of each log)"
        out.append(f"{log.fatal_count} refusal lines; the earliest{kept} is judged")
    return out


def render(figures: list, log: EngineLog, overrides, semantics_line: str = "", extra_notes=()) -> str:
    lines = [f"conformance: {log.path} against FEATURE.md ({' '.join(overrides) or 'default config'})"]
    lines += [f"note: {n}" for n in [*notes(log, semantics_line), *extra_notes] if n]
    width = min(max(len(f.logged) for f in figures), 60)
    lines.append(f"{'engine':<8} {'figure':<30} {'engine log':<{width}}  {'spec':<28} verdict")
    for f in figures:
        verdict = "-" if f.agree is None else ("agree" if f.agree else "DISAGREE")
        lines.append(f"{f.engine:<8} {f.name:<30} {f.logged:<{width}}  {f.expected:<28} {verdict}")
    lines.append(result_line(figures))
    return "\n".join(lines)


def result_line(figures: list) -> str:
    bad = [f"{f.engine}.{f.name}" for f in figures if f.agree is False]
    judged = sum(1 for f in figures if f.agree is not None)
    return f"result: DISAGREE on {', '.join(bad)}" if bad else f"result: agree ({judged} figures)"


def render_json(figures: list, log: EngineLog, overrides, semantics: str, semantics_line: str, extra_notes=()) -> str:
    verdict = lambda f: None if f.agree is None else ("agree" if f.agree else "disagree")  # noqa: E731
    out = {
        "logs": log.path, "overrides": list(overrides),
        "semantics": {"name": semantics, "split": semantics_line},
        "notes": [*notes(log, "")[1:], *extra_notes],
        "checks": [{**asdict(f), "verdict": verdict(f)} for f in figures],
        "result": "disagree" if any(f.agree is False for f in figures) else "agree",
    }
    return json.dumps(out, indent=2)
