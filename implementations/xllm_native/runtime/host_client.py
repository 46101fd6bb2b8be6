"""The parent's side of a host process (``host.py``): starting it on a checked library descriptor, one
request and its reply at a time within a time limit, reading how it ended, killing all it started."""

from __future__ import annotations

import atexit
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import NoReturn

from contract.errors import ImplementationFailure, UserError, clip
from contract.interface import NATIVE_LOG_ENV
from implementations.xllm_native.build import cachefs
from implementations.xllm_native.build.cache import Built, cache_error
from implementations.xllm_native.runtime import host

HOST = Path(host.__file__).resolve()
"""The child program that opens the library (standard library only)."""
LOAD_TIMEOUT_S = 60.0
"""The limit on starting the host and opening the library (its static constructors run then)."""
MAX_REPLY_BYTES = 64 << 20
"""The largest reply read from a host (64 MiB): the length comes from the host's process, which the tree's code
can write to; a real reply is a few KiB."""
SIGNAL_WORDS = {"SIGSEGV": "segmentation fault", "SIGABRT": "abort", "SIGBUS": "bus error",
                "SIGFPE": "arithmetic error", "SIGILL": "illegal instruction", "SIGKILL": "killed",
                "SIGXFSZ": f"wrote more than {host.MAX_OUTPUT_BYTES >> 20} MiB of output"}
TAIL_BYTES = 4096
TAIL_LINES = 4
READ_BYTES = 1 << 12
"""What one read of the reply pipe asks for: a reply's kind, length and body in one read, not one each."""


class Host:
    """One child process holding the library open; used by the process that started it only."""

    def __init__(self, built: Built, who: str) -> None:
        library = built.library
        self.who = who
        self.pid = os.getpid()
        self.folder = private_temp_folder("lwsplit-host-")  # the host's working folder
        try:  # checked again now, by descriptor: the host never opens a path someone could have swapped since
            lib_fd = cachefs.open_library(library, built.manifest.get("library_sha256"))
        except (cachefs.NotPrivate, cachefs.TooLarge, OSError) as exc:
            shutil.rmtree(self.folder, ignore_errors=True)
            raise cache_error(library.parent.parent, f"the library {exc}") from None
        self._out = tempfile.TemporaryFile(prefix="lwsplit-host-out-")  # unnamed: nothing to plant or leave
        self._err = tempfile.TemporaryFile(prefix="lwsplit-host-err-")
        self._out_seen = 0
        self._buffer = b""
        """Reply bytes read from the pipe and not yet taken (``_read``)."""
        self.parked = 0
        """CHECKs this host answered (threads parked in it)."""
        self.check_text_bytes = 0
        """What those CHECKs' texts took of glog's buffer for them (``native.GLOG_FATAL_TEXT_BYTES``)."""
        req_r, self._req = os.pipe()
        self._rep, rep_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(HOST), str(lib_fd), str(req_r), str(rep_w), str(os.getpid()), "1"],
                stdin=subprocess.DEVNULL, stdout=self._out, stderr=self._err, pass_fds=(lib_fd, req_r, rep_w),
                env={**os.environ, NATIVE_LOG_ENV: "/dev/fd/2"},  # the tree's log lines: the host's last output
                cwd=self.folder, start_new_session=True)  # Ctrl-C at a terminal is the parent's; killpg takes it all
        except BaseException:
            for fd in (self._req, self._rep):
                os.close(fd)
            shutil.rmtree(self.folder, ignore_errors=True)
            raise
        finally:
            for fd in (lib_fd, req_r, rep_w):
                os.close(fd)
        _HOSTS.add(self)
        kind = self._read(1, time.monotonic() + LOAD_TIMEOUT_S, "opening the library", LOAD_TIMEOUT_S)
        if kind != b"L":
            message = self._drain()
            self.close()
            raise ImplementationFailure(self.who, f"the library {library} could not be opened: "
                                                  f"{message.decode('utf-8', 'replace')}")

    def usable(self) -> bool:
        return self.pid == os.getpid() and self.proc.poll() is None

    def call(self, op: str, request: bytes, timeout_s: float) -> bytes:
        if self.pid != os.getpid():
            raise RuntimeError("a host is used by the process that started it only")
        deadline = time.monotonic() + timeout_s
        try:
            _write_all(self._req, struct.pack(">I", len(request)) + request)
        except BrokenPipeError:
            self._ended(f"the compiled {op}")
        what = f"the compiled {op}"
        kind = self._read(1, deadline, what, timeout_s)
        if kind != b"R":
            self.close()
            raise ImplementationFailure(self.who, f"the host answered {op} out of protocol ({kind!r})")
        size = struct.unpack(">I", self._read(4, deadline, what, timeout_s))[0]
        if size > MAX_REPLY_BYTES:
            self.close()
            raise ImplementationFailure(self.who, f"{what} answered a reply of {size} bytes, more than the "
                                                  f"{MAX_REPLY_BYTES >> 20} MiB a reply may hold; its process was killed")
        raw = self._read(size, deadline, what, timeout_s)
        self._check_stdout(what)
        return raw

    def _read(self, n: int, deadline: float, what: str, timeout_s: float) -> bytes:
        """``n`` bytes of the reply pipe: from what an earlier read took, then reads of up to ``READ_BYTES`` (no
        more than this reply still needs, past a small reply's size), each waiting until ``deadline`` at most."""
        out = self._buffer
        try:
            while len(out) < n:
                left = deadline - time.monotonic()
                ready = select.select([self._rep], [], [], max(left, 0))[0] if left > 0 else []
                if not ready:
                    self.close()
                    raise ImplementationFailure(
                        self.who, f"{what} did not return within {timeout_s:g} s (runner.timeout_s); its process "
                                  f"was killed", self.tail())
                chunk = os.read(self._rep, max(READ_BYTES, n - len(out)))
                if not chunk:
                    self._ended(what)
                out += chunk
        except ImplementationFailure:
            raise
        except BaseException:  # Ctrl-C, SIGTERM turned into KeyboardInterrupt, any error: the call is abandoned
            self.close()
            raise
        self._buffer = out[n:]
        return out[:n]

    def _ended(self, what: str) -> NoReturn:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        tail = self.tail()
        self.close()
        if rc is None:
            how = "closed its pipe without ending"
        elif rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = f"signal {-rc}"
            how = f"crashed: killed by {name}" + (f" ({SIGNAL_WORDS[name]})" if name in SIGNAL_WORDS else "")
        else:
            how = f"ended the process: it exited with status {rc} (exit() in the tree's code)"
        raise ImplementationFailure(self.who, f"{what} {how}", tail)

    def _check_stdout(self, what: str) -> None:
        size = os.fstat(self._out.fileno()).st_size
        if size <= self._out_seen:
            return
        text = os.pread(self._out.fileno(), min(size - self._out_seen, TAIL_BYTES), self._out_seen)
        self._out_seen = size
        raise ImplementationFailure(self.who, f"{what} wrote to standard output (planning code must not print): "
                                              f"{clip(' | '.join(_lines(text)), 160)!r}")

    def _drain(self) -> bytes:
        chunks = [self._buffer]
        self._buffer = b""
        while select.select([self._rep], [], [], 1.0)[0]:
            chunk = os.read(self._rep, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)

    def tail(self) -> str:
        """The last lines the host's process wrote (stderr, then stdout), as one line."""
        lines: list = []
        for f in (self._err, self._out):
            try:
                size = os.fstat(f.fileno()).st_size
                lines += _lines(os.pread(f.fileno(), TAIL_BYTES, max(size - TAIL_BYTES, 0)))
            except (OSError, ValueError):
                continue
        return " | ".join(lines[-TAIL_LINES:])

    def close(self) -> None:
        """Kill everything the host's tree started (a subreaper: its descendants, in sessions of their own
        included), then the host's process group; reap it and remove its working folder (only from the
        process that started it)."""
        _HOSTS.discard(self)
        if self.pid != os.getpid():
            return
        if self.proc.poll() is None:
            host.kill_descendants(self.proc.pid)
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for fd in (self._req, self._rep):
            try:
                os.close(fd)
            except OSError:
                pass
        self._req = self._rep = -1
        self._buffer = b""
        for f in (self._out, self._err):
            f.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def private_temp_folder(prefix: str) -> str:
    """A new folder (``mkdtemp``: mode 0700, a name no one could guess) in the temporary folder, where every
    folder on the way, the temporary folder itself included, is one no other user can rename or replace an
    entry of (``cachefs.trusted_folder``); a ``UserError`` naming ``TMPDIR`` otherwise."""
    parent = tempfile.gettempdir()
    try:
        trusted = cachefs.trusted_folder(Path(parent))
    except cachefs.NotPrivate as exc:
        raise UserError("TMPDIR", parent, "a temporary folder no other user can write to (or sticky, as /tmp)",
                        str(exc)) from None
    except OSError as exc:
        raise UserError("TMPDIR", parent, "an existing temporary folder", exc.strerror or str(exc)) from None
    return tempfile.mkdtemp(prefix=prefix, dir=str(trusted))


def _lines(raw: bytes) -> list:
    return [line.strip() for line in raw.decode("utf-8", errors="replace").splitlines() if line.strip()]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


_HOSTS: weakref.WeakSet[Host] = weakref.WeakSet()


def host_pids() -> list[int]:
    """The process ids of the hosts this process started and has not closed."""
    return [h.proc.pid for h in list(_HOSTS)]


@atexit.register
def _close_hosts() -> None:
    for h in list(_HOSTS):
        h.close()
