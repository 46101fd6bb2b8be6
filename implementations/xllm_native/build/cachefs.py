"""What the native cache stands on: folders and files only their owner can write, reads and hashes
with a size cap, make's dependency-file syntax, and compiler runs with a time limit.

* ``private_folder`` makes the cache folder (0700 where it creates it) and refuses one that is not
  the user's own: owned by another uid, writable by group or others, a file, or under a folder
  everyone may write without the sticky bit (another user could swap it). ``trusted_path`` checks every
  folder a path's names are looked up in; ``trusted_folder`` the folder too (one to make entries in).
* ``open_private`` opens a file without following a symbolic link and accepts it only when it is a
  regular file owned by the user and not writable by group or others; ``lock_file`` opens the build
  lock the same way, creating it 0600 and never truncating it.
* ``file_sha`` hashes in chunks and refuses a file above ``MAX_SOURCE_BYTES``.
* ``parse_depfile`` reads a rule file as make does (``\\`` + space, ``$$``, ``\\#``, line
  continuations); ``shadow_watch`` / ``shadowed`` record and check the include names a new header
  could take over.
* ``run_bounded`` runs a command in its own process group, killed whole on a time limit or on any
  exception (``KeyboardInterrupt``, ``Terminated``); ``terminate_as_exception`` turns SIGTERM and
  SIGHUP into ``Terminated`` for a block, then ends the process by that signal after the cleanup.
"""

from __future__ import annotations

import errno
import grp
import hashlib
import os
import pwd
import signal
import stat
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, Iterator, Optional, Sequence

MAX_SOURCE_BYTES = 16 << 20
"""The largest role or header file hashed (16 MiB): a bigger one is not planning code."""
MAX_MANIFEST_BYTES = 4 << 20
MAX_OUTPUT_BYTES = 4 << 20
"""The most of a compiler's output read back (its first error is near the start)."""
_CHUNK = 1 << 20


class TooLarge(Exception):
    """A file above the cap: ``path``, at least ``size`` bytes."""

    def __init__(self, path: str, size: int) -> None:
        super().__init__(f"{path} holds more than {size} bytes")
        self.path = path
        self.size = size


class NotPrivate(Exception):
    """A cache folder or file another user could have written; the message says why."""


class Timeout(Exception):
    """A bounded command still ran at its limit; its process group was killed."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived inside ``terminate_as_exception``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


# ---- ownership -----------------------------------------------------------------------------------


def _writable_by_others(mode: int) -> bool:
    return bool(mode & (stat.S_IWGRP | stat.S_IWOTH))


def why_not_private(st: os.stat_result) -> Optional[str]:
    """Why a file or folder with this status is not the user's own, or None."""
    if st.st_uid != os.getuid():
        return f"owned by uid {st.st_uid}, not {os.getuid()}"
    if _writable_by_others(st.st_mode):
        return f"writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def private_folder(path: Path) -> Path:
    """``path`` (absolute), created 0700 where missing, checked to be the user's own folder.

    Raises ``NotPrivate`` saying why not; ``OSError`` when it cannot be created."""
    path = Path(os.path.abspath(path))
    missing = []
    p = path
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            os.mkdir(d, 0o700)
        except FileExistsError:
            pass
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotPrivate("it is not a folder")
    why = why_not_private(st)
    if why:
        raise NotPrivate(f"it is {why}")
    trusted_path(path)
    return path


MAX_LINKS = 40
"""Symbolic links followed in one path before ``trusted_path`` gives up (the kernel's own limit)."""


def _group_is_private(gid: int) -> bool:
    """Whether no user but this one is in group ``gid`` (a user private group: ``umask 002`` makes the user's
    folders group-writable, to that group only)."""
    try:
        me = pwd.getpwuid(os.getuid()).pw_name
        if set(grp.getgrgid(gid).gr_mem) - {me}:
            return False
        return all(user.pw_uid == os.getuid() for user in pwd.getpwall() if user.pw_gid == gid)
    except (KeyError, OSError):
        return False


def _why_not_trusted_folder(st: os.stat_result) -> Optional[str]:
    """Why another user could rename or replace an entry of a folder with this status, or None."""
    if st.st_uid not in (0, os.getuid()):
        return f"owned by uid {st.st_uid}, who could replace what is in it"
    if st.st_mode & stat.S_ISVTX:
        return None
    if st.st_mode & stat.S_IWOTH or (st.st_mode & stat.S_IWGRP and not _group_is_private(st.st_gid)):
        return (f"writable by group or others without the sticky bit (mode {stat.S_IMODE(st.st_mode):04o}), "
                "so anyone could replace what is in it")
    return None


def trusted_path(path: Path) -> Path:
    """The real path of ``path``, resolved one component at a time as the kernel does, checking every folder a
    name is looked up in, the ones holding a symbolic link and those on its target's way included: each
    must be the user's or root's and not writable by group or others unless sticky (then no one else can
    rename an entry in it); group-writable is fine where the group is the user's alone (``_group_is_private``).
    Raises ``NotPrivate`` naming the folder, ``OSError`` for a missing component."""
    todo = list(Path(os.path.abspath(path)).parts[1:])
    todo.reverse()
    here, links = "/", 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            here = os.path.dirname(here)
            continue
        why = _why_not_trusted_folder(os.stat(here))
        if why:
            shown = os.path.join(here, name)
            raise NotPrivate(f"{here}, the folder holding {shown}{'' if shown == str(path) else ' on its way'}, "
                             f"is {why}")
        nxt = os.path.join(here, name)
        if stat.S_ISLNK(os.lstat(nxt).st_mode):
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
            target = os.readlink(nxt)
            if os.path.isabs(target):
                here = "/"
            todo += reversed(Path(target).parts[1:] if os.path.isabs(target) else Path(target).parts)
            continue
        here = nxt
    return Path(here)


def trusted_folder(path: Path) -> Path:
    """The real path of folder ``path`` (``trusted_path``), itself checked as the folders on its way are: a
    folder to make entries in (a temporary folder: ``/tmp``, sticky, passes). Raises ``NotPrivate``, ``OSError``."""
    real = trusted_path(path)
    st = os.stat(real)
    if not stat.S_ISDIR(st.st_mode):
        raise NotPrivate(f"{path} is not a folder")
    why = _why_not_trusted_folder(st)
    if why:
        raise NotPrivate(f"{real} is {why}")
    return real


def open_private(path: Path, flags: int = os.O_RDONLY) -> int:
    """A file descriptor of ``path``: not through a symbolic link, a regular file the user owns that
    group and others cannot write. Raises ``NotPrivate`` or ``OSError``."""
    fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o600)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotPrivate(f"{path} is not a regular file")
        why = why_not_private(st)
        if why:
            raise NotPrivate(f"{path} is {why}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock_file(path: Path) -> int:
    """The build lock's descriptor: created 0600 when missing, never truncated, never through a link.

    Raises ``NotPrivate`` (a link, another user's file, not a regular file) or ``OSError``."""
    try:
        return open_private(path, os.O_RDWR | os.O_CREAT)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotPrivate(f"{path} is a symbolic link") from None
        raise


def read_private(path: Path, limit: int = MAX_MANIFEST_BYTES) -> bytes:
    """The bytes of a private file (``open_private``), at most ``limit`` (``TooLarge`` above it)."""
    fd = open_private(path)
    with os.fdopen(fd, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(str(path), limit)
    return data


def sha_of_fd(fd: int, name: str, limit: int) -> str:
    h = hashlib.sha256()
    total = 0
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return h.hexdigest()
        total += len(chunk)
        if total > limit:
            raise TooLarge(name, limit)
        h.update(chunk)


def file_sha(path: Path, limit: int = MAX_SOURCE_BYTES) -> str:
    """sha256 of ``path``'s bytes, read in chunks; ``TooLarge`` past ``limit``."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return sha_of_fd(fd, str(path), limit)
    finally:
        os.close(fd)


def private_sha(path: Path, limit: int = 1 << 30) -> str:
    """sha256 of a private file (``open_private``)."""
    fd = open_private(path)
    try:
        return sha_of_fd(fd, str(path), limit)
    finally:
        os.close(fd)


def make_private(path: Path) -> None:
    """Clear the group and others' write bits of a file the build wrote (a umask of 002 sets them)."""
    os.chmod(path, stat.S_IMODE(os.lstat(path).st_mode) & ~(stat.S_IWGRP | stat.S_IWOTH))


def plain_name(name: object) -> bool:
    """``name`` is one path component: no folder, no ``..``, not absolute."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\0" not in name


# ---- make's dependency files ------------------------------------------------------------------------


def parse_depfile(text: str) -> list[str]:
    """The prerequisites of every rule in ``text``, a rule file as GCC's ``-MD`` writes it for make:
    ``\\ `` is a space in a name (an even run of backslashes before a space is half as many, then the
    separator), ``$$`` is ``$``, ``\\#`` is ``#``, a backslash before a newline continues the line."""
    lines: list[list[str]] = [[]]
    word: list[str] = []
    in_word = False

    def end_word() -> None:
        nonlocal in_word
        if in_word:
            lines[-1].append("".join(word))
            word.clear()
            in_word = False

    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            k = i
            while k < n and text[k] == "\\":
                k += 1
            run = k - i
            nxt = text[k] if k < n else ""
            if nxt == "\n" or text.startswith("\r\n", k):
                word.append("\\" * (run - 1))
                in_word = in_word or run > 1
                end_word()
                i = k + (2 if nxt == "\r" else 1)
                continue
            if nxt in (" ", "\t", "#"):
                word.append("\\" * (run // 2))
                in_word = True
                if run % 2 or nxt == "#":
                    word.append(nxt)
                    i = k + 1
                else:
                    i = k
                continue
            word.append("\\" * run)
            in_word = True
            i = k
            continue
        if c == "$" and text.startswith("$$", i):
            word.append("$")
            in_word = True
            i += 2
            continue
        if c in " \t\r":
            end_word()
        elif c == "\n":
            end_word()
            lines.append([])
        else:
            word.append(c)
            in_word = True
        i += 1
    end_word()
    deps: list[str] = []
    for words in lines:
        for j, w in enumerate(words):
            if w.endswith(":"):
                deps += [d for d in words[j + 1:] if d]
                break
    return deps


def inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def shadow_watch(deps: Iterable[str], search: Sequence[str], includer_dirs: Iterable[str]) -> dict:
    """{folder: [names]}: entries that did not exist when the compiler ran and that, appearing, could
    take over a header it read: for a header found as ``R`` under search folder ``S``, the first
    missing component of ``R`` under each folder searched before ``S``, and under each includer
    folder (a quoted include looks beside the including file first). Paths are normalised."""
    listings: dict = {}

    def listing(folder: str) -> set:
        if folder not in listings:
            try:
                listings[folder] = set(os.listdir(folder))
            except OSError:
                listings[folder] = set()
        return listings[folder]

    watch: dict = {}

    def watch_name(folder: str, parts: tuple) -> None:
        d = folder
        for j, part in enumerate(parts):
            if part not in listing(d):
                watch.setdefault(d, set()).add(part)
                return
            if j == len(parts) - 1 or not os.path.isdir(os.path.join(d, part)):
                return
            d = os.path.join(d, part)

    includers = sorted(set(includer_dirs))
    for dep in sorted(set(deps)):
        for at, folder in enumerate(search):
            if not inside(dep, folder) or dep == folder:
                continue
            parts = tuple(Path(os.path.relpath(dep, folder)).parts)
            for earlier in list(search[:at]) + includers:
                if earlier != folder:
                    watch_name(earlier, parts)
        for folder in includers:  # a quoted include by a name relative to the includer's folder
            if inside(dep, folder) and dep != folder:
                parts = tuple(Path(os.path.relpath(dep, folder)).parts)
                for other in includers:
                    if other != folder:
                        watch_name(other, parts)
    return {d: sorted(names) for d, names in sorted(watch.items())}


def shadowed(watch: object) -> Optional[str]:
    """The first watched entry that now exists (``folder/name``), or None; an unreadable watch counts."""
    if not isinstance(watch, dict):
        return "(no watch recorded)"
    for folder, names in watch.items():
        if not isinstance(folder, str) or not isinstance(names, list):
            return "(a malformed watch)"
        try:
            present = set(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return folder
        hit = present.intersection(names)
        if hit:
            return os.path.join(folder, sorted(hit)[0])
    return None


def search_dirs(output: str) -> list[str]:
    """The include search list a compiler printed for ``-E -v`` (quoted dirs first, then angle ones)."""
    dirs, inside = [], False
    for line in output.splitlines():
        if line.startswith("#include ") and "search starts here" in line:
            inside = True
        elif line.startswith("End of search list"):
            inside = False
        elif inside and line.startswith(" "):
            dirs.append(os.path.normpath(line.strip().split(" (")[0]))
    return dirs


# ---- bounded compiler runs ---------------------------------------------------------------------------


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_bounded(cmd: Sequence[str], *, timeout: float, cwd: Optional[str] = None) -> tuple[int, str]:
    """(exit status, output) of ``cmd`` run in its own process group with stdin closed; ``Timeout``
    when it runs past ``timeout`` s. On a time-out or any exception (Ctrl-C, ``Terminated``) the whole
    group (the compiler driver and ``cc1plus``, ``ld``) is killed before the exception goes on. Output
    goes to an unlinked file, so a grandchild that keeps it open cannot hold this call."""
    with tempfile.TemporaryFile() as out:
        proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise Timeout(f"{cmd[0]} still ran after {timeout:g} s") from None
        except BaseException:
            _kill_group(proc)
            raise
        out.seek(0)
        return rc, out.read(MAX_OUTPUT_BYTES).decode("utf-8", errors="replace")


def _raise_terminated(signum, _frame) -> None:
    raise Terminated(signum)


@contextmanager
def terminate_as_exception() -> Iterator[None]:
    """In the main thread, SIGTERM and SIGHUP left at their default raise ``Terminated`` inside the block,
    so its ``finally`` clauses run (the compiler's group is killed, the temporary folder removed);
    leaving the block by it restores the default and ends the process by the same signal.
    Handlers someone else installed (the app's) are left alone."""
    installed: dict = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(sig) == signal.SIG_DFL:
                installed[sig] = signal.signal(sig, _raise_terminated)
    try:
        yield
    except Terminated as exc:
        for sig, previous in installed.items():
            signal.signal(sig, previous)
        installed.clear()
        os.kill(os.getpid(), exc.signum)
        raise SystemExit(128 + exc.signum) from None
    finally:
        for sig, previous in installed.items():
            signal.signal(sig, previous)


# ---- opening a cached library ------------------------------------------------------------------------


def open_library(path: Path, sha256: object) -> int:
    """A descriptor of the cached library ``path`` to load by (``/proc/self/fd/<n>``): its folders checked
    as ``trusted_path`` does, the file opened without following a link, the user's regular file that group
    and others cannot write, whose sha256 is ``sha256`` (the manifest's). Raises ``NotPrivate`` saying why,
    ``OSError``; the descriptor is close-on-exec (``pass_fds`` hands it on)."""
    folder = trusted_path(Path(os.path.abspath(path)).parent)
    fd = open_private(folder / Path(path).name)
    try:
        if not isinstance(sha256, str) or sha_of_fd(fd, str(path), 1 << 30) != sha256:
            raise NotPrivate(f"{path} is not the library that was built (its sha256 is not the manifest's)")
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
