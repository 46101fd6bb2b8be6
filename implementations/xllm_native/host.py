"""The child process that opens a tree's compiled library and answers calls into it.

Started by ``native.Native`` as ``python -I -S host.py <library> <request fd> <reply fd>`` (standard
library only, so it starts in a few milliseconds): the library is ``dlopen``'ed here, never in the
process that asked, so whatever the tree's code does (``exit``, ``abort``, a segfault, a loop, a
``printf``) happens to this process and is read by its parent as a verdict.

Protocol on two pipes: the host writes ``L`` once the library is open (or ``E`` and the error), then
for each request (4-byte big-endian length, the request bytes) it calls ``lwsplit_call``, flushes the C
library's buffers (a ``printf`` reaches the stdout file now, where the parent looks for it) and
writes ``R``, a 4-byte length and the reply bytes. Standard output and error are files of the
parent's; this process never writes to them itself.

Limits: no core files (a crash of the tree must not leave ``core`` in the working folder), at most
``MAX_OUTPUT_BYTES`` per output file (SIGXFSZ ends a tree that prints without end), and a watchdog
thread that ends the process group when the parent is gone (a parent killed by SIGTERM or SIGKILL
leaves no host behind, even one whose tree loops: ctypes releases the GIL during the call).
"""

import ctypes
import os
import resource
import signal
import struct
import sys
import threading
import time

MAX_OUTPUT_BYTES = 16 << 20
WATCH_INTERVAL_S = 0.5


def _read_exact(fd: int, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = os.read(fd, n - len(out))
        if not chunk:
            return b""
        out += chunk
    return out


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _watch_parent(parent: int) -> None:
    while True:
        time.sleep(WATCH_INTERVAL_S)
        if os.getppid() != parent:
            try:
                os.killpg(0, signal.SIGKILL)  # this host and anything the tree started
            finally:
                os._exit(70)


def main(argv: list) -> int:
    library, requests, replies = argv[1], int(argv[2]), int(argv[3])
    parent = int(argv[4]) if len(argv) > 4 else os.getppid()
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    if hard == resource.RLIM_INFINITY or hard > MAX_OUTPUT_BYTES:
        resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES))
    if os.getppid() != parent:  # the parent died before this process watched it
        return 70
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True, name="lwsplit-host-watchdog").start()
    try:
        lib = ctypes.CDLL(library)
        call = lib.lwsplit_call
        call.restype = ctypes.c_char_p
        call.argtypes = [ctypes.c_char_p]
        libc = ctypes.CDLL(None)
    except (OSError, AttributeError) as exc:
        _write_all(replies, b"E" + str(exc).encode("utf-8", "replace"))
        return 1
    _write_all(replies, b"L")
    while True:
        head = _read_exact(requests, 4)
        if not head:
            return 0
        request = _read_exact(requests, struct.unpack(">I", head)[0])
        raw = call(request) or b""
        libc.fflush(None)
        _write_all(replies, b"R" + struct.pack(">I", len(raw)) + raw)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
