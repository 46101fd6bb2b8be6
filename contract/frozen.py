"""Frozen dataclasses made without their generated ``__init__``, for the paths that make thousands per
exploration: that ``__init__`` sets each field by ``object.__setattr__``, one call per field, about three times
the cost of setting them all at once. The one owner of the trick for the harness and the implementations (the
explorer's TC-03 facts, the reference's plans; the oracle, which imports nothing of contract/, keeps its own for
its capacities); for dataclasses with no ``__post_init__`` and no derived state.
"""

from __future__ import annotations

from dataclasses import MISSING, fields, replace
from typing import Any, TypeVar

T = TypeVar("T")

_SHAPES: dict = {}
"""Dataclass -> (its field names, {name: plain default} of the fields that have one)."""


def _shape(cls) -> tuple:
    shape = _SHAPES.get(cls)
    if shape is None:
        names = frozenset(f.name for f in fields(cls))
        shape = _SHAPES[cls] = (names, {f.name: f.default for f in fields(cls) if f.default is not MISSING})
    return shape


def made(cls: type[T], values: dict[str, Any]) -> T:
    """``cls(**values)``: every field given, or the ones left out having a plain default. Anything else (a name that
    is not a field, a field without a plain default left out: a ``default_factory`` is never called here) goes to
    ``cls(**values)`` itself, so its error is the constructor's."""
    names, defaults = _shape(cls)
    if values.keys() != names:
        if not (values.keys() <= names and names - values.keys() <= defaults.keys()):
            return cls(**values)
        values = {**defaults, **values}
    new = object.__new__(cls)
    vars(new).update(values)
    return new


def replaced(obj: T, changes: dict[str, Any]) -> T:
    """``dataclasses.replace(obj, **changes)``: ``obj``'s fields (nothing else it keeps) with ``changes``; a name
    that is not a field goes to ``dataclasses.replace`` itself (its error)."""
    names, _ = _shape(type(obj))
    if not changes.keys() <= names:
        return replace(obj, **changes)
    state = vars(obj)
    new = object.__new__(type(obj))
    vars(new).update({name: state[name] for name in names}, **changes)
    return new
