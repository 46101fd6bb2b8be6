"""The field mutant: the reference with exactly one reported field (or one tensor property) corrupted.

Where a rule mutant breaks a rule, a field mutant breaks one *fact*: one field of the master's
``KVPlan`` (or of one ``RankPlan``, or of the ``DraftPlan``), one field of the ``WorkerKVCache`` a
worker of one role returns, or one property of a tensor it exposes (shape, dtype, layout axes,
owned flag, storage). The rest of the implementation runs unchanged on the corrupted value, as a
port that got that one figure wrong would. ``harness.coverage`` runs the TC matrix against one
field mutant per field and records which cases catch it: a field no case catches is a fact no
check compares with the spec.

Selected by overriding the implementation node (``implementation._target_=implementations.mutants.fields.FieldMutant
+implementation.field='KVPlan.n_blocks'``, what ``harness.coverage.fields`` does), or directly as
``FieldMutant(field="KVPlan.n_blocks")``. A per-rank field corrupts the last rank (at dp > 1
a rank of the last dp group); a worker field corrupts that rank's worker of the named role.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from contract.errors import ConfigError
from contract.interface import ROLES, WorkerKVCache
from contract.plan_types import DraftPlan, KVPlan, RankPlan
from implementations.reference.impl import ReferenceImplementation

TENSOR_PROPERTIES = ("shape", "dtype", "layout_axes", "owned", "storage")
"""What a worker exposes of each layer's tensors besides the cache's fields."""
LABELS = {"KVPlan.implementation": "the implementation's own name, not a fact of the layout",
          "KVPlan.notes": "free text for people, not a fact of the layout; FEATURE 6's two notes are checked by "
                          "their phrase (rules F6.raises-peak, F6.gain-undefined)",
          "KVPlan.published_layouts": "a C++ tree's own master and engine layouts (TC-04 judges them); the "
                                      "reference publishes none, so there is nothing to corrupt"}
"""Plan fields that state nothing to compare with the spec (no field mutant)."""


def field_ids() -> tuple[str, ...]:
    """Every corruptible field: ``KVPlan.<f>``, ``RankPlan.<f>``, ``DraftPlan.<f>``,
    ``WorkerKVCache[<role>].<f>`` and ``tensor[<role>].<property>`` for both roles."""
    out = [f"{cls.__name__}.{f.name}" for cls in (KVPlan, RankPlan, DraftPlan) for f in dataclasses.fields(cls)]
    out = [f for f in out if f not in LABELS]
    for role in ROLES:
        out += [f"WorkerKVCache[{role}].{f.name}" for f in dataclasses.fields(WorkerKVCache)]
        out += [f"tensor[{role}].{p}" for p in TENSOR_PROPERTIES]
    return tuple(out)


def _corrupt(value: Any) -> Any:
    """A different value of the same type: numbers +1, a flag flipped, a tuple/list with its last item
    corrupted (or one item added to an empty one), a string changed."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 0.5
    if isinstance(value, str):
        other = {"heads_major": "tokens_major", "tokens_major": "heads_major"}
        return other.get(value, value + "_x")
    if dataclasses.is_dataclass(value):
        return None  # a nested plan (the DraftPlan) left out
    if isinstance(value, (tuple, list)):
        items = list(value)
        if items and dataclasses.is_dataclass(items[-1]) or items and not isinstance(items[-1], (int, str, tuple)):
            return type(value)(items[:-1])  # a record of many (RankPlan, LayerCache) left out
        if not items:
            items = [0]
        elif isinstance(items[-1], (tuple, list)) and len(items) > 1 and len(items[-1]) == len(items[0]):
            items[0], items[-1] = items[-1], items[0]  # two groups swapped: split_groups
            if items[0] == items[-1]:
                items[-1] = _corrupt(items[-1])
        else:
            items[-1] = _corrupt(items[-1])
        return type(value)(items)
    if isinstance(value, dict):
        items = dict(value)
        if items:
            items.pop(sorted(items)[-1])
        else:
            items["extra"] = None
        return items
    if value is None:
        return 0
    raise TypeError(f"no corruption for {type(value).__name__}")


class FieldMutant(ReferenceImplementation):
    """The reference with one field or tensor property corrupted (``field``: one of ``field_ids()``)."""

    name = "field_mutant"

    def __init__(self, field: str) -> None:
        if field not in field_ids():
            raise ConfigError("implementation.field", field, f"one of {', '.join(field_ids())}")
        self.field = field
        self.name = "field_" + field.replace("[", "_").replace("].", "_").replace(".", "_")
        self.kind, _, self.attr = field.partition(".")

    # ---- master --------------------------------------------------------------------------------

    def plan(self, run) -> KVPlan:
        plan = super().plan(run)
        if self.kind == "KVPlan":
            return dataclasses.replace(plan, **{self.attr: _corrupt(getattr(plan, self.attr))})
        if self.kind == "RankPlan":
            last = plan.ranks[-1]
            bad = dataclasses.replace(last, **{self.attr: _corrupt(getattr(last, self.attr))})
            return dataclasses.replace(plan, ranks=plan.ranks[:-1] + (bad,))
        if self.kind == "DraftPlan" and plan.draft is not None:
            draft = dataclasses.replace(plan.draft, **{self.attr: _corrupt(getattr(plan.draft, self.attr))})
            return dataclasses.replace(plan, draft=draft)
        return plan

    # ---- worker --------------------------------------------------------------------------------

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        if self.kind not in (f"WorkerKVCache[{role}]", f"tensor[{role}]") or rank != message.world_size - 1:
            return cache
        if self.kind.startswith("WorkerKVCache"):
            setattr(cache, self.attr, _corrupt(getattr(cache, self.attr)))
        else:
            _corrupt_tensor(cache, self.attr)
        return cache


def _corrupt_tensor(cache: WorkerKVCache, prop: str) -> None:
    full = [layer for layer in cache.layers if layer.kind == "full"]
    owned = [layer for layer in full if layer.owned] or full
    layer = owned[-1]
    name = sorted(layer.tensors)[0]
    t = layer.tensors[name]
    if prop == "shape":
        layer.tensors[name] = t[..., :-1]
    elif prop == "dtype":
        same_size = {1: torch.uint8 if t.dtype != torch.uint8 else torch.int8, 2: torch.int16, 4: torch.int32}
        layer.tensors[name] = t.view(same_size[t.element_size()])
    elif prop == "layout_axes":
        layer.tensors[name] = t.transpose(1, 2)  # heads-major <-> tokens-major, the same bytes
    elif prop == "owned":
        layer.owned = not layer.owned
    elif prop == "storage":
        views = [l for l in full if not l.owned]
        if views:  # a non-owned layer with storage of its own
            views[0].tensors = {n: v.clone() for n, v in views[0].tensors.items()}
        else:  # an owned layer's second tensor inside its first one's storage
            names = sorted(layer.tensors)
            first, second = layer.tensors[names[0]], layer.tensors[names[-1]]
            if len(names) > 1 and first.dtype == second.dtype and first.numel() >= second.numel():
                layer.tensors[names[-1]] = first.reshape(-1)[:second.numel()].view(second.shape)
