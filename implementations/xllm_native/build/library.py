"""Compile an xLLM tree's layerwise split planning code into a shared library, once per source.

What is compiled, unchanged, from the tree (``TreeMap`` names each role's file):

* ``estimation``  the whole file (``estimate_kv_cache_capacity``, ``build_layer_cache_owned``,
  ``resolve_indexer_cache_enabled_layers``); its header sits next to it (``.h``);
* ``layout``      the header with ``LayerwiseSplitLayout`` (owner rank, ``owns``) and the
  enablement checks;
* ``speculative`` ``SpeculativeEngine::calculate_kv_cache``, cut out of its file;
* ``master``      ``validate_layerwise_split_size_startup_config``, cut out of its file;
* ``utils``       the helpers the estimation calls (``ceil_div``, the model-type helpers,
  ``kv_split_size_effective``, ``enable_kvcache_split``), cut out of ``util/utils.h``
  (the whole header pulls protobuf and the model registry);
* ``support``     further files compiled whole (``block_utils.cpp``, ``pretty_print.cpp``).

Functions are cut out mechanically (``extract``) into the build folder, never into the
repository; ``#line`` keeps compiler errors and CHECK locations on the tree's own lines.
The project's shims (``cpp/parallel_config.h``, ``cpp/engine_shim.h``) stand in for what those
functions read from their classes; ``cpp/binding.cpp`` is the one C entry point.

The library is cached under ``~/.cache/lwsplit/native`` (``LWSPLIT_NATIVE_CACHE`` overrides):
``<key>-<deps>/`` where ``key`` hashes the role files, the project's C++ sources, the compiler and
its flags, and ``deps`` hashes every header of the tree the compiler read (its ``-MD`` list, checked
again on each load). A build runs in a temporary folder under a file lock and is renamed into place
after its manifest is written, so concurrent processes build once and a failed build leaves nothing.
Only the user's own cache counts (``cachefs``): the folder is 0700 and must be the user's, an entry is
used only when it is the user's and its library matches the sha256 its manifest records, and headers
that are links or that a new file could shadow are watched; the compiler runs bounded, in its own
process group.

This module runs a build (``build``); each part of it is a module of its own: the generated sources
(``generate``), the compiler runs (``commands``), the cache keys (``keys``), the cache folder and its entries
(``cache``), the headers the compiler read (``deps``), each compiled object of a port or tensor library
(``objects``) and a failed compile said as one error (``diagnose``).
"""

from __future__ import annotations

import errno
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path
from typing import Optional

from contract.errors import UserError
from implementations.xllm_native.build import cachefs, objects
from implementations.xllm_native.build.cache import ENV_CACHE as ENV_CACHE  # impl.py's name for it
from implementations.xllm_native.build.cache import Built, cache_error, cache_root, find, locked, place, private_cache
from implementations.xllm_native.build.commands import (
    CXX_FLAGS,
    PORT_FLAGS,
    TENSOR_FLAGS,
    build_timeout,
    compile_commands,
    compiler_id,
    compiler_timeout,
    tensor_commands,
    torch_build,
)
from implementations.xllm_native.build.deps import deps_digest, parse_deps, shadow_watch_of, watched_roots
from implementations.xllm_native.build.diagnose import compile_error, tensor_compile_error
from implementations.xllm_native.build.generate import generate
from implementations.xllm_native.build.keys import ABI, source_key, tensor_key
from implementations.xllm_native.tree.files import ENV_SOURCE as ENV_SOURCE  # impl.py's name for it
from implementations.xllm_native.tree.files import FIELD, TreeMap


def build(tree: TreeMap, *, root: Optional[Path] = None, tensors: bool = False, kv_layout: Optional[str] = None) -> Built:
    """The cached library for ``tree``, building it once (under a lock) when no valid entry exists;
    ``tensors``: its allocation's torch library (the manifest's ``allocation.torch``) instead, the build for
    a hardware profile's ``kv_layout`` where the manifest has ``allocation.layout_defines`` (None: its first).

    SIGTERM and SIGHUP (when nobody else handles them) and Ctrl-C during it kill the compiler's process
    group and remove the temporary folder before the process ends."""
    root = cache_root() if root is None else root
    try:
        os.fsencode(str(tree.root)).decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(FIELD, str(tree.root), "a path that is valid UTF-8",
                        "the generated sources name the tree's files by their paths") from None
    with cachefs.terminate_as_exception():
        root = private_cache(root)
        if tensors and (tree.manifest is None or tree.manifest.tensors is None):
            raise UserError(FIELD, str(tree.root), "a manifest whose allocation is compiled against torch "
                            "(allocation.torch: true)")
        if tensors and kv_layout is not None and tree.manifest.tensors.layout_defines \
                and kv_layout not in tree.manifest.tensors.layouts():
            raise UserError("hardware.kv_layout", kv_layout,
                            f"one of {', '.join(tree.manifest.tensors.layouts())} (the layouts manifest "
                            f"{tree.manifest.name} builds its allocation for: allocation.layout_defines)")
        key = tensor_key(tree, kv_layout) if tensors else source_key(tree)
        found = find(root, key)
        if found is not None:
            return found
        with locked(root, key, "build"):
            found = find(root, key)
            if found is not None:
                return found
            return _build_locked(tree, root, key, tensors, kv_layout)


_FULL = ("No space left on device", "Disk quota exceeded")


def _build_locked(tree: TreeMap, root: Path, key: str, tensors: bool = False, kv_layout: Optional[str] = None) -> Built:
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=root))
    except OSError as exc:
        raise cache_error(root, f"cannot make a build folder: {exc.strerror}") from None
    try:
        gen = tmp / "gen"
        gen.mkdir()
        if tensors:
            library = tmp / "liblwsplit_tensors.so"
            commands = tensor_commands(tree, gen, library, kv_layout)
        else:
            unity = generate(tree, gen)
            library = tmp / "liblwsplit_native.so"
            commands = compile_commands(tree, gen, unity, library)
        started = time.monotonic()
        limit = build_timeout()
        cxx_id = compiler_id(commands[0][0])
        extra = json.dumps(torch_build(), sort_keys=True).encode() if tensors else b""
        objects_run: dict = {"compiled": [], "reused": []}
        for cmd in commands:
            reused = objects.compile_once(root, cmd, gen, cxx_id, extra,
                                          lambda c: _run(c, tree, root, tmp, gen, limit, tensors))
            if objects.is_compile(cmd):
                objects_run["reused" if reused else "compiled"].append(os.path.basename(cmd[cmd.index("-o") + 1]))
        if not library.is_file():
            raise compile_error(tree, "(the compiler wrote no library)")
        if tree.port or tensors:  # one dependency file per object, each a rule of its own, as make reads them
            rules = [d.read_text(errors="surrogateescape") for d in sorted((gen / "obj").glob("*.d"))]
            (gen / "deps.d").write_text("\n".join(rules) + "\n", errors="surrogateescape")
        depfile = (gen / "deps.d").read_text(errors="surrogateescape")
        deps = parse_deps(depfile, watched_roots(tree), gen)
        if not any(cachefs.inside(p, str(tree.root)) for p in deps):
            raise UserError(FIELD, str(tree.root), "a compiler that writes its dependency list (-MD)",
                            f"{gen / 'deps.d'} names no file of the tree")
        cachefs.make_private(library)
        manifest = {
            "abi": ABI, "source": str(tree.root), "files": tree.files, "key": key,
            "manifest": str(tree.manifest.path) if tree.manifest is not None else None,
            "compiler": cxx_id.decode(errors="replace").splitlines()[:1],
            "flags": list(TENSOR_FLAGS if tensors else PORT_FLAGS if tree.port else CXX_FLAGS), "command": cmd, "commands": len(commands),
            "seconds": round(time.monotonic() - started, 1), "objects": objects_run,
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.machine(),
            "library": library.name, "library_sha256": cachefs.private_sha(library),
            "deps": deps, "deps_digest": deps_digest(deps),
            "shadow_watch": shadow_watch_of(depfile, commands[0], gen, watched_roots(tree)),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        cachefs.make_private(tmp / "manifest.json")
        final = place(tmp, root, f"{key}-{manifest['deps_digest']}")
        return Built(library=final / library.name, manifest=manifest)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if cachefs.inside(os.path.abspath(str(exc.filename or "")), str(root)) or exc.errno in (
                errno.ENOSPC, errno.EDQUOT, errno.EROFS):
            raise cache_error(root, f"{exc.filename or root}: {exc.strerror}",
                               "a cache folder you own, writable, with room for a build") from None
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _run(cmd: list, tree: TreeMap, root: Path, tmp: Path, gen: Path, limit: float, tensors: bool) -> None:
    """One compiler run of a build, bounded; its output appended to ``build.log``; a failure as one error."""
    try:
        rc, log = cachefs.run_bounded(cmd, timeout=limit, cwd=str(gen))
    except cachefs.Timeout:
        raise compiler_timeout(cmd[0], limit, f"compiling {tree.root}") from None
    except OSError as exc:
        raise UserError("CXX", cmd[0], "a C++20 compiler this user can run", exc.strerror) from None
    with open(tmp / "build.log", "a", errors="replace") as build_log:
        build_log.write(" ".join(cmd) + "\n" + log)
    if rc != 0:
        full = [line.strip() for line in log.splitlines() if any(s in line for s in _FULL)]
        if full:  # the linker's "ld returned 1" is the disk's doing, not the tree's
            raise cache_error(root, f"the compiler ran out of room: {full[0]}",
                               "a cache folder with room for a build") from None
        raise tensor_compile_error(tree, log) if tensors else compile_error(tree, log)
