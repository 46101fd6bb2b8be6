"""Which tree and which manifest a configuration names: the manifest given, upstream's when ``files`` re-point
its roles, the tree's own, or the shipped one whose ``detect`` fits; and a port's base tree."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping, Optional

from contract.errors import UserError
from implementations.xllm_native import manifest as manifest_mod
from implementations.xllm_native.tree.files import ENV_SOURCE, FIELD, TreeMap, port_tree, tree_map


def resolve(source_dir: Optional[str] = None, files: Optional[Mapping[str, str]] = None,
            manifest: Optional[str] = None) -> tuple[TreeMap, manifest_mod.Manifest, str]:
    """The tree to build, its manifest and why that manifest: ``manifest`` when given; upstream's
    when ``files`` re-point upstream's roles; else the manifest the tree carries (``lwsplit-manifest.yaml``),
    else the shipped manifest whose ``detect`` fits the tree."""
    given = source_dir or os.environ.get(ENV_SOURCE) or None
    if manifest:
        m = manifest_mod.load(manifest)
        why = f"implementation.manifest={m.path}"
    elif files:
        m = manifest_mod.load(manifest_mod.SHIPPED_DIR / "upstream_494f293b5.yaml")
        why = "implementation.files re-point upstream's roles"
    else:
        if not given:
            raise UserError(FIELD, None,
                            f"an xLLM source tree: implementation.source_dir=<path> or ${ENV_SOURCE}")
        root = Path(str(given)).expanduser()
        if not root.is_dir():
            raise UserError(FIELD, str(given), "an existing folder holding an xLLM source tree")
        m, why, found = manifest_mod.for_tree(root.resolve())
        given = str(found)  # a port's files may sit below the folder given (an xLLM fork's xllm/)
    if m.compile == "upstream-cut":
        tree = tree_map(source_dir, {**m.files, **dict(files or {})})
        if manifest:
            manifest_mod.check_tree(m, tree.root)
        else:
            manifest_mod.check_tensors(m, tree.root)
        return TreeMap(root=tree.root, files=tree.files, manifest=m), m, why
    if not given:
        raise UserError(FIELD, None, f"the tree manifest {m.name} describes: "
                        f"implementation.source_dir=<path> or ${ENV_SOURCE}")
    tree = port_tree(m, Path(str(given)))
    manifest_mod.check_tree(m, tree.root)
    return tree, m, why


ENV_BASE_SOURCE = "LWSPLIT_XLLM_BASE_SRC"
"""The base manifest's tree when neither the manifest (``base_source_dir``) nor ``implementation.base_source_dir``
names it."""
BASE_FIELD = "implementation.base_source_dir"


def base_tree_dir(m: manifest_mod.Manifest, base_source_dir: Optional[str] = None) -> tuple[Optional[Path], str]:
    """The base manifest's tree (None when nothing names it) and what named it: the manifest's
    ``base_source_dir``, else ``implementation.base_source_dir``, else ``$LWSPLIT_XLLM_BASE_SRC``."""
    for given, why in ((m.base_source_dir and str(m.beside(m.base_source_dir)), f"{m.path}: base_source_dir"),
                       (base_source_dir, BASE_FIELD), (os.environ.get(ENV_BASE_SOURCE), f"${ENV_BASE_SOURCE}")):
        if given:
            root = Path(str(given)).expanduser()
            if not root.is_dir():
                raise UserError(BASE_FIELD if why != f"{m.path}: base_source_dir" else f"{manifest_mod.FIELD}={m.path}: "
                                "base_source_dir", str(given),
                                f"an existing folder holding the tree of base manifest {m.base_manifest.name}")
            return root.resolve(), why
    return None, ""


def base_missing_reason(m: manifest_mod.Manifest) -> str:
    return (f"the tree of its base {m.base_manifest.name} is not given (the manifest's base_source_dir, "
            f"{BASE_FIELD}=<path> or ${ENV_BASE_SOURCE})")


def base_error(m: manifest_mod.Manifest, root: Path, exc: UserError) -> UserError:
    """A base that does not resolve or compile: named as the base's, never as the port's."""
    return UserError(f"{manifest_mod.FIELD}={m.path}: base", m.base,
                     f"a base tree that builds as its manifest {m.base_manifest.name} builds it",
                     f"the base {m.base_manifest.name} (tree {root}) failed, not the port: "
                     f"{exc.detail or exc}" + (f" [{exc.field}]" if exc.detail else ""))


def resolve_base(m: manifest_mod.Manifest, base_source_dir: Optional[str] = None
                 ) -> Optional[tuple[TreeMap, manifest_mod.Manifest]]:
    """The base manifest's tree and manifest, checked (None: no base manifest, or its tree not given)."""
    if m.base_manifest is None:
        return None
    root, _why = base_tree_dir(m, base_source_dir)
    if root is None:
        return None
    try:
        tree, bm, _ = resolve(str(root), None, str(m.base_manifest.path))
    except UserError as exc:
        raise base_error(m, root, exc) from None
    return tree, bm
