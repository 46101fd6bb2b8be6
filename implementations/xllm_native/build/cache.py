"""The cache folder and its entries: where it is, that it is the user's own, which entry is valid and current,
and placing a finished build (``<key>-<deps>/``)."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from contract.errors import UserError
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.build.deps import deps_digest

ENV_CACHE = "LWSPLIT_NATIVE_CACHE"


def cache_root() -> Path:
    """The configured cache folder (not yet checked: ``private_cache`` does that): ``$LWSPLIT_NATIVE_CACHE``,
    else ``$XDG_CACHE_HOME/lwsplit/native`` (an absolute one: the XDG spec ignores a relative one), else
    ``~/.cache/lwsplit/native``."""
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "lwsplit" / "native"
    home = os.path.expanduser("~")
    if not os.path.isabs(home):  # no $HOME and no passwd entry: never a cache relative to the working folder
        raise UserError(ENV_CACHE, None, f"a cache folder: set {ENV_CACHE} or XDG_CACHE_HOME",
                        "this user has no home folder")
    return Path(home) / ".cache" / "lwsplit" / "native"


def _cache_setting() -> str:
    if os.environ.get(ENV_CACHE):
        return ENV_CACHE
    return "XDG_CACHE_HOME" if os.path.isabs(os.environ.get("XDG_CACHE_HOME", "")) else ENV_CACHE


def cache_error(root: Path, detail: str, need: str = "") -> UserError:
    need = need or f"a cache folder only you (uid {os.getuid()}) can write"
    return UserError(_cache_setting(), str(root), f"{need}; set {ENV_CACHE} or XDG_CACHE_HOME to one", detail)


def private_cache(root: Path) -> Path:
    """``root`` created 0700 where missing; one ``UserError`` naming it when it is not the user's own
    (another uid's, writable by group or others, a file, under a folder others can swap) or cannot
    be made."""
    try:
        return cachefs.private_folder(root)
    except cachefs.NotPrivate as exc:
        raise cache_error(root, str(exc)) from None
    except OSError as exc:
        raise cache_error(root, f"{exc.filename or root}: {exc.strerror}") from None


@dataclass(frozen=True, kw_only=True)
class Built:
    """A usable cache entry."""

    library: Path
    manifest: dict


def _valid_entry(entry: Path, key: Optional[str] = None) -> Optional[Built]:
    """The entry when it can be trusted and is current, else None: a folder, its manifest and its library
    owned by the user and not writable by group or others, the library a plain name inside the entry
    whose sha256 is the manifest's, the manifest's key ``key``, every recorded header unchanged and no
    header now shadowing one the compiler read. A truncated or foreign entry is never an error: it is
    skipped and the library built again."""
    try:
        st = os.lstat(entry)
        if not stat.S_ISDIR(st.st_mode) or cachefs.why_not_private(st):
            return None
        manifest = json.loads(cachefs.read_private(entry / "manifest.json"))
        if not isinstance(manifest, dict) or (key is not None and manifest.get("key") != key):
            return None
        name, deps = manifest.get("library"), manifest.get("deps")
        if not cachefs.plain_name(name) or not isinstance(deps, dict):
            return None
        library = entry / name
        if cachefs.private_sha(library) != manifest.get("library_sha256"):
            return None
        if deps_digest(deps) != manifest.get("deps_digest") or cachefs.shadowed(manifest.get("shadow_watch")):
            return None
    except (OSError, ValueError, TypeError, cachefs.NotPrivate, cachefs.TooLarge):
        return None
    return Built(library=library, manifest=manifest)


def find(root: Path, key: str) -> Optional[Built]:
    try:
        found = sorted(root.glob(f"{key}-*"))
    except OSError:
        return None
    for entry in found:
        built = _valid_entry(entry, key)
        if built is not None:
            return built
    return None


def place(tmp: Path, root: Path, name: str) -> Path:
    """Rename the finished build folder to ``name``, or ``name-<n>`` when an entry that did not pass the
    checks (truncated, another user's) holds the name: nothing the build did not write is removed."""
    for n in range(100):
        final = root / (name if n == 0 else f"{name}-{n}")
        try:
            os.rename(tmp, final)
            return final
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise
    raise cache_error(root, f"100 entries named {name}* that are not usable", "a cache folder with fewer broken entries")


@contextmanager
def locked(root: Path, key: Optional[str], what: str) -> Iterator[None]:
    """The lock of a cache entry (``<key>.lock``, ``cachefs.lock_file``) held, and the stale temporary folders of
    the key (``.tmp-<key>-*``: a build or publication killed midway, which no one else holds the lock of) removed;
    nothing when ``key`` is None. ``what`` names the entry in an error (``build``, ``object``)."""
    if key is None:
        yield
        return
    lock_path = root / f"{key}.lock"
    try:
        fd = cachefs.lock_file(lock_path)
    except cachefs.NotPrivate as exc:
        raise cache_error(root, f"the {what} lock {exc}") from None
    except OSError as exc:
        raise cache_error(root, f"the {what} lock {lock_path}: {exc.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        for stale in root.glob(f".tmp-{key}-*"):
            try:
                if not cachefs.why_not_private(os.lstat(stale)) and stale.is_dir() and not stale.is_symlink():
                    shutil.rmtree(stale, ignore_errors=True)
            except OSError:
                pass
        yield
    finally:
        os.close(fd)
