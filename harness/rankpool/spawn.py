"""Starting rank processes: from a thread that outlives them, with the ranks' thread limits.

PR_SET_PDEATHSIG fires when the *thread* that forked a rank ends, so ranks are always
forked by a thread that lives as long as the process: the main thread, or a daemon
spawner thread when a pool is (re)started from another thread.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from collections.abc import Iterator
from typing import Any, Optional

_RANK_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}  # CI: 2 cores, 4 xdist workers, pools of 8
_spawn_jobs: queue.Queue[tuple[list[Any], queue.Queue]] = queue.Queue()
_spawn_thread: Optional[threading.Thread] = None
_spawn_lock = threading.Lock()
_env_lock = threading.Lock()
_spawner_busy = False
"""True while the spawner thread handles a job (only it writes this)."""


def spawner_thread() -> Optional[threading.Thread]:
    """The long-lived thread that starts ranks for pools started off the main thread (None until the first)."""
    return _spawn_thread


def start_processes(procs: list[Any]) -> None:
    """``p.start()`` for each process, on the main thread or the long-lived spawner thread."""
    global _spawn_thread
    if threading.current_thread() is threading.main_thread():
        _start_now(procs)
        return
    with _spawn_lock:
        if _spawn_thread is None:
            _spawn_thread = threading.Thread(target=_spawn_loop, name="lwsplit-spawner", daemon=True)
            _spawn_thread.start()
    done: queue.Queue = queue.Queue()
    _spawn_jobs.put((procs, done))
    error = done.get()
    if error is not None:
        raise error


def _spawn_loop() -> None:
    global _spawner_busy
    while True:
        procs, done = _spawn_jobs.get()
        _spawner_busy = True
        try:
            _start_now(procs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            done.put(exc)
        else:
            done.put(None)
        finally:
            _spawner_busy = False


def other_threads() -> list[threading.Thread]:
    """The live Python threads besides the main one that a fork could catch holding a lock
    (``fork_unsafe_threads`` of this process's threads, its spawner thread and whether it is at work)."""
    return fork_unsafe_threads(threading.enumerate(), threading.main_thread(), _spawn_thread, _spawner_busy)


def fork_unsafe_threads(threads, main: threading.Thread, spawner: Optional[threading.Thread],
                        spawner_busy: bool) -> list[threading.Thread]:
    """Of ``threads``, those a fork could catch holding a lock: all but ``main``, and but ``spawner`` while it
    waits for work (``spawner_busy`` false).

    The spawner thread then holds none of this module's locks, and a rank never uses its queue. It lives
    as long as the process once a pool was started from another thread; counting it would make every later
    pool of that process pay for a forkserver and for each rank's own imports."""
    return [t for t in threads if t is not main and not (t is spawner and not spawner_busy)]


def _start_now(procs: list[Any]) -> None:
    with _env_lock, _rank_env():
        for p in procs:
            p.start()


@contextlib.contextmanager
def _rank_env() -> Iterator[None]:
    """Thread limits must be in the environment before the rank imports torch."""
    saved = {k: os.environ.get(k) for k in _RANK_ENV}
    os.environ.update(_RANK_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
