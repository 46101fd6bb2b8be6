"""What the ranks report to the parent: frozen dataclasses of builtins and tuples.

They cross the process boundary by pickling (a rank body returns one per rank), so
they hold plain data only: no tensors, no caches. ``worker_facts`` measures a
worker's tensors on the rank; everything else is built by ``bring_up`` and the TC
bodies. A worker's report about itself (its split rank, its digest) is a FACT to
check against the spec, never an expectation.
"""

from __future__ import annotations

import functools
import operator
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional

from contract.errors import UserError
from harness.suites.measure import tensor_bytes, union_bytes


@dataclass(frozen=True, kw_only=True)
class TensorFacts:
    shape: tuple[int, ...]
    dtype: str
    """``bfloat16``, ``int8``, ... (torch's name without the ``torch.`` prefix)."""
    bytes: int
    """numel x element size of this tensor (a view counts what it spans, not what it owns)."""

    @property
    def geometry(self) -> tuple[tuple[int, ...], str]:
        return self.shape, self.dtype


class LayerFacts(NamedTuple):
    """One layer of a worker's cache (a tuple: a worker has one per layer, a configuration hundreds)."""

    layer: int
    kind: str
    """``full`` or ``linear``."""
    owned: bool
    own_bytes: int
    """Bytes of storage this layer holds apart from the scratch and earlier layers."""
    scratch_view: bool
    """Every tensor of the layer is a view of the rank's scratch."""
    tensors: dict[str, TensorFacts]
    """Tensor name -> its facts; layers of one worker with the same tensors share one mapping (``walked_worker``)."""

    @property
    def geometry(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Tensor name -> (shape, dtype): what a non-owned view must share with an owned layer."""
        return {name: t.geometry for name, t in sorted(self.tensors.items())}


@dataclass(frozen=True, kw_only=True)
class LeakFacts:
    """After teardown: weak references to a worker's tensors and storages that are still alive."""

    tracked: int
    alive: int
    allocator_before: int = 0
    allocator_after: int = 0
    """Device allocator bytes before bring-up and after teardown (0 on CPU)."""


@dataclass(frozen=True, kw_only=True)
class MessageFacts:
    """The engine message a worker received, as the engine wrote it (FEATURE 8): its split fields and the
    entry of the worker's own plan rank. A fact to check, whatever the worker then made of it."""

    active: bool
    split_size: int
    split_groups: tuple[tuple[int, ...], ...]
    layer_owner: tuple[tuple[int, int], ...]
    scratch_bytes_per_block: int
    split_group: Optional[int]
    """The worker's entry: index into ``split_groups`` (None: the message has no entry for its plan rank)."""
    split_rank: Optional[int]
    owned_full_layers: tuple[int, ...]


def message_facts(message, plan_rank: int) -> MessageFacts:
    entry = next((r for r in message.ranks if r.rank == plan_rank), None)
    return MessageFacts(  # (``map(tuple, ...)``: once per worker over every owner pair, without a generator)
        active=bool(message.active), split_size=message.split_size,
        split_groups=tuple(map(tuple, message.split_groups)),
        layer_owner=tuple(map(tuple, message.layer_owner)),
        scratch_bytes_per_block=message.scratch_bytes_per_block,
        split_group=None if entry is None else entry.split_group,
        split_rank=None if entry is None else entry.split_rank,
        owned_full_layers=() if entry is None else tuple(entry.owned_full_layers))


@dataclass(frozen=True, kw_only=True)
class WorkerFacts:
    role: str
    plan_rank: int
    device: str
    digest: str
    n_blocks: int
    split_size: int
    split_rank: int
    split_group: tuple[int, ...]
    kv_layout: str
    measured_bytes: int
    scratch_bytes: int
    scratch_tensors: dict[str, tuple[int, ...]]
    layers: tuple[LayerFacts, ...]
    received_digest: str = ""
    """Digest of the engine message this worker received (hashed by plan_types on the rank)."""
    leak: Optional[LeakFacts] = None
    """Filled by teardown: None means the leak check did not run for this worker."""
    reported_rank: int = -1
    reported_role: str = ""
    reported_device: str = ""
    """What the worker's cache says about itself (its rank, role and device): facts to check."""
    message: Optional[MessageFacts] = None
    """The engine message it received (its split fields and its own entry)."""

    def owned_full(self) -> list[int]:
        return list(self._owned_full)

    @functools.cached_property
    def _owned_full(self) -> tuple[int, ...]:
        """(read once: TC-01, TC-07 and the ownership check each ask, and a worker has hundreds of layers)"""
        return tuple(l.layer for l in self.layers if l.kind == "full" and l.owned)

    def layer(self, layer_id: int) -> Optional[LayerFacts]:
        return next((l for l in self.layers if l.layer == layer_id), None)


@dataclass(frozen=True, kw_only=True)
class MasterError:
    """The master's refusal: the error type, the field it names (UserError.field) and its text."""

    type: str
    field: Optional[str]
    message: str
    user_error: bool = True
    """True when the error is ``contract.errors.UserError`` or a subclass."""
    classes: tuple[str, ...] = ()
    """Names of the error's classes, most derived first (``PlanError``, ``UserError``, ...)."""

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


@dataclass(frozen=True, kw_only=True)
class RankFacts:
    """One rank's answer from a standard body. ``plan`` and ``run`` are sent by rank 0 only."""

    rank: int
    error: Optional[MasterError] = None
    plan: Any = None
    run: Any = None
    workers: dict[str, WorkerFacts] = field(default_factory=dict)
    digests: dict[str, tuple] = field(default_factory=dict)
    """Role -> the digests all-gathered from every rank (None where a rank hosts no worker)."""
    problems: tuple[str, ...] = ()
    """Problems the rank itself found (leaks, an exchange that went wrong)."""
    refusals: dict[str, MasterError] = field(default_factory=dict)
    """Role -> the UserError this rank's worker of that engine raised in ``init_worker`` (none: it started)."""


def master_error_of(exc: BaseException) -> MasterError:
    return MasterError(type=type(exc).__name__, field=exc.field if isinstance(exc, UserError) else None,
                       message=str(exc), user_error=isinstance(exc, UserError),
                       classes=tuple(c.__name__ for c in type(exc).__mro__))


def worker_facts(worker, device: str, *, leak: Optional[LeakFacts] = None) -> WorkerFacts:
    """Per layer: owned flag, tensor names/shapes/dtypes and bytes of its own storage (``walked_worker``)."""
    return walked_worker(worker, device)[0](leak)


def walked_worker(worker, device: str, *, storages: Optional[list] = None
                  ) -> tuple[Callable[[Optional[LeakFacts]], WorkerFacts], list]:
    """The worker's facts from one walk over its tensors, given its leak facts (``leak -> WorkerFacts``: they
    hold nothing of the cache, which the leak check can then drop), and (``storages`` given: each distinct
    storage is appended to it, ``bring_up.walked`` takes their weak references at once) the weak references to
    each tensor.

    Each tensor is looked at once (a case's ranks hold thousands of them) and its storage once: its address
    keys the layer's own bytes, the scratch views and the references; its byte range the measured bytes where
    the worker has none yet (``Worker.measured_bytes`` None: the union of the storages' ranges, as
    ``measure.distinct_storage_bytes`` counts it). Tensors of one geometry share one ``TensorFacts`` and layers
    of one set of names and geometries one mapping (frozen): the pickle that carries them to the parent holds
    each once, and the checks judge each mapping once."""
    cache = worker.cache
    tracking = storages is not None
    extent: dict = {}  # storage (device, address), as ``storage_key`` names it (the device object) -> its bytes
    tensor_refs: list = []
    keep, ref = tensor_refs.append, weakref.ref
    fresh = storages.append if tracking else None

    def storage_of(t) -> tuple[tuple, int, bool]:
        """(its storage's key, its bytes, whether this walk meets the storage first)"""
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
        key = (t.device, storage.data_ptr())
        known = extent.get(key)
        if known is None:
            extent[key] = nbytes
            if tracking:
                fresh(storage)
        elif nbytes > known:  # another storage object over the same address, longer (``from_blob``)
            extent[key] = nbytes
        if tracking:
            keep(ref(t))
        return key, nbytes, known is None

    scratch = {}
    for t in cache.scratch.values():
        key, nbytes, _ = storage_of(t)
        scratch[key] = nbytes
    geometries: dict = {}  # (shape, dtype) -> its TensorFacts
    last: dict = {}  # name -> (shape, dtype, TensorFacts) of the tensor of that name in the layer before
    shared: dict = {}  # ((name, id of its TensorFacts), ...) -> the one mapping of the layers with those tensors
    again: dict = {}  # id of a non-owned layer's first tensor -> (its mapping of tensors, (scratch views, facts))
    layers = []
    # (a LayerFacts made from one tuple in C: its generated ``__new__`` is a Python call per layer, ~1% of a draw)
    new_layer = functools.partial(tuple.__new__, LayerFacts)
    for layer in cache.layers:
        by_name = layer.tensors
        # A non-owned layer holding the very tensors of one walked before (the scratch views that a worker's
        # non-owned layers may share: a third of the tensors walked) is read once: the same storages (none new: no
        # own bytes, no storage reference), the same facts; only its tensors' references are taken again. (Looked
        # for where ``owned`` is False alone: an owned layer's tensors are its own, the look would cost them.)
        viewing = layer.owned is False
        if viewing:
            first = id(next(iter(by_name.values()), None))
            met = again.get(first)
            if met is not None and tuple(met[0]) == tuple(by_name) \
                    and all(map(operator.is_, met[0].values(), by_name.values())):
                if tracking:
                    tensor_refs.extend(map(ref, by_name.values()))
                layers.append(new_layer((layer.layer_id, layer.kind, bool(layer.owned), 0, *met[1])))
                continue
        if tracking:  # (one C-level pass per layer, not a call per tensor)
            tensor_refs.extend(map(ref, by_name.values()))
        tensors, signature = {}, []
        own_bytes, all_scratch = 0, True
        for name, t in by_name.items():
            # (inline: ``storage_of`` once per scratch tensor, this once per layer tensor, hundreds per worker)
            storage = t.untyped_storage()
            nbytes = storage.nbytes()
            key = (t.device, storage.data_ptr())
            known = extent.get(key)
            if known is None:
                extent[key] = nbytes
                own_bytes += nbytes
                if tracking:
                    fresh(storage)
            elif nbytes > known:
                extent[key] = nbytes
            if all_scratch and key not in scratch:  # (an owned layer's first tensor decides: no lookup after it)
                all_scratch = False
            shape, dtype = t.shape, t.dtype
            before = last.get(name)
            if before is not None and before[1] is dtype and before[0] == shape:
                found = before[2]
            else:
                found = geometries.get((shape, dtype))
                if found is None:
                    found = geometries[(shape, dtype)] = TensorFacts(
                        shape=tuple(shape), dtype=str(dtype).replace("torch.", ""), bytes=tensor_bytes(t))
                last[name] = (shape, dtype, found)
            tensors[name] = found
            signature.append(name)
            signature.append(id(found))
        read = (all_scratch and bool(tensors), shared.setdefault(tuple(signature), tensors))
        if viewing:
            again[first] = (by_name, read)
        layers.append(new_layer((layer.layer_id, layer.kind, bool(layer.owned), own_bytes, *read)))
    measured = worker.measured_bytes
    if measured is None:
        by_device: dict = {}  # (the device object: its name once per device, not once per storage)
        for (where, start), nbytes in extent.items():
            if nbytes:
                spans = by_device.get(where)
                if spans is None:
                    spans = by_device[where] = []
                spans.append((start, start + nbytes))
        by_name: dict[str, list] = {}
        for where, spans in by_device.items():
            by_name.setdefault(str(where), []).extend(spans)
        measured = sum(union_bytes(spans) for spans in by_name.values())
    facts = functools.partial(
        WorkerFacts,
        role=worker.role,
        plan_rank=worker.plan_rank,
        device=device,
        digest=cache.plan_digest,
        n_blocks=cache.n_blocks,
        split_size=cache.split_size,
        split_rank=cache.split_rank,
        split_group=tuple(cache.split_group),
        kv_layout=cache.kv_layout,
        measured_bytes=measured,
        scratch_bytes=sum(scratch.values()),
        scratch_tensors={n: tuple(t.shape) for n, t in cache.scratch.items()},  # (a torch.Size holds ints)
        layers=tuple(layers),
        received_digest=worker.message.digest,
        reported_rank=cache.rank,
        reported_role=cache.role,
        reported_device=str(cache.device),
        message=message_facts(worker.message, worker.plan_rank),
    )
    return lambda leak: facts(leak=leak), tensor_refs


# ---- reading facts: the one place that knows how a fact is shaped ----------------------------------


def fact_field(obj: Any, name: str, default: Any = None) -> Any:
    """``obj.name`` of a fact dataclass (``obj[name]`` of a mapping with the same field names, as reports and
    tests build them), or ``default`` when absent."""
    mapping = _IS_MAPPING.get(type(obj))
    if mapping is None:  # (once per type: the ABC's check costs more than the field, asked per rank of every check)
        mapping = isinstance(obj, Mapping)
        if len(_IS_MAPPING) < _TYPES_REMEMBERED:
            _IS_MAPPING[type(obj)] = mapping
    if mapping:
        return obj.get(name, default)
    return getattr(obj, name, default)


_TYPES_REMEMBERED = 64
_IS_MAPPING: dict[type, bool] = {}
"""A fact's type -> whether it is a ``Mapping`` (``fact_field``), for up to ``_TYPES_REMEMBERED`` types."""


def plan_of(facts: Sequence[Any]) -> Any:
    """The master's plan (rank 0 sends it), None without facts or when the master refused."""
    return fact_field(facts[0], "plan") if facts else None


def run_of(facts: Sequence[Any]) -> Any:
    """The RunSpec rank 0 brought up (the card-fitted run), None without facts."""
    return fact_field(facts[0], "run") if facts else None


def master_error(facts: Sequence[Any]) -> Optional[MasterError]:
    """The master's refusal or failure (rank 0's ``error``), None when it planned."""
    return fact_field(facts[0], "error") if facts else None


def rank_of(fact: Any) -> int:
    return int(fact_field(fact, "rank"))


def workers_of(fact: Any) -> Mapping[str, Any]:
    """Role -> the worker fact of that engine on this rank."""
    return fact_field(fact, "workers") or {}


def worker_of(fact: Any, role: str) -> Any:
    return workers_of(fact).get(role)


def owned_full(worker: Any) -> list[int]:
    """Full layers the worker holds storage for (its own report, measured from its tensors)."""
    return [int(fact_field(layer, "layer")) for layer in fact_field(worker, "layers") or ()
            if fact_field(layer, "kind") == "full" and fact_field(layer, "owned")]


def full_layers_held(worker: Any) -> list[int]:
    """Full layers the worker has a cache entry for, owned or a view of its scratch."""
    return [int(fact_field(layer, "layer")) for layer in fact_field(worker, "layers") or ()
            if fact_field(layer, "kind") == "full"]


def summarize(facts: list) -> dict:
    """Numbers a sweep aggregates: per-rank estimated vs measured bytes, blocks, savings (the default
    ``Suite.summarize``)."""
    plan = plan_of(facts)
    if plan is None:
        return {"error": str(master_error(facts))}
    measured = {f.rank: f.workers["target"].measured_bytes for f in facts if "target" in f.workers}
    return {
        "n_blocks": plan.n_blocks,
        "uniform_n_blocks": plan.uniform_n_blocks,
        "peak_bytes": plan.peak_bytes,
        "uniform_peak_bytes": plan.uniform_peak_bytes,
        "savings_bytes": plan.savings_bytes,
        "capacity_gain": plan.capacity_gain,
        "ranks": [
            {"rank": rp.rank, "estimated_bytes": rp.estimated_bytes, "measured_bytes": measured.get(rp.rank)}
            for rp in plan.ranks
        ],
    }
