"""What the rest of the harness may know of a C++ tree, asked through one function (``tree_facts``): which tree
and manifest it is, the files its build compiles, the backend each allocation build selects, its own tests.

The harness decides from these facts alone (which of upstream's predictions apply, whether a tree is upstream's
by content, whether it has tests of its own); it never reads a manifest's defines or the wing's modules.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from implementations.xllm_native import manifest as manifest_mod
from implementations.xllm_native.tree.files import TreeMap, plays_groups
from implementations.xllm_native.tree.resolve import ENV_BASE_SOURCE as ENV_BASE_SOURCE  # a run's command line names it
from implementations.xllm_native.tree.resolve import resolve

UPSTREAM_MANIFEST = manifest_mod.SHIPPED_DIR / "upstream_494f293b5.yaml"
"""The shipped manifest of upstream xLLM 494f293b5's tree."""
BACKEND_DEFINE_PREFIX = "USE_"
"""An upstream build selects its backend with one define ``USE_<BACKEND>`` (``USE_ILU``); none is its CPU build."""


@dataclass(frozen=True, kw_only=True)
class TreeFacts:
    """One tree as the harness may know it."""

    root: Path
    """The tree's folder (a port's files may sit below the folder given: an xLLM fork's ``xllm/``)."""
    manifest_name: str
    manifest_path: Path
    why: str
    """Why that manifest: given, ``files`` re-pointing upstream's roles, the tree's own, or detected."""
    port: bool
    """Built from its own sources by its manifest (``compile: sources``); False: upstream's cut-out build."""
    upstream_manifest: bool
    """Built by the shipped manifest of upstream 494f293b5 (``UPSTREAM_MANIFEST``)."""
    planning_files: tuple[str, ...]
    """The files, relative to ``root``, an upstream-cut planning build compiles (each role's file, the support
    files and headers the cut names, the estimation header); empty for a port."""
    allocation_files: tuple[str, ...]
    """The allocation's sources, relative to ``root`` (empty when the manifest compiles no allocation)."""
    allocation_backends: Optional[Mapping[str, str]]
    """Per KV layout (``manifest.KV_LAYOUTS``), the backend its allocation build selects (``ilu``; ``cpu`` without
    a ``USE_*`` define); None when the manifest compiles no allocation against torch."""
    own_tests: Optional[str]
    """The tree's own GoogleTest file, relative to ``root`` (the manifest's ``tests``, built with a port's
    sources); None when it has none."""


def tree_facts(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None,
               manifest: Optional[str] = None) -> TreeFacts:
    """The facts of the tree ``implementation.source_dir`` (else ``$LWSPLIT_XLLM_SRC``) names, with
    ``implementation.files`` and ``implementation.manifest``; ``UserError`` when it does not resolve."""
    tree, m, why = resolve(source_dir, files, manifest)
    return facts_of(tree, why)


def facts_of(tree: TreeMap, why: str = "") -> TreeFacts:
    """The facts of a resolved tree (``tree_facts`` without resolving it again)."""
    m = tree.manifest
    t = m.tensors
    backends = None if t is None else {layout: backend(t.defines_for(layout)) for layout in manifest_mod.KV_LAYOUTS}
    return TreeFacts(root=tree.root, manifest_name=m.name, manifest_path=m.path, why=why, port=tree.port,
                     upstream_manifest=m.path == UPSTREAM_MANIFEST.resolve(),
                     planning_files=() if tree.port else planning_files(tree),
                     allocation_files=tuple(sorted(t.sources)) if t is not None else (),
                     allocation_backends=backends, own_tests=m.tests if m.tests and tree.port else None)


def planning_files(tree: TreeMap) -> tuple[str, ...]:
    """The files, relative to the tree, that the upstream-cut planning build of ``tree`` compiles."""
    skipped = {"include_dirs"} | (set() if plays_groups(tree) else {"groups"})
    planning = {p.strip() for role, value in tree.files.items() if role not in skipped
                for p in str(value).split(",") if p.strip()}
    planning.add(str(Path(tree.files["estimation"]).with_suffix(".h")))
    return tuple(sorted(planning))


def backend(defines) -> str:
    """The backend an upstream build's defines select (``USE_ILU`` -> ``ilu``); ``cpu`` with none."""
    backends = sorted(d[len(BACKEND_DEFINE_PREFIX):].lower() for d in defines if d.startswith(BACKEND_DEFINE_PREFIX))
    return backends[0] if len(backends) == 1 else "cpu" if not backends else "+".join(backends)

