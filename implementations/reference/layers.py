"""Which layers are full attention, and which carry a DSA indexer (FEATURE section 4)."""

from __future__ import annotations

from contract.errors import ConfigError
from contract.specs import FULL_ATTENTION_TYPES, ModelSpec


def is_full_layer_kind(model: ModelSpec, layer_id: int) -> bool:
    """True for a full-attention layer, False for a linear-attention (GDN) one.

    ``layer_types`` ``full_attention`` / ``attention`` is full, every other value
    linear (upstream's rule); without ``layer_types`` the interval decides.
    """
    if model.layer_types is None:
        interval = model.full_attention_interval
        return interval <= 1 or (layer_id + 1) % interval == 0
    return model.layer_types[layer_id] in FULL_ATTENTION_TYPES


def check_layer_types(model: ModelSpec) -> None:
    """``layer_types``, when given, names every layer once with a known kind."""
    if model.layer_types is None:
        return
    if len(model.layer_types) != model.num_hidden_layers:
        raise ConfigError(
            "model.layer_types",
            f"{len(model.layer_types)} entries",
            f"one entry per layer (model.num_hidden_layers {model.num_hidden_layers})",
        )


def full_layers(model: ModelSpec) -> tuple[int, ...]:
    """Ids of the full-attention layers, ascending."""
    return _layer_kinds(model)[0]


def linear_layers(model: ModelSpec) -> tuple[int, ...]:
    """Ids of the linear-attention layers, ascending."""
    return _layer_kinds(model)[1]


_KINDS_REMEMBERED = 1024
_kinds: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = {}
"""(num_hidden_layers, layer_types, full_attention_interval) -> (full layers, linear layers), the oldest dropped
past ``_KINDS_REMEMBERED``."""


def _layer_kinds(model: ModelSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(full layers, linear layers), once per distinct layer count, ``layer_types`` and interval: the only fields
    the rule reads (a plan asks some ten times, and models that differ in other fields share them); the last model
    asked about (held) answered without building and hashing its key (its ``layer_types`` hashed afresh each time)."""
    global _last_asked
    last = _last_asked
    if last[0] is model:
        return last[1]
    key = (model.num_hidden_layers, model.layer_types, model.full_attention_interval)
    try:
        kinds = _kinds.get(key)
    except TypeError:  # layer_types that cannot be hashed (a list where a tuple belongs): worked out each time
        return _worked_out_kinds(model)
    if kinds is None:
        kinds = _worked_out_kinds(model)
        if len(_kinds) >= _KINDS_REMEMBERED:
            del _kinds[next(iter(_kinds))]
        _kinds[key] = kinds
    _last_asked = (model, kinds)
    return kinds


_last_asked: tuple = (None, None)
"""(model, its kinds) of the last ``_layer_kinds`` ask that could be kept, the model held."""


def _worked_out_kinds(model: ModelSpec) -> tuple[tuple[int, ...], tuple[int, ...]]:
    check_layer_types(model)
    full = tuple(l for l in range(model.num_hidden_layers) if is_full_layer_kind(model, l))
    held = set(full)
    return full, tuple(l for l in range(model.num_hidden_layers) if l not in held)


def has_indexer(model: ModelSpec) -> bool:
    """A DSA model (index_n_heads > 0) carries an indexer cache on every full layer."""
    return model.index_n_heads > 0


def indexer_layers(model: ModelSpec) -> tuple[int, ...]:
    """Ids of the layers that carry an indexer cache."""
    return full_layers(model) if has_indexer(model) else ()
