"""The dependency watch: every header of the tree the compiler read (its ``-MD`` list) with its sha256, and the
include names a header added later could take over (``cachefs.shadow_watch``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

from contract.errors import UserError
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.build.commands import VERSION_TIMEOUT_S, build_timeout
from implementations.xllm_native.build.keys import sha, too_large
from implementations.xllm_native.tree.files import FIELD, TreeMap


def watched_roots(tree: TreeMap) -> list[str]:
    """The folders whose files the compiler read are recorded: the tree's, and a port manifest's ``base``."""
    base = tree.manifest.base_root() if tree.manifest is not None and tree.manifest.base else None
    return [str(tree.root)] + ([str(base)] if base is not None else [])


def parse_deps(text: str, roots: list, cwd: Path) -> dict:
    """{header: sha256} of what the compiler read (its ``-MD`` rules, ``cachefs.parse_depfile``: every rule's
    prerequisites) inside ``roots`` (the tree, a manifest's base): each by the name the compiler used, and,
    for a symbolic link, its target too (wherever it is)."""
    root = roots[0]
    deps = {}
    for raw in cachefs.parse_depfile(text):
        path = os.path.normpath(os.path.join(str(cwd), raw))
        real = os.path.realpath(path)
        if not any(cachefs.inside(path, r) or cachefs.inside(real, r) for r in roots):
            continue
        for p in {path, real}:
            deps[p] = header_sha(p, root)
    return dict(sorted(deps.items()))


def header_sha(path: str, root: str) -> str:
    """The sha256 of a file the compiler read; one too large, or gone or unreadable since the compile (the tree
    edited while it builds), is one error naming the tree's field and the file."""
    try:
        return cachefs.file_sha(Path(path))
    except cachefs.TooLarge as exc:
        raise too_large(FIELD, root, exc) from None
    except OSError as exc:
        raise UserError(FIELD, root, "a tree that stays as it is while it is built",
                        f"{path}, read by the compiler, is unreadable now ({exc.strerror}): build again once the "
                        "tree is still") from None


def search_lists(cmd: list, cwd: Path) -> tuple[list, list, list]:
    """The compiler's include search order in three parts: the command's ``-I`` folders, its ``-isystem``
    folders (kept even when missing, so one created later is watched), then its built-in folders (``-E -v``)."""
    quoted, system, flags = [], [], []
    args = iter(cmd[1:])
    for a in args:
        for opt, into in (("-I", quoted), ("-isystem", system)):
            if a.startswith(opt):
                folder = a[len(opt):] or next(args, "")  # -Idir or -I dir
                into.append(os.path.normpath(os.path.join(str(cwd), folder)))
                flags.append(opt + folder)
                break
        else:
            if a.startswith("-std="):
                flags.append(a)
    given = quoted + system
    probe = [cmd[0], *flags, "-xc++", "-E", "-v", os.devnull, "-o", os.devnull]
    try:
        out = cachefs.run_bounded(probe, timeout=min(VERSION_TIMEOUT_S, build_timeout()), cwd=str(cwd))[1]
    except (cachefs.Timeout, OSError):
        out = ""
    return quoted, system, [d for d in cachefs.search_dirs(out) if d not in given]


def _search_path(cmd: list, cwd: Path) -> list:
    """The compiler's include search order (``search_lists``, joined)."""
    quoted, system, builtin = search_lists(cmd, cwd)
    return quoted + system + builtin


def shadow_watch_of(depfile: str, cmd: list, gen: Path, roots: list) -> dict:
    """``cachefs.shadow_watch`` over every header the compiler read, kept for the folders of ``roots`` (the
    tree, a manifest's base): a header added there is what can go unseen (system folders change with the
    compiler, which is in the key; the build folder is the harness's own and goes with the entry)."""
    deps = [os.path.normpath(os.path.join(str(gen), d)) for d in cachefs.parse_depfile(depfile)]
    includers = {os.path.dirname(d) for d in deps if any(cachefs.inside(d, r) for r in roots)}
    watch = cachefs.shadow_watch(deps, _search_path(cmd, gen), includers)
    return {d: names for d, names in watch.items() if any(cachefs.inside(d, r) for r in roots)}


def deps_digest(deps: dict) -> Optional[str]:
    """Hash of the recorded headers' names and current contents; None when one is gone or unreadable."""
    parts = []
    for path in sorted(deps):
        try:
            parts.append(os.fsencode(path) + b"\0" + cachefs.file_sha(Path(path)).encode())
        except (OSError, cachefs.TooLarge):
            return None
    return sha(*parts)[:12]
