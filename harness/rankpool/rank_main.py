"""The rank process: join the group once, then run bodies sent by the parent until told to stop.

Protocol over this rank's Pipe (frozen dataclasses of ``harness.rankpool.messages``):
  parent -> rank   Call(call_id, "module:qualname", args, kwargs) | StateQuery() | Close()
  rank -> parent   Ready(pid) | Done(call_id, result) | Failed(call_id, kind, text)
                   | State(RankContext.sync_state()) | Closed()
``kind`` is "exception", "check" (an agreed ``assert_all`` failure) or "skip" (text = reason);
call_id None answers the current call (its arguments could not be unpickled).
Only stdlib is imported at module level: torch is imported after the thread limits are set.
"""

from __future__ import annotations

import ctypes
import dataclasses
import faulthandler
import importlib
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
import unittest
from typing import Any, Callable, Optional

from contract.interface import NATIVE_LOG_ENV
from harness import procfs

from . import rendezvous
from .errors import CollectiveCheckFailed, RankSkip, origin_of
from .messages import Call, Close, Closed, Done, Failed, Ready, State, StateQuery

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
"""prctl(2): orphaned descendants of the rank (a ``setsid()`` grandchild) are reparented to it, so the pool
finds and ends them before the rank (``RankPool._kill_descendants``)."""
STACK_FILE = "faulthandler-rank{rank}.txt"
TEMP_DIR = "tmp-rank{rank}"
"""The rank's temporary folder (``TMPDIR``, ``tempfile.tempdir``) inside the pool's private one: what the rank and
its processes leave there (a native host's working folder when the pool killed the host) goes when the pool
removes its folder."""
NATIVE_LOG_FILE = "native-log-rank{rank}.txt"
"""The rank's native log (``contract.interface.NATIVE_LOG_ENV`` names it in the rank's environment): where
compiled code loaded into the rank appends its log lines. The pool shows a failed or hung rank's last ones."""


def die_with_parent(parent_pid: int, *, pdeathsig: bool = True,
                    before_exit: Optional[Callable[[], None]] = None) -> None:
    """End this process when ``parent_pid`` (the pool's owner, or a launcher agent) goes.

    Ranks are forked by the owner's main (or spawner) thread, or by a forkserver that exits with
    the owner, so prctl's parent-death signal (fired when the forking thread ends: a SIGKILL)
    covers the fast path; a thread polling the owner's pid covers the rest, and alone covers a
    process that another program started (``pdeathsig=False``: that program's thread is not
    ours to know). The poller calls ``before_exit`` (best effort) before it leaves with exit code 1.
    """
    if pdeathsig:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # not Linux: the watchdog below still works
    if not _alive(parent_pid):  # the owner died before prctl took effect
        os._exit(1)

    def watch() -> None:
        while _alive(parent_pid):
            time.sleep(0.5)
        if before_exit is not None:
            try:
                before_exit()
            except Exception:  # noqa: BLE001 - leaving matters more than tidying
                pass
        os._exit(1)

    threading.Thread(target=watch, name="parent-watchdog", daemon=True).start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True

    found = procfs.stat(pid)  # an unreaped zombie is gone for our purpose
    return found is None or not found.zombie


def resolve(ref: str) -> Callable[..., Any]:
    """``"package.module:Outer.func"`` -> the function object."""
    module_name, _, qualname = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def classify(exc: BaseException) -> Failed:
    """The ``Failed`` message (kind, text, origin) for an exception raised by a body (its call id unset)."""
    if isinstance(exc, RankSkip):
        return Failed(None, "skip", exc.reason)
    pytest = sys.modules.get("pytest")  # pytest.skip() in a body (it imported pytest); never import it here
    if isinstance(exc, unittest.SkipTest) or (pytest is not None and isinstance(exc, pytest.skip.Exception)):
        return Failed(None, "skip", str(getattr(exc, "msg", None) or exc))
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Failed(None, "check" if isinstance(exc, CollectiveCheckFailed) else "exception", text, origin_of(exc))


def send_result(conn: Any, call_id: int, result: Any) -> None:
    try:
        conn.send(Done(call_id, result))
    except Exception as exc:  # pickling happens before any byte is written
        conn.send(Failed(call_id, "exception", f"result of rank could not be sent to the parent: {exc!r}"))


def main(
    *,
    rank: int,
    world_size: int,
    backend: str,
    device: str,
    tmp_dir: str,
    conn: Any,
    parent_pid: int,
    pg_timeout_s: float,
    output: Any = None,
) -> None:
    die_with_parent(parent_pid)
    if output is not None:  # standard output and error: the pool's pipe, which keeps their tail (pool.OUTPUT_TAIL_BYTES)
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
        output.close()
        # a forked rank's sys.stdout may be its owner's (pytest's capture file): Python's writes go to the pipe too
        sys.stdout = open(1, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
        sys.stderr = open(2, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills us
    for sig in (signal.SIGTERM, signal.SIGHUP):  # a rank forked from the owner has the owner's handlers
        signal.signal(sig, signal.SIG_DFL)
    stack_file = open(os.path.join(tmp_dir, STACK_FILE.format(rank=rank)), "w")
    os.environ[NATIVE_LOG_ENV] = os.path.join(tmp_dir, NATIVE_LOG_FILE.format(rank=rank))
    temp = os.path.join(tmp_dir, TEMP_DIR.format(rank=rank))  # the rank's temporary files go with the pool's folder
    os.makedirs(temp, mode=0o700, exist_ok=True)
    os.environ["TMPDIR"] = temp
    tempfile.tempdir = temp
    faulthandler.enable(file=stack_file, all_threads=True)  # crashes (SIGSEGV, ...)
    faulthandler.register(signal.SIGUSR1, file=stack_file, all_threads=True)  # parent asks on timeout
    try:
        ctx = start_group(rank=rank, world_size=world_size, backend=backend, device=device, tmp_dir=tmp_dir,
                          pg_timeout_s=pg_timeout_s)
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, then exit
        from .errors import origin_of

        text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        conn.send(Failed(0, "exception", text, origin_of(exc)))
        os._exit(1)
    conn.send(Ready(os.getpid()))
    serve(ctx, conn)


def start_group(*, rank: int, world_size: int, backend: str, device: str, tmp_dir: str, pg_timeout_s: float):
    rendezvous.pin_gloo_to_loopback()
    # the pool's parent imports this module and never imports torch (3.7 s, python -X importtime): ranks only
    import torch

    torch.set_num_threads(1)
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    rendezvous.init_from_file_store(
        backend=backend, store_dir=tmp_dir, rank=rank, world_size=world_size, timeout_s=pg_timeout_s
    )
    # RankContext imports torch: ranks only (the pool's parent imports this module, never torch)
    from .context import RankContext

    return RankContext.after_init(local_rank=rank, device=device, tmp_dir=tmp_dir)


def serve(ctx: Any, conn: Any) -> None:
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # parent gone
            os._exit(1)
        except Exception as exc:  # noqa: BLE001 - the arguments do not unpickle in this rank
            conn.send(Failed(None, "exception", f"the call's arguments could not be unpickled: {exc!r}"))
            continue
        if isinstance(msg, Close):
            shut_down(conn)
        if isinstance(msg, StateQuery):
            conn.send(State(ctx.sync_state()))
            continue
        if not isinstance(msg, Call):
            conn.send(Failed(None, "exception", f"unknown message {type(msg).__name__}"))
            continue
        call_id = msg.call_id
        try:
            result = resolve(msg.ref)(ctx, *msg.args, **msg.kwargs)
        except BaseException as exc:  # noqa: BLE001 - every outcome goes back to the parent
            failed = dataclasses.replace(classify(exc), call_id=call_id)
            del exc
            conn.send(failed)
        else:
            send_result(conn, call_id, result)
            del result
        ctx.end_call()


def shut_down(conn: Any) -> None:
    """destroy_process_group, say so, and leave without interpreter teardown (the parent bounds the wait)."""
    try:
        # the pool's parent imports this module and never imports torch (3.7 s, python -X importtime): ranks only
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
    finally:
        try:
            conn.send(Closed())
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)
