"""Cache keys: the hash of everything that decides a library before the compiler runs (role files, the
project's C++, the compiler and its flags, the manifest, torch)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Optional

from contract.errors import UserError
from implementations.xllm_native.build import cachefs, commands
from implementations.xllm_native.build.commands import (
    CXX_FLAGS,
    PORT_FLAGS,
    TENSOR_FLAGS,
    compiler,
    compiler_id,
    port_sources,
    tensor_sources,
    torch_paths,
)
from implementations.xllm_native.tree.files import ROLES, TreeMap, cut_defines, plays_groups

ABI = "lwsplit-native-1"
"""Bumped when the binding's protocol changes: part of every cache key."""
PROJECT_SOURCES = ("binding.cpp", "protocol.h", "request_args.h", "engine_shim.h", "parallel_config.h", "worker_shim.h",
                   "mapping_shim.h", "engine_options_shim.h", "allocation_shim.h")
TENSOR_ABI = "lwsplit-tensors-2"
"""Bumped when ``cpp/alloc_protocol.h``'s protocol changes: part of every tensor library's key."""


def tensor_key(tree: TreeMap, kv_layout: Optional[str] = None) -> str:
    """Hash of what decides a tensor library: the manifest, every source and the glue, the project's protocol
    headers and shims, the compiler, the flags, the layout's defines and the torch it is built against."""
    m = tree.manifest
    t = m.tensors
    parts = [TENSOR_ABI.encode(), m.path.read_bytes(), os.fsencode(str(tree.root)), os.fsencode(str(m.base_root()))]
    project = sorted(p for p in commands.CPP_DIR.iterdir() if p.suffix in (".h", ".cpp"))  # a unity glue includes its siblings
    for path in [*tensor_sources(tree), *project]:
        parts.append(_hashed("implementation.manifest", str(m.path), path, tree.root))
    if t.shims:
        for path in sorted(m.beside(t.shims).rglob("*")):
            if path.is_file():
                parts.append(os.fsencode(str(path)) + _hashed("implementation.manifest", str(m.path), path, tree.root))
    cxx = compiler()
    return sha(*parts, cxx.encode(), compiler_id(cxx), " ".join(TENSOR_FLAGS).encode(),
                " ".join(t.defines_for(kv_layout)).encode(), json.dumps(commands.torch_build(), sort_keys=True).encode())[:20]


def sha(*parts: bytes) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())
    return h.hexdigest()


def too_large(name: str, value: str, exc: cachefs.TooLarge) -> UserError:
    return UserError(name, value, f"source files of at most {cachefs.MAX_SOURCE_BYTES >> 20} MiB",
                     f"{exc.path} holds more; planning code is never that large")


def source_key(tree: TreeMap) -> str:
    """Hash of what decides the build before the compiler runs: role files, the project's C++,
    the map (its include folders in their order among it), the compiler and its flags, the torch
    headers' location; for a port, its manifest and every source it compiles. Files are hashed in chunks;
    one above ``cachefs.MAX_SOURCE_BYTES`` is refused."""
    if tree.port:
        m = tree.manifest
        parts = [ABI.encode(), m.path.read_bytes(), os.fsencode(str(tree.root)), os.fsencode(str(m.base_root()))]
        for path in [*port_sources(tree), commands.CPP_DIR / "protocol.h", commands.CPP_DIR / "request_args.h"]:
            parts.append(_hashed("implementation.manifest", str(m.path), path, tree.root))
        cxx = compiler()
        return sha(*parts, cxx.encode(), compiler_id(cxx), " ".join(PORT_FLAGS).encode())[:20]
    files = [(f"implementation.files.{r}", tree.files[r], tree.path(r)) for r in ROLES]
    files += [("implementation.files.support", tree.files["support"], p) for p in tree.paths("support")]
    files += [("implementation.files.utils_headers", tree.files["utils_headers"], p)
              for p in tree.paths("utils_headers")]
    header = tree.path("estimation").with_suffix(".h")
    files += [("implementation.files.estimation", str(header), header)]
    files += [("implementation.files.worker_checks", tree.files["worker_checks"], tree.path("worker_checks"))]
    files += [(f"implementation.files.{r}", tree.files[r], tree.path(r)) for r in ("engine_options", "engine_platform")]
    files += [(f"implementation.files.{r}", tree.files[r], tree.path(r)) for r in ("allocation_checks", "indexer_checks")]
    if plays_groups(tree):
        files += [("implementation.files.groups", tree.files["groups"], tree.path("groups"))]
    parts = [ABI.encode(), json.dumps(tree.files, sort_keys=True).encode(), os.fsencode(str(tree.root))]
    parts += [_hashed(name, value, path, tree.root) if path.is_file() else b"" for name, value, path in files]
    parts += [(commands.CPP_DIR / s).read_bytes() for s in PROJECT_SOURCES]
    cxx = compiler()
    parts += [cxx.encode(), compiler_id(cxx), " ".join(CXX_FLAGS).encode(), json.dumps(torch_paths()).encode()]
    if cut_defines(tree):  # none (upstream's manifest): the key as before
        parts.append(" ".join(cut_defines(tree)).encode())
    return sha(*parts)[:20]


def _hashed(name: str, value: str, path: Path, root: Path) -> bytes:
    """``path``'s sha256 for a key (in chunks); one above ``cachefs.MAX_SOURCE_BYTES`` or unreadable is refused,
    naming ``name``."""
    try:
        return cachefs.file_sha(path).encode()
    except cachefs.TooLarge as exc:
        raise too_large(name, value, exc) from None
    except OSError as exc:
        raise UserError(name, value, f"a readable file of {root}", f"{path}: {exc.strerror}") from None
