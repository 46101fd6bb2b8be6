"""TC-05 (L1) Worker KV shard application.

On a live group with the split active, after a normal bring-up:

0. marks: every block of every tensor of each layer it owns gets a mark of its own (8 bytes
   at its start naming layer, tensor and block), all written before any is read back: an
   owned block that shares memory with another (layers carved out of one pool at
   overlapping offsets, even through two mappings of one page) reads the other's mark;
1. guards: the first and last bytes of sampled unused blocks of every tensor region
   (each distinct tensor extent; the scratch and its views are one region) get a
   sentinel, and no two regions may overlap in memory (addresses on one device, whichever
   storage objects hold them);
2. every worker writes a deterministic byte pattern p(layer, tensor, block), the same
   on every rank, into blocks 0, 1 and the last block of every tensor of each layer it
   owns (full and linear; a linear tensor's "blocks" are its sequence slots);
3. for each full layer (the spec's list, same order on every rank) its owner in each
   split group sends the blocks 0-1 of the layer's tensors over the REAL split subgroup
   (one broadcast per owner carrying all of its layers); each non-owner copies each
   layer, in the spec's order, into its view of that layer, i.e. its scratch, and
   checks the bytes at once, since the next layer overwrites them;
4. owners read their written blocks back (no receive or other layer landed there) and
   every guard still holds its sentinel (nothing written outside the layer meant);
5. teardown (``RankSession.teardown``): weak references to every tensor and (C++ level)
   storage are dead once the harness drops the engine; on a card the allocator's counter
   is back to its value before bring-up.

Also run on an int8 cache (scales and index included) and on a regrouped topology at
world 4 and 8; non-owned views must look like an owned layer (names, shapes, dtypes).

Patterns are bytes: copies and broadcasts are bitwise, so every dtype (bf16, int8, fp8,
fp32 scales) carries them unchanged; the sentinel 0xFF never occurs in a pattern.
Owners are taken from what the workers really allocated (all-gathered), so the
mechanics run for any owner rule; which rule is right is TC-01's concern.
"""

from __future__ import annotations

import dataclasses
import itertools
import zlib
from dataclasses import dataclass, field

import numpy
import torch
import torch.distributed as dist

from harness import oracle
from harness.suites import Suite
from harness.suites.bring_up import bring_up
from harness.suites.case import Case
from harness.suites.checks import leak_problems, ownership_problems, startup_problems, view_problems
from harness.suites.expectations import upstream_worker_owners
from harness.suites.facts import RankFacts, plan_of, worker_facts
from harness.suites.measure import storage_key
from harness.suites.standard import profile_cases, regrouped_cases

TC = "TC-05"

DP_MODELS = ("deepseek_v32", "qwen3_5_moe")
"""Models also run at dp 2 x tp 4 (one MLA+DSA, one hybrid): the split groups of two TP groups."""
QUANTIZED = ("int8", "deepseek_v32", "s2", ("cache.kv_cache_dtype=int8", "cache.indexer_cache_dtype=int8"))
"""The exchange on a quantized cache (int8 KV + float32 scales + int8 index), CPU profile."""
SENTINEL = 0xFF
PATTERN_MOD = 251  # pattern bytes are 0..250: never the sentinel
GUARD_BYTES = 64
GUARD_BLOCKS = 6
"""Unused blocks sampled per region: both neighbours of the written blocks and a few between."""
MAX_LISTED = 40
MARK_BYTES = 8
"""The mark at the start of each owned block: an int64 (layer + 1) << 40 | tensor << 32 | block."""


# ---- cases ------------------------------------------------------------------------------


def cases(matrix) -> list[Case]:
    """Supported models x the layerwise axis's active splits (s2, s4) x tp4, plus the other parallel
    options (dp 2 x tp 4) for two models, x implementations."""
    models = [m for m in matrix.models if m != "llama3_8b"]  # the dense control cannot split (TC-01 covers that)
    layerwise = [lw for lw in matrix.layerwise if matrix.layerwise_flags(lw).active]
    dp_models = [m for m in DP_MODELS if m in models] or models
    tp4 = matrix.offered("parallel", ["tp4"])
    out = []
    for hw, model, lw, par, impl in itertools.product(
        matrix.hardware, models, layerwise, matrix.parallel, matrix.implementations
    ):
        if par not in tp4 and model not in dp_models:
            continue
        out.append(Case(tc=TC, model=model, layerwise=lw, parallel=par, implementation=impl, hardware=hw,
                        extra=matrix.extra_for(lw, par)))
    variant, model, lw, extra = QUANTIZED
    if matrix.offers("layerwise", lw) and "cpu" in matrix.hardware:
        model = preferred_model(model, models)
        out += [Case(tc=TC, model=model, layerwise=lw, parallel="tp4", implementation=impl, hardware="cpu",
                     variant=variant, extra=(*extra, *matrix.extra)) for impl in matrix.implementations]
    if models:
        out += regrouped_cases(TC, matrix, models)
    return out + profile_cases(TC, matrix)


def preferred_model(model: str, models: list) -> str:
    return model if model in models else models[0]


# ---- rank side --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ExchangeFacts(RankFacts):
    stats: dict[str, int] = field(default_factory=dict)


def body(ctx, run, impl_cfg) -> ExchangeFacts:
    session = bring_up(ctx, run, impl_cfg, record_user_refusals=True)
    base = {"rank": ctx.rank, "error": session.error, "plan": session.plan if ctx.rank == 0 else None,
            "run": session.run if ctx.rank == 0 else None,
            "refusals": session.refusal_errors()}
    if session.error is not None:
        return ExchangeFacts(**base)
    if session.refused_anywhere():  # nothing after a worker's refusal is checked
        session.teardown()
        return ExchangeFacts(**base)
    worker = session.workers["target"]
    facts = worker_facts(worker, ctx.device)
    problems, stats = _exchange(ctx, session.run, session.plan, worker.cache)
    del worker
    leaks = session.teardown()  # every engine's tensors and storages must be gone (weak refs)
    return ExchangeFacts(**base, workers={"target": dataclasses.replace(facts, leak=leaks.get("target"))},
                         problems=tuple(problems), stats=stats)


def _exchange(ctx, run, plan, cache) -> tuple[list[str], dict]:
    """Steps 1-4 of the module docstring; every collective decision uses all-gathered data."""
    r = ctx.rank
    problems: list[str] = []
    full = oracle.expected_full_layers(run.model)
    layers = {layer.layer_id: layer for layer in cache.layers}
    mine = {l for l in full if l in layers and layers[l].kind == "full" and layers[l].owned}
    protocol = {l: [(name, *_block_geometry(t)) for name, t in sorted(layers[l].tensors.items())] for l in mine}
    gathered = ctx.all_gather_object({"owned": sorted(mine), "protocol": protocol})
    stats = {"written_layers": 0, "sent_layers": 0, "received_layers": 0, "guard_windows": 0, "marked_blocks": 0}
    try:
        group = ctx.split_groups(plan.split_groups)
    except ValueError as exc:  # same plan everywhere: every rank lands here, no collective left waiting
        return [f"rank {r}: plan split groups are not a partition of the ranks: {exc}"], stats
    members = next(tuple(g) for g in plan.split_groups if r in g)

    pattern = Patterns(ctx.device)
    extents = regions(cache)
    problems += overlaps(r, extents)
    found, stats["marked_blocks"] = marked_blocks(r, cache)
    problems += found
    guards = _fill_guards(extents)
    stats["guard_windows"] = sum(len(picked) for _, windows in guards for _, picked in windows)

    for layer in cache.layers:
        if layer.owned:
            stats["written_layers"] += 1
            for name, t in layer.tensors.items():
                problems += _write(r, pattern, layer.layer_id, name, t)

    sends: dict[int, list] = {m: [] for m in members}  # owner -> [(layer, its protocol, my view)], spec order
    for l in full:
        owners = [m for m in members if l in gathered[m]["owned"]]
        if len(owners) != 1:
            if r == members[0]:
                problems.append(f"split group {list(members)}: full layer {l} owned by {owners}, expected exactly one")
            continue
        view = layers.get(l)
        if r != owners[0] and (view is None or view.kind != "full" or view.owned):
            problems.append(f"rank {r} layer {l}: not owned here but no scratch view of a full layer to receive into")
            view = None
        sends[owners[0]].append((l, gathered[owners[0]]["protocol"][l], view))
    for owner in members:  # the same order on every rank of the group
        if not sends[owner]:
            continue
        for (_, _, view), found in zip(sends[owner], _send_layers(ctx, group, owner, sends[owner], pattern)):
            problems += found
            if r == owner:
                stats["sent_layers"] += 1
            elif view is not None and not found:
                stats["received_layers"] += 1

    for layer in cache.layers:
        if layer.owned:
            for name, t in layer.tensors.items():
                problems += _read_back(r, pattern, layer.layer_id, name, t)
    problems += _check_guards(r, guards)
    return problems, stats


def _send_layers(ctx, group, owner: int, layers: list, pattern) -> list[list[str]]:
    """``owner`` broadcasts the leading blocks of every tensor of its ``layers`` over ``group`` in one
    message; each other rank copies them, layer by layer, into its view of that layer (its scratch)
    and checks the bytes at once, since the next layer's copy overwrites them.

    ``layers``: (layer id, the owner's protocol [(tensor, blocks, block bytes)], this rank's view).
    Returns the problems of each layer, in order. One broadcast per owner, not per tensor: the bytes land
    where a per-tensor receive would, and a case's collectives no longer grow with its layer count.
    """
    r = ctx.rank
    parts = [(l, name, len(_sent_blocks(n0)), nbytes) for l, protocol, _ in layers for name, n0, nbytes in protocol]
    total = sum(k * nbytes for _, _, k, nbytes in parts)
    if r == owner:  # its own layers' blocks (a non-contiguous tensor, already reported by _write, sends zeros)
        mine = {l: view for l, _, view in layers}
        chunks = [_as_bytes(mine[l].tensors[name][:k]) for l, name, k, _ in parts]
        message = torch.cat([c if c is not None else torch.zeros(k * nbytes, dtype=torch.uint8, device=ctx.device)
                             for c, (_, _, k, nbytes) in zip(chunks, parts)]) if parts else \
            torch.empty(0, dtype=torch.uint8, device=ctx.device)  # layers with no tensor: nothing to send
    else:
        message = torch.empty(total, dtype=torch.uint8, device=ctx.device)
    dist.broadcast(message, src=owner, group=group)
    if r == owner:
        return [[] for _ in layers]
    out = []
    offset = 0
    for l, protocol, view in layers:
        problems = []
        for name, n0, block_nbytes in protocol:
            k = len(_sent_blocks(n0))
            received = message[offset:offset + k * block_nbytes]
            offset += k * block_nbytes
            t = view.tensors.get(name) if view is not None else None
            buf = _as_bytes(t[:k]) if t is not None and _block_geometry(t) == (n0, block_nbytes) else None
            if buf is None:
                if view is not None:
                    problems.append(f"rank {r} layer {l} tensor {name}: view missing or not {n0} contiguous blocks "
                                    f"of {block_nbytes} B like the owner's")
                buf = received
            else:
                buf.copy_(received)  # into the scratch: a view that overlaps an owned layer corrupts it here
            for b in range(k):
                if not _same_bytes(buf[b * block_nbytes:(b + 1) * block_nbytes], pattern(l, name, b, block_nbytes)):
                    problems.append(f"rank {r} layer {l} tensor {name} block {b}: received bytes differ from owner "
                                    f"rank {owner}'s pattern")
        out.append(problems)
    return out


# ---- patterns ---------------------------------------------------------------------------


class Patterns:
    """Bytes p(layer, tensor, block): the same on every rank, distinct per layer and block.

    Each pattern is a window of one cyclic 0..250 ramp (a view, no per-call work); the
    ramp lives as long as this object, so it is gone before the allocator check.
    """

    def __init__(self, device) -> None:
        self.device = device
        self._ramp = torch.empty(0, dtype=torch.uint8, device=device)

    def __call__(self, layer: int, name: str, block: int, nbytes: int) -> torch.Tensor:
        seed = (layer * 131 + block * 17 + zlib.crc32(name.encode())) % PATTERN_MOD
        if self._ramp.numel() < nbytes + PATTERN_MOD:
            n = max(nbytes + PATTERN_MOD, 2 * self._ramp.numel())
            self._ramp = (torch.arange(n, dtype=torch.int32, device=self.device) % PATTERN_MOD).to(torch.uint8)
        return self._ramp[seed:seed + nbytes]


def _block_geometry(t) -> tuple[int, int]:
    """(blocks along the leading dim, bytes of one block)."""
    if t.dim() == 0 or t.shape[0] == 0:
        return 0, 0
    return int(t.shape[0]), int(t[0].numel() * t.element_size())


def _written_blocks(n0: int) -> tuple[int, ...]:
    """Blocks an owner writes: the ones it sends, and the last one (the far end of the tensor)."""
    return tuple(sorted({0, 1, n0 - 1} & set(range(n0))))


def _sent_blocks(n0: int) -> tuple[int, ...]:
    """The leading blocks (contiguous: one slice of each tensor carries them)."""
    return tuple(range(min(2, n0)))


def _as_bytes(t):
    """A flat uint8 view sharing ``t``'s memory, or None if ``t`` is not contiguous."""
    if t is None or not t.is_contiguous():
        return None
    return t.reshape(-1).view(torch.uint8)


def _same_bytes(a, b) -> bool:
    """``torch.equal`` for two flat uint8 tensors; on CPU through numpy, whose compare is about
    8x faster than torch's byte-wise loop on blocks of 64 KiB and more."""
    if a.device.type == "cpu" and b.device.type == "cpu":
        return a.shape == b.shape and bool(numpy.array_equal(a.numpy(), b.numpy()))
    return torch.equal(a, b)


def _write(r: int, pattern: Patterns, layer: int, name: str, t) -> list[str]:
    n0, nbytes = _block_geometry(t)
    for b in _written_blocks(n0):
        buf = _as_bytes(t[b])
        if buf is None:
            return [f"rank {r} layer {layer} tensor {name}: not contiguous, cannot write blocks in place"]
        buf.copy_(pattern(layer, name, b, nbytes))
    return []


def _read_back(r: int, pattern: Patterns, layer: int, name: str, t) -> list[str]:
    n0, nbytes = _block_geometry(t)
    out = []
    for b in _written_blocks(n0):
        buf = _as_bytes(t[b])
        if buf is not None and not _same_bytes(buf, pattern(layer, name, b, nbytes)):
            out.append(f"rank {r} layer {layer} tensor {name} block {b}: owned bytes changed after the exchange "
                       f"(a receive or another layer's write landed in this layer)")
    return out


# ---- marks ------------------------------------------------------------------------------


def marked_blocks(r: int, cache) -> tuple[list[str], int]:
    """Step 0 of the module docstring: (problems, blocks marked). One vectorised write and one compare per
    tensor: the mark's bytes in the first ``MARK_BYTES`` of each block, read back once all are written."""
    written = []
    for layer in cache.layers:
        if not layer.owned:
            continue
        for index, (name, t) in enumerate(sorted(layer.tensors.items())):
            n0, nbytes = _block_geometry(t)
            flat = _as_bytes(t)
            if flat is None or n0 == 0 or nbytes == 0:  # not contiguous: _write reports it
                continue
            width = min(MARK_BYTES, nbytes)
            marks = _marks(layer.layer_id, index, n0, t.device)[:, :width]
            cols = flat.view(n0, nbytes)[:, :width]
            cols.copy_(marks)
            written.append((layer.layer_id, name, cols, marks))
    problems = []
    for layer_id, name, cols, marks in written:
        bad = (cols != marks).any(dim=1).nonzero()
        if bad.numel():
            b = int(bad[0])
            problems.append(f"rank {r} layer {layer_id} tensor {name}: block {b} holds {_mark_owner(cols[b])} once "
                            f"every owned block was marked ({bad.numel()} of its {cols.shape[0]} blocks changed): "
                            f"owned blocks share memory")
    return problems, sum(int(cols.shape[0]) for _, _, cols, _ in written)


def _marks(layer: int, tensor: int, n0: int, device) -> torch.Tensor:
    """[n0, MARK_BYTES] bytes: each block's mark, (layer + 1) << 40 | tensor << 32 | block (little-endian)."""
    values = torch.arange(n0, dtype=torch.int64, device=device) + ((layer + 1) << 40 | tensor << 32)
    return values.view(torch.uint8).view(n0, MARK_BYTES)


def _mark_owner(found) -> str:
    """Whose mark ``found`` (a block's first bytes) is, in words."""
    if found.numel() < MARK_BYTES:
        return f"bytes {found.tolist()}"
    value = int(found[:MARK_BYTES].clone().view(torch.int64))
    layer, tensor, block = (value >> 40) - 1, (value >> 32) & 0xFF, value & 0xFFFFFFFF
    if layer < 0 or value >> 48:
        return f"bytes {found.tolist()} (no block's mark)"
    return f"the mark of layer {layer} tensor #{tensor} block {block}"


# ---- guards -----------------------------------------------------------------------------


def regions(cache) -> dict:
    """Distinct tensor extents -> (labels, tensor). The scratch and its views share one extent."""
    out: dict = {}
    named = [(("scratch", n), t) for n, t in cache.scratch.items()]
    named += [((layer.layer_id, layer.owned, n), t) for layer in cache.layers for n, t in layer.tensors.items()]
    for label, t in named:
        key = (storage_key(t), t.storage_offset(), tuple(t.shape), t.stride(), t.dtype)
        out.setdefault(key, ([], t))[0].append(label)
    return out


def _label(labels: list) -> str:
    first = labels[0]
    return f"scratch/{first[1]}" if first[0] == "scratch" else f"layer {first[0]}/{first[2]}"


def overlaps(r: int, regions: dict) -> list[str]:
    """Shared bytes between two layers' tensors: a write to one lands in the other.

    Only the scratch and the non-owned layers' views of it may share an extent. Extents are compared by
    address on each device, not per storage object: tensors carved out of one buffer (``at::from_blob``, a
    DLPack hand-over) are storages of their own over the same bytes.
    """
    out = []
    by_device: dict = {}
    for labels, t in regions.values():
        owners = [lab for lab in labels if lab[0] != "scratch" and lab[1]]
        if len(labels) > 1 and owners:
            out.append(f"rank {r}: owned {_label(owners)} shares its bytes with "
                       f"{', '.join(_label([lab]) for lab in labels if lab is not owners[0])}")
        start = t.data_ptr()
        by_device.setdefault(str(t.device), []).append((start, start + t.numel() * t.element_size(), _label(labels)))
    for extents in by_device.values():
        extents.sort()
        reach, reach_label = extents[0][1], extents[0][2]
        for start, end, label in extents[1:]:
            if start < reach:
                out.append(f"rank {r}: {reach_label} and {label} overlap in memory")
            if end > reach:
                reach, reach_label = end, label
    return out


def _fill_guards(regions: dict) -> list:
    """Sentinel windows at both ends of sampled unused blocks; returns (label, windows)."""
    out = []
    for labels, t in regions.values():
        label = _label(labels)
        n0, nbytes = _block_geometry(t)
        flat = _as_bytes(t)
        first, last = 2, n0 - 2  # blocks 0, 1 and n0 - 1 are written
        if flat is None or last < first or nbytes == 0:
            continue
        width = min(GUARD_BYTES, nbytes)
        unused = sorted({first + (last - first) * k // (GUARD_BLOCKS - 1) for k in range(GUARD_BLOCKS)})
        rows = flat.view(n0, nbytes)[unused[0]:unused[-1] + 1]  # a view: the sampled blocks and those between
        picked = torch.tensor([b - unused[0] for b in unused], device=t.device)
        windows = []
        for lo in sorted({0, nbytes - width}):  # each window offset: every sampled block at once
            window = rows[:, lo:lo + width]
            window.index_fill_(0, picked, SENTINEL)
            windows.append((window, picked))
        out.append((label, windows))
    return out


def _check_guards(r: int, guards: list) -> list[str]:
    out = []
    for label, windows in guards:
        changed = sum(int((w.index_select(0, picked) != SENTINEL).sum()) for w, picked in windows)
        if changed:
            out.append(f"rank {r} {label}: {changed} guard bytes outside the written blocks changed")
    return out


# ---- parent side ------------------------------------------------------------------------


def check(facts: list, run) -> list[str]:
    verdict = startup_problems(facts, run)
    if verdict is not None:
        return verdict
    plan = plan_of(facts)
    s = oracle.split_size(run)
    problems = [p for f in facts for p in f.problems]
    if not plan.active or s < 2:
        problems.append(f"split not active (s={s}): nothing to exchange")
        return problems
    full = oracle.expected_full_layers(run.model)
    problems += ownership_problems(facts, run, owner=dict(plan.layer_owner))  # positions: the spec's
    problems += view_problems(facts)
    problems += leak_problems(facts)
    for f in facts:
        problems += _addressing_problems(f.rank, f.workers["target"], run, plan.n_blocks)
    world = run.parallel.world_size
    # each full layer reaches the s - 1 non-owners of every split group: world / s groups
    want_received = len(full) * (s - 1) * (world // s)
    got_received = sum(f.stats.get("received_layers", 0) for f in facts)
    if got_received != want_received:
        problems.append(f"{got_received} layer receives verified across ranks, spec {want_received} "
                        f"({len(full)} full layers x (s-1)={s - 1} non-owners x {world // s} split groups)")
    for f in facts:
        st = f.stats
        if st.get("written_layers", 0) != len(_owned(f)) or not _owned(f):
            problems.append(f"rank {f.rank}: wrote {st.get('written_layers', 0)} layers, owns {len(_owned(f))}")
        if st.get("marked_blocks", 0) == 0:
            problems.append(f"rank {f.rank}: no owned block was marked (nothing could show two sharing memory)")
        if st.get("guard_windows", 0) == 0:
            problems.append(f"rank {f.rank}: no guard window was placed (nothing could show a stray write)")
    if len(problems) > MAX_LISTED:
        problems = problems[:MAX_LISTED] + [f"... and {len(problems) - MAX_LISTED} more problems"]
    return problems


def _addressing_problems(r: int, wf, run, n_blocks: int) -> list[str]:
    """Where a worker writes a token's KV: the profile's layout fixes the slot axis (FEATURE 7), and
    linear layers keep their state on every rank (it is never exchanged, FEATURE 4)."""
    slot_axis = 2 if run.hardware.kv_layout == "heads_major" else 1
    linear = set(oracle.expected_linear_layers(run.model))
    out = []
    for layer in wf.layers:
        lid = layer.layer
        if lid in linear:
            if not layer.owned or layer.own_bytes == 0:
                out.append(f"rank {r} linear layer {lid}: no state of its own here, and linear state is never "
                           f"exchanged")
            continue
        for name, t in layer.tensors.items():
            shape = list(t.shape)
            rank_ = 3 if name.endswith("_scale") else 4  # upstream's scales: the cache shape minus its last dim
            if len(shape) != rank_ or shape[0] != n_blocks or shape[slot_axis] != run.cache.block_size:
                out.append(f"rank {r} layer {lid} tensor {name}: shape {shape} does not put {n_blocks} blocks on "
                           f"axis 0 and block_size {run.cache.block_size} on axis {slot_axis} "
                           f"({run.hardware.kv_layout}): token slots would be written in the wrong place")
                break
    return out


def _owned(f) -> list[int]:
    wf = f.workers.get("target")
    return [l.layer for l in wf.layers if l.owned] if wf is not None else []


SUITE = Suite(
    TC=TC,
    LEVEL="L1",
    TITLE="Worker KV shard application",
    cases=cases,
    body=body,
    check=check,
    predict_upstream_layout=upstream_worker_owners,
)
