"""A test binary run so that nothing it starts outlives it, in a private folder that is removed after.

``run_reaped(cmd, ...)`` runs this file as a script (``python -I -S reaper.py <status file> <cmd...>``) in a
session of its own, its output to a file. The script makes itself the child subreaper
(``PR_SET_CHILD_SUBREAPER``): every orphan below it, a grandchild that ``setsid()``\\ s or double-forks
included, becomes its child. When the command ends, the script kills (SIGKILL) and reaps whatever is left,
round by round until no child is left, and writes how the command ended to the status file. SIGTERM (the
caller's time limit, Ctrl-C) ends the command and every descendant the same way. A grandchild that keeps
the output open holds nothing: the caller reads a file, not a pipe.

``private_folder()`` is a fresh 0700 temporary folder; ``remove_folder`` removes one whatever the binary
left in it (folders it made read-only included), in bounded tries.

Standard library only: the script runs before anything of the project is importable.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional, Sequence

PR_SET_CHILD_SUBREAPER = 36
"""``prctl`` option (linux/prctl.h)."""
KILL_ROUNDS_S = 10.0
"""How long the script keeps killing what is left (a process that forks as fast as it is killed)."""
STOP_GRACE_S = 15.0
"""How long the caller waits for the script to end the command's tree after SIGTERM, before SIGKILL."""
MAX_OUTPUT_BYTES = 4 << 20
"""The most of the command's output read back (its last bytes)."""


class Timeout(Exception):
    """The command still ran after its time limit (it and every descendant were stopped)."""


# ---- the caller's side --------------------------------------------------------------------------------


def run_reaped(cmd: Sequence[str], *, timeout: float, cwd: str, scratch: Path) -> tuple[str, str]:
    """(how ``cmd`` ended: ``exit N`` or ``signal NAME``, its output decoded as UTF-8 with undecodable bytes
    replaced). ``scratch`` is a private folder for the output and status files. ``Timeout`` past ``timeout``
    s; on it or any exception (Ctrl-C) the command and every descendant are stopped first."""
    output, status = scratch / "reaper.out", scratch / "reaper.status"
    with open(output, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-I", "-S", str(Path(__file__).resolve()), str(status), *cmd],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise Timeout(f"{cmd[0]} still ran after {timeout:g} s") from None
        except BaseException:
            _stop(proc)
            raise
    try:
        ended = status.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        ended = f"reaper exit {proc.returncode}"
    return ended or f"reaper exit {proc.returncode}", tail(output)


def tail(path: Path, limit: int = MAX_OUTPUT_BYTES) -> str:
    """The last ``limit`` bytes of ``path`` as UTF-8, undecodable bytes replaced."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - limit))
        return f.read(limit).decode("utf-8", errors="replace")


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the script (it kills the command's whole tree), SIGKILL to its session's group after
    ``STOP_GRACE_S``."""
    try:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=STOP_GRACE_S)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def private_folder(prefix: str) -> Path:
    """A new temporary folder only this user can enter (0700)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    os.chmod(path, stat.S_IRWXU)
    return path


def remove_folder(path: Path, tries: int = 3) -> Optional[str]:
    """Remove ``path`` and everything in it, whatever the binary left there: every folder inside is made
    the user's to list and write first (a test that made one read-only), and a removal that failed (a
    file that arrived meanwhile: "Directory not empty") is tried again, at most ``tries`` times. None when
    it is gone; else why not (the last error)."""
    last: list[str] = []

    def note(_func, name, exc_info) -> None:
        if not isinstance(exc_info[1], FileNotFoundError):
            last[:] = [f"{name}: {exc_info[1].strerror or exc_info[1]}"]

    for _ in range(tries):
        if not os.path.lexists(path):
            return None
        last.clear()
        _open_up(path)
        shutil.rmtree(path, onerror=note)
    return None if not os.path.lexists(path) else (last[0] if last else f"{path} is still there")


def _open_up(path: Path) -> None:
    """Every folder under ``path`` (itself included, links not followed) readable, writable and enterable
    by the user, parents before children, so that the walk and the removal can go everywhere."""
    def chmod(folder: str) -> None:
        try:
            mode = os.lstat(folder).st_mode
            if stat.S_ISDIR(mode) and mode & stat.S_IRWXU != stat.S_IRWXU:
                os.chmod(folder, stat.S_IMODE(mode) | stat.S_IRWXU)
        except OSError:
            pass

    chmod(str(path))
    for root, dirs, _ in os.walk(path):  # top-down: a folder is opened up before the walk lists it
        for d in dirs:
            chmod(os.path.join(root, d))


# ---- the script ---------------------------------------------------------------------------------------


def _children() -> list[int]:
    """This process's children (``/proc/<pid>/stat``'s parent field)."""
    me = os.getpid()
    out = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc: only what waitpid reaps is ended
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2:].split()
        if len(fields) > 1 and int(fields[1]) == me:
            out.append(int(name))
    return out


def _kill_descendants() -> None:
    """Kill and reap every child until none is left (orphans below keep arriving as the subreaper's)."""
    deadline = time.monotonic() + KILL_ROUNDS_S
    while time.monotonic() < deadline:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                break
        for pid in _children():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


class _Stopped(Exception):
    pass


def _stop_requested(_signum, _frame) -> None:
    raise _Stopped()


def _main(argv: list[str]) -> int:
    status_file, cmd = argv[0], argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop_requested)
    ended = "stopped"
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        try:
            os.execv(cmd[0], cmd)
        except OSError as exc:
            os.write(2, f"cannot run {cmd[0]}: {exc}\n".encode())
        os._exit(127)
    try:
        _, code = os.waitpid(pid, 0)
        ended = f"signal {_signal_name(os.WTERMSIG(code))}" if os.WIFSIGNALED(code) else f"exit {os.WEXITSTATUS(code)}"
    except _Stopped:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        _kill_descendants()
        with open(status_file, "w", encoding="ascii") as f:
            f.write(ended + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
