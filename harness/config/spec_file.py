"""A ``RunSpec`` written and read as data: a JSON file of its fields, read back to the same spec.

The explorer writes the configuration it found failing to such a file and prints
``python -m harness.plan --table --run-spec FILE implementation=...``, which plans that very
spec (no overrides composed back from it). Reading checks every field against the spec's types
(``ConfigError`` naming the field) and the harness's bounds (``build.check_bounds``).
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any, Union

from contract import bounded_inputs
from contract.errors import ConfigError
from contract.specs import RunSpec
from harness.config.build import check_bounds
from harness.files import write_atomic

OPTION = "--run-spec"
"""The option of ``python -m harness.plan`` that reads such a file."""


def to_data(run: RunSpec) -> dict:
    """The spec's fields as JSON values (tuples as lists, nested specs as objects)."""
    return json.loads(json.dumps(dataclasses.asdict(run)))


def to_text(run: RunSpec) -> str:
    return json.dumps(to_data(run), indent=1, sort_keys=True) + "\n"


def write(path: Union[str, Path], run: RunSpec) -> Path:
    """``run`` as JSON at ``path``, written atomically, readable by this user only."""
    return write_atomic(path, to_text(run), mode=0o600)


def read(path: Union[str, Path]) -> RunSpec:
    """The spec in the JSON file ``path`` (read bounded: a FIFO or a huge file is refused unread)."""
    text = bounded_inputs.read_input_file(Path(path), OPTION, max_bytes=bounded_inputs.MAX_FILE_BYTES)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(OPTION, str(path), "a JSON file of a RunSpec's fields", str(exc)) from None
    return from_data(data)


def from_data(data: Any) -> RunSpec:
    """The spec ``data`` (``to_data``) describes; ``ConfigError`` naming the first field that is not the spec's."""
    return check_bounds(_value(RunSpec, data, "run"))


def _value(annotation: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Union:  # Optional[X]
        if value is None and type(None) in args:
            return None
        return _value(next(a for a in args if a is not type(None)), value, where)
    if dataclasses.is_dataclass(annotation):
        return _spec(annotation, value, where)
    if origin is tuple:
        if not isinstance(value, list):
            raise ConfigError(f"{OPTION} {where}", value, "a list")
        inner = args[0]
        return tuple(_value(inner, v, f"{where}[{i}]") for i, v in enumerate(value))
    ok = {bool: isinstance(value, bool), int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, (int, float)) and not isinstance(value, bool), str: isinstance(value, str)}
    if not ok.get(annotation, False):
        raise ConfigError(f"{OPTION} {where}", value, _KINDS.get(annotation, "a value of the spec's type"))
    return float(value) if annotation is float else value


_KINDS = {bool: "a bool (true or false)", int: "an int", float: "a number", str: "a string"}


def _spec(spec: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise ConfigError(f"{OPTION} {where}", value, f"an object of {spec.__name__}'s fields")
    fields = {f.name: f for f in dataclasses.fields(spec)}
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ConfigError(f"{OPTION} {where}.{unknown[0]}", value[unknown[0]], f"a field of {spec.__name__}: "
                          f"{', '.join(fields)}")
    hints = typing.get_type_hints(spec)
    values = {name: _value(hints[name], v, f"{where}.{name}") for name, v in value.items()}
    missing = [name for name, f in fields.items() if name not in value
               and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"{OPTION} {where}.{missing[0]}", None, f"given: {spec.__name__} has no default for it")
    return spec(**values)
