"""A drawn configuration as overrides in the harness vocabulary, and as a ready command.

Every field of the drawn ``RunSpec`` is written out (``model.<field>=``, ``cache.<field>=``,
...) on top of a shipped option of each group, so the command composes exactly the
configuration that was explored (``testcases/explore`` checks this by composing it). A
random link matrix is written to a YAML file named by its content under the temp folder
(``hardware.topology=<path>``); shipped fixtures are named.
"""

from __future__ import annotations

import dataclasses
import shlex
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from harness.explore.strategies import RANDOM_TOPOLOGY_PREFIX
from implementations.specs import RunSpec, Topology

TOPOLOGY_FOLDER = "lwsplit-explore"
"""Folder under the temp folder that holds the random link matrices of printed commands."""
BASE_OPTIONS = {"model": "deepseek_v32", "draft": "deepseek_mtp", "parallel": "tp4", "layerwise": "off"}
"""The shipped option each group starts from; every field is then overridden."""


def value_text(value) -> str:
    """A value as a Hydra override writes it: ``null``, ``true``, ``[a,b]``, ``2.0``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(value_text(v) for v in value) + "]"
    return str(value)


def _fields(prefix: str, spec) -> list[str]:
    return [f"{prefix}.{f.name}={value_text(getattr(spec, f.name))}" for f in dataclasses.fields(spec)]


def topology_file(topology: Topology, folder: Optional[Path] = None) -> Path:
    """Write a drawn link matrix as a YAML topology (content-addressed: the same matrix, the same file)."""
    folder = Path(folder) if folder is not None else Path(tempfile.gettempdir()) / TOPOLOGY_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{topology.name}.yaml"
    rows = "\n".join("  - [" + ", ".join(row) + "]" for row in topology.links)
    text = f"name: {topology.name}\ncards: [{', '.join(topology.cards)}]\nlinks:\n{rows}\n"
    if not path.is_file() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)  # never half-written
    return path


def overrides(run: RunSpec, implementation: Sequence[str], *, folder: Optional[Path] = None) -> list[str]:
    """The overrides composing ``run`` under ``implementation`` (``implementation=<name>`` plus any
    ``implementation.*`` keys)."""
    hw = run.hardware
    topology = hw.topology.name
    if topology.startswith(RANDOM_TOPOLOGY_PREFIX):
        topology = str(topology_file(hw.topology, folder))
    out = [f"model={BASE_OPTIONS['model']}", *_fields("model", run.model)]
    if run.draft is None:
        out.append("draft=none")
    else:
        out += [f"draft={BASE_OPTIONS['draft']}", *_fields("draft", run.draft)]
    out += [f"parallel={BASE_OPTIONS['parallel']}", *_fields("parallel", run.parallel),
            f"layerwise={BASE_OPTIONS['layerwise']}", *_fields("layerwise", run.layerwise),
            *_fields("cache", run.cache),
            f"hardware={hw.name}", f"hardware.num_cards={hw.num_cards}", f"hardware.topology={topology}"]
    if run.placement is not None:
        out.append(f"placement={value_text(run.placement)}")
    return out + list(implementation)


def command(run: RunSpec, implementation: Sequence[str], *, folder: Optional[Path] = None) -> str:
    """``python -m harness.plan --table <overrides>``, quoted for a POSIX shell."""
    return "python -m harness.plan --table " + " ".join(shlex.quote(o) for o in overrides(run, implementation,
                                                                                          folder=folder))
