"""Outputs of planning: the layout and memory estimate a master computes.

A ``KVPlan`` is plain data (picklable, JSON-able): the master computes it once,
engines hand it to their workers, and every worker must hold the same one (same
``digest``). Byte fields carry their unit in the name.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from functools import cached_property
from operator import attrgetter
from typing import Optional


@dataclass(frozen=True, kw_only=True)
class RankPlan:
    """What one rank owns and is expected to allocate for the target model."""

    rank: int
    node: int
    card: int
    dp_rank: int
    cp_rank: int
    tp_rank: int
    split_group: int
    """Index into ``KVPlan.split_groups``."""
    split_rank: int
    """Position of this rank inside its split group."""
    owned_full_layers: tuple[int, ...]
    estimated_bytes: int
    """Target KV this rank allocates: n_blocks * (owned + scratch) + linear state."""
    draft_estimated_bytes: int = 0
    """KV of the draft model on this rank (speculative only)."""


@dataclass(frozen=True, kw_only=True)
class CacheCapacity:
    """One engine's cache figures, as upstream's ``KVCacheCapacity`` carries them.

    What the speculative block count reads (upstream
    ``estimate_speculative_kv_cache_blocks``); slot sizes are bytes per token slot.
    """

    cache_size_bytes: int
    """The engine's per-rank KV budget."""
    block_size: int
    slot_size: int = 0
    index_slot_size: int = 0
    scale_slot_size: int = 0
    num_full_attention_layers: int = 0
    num_indexer_layers: int = 0
    n_layers: int = 0
    linear_cache_bytes: int = 0
    """Linear-state reservation (target only)."""
    n_blocks: int = 0
    """The engine's own block count (used when target and draft do not share a device)."""


@dataclass(frozen=True, kw_only=True)
class DraftPlan:
    """The speculative draft model's KV: never split, shares the target's n_blocks."""

    model: str
    num_layers: int
    full_layers: tuple[int, ...]
    layer_bytes_per_block: tuple[int, ...]
    body_tp1: bool = False
    """The draft body runs at TP 1 and its KV takes its own shape; else the target's cache shape."""

    @property
    def bytes_per_block(self) -> int:
        return sum(self.layer_bytes_per_block)


TREE_GROUPS_NOTE = "split groups from the compiled tree"
"""How a plan's note begins when a compiled tree formed its split groups (its groups role, or read off its worker
role's masks): TC-03 quotes it with a grouping problem (what the groups come from, and that no role of the tree
reads the topology)."""
TREE_CARDS_NOTE = ("no card check in the compiled tree: nothing in its start-up path refuses two ranks of a split "
                   "group on one card or a card planned past its HBM (FEATURE 4's card checks are the adaptation's)")
"""A compiled tree's plan note: it is credited with no card refusal, and TC-03 quotes this where the spec refuses
a placement or finds a card problem."""
TREE_MESSAGE_NOTE = "tampered-layout check not judged"
"""How a plan's note begins when no code of the implementation checks a layout its workers receive against the
one the master published (a compiled tree: its workers take their split from their own s and rank, and what they
check is their start-up CHECKs). The rest of the note says, in the tree's terms, where its workers take their split
from. TC-04 then judges no tampered layout and shows the note as not judged: the note can only withdraw a check
from the verdict, visibly, never pass one."""


@dataclass(frozen=True, kw_only=True)
class KVPlan:
    """Layout + estimate for one configuration (FEATURE sections 4 to 6)."""

    implementation: str
    model: str
    world_size: int
    dp_size: int
    cp_size: int
    attn_tp_size: int
    split_size: int
    active: bool
    block_size: int
    kv_layout: str
    num_layers: int
    full_layers: tuple[int, ...]
    layer_bytes_per_block: tuple[int, ...]
    """One entry per layer id; 0 for linear-attention layers."""
    scratch_bytes_per_block: int
    """One full layer's bytes (with the index slot if any layer has one); 0 if not active."""
    additional_bytes_per_block: int
    """The draft's full-attention bytes per block (speculative), else 0."""
    linear_state_bytes: int
    """Per-rank reservation for linear-attention conv + recurrent state."""
    budget_bytes: int
    """Per-rank KV budget before the linear-state reservation."""
    available_bytes: int
    """Per rank, after the linear-state reservation."""
    split_groups: tuple[tuple[int, ...], ...]
    """Global ranks of each split group, in split-rank order."""
    layer_owner: tuple[tuple[int, int], ...]
    """(full layer id, owner split rank) for every full layer; empty when not active."""
    n_blocks: int
    uniform_n_blocks: int
    peak_bytes: int
    mean_bytes: int
    uniform_peak_bytes: int
    """Uniform allocation at the same n_blocks, for the savings figure."""
    savings_bytes: int
    capacity_gain: Optional[float]
    """n_blocks / uniform_n_blocks at the same budget; None (JSON null) when no uniform block fits (FEATURE 6)."""
    ranks: tuple[RankPlan, ...]
    draft: Optional[DraftPlan] = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    slot_size: int = 0
    """Bytes per token slot of one full layer's KV (upstream ``slot_size``)."""
    index_slot_size: int = 0
    """Bytes per token slot of one indexer cache (0 without a DSA indexer)."""
    scale_slot_size: int = 0
    """Bytes per token slot of quantization scales (0 unless the KV cache is quantized)."""
    num_indexer_layers: int = 0
    """Full layers that carry an indexer cache."""
    linear_slot_size: int = 0
    """Bytes of one sequence slot of one linear layer's state (conv + recurrent)."""
    num_linear_state_blocks: int = 0
    """Linear-state sequence slots per linear layer (upstream ``num_linear_state_blocks``)."""
    published_layouts: tuple = ()
    """Layouts the implementation's own code publishes beside ``layer_owner`` (a tree's master or engine
    layout): ``(source, ((full layer id, tp ranks holding it, KV heads of each), ...))`` per layout."""

    @property
    def num_full_attention_layers(self) -> int:
        return len(self.full_layers)

    @property
    def num_linear_attention_layers(self) -> int:
        return self.num_layers - len(self.full_layers)

    @property
    def linear_cache_bytes(self) -> int:
        """Upstream ``linear_cache_size_in_bytes``: the linear-state reservation."""
        return self.linear_state_bytes

    def owner_of(self, layer_id: int) -> Optional[int]:
        """Owner split rank of a full layer, or None (linear layer, or not active)."""
        return dict(self.layer_owner).get(layer_id)

    def to_json(self) -> dict:
        out = asdict(self)
        out["num_full_attention_layers"] = self.num_full_attention_layers
        out["num_linear_attention_layers"] = self.num_linear_attention_layers
        out["linear_cache_bytes"] = self.linear_cache_bytes
        out["digest"] = self.digest
        return out

    @cached_property
    def digest(self) -> str:
        """Stable hash of the whole plan; workers compare it to detect a diverging layout.

        Computed once per plan object (a frozen dataclass: its fields cannot change after)."""
        body = json.dumps(_plain(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()[:16]


_SCALARS = frozenset((int, str, float, bool, type(None)))
_FIELD_NAMES: dict = {}
"""Dataclass type -> (its field names, in order; a callable giving their values as a tuple)."""


def _plain(value):
    """What ``json.dumps`` writes for ``asdict(value)``, built without copying: a dataclass as a dict of its
    fields, a tuple or list as a list (JSON writes both alike), a dict as a dict, anything else as it is
    (``digest``: the same text as ``asdict``, at a fraction of its cost). A scalar field is taken as it is,
    without a call (a plan has hundreds: its ranks' fields), and a dataclass's fields are read in one call."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is tuple or kind is list:
        return [v if type(v) in _SCALARS else _plain(v) for v in value]
    named = _FIELD_NAMES.get(kind)
    if named is None:
        if not hasattr(kind, "__dataclass_fields__"):
            return {k: _plain(v) for k, v in value.items()} if isinstance(value, dict) else value
        names = tuple(f.name for f in fields(kind))
        named = _FIELD_NAMES[kind] = (names, _field_values(names))
    names, values = named
    return {name: v if type(v) in _SCALARS else _plain(v) for name, v in zip(names, values(value))}


def _field_values(names: tuple[str, ...]):
    """A callable giving an object's attributes ``names`` as a tuple, in order (``attrgetter``: one call)."""
    if not names:
        return lambda value: ()
    get = attrgetter(*names)
    return get if len(names) > 1 else lambda value: (get(value),)
