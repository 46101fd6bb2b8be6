"""The object cache: one entry per compiled translation unit of a port or a tensor library, so that a build
whose library key is new (another manifest, another glue) compiles only the sources whose command or
content differ, and links.

An object's key (``object_key``) hashes everything that decides its bytes before the compiler runs: the
compiler (its path and ``--version``), the whole compile command (flags, defines, include folders and their
order, the source's path) less the names of the build folder's own outputs (``-o``, ``-MF``), the source's
content, and what the build adds (torch's version, headers and ABI for a tensor library). Its entry,
``<key>-<deps>/`` beside the libraries, holds the object, its ``-MD`` rule and a ``manifest.json``, and is
judged by the library's rules (``cache.find``): the user's own, the object's sha256 the manifest's, every
file the compiler read outside the system folders (the source, the tree's, the base's, the glue's and the
project's headers and shims) unchanged, no new header shadowing one of them. An object is written into a
temporary folder and renamed into place whole (``cache.place``), under the object's own lock, so
concurrent builds compile it once; it is copied out of the entry through a checked descriptor, its sha256
compared again (``reuse``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from implementations.xllm_native.build import cachefs
from implementations.xllm_native.build.cache import find, locked, place
from implementations.xllm_native.build.deps import deps_digest, header_sha, search_lists
from implementations.xllm_native.build.keys import sha

OBJECT_ABI = "lwsplit-object-1"
"""Bumped when an object entry's layout changes: part of every object's key."""
OBJECT_NAME = "object.o"
_OUTPUTS = ("-o", "-MF")
"""The options whose value is a file of the build folder: left out of the key (no byte of the object)."""


def is_compile(cmd: list) -> bool:
    """A command that compiles one source into one object (``-c src -o obj``), not a link."""
    return "-c" in cmd and "-o" in cmd and "-MF" in cmd


def _value(cmd: list, opt: str) -> str:
    return cmd[cmd.index(opt) + 1]


def object_key(cmd: list, compiler_id: bytes, extra: bytes = b"") -> str:
    """``obj-<hash>`` of what decides the object ``cmd`` writes: ``compiler_id`` (``g++ --version``), the
    command with the values of ``-o`` and ``-MF`` left out, the source's content, ``extra``."""
    kept, skip = [], False
    for arg in cmd:
        if skip:
            skip = False
            continue
        skip = arg in _OUTPUTS
        kept.append(arg)
    source = Path(_value(cmd, "-c"))
    return "obj-" + sha(OBJECT_ABI.encode(), compiler_id, "\0".join(kept).encode(),
                        cachefs.file_sha(source).encode(), extra)[:24]


def reuse(root: Path, key: str, cmd: list) -> bool:
    """Whether a valid entry of ``key`` exists; then its object is copied to ``cmd``'s ``-o`` (its sha256
    checked on the descriptor read) and its ``-MD`` rule to ``-MF``, as the compiler would have written them."""
    found = find(root, key)
    if found is None or not isinstance(found.manifest.get("depfile"), str):
        return False
    try:
        fd = cachefs.open_private(found.library)
    except (OSError, cachefs.NotPrivate):
        return False
    with os.fdopen(fd, "rb") as f:
        data = f.read(1 << 30)
    if hashlib.sha256(data).hexdigest() != found.manifest.get("library_sha256"):  # replaced since ``find``
        return False
    Path(_value(cmd, "-o")).write_bytes(data)
    Path(_value(cmd, "-MF")).write_text(found.manifest["depfile"], errors="surrogateescape")
    return True


def object_deps(depfile: str, cmd: list, cwd: Path) -> tuple[dict, dict]:
    """({file: sha256}, shadow watch) of what the compiler read for one object, every file but those of its
    system folders (``-isystem``, the compiler's own: they change with the compiler and torch, in the key);
    a link under its name and its target."""
    quoted, system, builtin = search_lists(cmd, cwd)
    outside = system + builtin
    read = [os.path.normpath(os.path.join(str(cwd), d)) for d in cachefs.parse_depfile(depfile)]
    read = [p for p in read if not any(cachefs.inside(p, s) for s in outside)]
    deps = {}
    for path in read:
        for p in {path, os.path.realpath(path)}:
            deps[p] = header_sha(p, str(cwd))
    includers = {os.path.dirname(p) for p in read}
    watch = cachefs.shadow_watch(read, quoted + system + builtin, includers)
    watch = {d: names for d, names in watch.items() if not any(cachefs.inside(d, s) for s in outside)}
    return dict(sorted(deps.items())), watch


def publish(root: Path, key: str, cmd: list, cwd: Path) -> Path:
    """The object ``cmd`` just wrote, placed whole as ``<key>-<deps>/`` (written in a temporary folder,
    renamed); a failure leaves nothing."""
    depfile = Path(_value(cmd, "-MF")).read_text(errors="surrogateescape")
    deps, watch = object_deps(depfile, cmd, cwd)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{key}-", dir=root))
    try:
        obj = tmp / OBJECT_NAME
        shutil.copyfile(_value(cmd, "-o"), obj)
        cachefs.make_private(obj)
        manifest = {"abi": OBJECT_ABI, "key": key, "command": cmd, "library": OBJECT_NAME,
                    "library_sha256": cachefs.private_sha(obj), "depfile": depfile,
                    "deps": deps, "deps_digest": deps_digest(deps), "shadow_watch": watch}
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
        cachefs.make_private(tmp / "manifest.json")
        return place(tmp, root, f"{key}-{manifest['deps_digest']}")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def compile_once(root: Path, cmd: list, cwd: Path, compiler_id: bytes, extra: bytes, run: Callable[[list], None]) -> bool:
    """``run(cmd)`` (the bounded compiler run that raises on failure) unless a valid entry of ``cmd``'s object
    exists, then the object published; a link is just run. True when the object came from the cache."""
    if not is_compile(cmd):
        run(cmd)
        return False
    key = object_key(cmd, compiler_id, extra)
    with locked(root, key, "object"):  # one object compiled once, whichever build needs it first
        if reuse(root, key, cmd):
            return True
        run(cmd)
        publish(root, key, cmd, cwd)
        return False
