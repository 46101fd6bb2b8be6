"""What the harness reads from outside, bounded: files, JSON, YAML, numbers.

Every file option (``model_path``, ``draft_path``, ``--parallel-config``, topology
files, matrices) and every number typed by a user goes through here, so a hostile
or broken input is one ``ConfigError`` (a ``UserError``) naming the field and the limit, never a
MemoryError, RecursionError, a hang on a FIFO or a silently reinterpreted value.

The limits are far above any real input: an upstream ``config.json`` is a few KB
and nested 3 deep, a topology file a few hundred bytes, a model at most a few
hundred layers.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any, Union

import yaml

from contract.errors import ConfigError

MAX_FILE_BYTES = 4 * 1024 * 1024
"""Largest input file read (a real config.json is ~10 KB)."""
MAX_NESTING = 64
"""Deepest JSON / YAML nesting accepted (a real config.json nests 3 deep)."""
MAX_YAML_NODES = 100_000
"""Most YAML nodes a file may stand for once its aliases are expanded (a topology file has a few dozen):
aliases let 300 bytes stand for a billion strings, which any later walk or message would expand."""
MAX_INT_DIGITS = 18
"""Longest integer accepted, in decimal digits (fits int64)."""
MAX_LAYERS = 10_000
"""Most layers a model may declare (real models have < 200; the planning benchmark uses 1,000)."""
MAX_WORLD_SIZE = 4096
"""Most ranks a configuration may declare."""

_ASCII_INT = re.compile(r"[+-]?[0-9]+")


def read_input_file(path: Union[str, Path], field: str, *, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The UTF-8 text of a regular file of at most ``max_bytes``; ``UserError`` otherwise.

    The file type is checked before opening, so a FIFO, socket or device (``/dev/zero``)
    is refused without blocking or reading it.
    """
    p = Path(path)
    allowed = f"a readable regular file of at most {max_bytes} bytes"
    try:
        st = os.stat(p)
    except OSError as exc:
        raise ConfigError(field, str(path), allowed, exc.strerror or type(exc).__name__) from None
    if not stat.S_ISREG(st.st_mode):
        kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a regular file (FIFO, device or socket)"
        raise ConfigError(field, str(path), allowed, f"it is {kind}")
    if st.st_size > max_bytes:
        raise ConfigError(field, str(path), allowed, f"it has {st.st_size} bytes")
    try:
        with open(p, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ConfigError(field, str(path), allowed, exc.strerror or type(exc).__name__) from None
    if len(data) > max_bytes:  # grew since stat, or a /proc-like file reporting size 0
        raise ConfigError(field, str(path), allowed, f"it has more than {max_bytes} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(field, str(path), "UTF-8 text", f"byte {exc.start} is not UTF-8") from None


def nesting_depth(text: str) -> int:
    """Deepest bracket nesting (``[`` / ``{``) outside JSON strings: a linear scan, no recursion."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def loads_json(text: str, field: str, source: str = "JSON") -> Any:
    """JSON with bounded nesting and integer size; NaN / Infinity refused. ``source`` (a path) names the text in errors."""
    depth = nesting_depth(text)
    if depth > MAX_NESTING:
        raise ConfigError(field, f"JSON nested {depth} deep", f"JSON nested at most {MAX_NESTING} deep")

    def parse_int(digits: str) -> int:
        if len(digits.lstrip("+-")) > MAX_INT_DIGITS:
            raise ConfigError(field, f"{digits[:12]}... ({len(digits)} digits)",
                            f"an integer of at most {MAX_INT_DIGITS} digits")
        return int(digits)

    def parse_constant(name: str) -> Any:
        raise ConfigError(field, name, "a finite JSON number (NaN and Infinity are not JSON)")

    try:
        return json.loads(text, parse_int=parse_int, parse_constant=parse_constant)
    except json.JSONDecodeError as exc:
        raise ConfigError(field, f"{source} line {exc.lineno} column {exc.colno}", "valid JSON", exc.msg) from None
    except RecursionError:  # belt and braces: the scan above should have caught it
        raise ConfigError(field, "deeply nested JSON", f"JSON nested at most {MAX_NESTING} deep") from None


def loads_yaml(text: str, field: str, source: str = "YAML", *, unique_keys: bool = False) -> Any:
    """``yaml.safe_load`` (data only) with bounded nesting and size, both counted after aliases are expanded:
    at most ``MAX_NESTING`` deep and ``MAX_YAML_NODES`` nodes; an alias inside its own anchor is refused.
    ``unique_keys``: a key given twice in one mapping is refused naming its path and lines (YAML keeps the
    last silently)."""
    depth = nesting_depth(text)
    if depth > MAX_NESTING:
        raise ConfigError(field, f"YAML nested {depth} deep", f"YAML nested at most {MAX_NESTING} deep")
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_yaml_graph(node, field)
        if unique_keys:
            _check_unique_keys(node, field, source)
        return loader.construct_document(node)
    except RecursionError:
        raise ConfigError(field, "deeply nested YAML", f"YAML nested at most {MAX_NESTING} deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{source} line {mark.line + 1} column {mark.column + 1}" if mark is not None else source
        raise ConfigError(field, where, "valid YAML", str(getattr(exc, "problem", "") or exc).strip()) from None
    finally:
        loader.dispose()


def _check_unique_keys(root: Any, field: str, source: str) -> None:
    """``ConfigError`` for the first mapping key given twice (each node visited once: the graph is bounded)."""
    todo, seen_nodes = [(root, "")], set()
    while todo:
        node, path = todo.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.MappingNode):
            lines: dict = {}
            for key, value in node.value:
                name = str(key.value) if isinstance(key, yaml.ScalarNode) else f"<{key.tag}>"
                inner = f"{path}.{name}" if path else name
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if name in lines:
                        raise ConfigError(field, f"{inner} given twice (lines {lines[name]} and "
                                          f"{key.start_mark.line + 1} of {source})", "each key once in its mapping",
                                          "YAML would keep the last value silently")
                    lines[name] = key.start_mark.line + 1
                todo.append((value, inner))
        elif isinstance(node, yaml.SequenceNode):
            todo += [(item, f"{path}[{i}]") for i, item in enumerate(node.value)]


def _check_yaml_graph(root: Any, field: str) -> None:
    """Nodes and depth of a YAML node graph as the data would hold them (an alias counts its anchor's
    whole subtree again), each shared node measured once; ``ConfigError`` past a bound."""
    deep = ConfigError(field, f"YAML nested more than {MAX_NESTING} deep (aliases expanded)",
                       f"YAML nested at most {MAX_NESTING} deep")
    measured: dict[int, tuple[int, int]] = {}  # id(node) -> (nodes, height)
    open_nodes: set[int] = set()

    def measure(node: Any, level: int) -> tuple[int, int]:
        key = id(node)
        if key not in measured:
            if key in open_nodes:
                raise ConfigError(field, "a YAML alias inside its own anchor", "YAML data without a cycle")
            if level > MAX_NESTING:
                raise deep
            open_nodes.add(key)
            if isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            elif isinstance(node, yaml.MappingNode):
                children = [part for pair in node.value for part in pair]
            else:
                children = []
            nodes, height = 1, 1
            for child in children:
                child_nodes, child_height = measure(child, level + 1)
                nodes += child_nodes
                height = max(height, child_height + 1)
                if nodes > MAX_YAML_NODES:
                    raise ConfigError(field, f"YAML of more than {MAX_YAML_NODES} nodes (aliases expanded)",
                                      f"YAML of at most {MAX_YAML_NODES} nodes")
            open_nodes.discard(key)
            measured[key] = (nodes, height)
        nodes, height = measured[key]
        if level + height - 1 > MAX_NESTING:
            raise deep
        return nodes, height

    measure(root, 1)


def parse_int(field: str, value: object, allowed: str = "a whole number") -> int:
    """A strict integer: an ``int`` (not bool) or ASCII digits with an optional sign, of at most
    ``MAX_INT_DIGITS`` digits; ``allowed`` says what the caller's field takes.

    Python's ``int()`` also reads ``0_2`` and full-width or other Unicode digits
    (``２``) as 2; a flag value typed by a user must not change meaning that way. A float,
    even ``2.0``, is not a whole number as a user would spell one (gflags refuses it too).
    """
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(field, value, allowed)
    if isinstance(value, int):
        if len(str(abs(value))) > MAX_INT_DIGITS:
            text = str(value)
            raise ConfigError(field, f"{text[:12]}... ({len(text)} digits)", f"{allowed} of at most {MAX_INT_DIGITS} digits")
        return value
    text = value.strip()
    if not _ASCII_INT.fullmatch(text) or len(text.lstrip("+-")) > MAX_INT_DIGITS:
        raise ConfigError(field, value, allowed,
                          f"ASCII digits only, at most {MAX_INT_DIGITS} of them (no '_', no other scripts)")
    return int(text)


def finite(field: str, value: float, allowed: str = "a finite number") -> float:
    """``value`` unless it is NaN or infinite (every comparison with NaN is False)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return value
    raise ConfigError(field, value, allowed)


def at_most(field: str, value: int, maximum: int, what: str) -> int:
    """An upper bound with the reason, e.g. layer counts."""
    if value > maximum:
        raise ConfigError(field, value, f"at most {maximum} ({what})")
    return value
