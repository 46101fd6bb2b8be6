"""The oracle's own readers of the two outside formats FEATURE.md names (sections 2 and 4).

Kept apart from ``contract/server_flags.py`` on purpose: the expected values must not depend
on the parsers of the code under test. Two small readers:

- a link matrix as ``nvidia-smi topo -m`` / ``ixsmi topo -m`` print it (tab separated,
  header row of device names, optional ANSI underline codes, then a Legend), or the
  harness's YAML twin (``cards:`` + ``links:``);
- the layerwise gflag spellings (``--enable_layerwise_split=true
  --layerwise_split_size=2``; gflags booleans also read t/f/y/n/yes/no/1/0 and the bare
  ``--flag`` / ``--noflag`` forms) and a ParallelConfig JSON's ``layerwise_split_size``.

This module imports nothing from ``implementations/``.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import yaml

from harness.paths import TOPOLOGY_DIR  # the one owner of paths (imports nothing from implementations/)

LINK_KINDS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_DEVICE = re.compile(r"^GPU\d+$")
_NVLINK = re.compile(r"^NV(\d+)$")


@dataclass(frozen=True)
class OracleTopology:
    """Cards and their link matrix, as the oracle read them (FEATURE section 4)."""

    name: str
    cards: tuple
    links: tuple
    source: str
    """Where it came from: a file path, or ``run`` when copied from the RunSpec."""


def is_link(value: str) -> bool:
    return value in LINK_KINDS or bool(_NVLINK.match(value))


def parse_topology_text(text: str, name: str = "topology", source: str = "text") -> OracleTopology:
    """``nvidia-smi topo -m`` text -> cards (GPU rows, in order) and their GPU x GPU links."""
    header: Optional[list] = None
    rows = {}
    order = []
    for raw in text.splitlines():
        line = _ANSI.sub("", raw).rstrip("\n")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.strip().startswith("Legend"):
            break
        fields = [f.strip() for f in line.split("\t")]
        if header is None:
            if fields and fields[0] == "" and any(_DEVICE.match(f) for f in fields[1:]):
                header = fields[1:]
            continue
        if _DEVICE.match(fields[0]):
            rows[fields[0]] = fields[1:]
            order.append(fields[0])
    if header is None or not order:
        raise ValueError(f"{source}: no `topo -m` header row with GPU columns")
    columns = {dev: i for i, dev in enumerate(header)}
    links = []
    for dev in order:
        row = []
        for other in order:
            if other not in columns or columns[other] >= len(rows[dev]):
                raise ValueError(f"{source}: row {dev} has no column {other}")
            value = rows[dev][columns[other]]
            if not is_link(value):
                raise ValueError(f"{source}: link {dev}-{other} is {value!r}; allowed: X, PIX, PXB, PHB, NODE, SYS, NV#")
            row.append(value)
        links.append(tuple(row))
    return OracleTopology(name=name, cards=tuple(order), links=tuple(links), source=source)


def parse_topology_yaml(text: str, name: str = "topology", source: str = "yaml") -> OracleTopology:
    """The YAML twin: ``cards: [...]`` and ``links: [[...], ...]``."""
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "cards" not in data or "links" not in data:
        raise ValueError(f"{source}: expected keys cards and links")
    cards = tuple(str(c) for c in data["cards"])
    links = tuple(tuple(str(v).strip() for v in row) for row in data["links"])
    if len(links) != len(cards) or any(len(row) != len(cards) for row in links):
        raise ValueError(f"{source}: links must be {len(cards)} x {len(cards)}")
    for row in links:
        for value in row:
            if not is_link(value):
                raise ValueError(f"{source}: link {value!r}; allowed: X, PIX, PXB, PHB, NODE, SYS, NV#")
    return OracleTopology(name=str(data.get("name", name)), cards=cards, links=links, source=source)


def load_topology(name_or_path: Union[str, Path]) -> OracleTopology:
    """A fixture by name (``conf/topology/<name>.txt``, else ``.yaml``) or by path."""
    path = Path(name_or_path)
    if not path.is_file():
        for suffix in (".txt", ".yaml"):
            candidate = TOPOLOGY_DIR / f"{name_or_path}{suffix}"
            if candidate.is_file():
                path = candidate
                break
        else:
            raise FileNotFoundError(f"no topology fixture {name_or_path!r} in {TOPOLOGY_DIR}")
    return _parsed(path.read_text(), path.suffix, path.stem, str(path))


@functools.lru_cache(maxsize=64)
def _parsed(text: str, suffix: str, name: str, source: str) -> OracleTopology:
    """One parse per distinct file text (the checks of every case ask for the same fixtures);
    an OracleTopology is frozen, so it is shared."""
    if suffix in (".yaml", ".yml"):
        return parse_topology_yaml(text, name=name, source=source)
    return parse_topology_text(text, name=name, source=source)


# ---- gflags -------------------------------------------------------------------------------

_TRUE = ("true", "t", "yes", "y", "1")
_FALSE = ("false", "f", "no", "n", "0")


def parse_gflag_bool(value: str) -> bool:
    low = value.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"not a gflags boolean: {value!r}; allowed: true/false, t/f, yes/no, y/n, 1/0")


SEMANTICS = ("adaptation", "upstream")
"""FEATURE section 2 (v2.1): the adaptation's enable flag and s > 1, or upstream's s > 1 alone."""


def _check_semantics(semantics: str) -> None:
    if semantics not in SEMANTICS:
        raise ValueError(f"semantics {semantics!r}; allowed: adaptation, upstream")


def parse_layerwise_gflags(text: str, semantics: str = "adaptation") -> dict:
    """``--enable_layerwise_split[=B] --layerwise_split_size=N`` (also ``-flag``, ``--noflag``,
    ``--flag value``) -> the layerwise keys it sets: ``{"enable": bool, "split_size": int}``
    (only those present). Other flags are ignored; the last spelling of a flag wins. Under
    upstream semantics the enable flag is an unknown flag (ValueError)."""
    _check_semantics(semantics)
    tokens = shlex.split(text, comments=True)
    out = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        i += 1
        if not tok.startswith("-"):
            continue
        body = tok.lstrip("-")
        name, eq, value = body.partition("=")
        if name in ("enable_layerwise_split", "noenable_layerwise_split") and semantics == "upstream":
            raise ValueError(f"{tok}: unknown command line flag for an upstream build (no enable flag)")
        if name == "enable_layerwise_split":
            out["enable"] = parse_gflag_bool(value) if eq else True
        elif name == "noenable_layerwise_split" and not eq:
            out["enable"] = False
        elif name == "layerwise_split_size":
            if not eq:
                if i >= len(tokens):
                    raise ValueError("--layerwise_split_size needs a value")
                value = tokens[i]
                i += 1
            try:
                out["split_size"] = int(value.strip())
            except ValueError:
                raise ValueError(f"--layerwise_split_size={value!r} is not an integer") from None
    return out


def parse_parallel_config_json(text: str, semantics: str = "adaptation") -> dict:
    """A ParallelConfig JSON: ``split_size`` from ``layerwise_split_size`` (upstream writes it only
    when not 1) and, under the adaptation only, ``enable`` from ``enable_layerwise_split``."""
    _check_semantics(semantics)
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("ParallelConfig JSON must be an object")
    out = {}
    if "layerwise_split_size" in data:
        value = data["layerwise_split_size"]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"layerwise_split_size={value!r} is not an integer")
        out["split_size"] = value
    if "enable_layerwise_split" in data:
        if semantics == "upstream":
            raise ValueError("enable_layerwise_split: upstream's ParallelConfig has no enable key")
        value = data["enable_layerwise_split"]
        if not isinstance(value, bool):
            raise ValueError(f"enable_layerwise_split={value!r} is not a JSON boolean")
        out["enable"] = value
    return out


def split_active(semantics: str, settings: dict) -> bool:
    """FEATURE section 2's one rule per semantics, on what a route set (absent: the defaults)."""
    _check_semantics(semantics)
    s = settings.get("split_size", 1)
    if semantics == "upstream":
        return s > 1
    return bool(settings.get("enable", False)) and s > 1


def expected_split_active(semantics: str, settings: dict) -> bool:
    """Section 2 (v2.1): whether the split is on, given what the flags set, under ``semantics``:
    adaptation: enable and s > 1; upstream: s > 1 alone (no enable flag)."""
    return split_active(semantics, settings)
