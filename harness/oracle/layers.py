"""FEATURE section 4: which layers are full attention (and which carry an indexer; a draft's layer count)."""

from __future__ import annotations

from functools import lru_cache

from harness.oracle.inputs import FULL_TYPES, _opt

# ---- section 4: which layers are full attention -------------------------------------------


def is_full_attention_layer(model, layer: int) -> bool:
    """Section 4 (upstream ``is_full_attention_layer``): ``layer_types`` first, else the interval."""
    return _is_full(layer, getattr(model, "layer_types", None) or (), _opt(model, "full_attention_interval", 1))


def _is_full(layer: int, layer_types, interval: int) -> bool:
    """``is_full_attention_layer`` with the model's two fields read (once per model where every layer is asked)."""
    if 0 <= layer < len(layer_types):
        return layer_types[layer] in FULL_TYPES
    if interval <= 1:
        return True
    return (layer + 1) % interval == 0


def expected_full_layers(model) -> tuple:
    """Section 4: ids of the full-attention layers."""
    try:
        return _full_layers(model)
    except TypeError:  # an unhashable model object: computed each time
        return _full_layers.__wrapped__(model)


@lru_cache(maxsize=1024)
def _full_layers(model) -> tuple:
    """``expected_full_layers`` once per distinct (frozen) model: every check asks again."""
    layer_types = getattr(model, "layer_types", None) or ()
    interval = _opt(model, "full_attention_interval", 1)
    n = model.num_hidden_layers
    if type(interval) is not int or type(n) is not int:
        return tuple(layer for layer in range(n) if _is_full(layer, layer_types, interval))
    # _is_full's two rules as ranges (a drawn model is new to this cache: about 30 calls of _is_full a draw saved)
    typed = min(len(layer_types), max(n, 0))
    head = [layer for layer in range(typed) if layer_types[layer] in FULL_TYPES]
    if interval <= 1:
        return (*head, *range(typed, n))
    return (*head, *range(typed + (-(typed + 1)) % interval, n, interval))  # the first layer past the types with
    # (layer + 1) % interval == 0, then every interval-th


def expected_linear_layer_count(model) -> int:
    """Section 4: how many linear-attention layers (``len(expected_linear_layers(model))``, no tuple made)."""
    return model.num_hidden_layers - len(expected_full_layers(model))


def expected_linear_layers(model) -> tuple:
    """Section 4: ids of the linear-attention (GDN) layers."""
    full = set(expected_full_layers(model))
    return tuple(layer for layer in range(model.num_hidden_layers) if layer not in full)


def has_linear_attention_layers(model) -> bool:
    """Section 3 (upstream ``has_linear_attention_layers``): any non-full ``layer_types`` entry,
    or, without ``layer_types``, ``full_attention_interval > 1``."""
    layer_types = getattr(model, "layer_types", None)
    if layer_types:
        return any(t not in FULL_TYPES for t in layer_types)
    return _opt(model, "full_attention_interval", 1) > 1


def expected_indexer(model) -> bool:
    """Section 5: a DSA indexer (``index_n_heads > 0``) on every full-attention layer."""
    return _opt(model, "index_n_heads", 0) > 0


def draft_num_layers(draft) -> int:
    """Section 6: a draft engine's layers (upstream: ``num_nextn_predict_layers``; a draft spec
    that does not say has that many layers)."""
    nextn = int(_opt(draft, "num_nextn_predict_layers", 0))
    return nextn if nextn > 0 else draft.num_hidden_layers
