"""The child process that opens a tree's compiled library and answers calls into it.

Started by ``native.Native`` as ``python -I -S host.py <library fd> <request fd> <reply fd> <parent pid>
<working folder is mine>`` (standard library only, so it starts in a few milliseconds): the library is
``dlopen``'ed here, never in the process that asked, so whatever the tree's code does (``exit``,
``abort``, a segfault, a loop, a ``printf``) happens to this process and is read by its parent as a
verdict. The library comes as a descriptor the parent opened and checked (``cachefs.open_library``:
owner, mode, sha256 against the cache entry's manifest) and is opened as ``/proc/self/fd/<n>``, so no
path on the command line can be swapped between the check and the ``dlopen``. The host runs in a
private working folder of its own (0700, made by the parent, removed when the host ends), so a tree
that writes a file by a relative name writes it there.

Protocol on two pipes: the host writes ``L`` once the library is open (or ``E`` and the error), then
hands both pipes to the library's ``lwsplit_serve`` (``cpp/protocol.h``: the loop compiled, no interpreter's
work for each request): for each request (4-byte big-endian length, the request bytes) it calls
``lwsplit_call``, flushes the C library's buffers (a ``printf`` reaches the stdout file now, where the parent
looks for it) and writes ``R``, a 4-byte length and the reply bytes. Standard output and error are files of the
parent's; this process never writes to them itself.

Limits: no core files (a crash of the tree must not leave ``core`` in the working folder), at most
``MAX_OUTPUT_BYTES`` per output file (SIGXFSZ, put back to its default action before the library is
opened, since Python ignores it, ends a tree that prints without end), and a watchdog thread that
ends the process group when the parent is gone (a parent killed by SIGTERM or SIGKILL leaves no host
behind, even one whose tree loops: ctypes releases the GIL during the call). The host is a child
subreaper (``PR_SET_CHILD_SUBREAPER``): whatever the tree forks stays its descendant, a ``setsid()``
grandchild whose parent exited included, and ``kill_descendants`` (the parent's ``close``, the
watchdog) ends them all before the host. It runs as two processes: the one started (the keeper, also a
subreaper) forks the host and waits; when the host dies however it dies (a crash, ``exit`` in the tree),
the tree's orphans are reparented to the keeper, which kills them and then ends as the host ended (by
its signal, or with its status), so its parent reads the host's end from it.
"""

import ctypes
import os
import resource
import signal
import sys
import threading
import time

MAX_OUTPUT_BYTES = 16 << 20
WATCH_INTERVAL_S = 0.5
PR_SET_CHILD_SUBREAPER = 36
"""prctl(2)'s option: orphaned descendants are reparented to this process, not to init."""
KILL_ROUNDS = 100
"""How many times ``kill_descendants`` walks the tree again (a descendant may fork while it is killed)."""


def descendants(pid: int) -> list:
    """Every live (not zombie) descendant of ``pid``, read from ``/proc/<pid>/task/*/children``."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                todo.append(kid)
                try:
                    with open(f"/proc/{kid}/stat", "rb") as fh:
                        state = fh.read().rpartition(b")")[2].split()[0]
                except (OSError, IndexError):
                    continue
                if state != b"Z":
                    found.append(kid)
    return found


def kill_descendants(pid: int) -> None:
    """SIGKILL every descendant of ``pid`` (a subreaper: orphans stay under it), walking again until none is
    left (or ``KILL_ROUNDS`` walks)."""
    for _ in range(KILL_ROUNDS):
        found = descendants(pid)
        if not found:
            return
        for kid in found:
            try:
                os.kill(kid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.001)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _watch_parent(parent: int, folder: str) -> None:
    """End this process's group, and first every descendant, when ``parent`` is no longer its parent."""
    import shutil  # here, off the start-up path: 30-50 ms of a host's start (python -I -S, measured)

    while True:
        time.sleep(WATCH_INTERVAL_S)
        if os.getppid() != parent:
            try:
                kill_descendants(os.getpid())  # anything the tree started, in a session of its own included
                if folder:
                    shutil.rmtree(folder, ignore_errors=True)
                os.killpg(0, signal.SIGKILL)  # this host
            finally:
                os._exit(70)


def _keep(host: int, folder: str) -> int:
    """The keeper's life: wait for the host process ``host`` (reaping the orphans that reach this subreaper
    meanwhile), kill every descendant left, remove the working ``folder`` (when it is the host's own), then end
    as the host ended (by its signal, or its status)."""
    status = 0
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == host:
            break
    kill_descendants(os.getpid())
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                break
        except ChildProcessError:
            break
    if folder:
        import shutil  # as in _watch_parent

        shutil.rmtree(folder, ignore_errors=True)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass  # SIGKILL cannot be caught: its default is the only one
        os.kill(os.getpid(), sig)
        return 128 + sig
    return os.waitstatus_to_exitcode(status)


def main(argv: list) -> int:
    library, requests, replies = int(argv[1]), int(argv[2]), int(argv[3])
    parent = int(argv[4]) if len(argv) > 4 else os.getppid()
    folder = os.getcwd() if len(argv) > 5 and argv[5] == "1" else ""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; the tree's writes past the limit end it
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard == resource.RLIM_INFINITY or hard > MAX_OUTPUT_BYTES:
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES))
    if os.getppid() != parent:  # the parent died before this process watched it
        return 70
    host = os.fork()  # this process keeps the host: the tree's orphans come here when the host itself dies
    if host:
        for fd in (library, requests, replies):
            os.close(fd)
        threading.Thread(target=_watch_parent, args=(parent, folder), daemon=True, name="lwsplit-keeper-watchdog").start()
        return _keep(host, folder)
    parent = os.getppid()  # the keeper
    if parent == 1:
        return 70
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # the host too: the tree's orphans stay under it while it lives
    folder = ""  # the keeper's to remove
    for fd in (requests, replies):  # what the tree starts never holds the protocol's pipes
        os.set_inheritable(fd, False)
    threading.Thread(target=_watch_parent, args=(parent, folder), daemon=True, name="lwsplit-host-watchdog").start()
    try:
        lib = ctypes.CDLL(f"/proc/self/fd/{library}")
        serve = lib.lwsplit_serve
        serve.restype = ctypes.c_int
        serve.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError) as exc:
        _write_all(replies, b"E" + str(exc).encode("utf-8", "replace"))
        return 1
    finally:
        os.close(library)
    _write_all(replies, b"L")
    return serve(requests, replies)  # the loop, compiled (cpp/protocol.h); ctypes lets the watchdog run meanwhile


if __name__ == "__main__":
    sys.exit(main(sys.argv))
