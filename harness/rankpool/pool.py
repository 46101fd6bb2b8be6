"""RankPool: a persistent group of rank processes that runs one function on every rank.

    pool = RankPool(4)                            # gloo on CPU here; nccl, one rank per card, on a card box
    sums = pool.run(my_module.body, 3)            # body(ctx, 3) on ranks 0..3 -> [r0, r1, r2, r3]
    pool.close()

Ranks are started (forked, see ``start_method`` and .spawn) and join their process group once; every
``run`` reuses that live group, so a test costs a few ms instead of a group start-up.
A rank that raises, exits or hangs fails the call in bounded time (RankFailure /
RankTimeout, with the rank's traceback or live stack); the pool then kills its
ranks and the next ``run`` starts a fresh group. Bodies are module-level functions
(sent by import path) and results must pickle. Rendezvous is a FileStore in a
private temp dir: no ports, so pools in xdist workers and side by side never collide.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.connection as mp_connection
import os
import re
import shutil
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any, Optional

from harness import procfs

from . import rank_main, rendezvous
from .backend import DEFAULT_MAX_WORLD_SIZE, BackendChoice, check_seconds, check_world_size, resolve_backend
from .errors import Origin, RankFailure, RankSkip, RankTimeout, origin_of_dump
from .messages import Call, Close, Done, Failed, Ready, State, StateQuery, ToParent
from .spawn import other_threads, start_processes

# forkserver: one process per pool owner imports torch once; every rank is then a
# cheap fork of it (spawn paid ~1.8 s of torch import per rank, per pool start).
_MP = multiprocessing.get_context("forkserver")
_PRELOAD = ["torch", "torch.distributed", "harness.rankpool.rank_main"]
_MP.set_forkserver_preload(list(_PRELOAD))
_FORK = multiprocessing.get_context("fork") if "fork" in multiprocessing.get_all_start_methods() else None


def start_method(device_type: str) -> str:
    """``fork`` where forking the owner itself is safe, else ``forkserver``.

    An owner on CPU whose only Python thread is the main one (an xdist worker, whose execnet
    runs on the main thread; ``python -m harness``; a plain ``pytest``) forks its ranks
    directly: they inherit the torch and modules it already imported. A forkserver costs a
    second interpreter that imports torch (~2 s of CPU), worth it where the owner cannot be
    forked safely: other Python threads (a lock one of them holds would stay held in the rank; the
    harness's own idle spawner thread does not count, ``spawn.other_threads``),
    ranks on cards (CUDA the owner initialised does not survive a fork), Python 3.12+ (which
    warns on forking a process with any other OS thread, and torch keeps one).
    """
    if (_FORK is not None and device_type == "cpu" and sys.version_info < (3, 12)
            and threading.current_thread() is threading.main_thread() and not other_threads()):
        return "fork"
    return "forkserver"


def preload(*modules: str) -> None:
    """Import ``modules`` once in the forkserver too, so every rank forked from it has them.

    A body's modules are otherwise imported by each rank on its first call (hundreds of
    milliseconds per rank for a body that pulls in Hydra). Takes effect when this process
    starts its forkserver (its first pool); afterwards it changes nothing. A module that
    fails to import there is skipped, and a rank that needs it imports it as before.
    """
    added = [m for m in modules if m not in _PRELOAD]
    if added:
        _PRELOAD.extend(added)
        _MP.set_forkserver_preload(list(_PRELOAD))
_live_pools: weakref.WeakSet[RankPool] = weakref.WeakSet()

OUTPUT_TAIL_BYTES = 1 << 20
"""The most of one rank's standard output and error kept per call (its last bytes): a rank's output goes to
a pipe of the pool's, and at the end of each call the pool writes what it kept to its own standard error,
saying how much was cut before it."""
_READ_BYTES = 1 << 16


class _Output:
    """The read end of one rank's output pipe: the tail of what it wrote since the last report, and how much."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.chunks: list[bytes] = []
        self.kept = 0
        self.total = 0
        self.eof = False

    def drain(self) -> None:
        """Read what the pipe holds now (never waits), keeping the last ``OUTPUT_TAIL_BYTES``."""
        while not self.eof and mp_connection.wait([self.conn], timeout=0):
            try:
                chunk = os.read(self.conn.fileno(), _READ_BYTES)
            except OSError:
                chunk = b""
            if not chunk:
                self.eof = True
                break
            self.total += len(chunk)
            self.chunks.append(chunk)
            self.kept += len(chunk)
            while self.chunks and self.kept - len(self.chunks[0]) >= OUTPUT_TAIL_BYTES:
                self.kept -= len(self.chunks.pop(0))

    def report(self, rank: int) -> None:
        """Write the kept tail to this process's standard error (cut to ``OUTPUT_TAIL_BYTES``, saying so)."""
        if not self.total:
            return
        data = b"".join(self.chunks)[-OUTPUT_TAIL_BYTES:]
        text = data.decode(errors="replace")
        if self.total > len(data):
            text = (f"[rank {rank} wrote {self.total} bytes to its standard output and error; the first "
                    f"{self.total - len(data)} were cut, the last {len(data)} follow]\n") + text
        self.chunks, self.kept, self.total = [], 0, 0
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(text)
            sys.stderr.flush()


class RankPool:
    """``world_size`` rank processes forming one torch.distributed group, reused by every ``run``.

    backend: "auto" (nccl with one rank per card if there are enough cards, else gloo),
    "gloo" or "nccl" (PoolUnavailable without a card per rank). device_type: "auto",
    "cpu", or "cuda" (with gloo: ranks share the visible cards round-robin).
    timeout_s: default limit of one ``run``; grace_s: once a rank has failed, how long
    the others may go without reporting or using CPU before they count as stuck (in a
    collective with the failed rank) and are killed.
    Not re-entrant: calls are serialized by a lock.
    """

    def __init__(
        self,
        world_size: int,
        *,
        backend: str = "auto",
        device_type: str = "auto",
        timeout_s: float = 60.0,
        max_world_size: int = DEFAULT_MAX_WORLD_SIZE,
        start_timeout_s: float = 180.0,
        grace_s: float = 2.0,
        close_timeout_s: float = 5.0,
    ) -> None:
        self.world_size = check_world_size(world_size, max_world_size)
        self.timeout_s = check_seconds("runner.timeout_s", timeout_s)
        self.start_timeout_s = check_seconds("runner.start_timeout_s", start_timeout_s)
        self.grace_s = grace_s
        self.close_timeout_s = close_timeout_s
        self.choice: BackendChoice = resolve_backend(backend, world_size, device_type=device_type)
        self.generation = 0
        self.start_method: Optional[str] = None
        """How the live generation's ranks were started (``start_method``); None before the first start."""
        """How many times the ranks have been started (a rebuild after a failure adds one)."""
        self._lock = threading.RLock()
        self._owner_pid = os.getpid()
        self._procs: list[Any] = []
        self._conns: list[Any] = []
        self._outputs: list[_Output] = []
        """Per rank, its output pipe's read end (``OUTPUT_TAIL_BYTES``)."""
        self._tmp_dir: Optional[str] = None
        self._stack_offsets: dict[int, int] = {}
        self._native_offsets: dict[int, int] = {}
        """Per rank, the size of its native log when the current call began (its lines since are the call's)."""
        self._call_id = 0
        self.idle_since = time.monotonic()
        """When the last ``run`` returned (or the pool was made)."""
        _live_pools.add(self)

    # -- public ---------------------------------------------------------------------------
    @property
    def backend(self) -> str:
        return self.choice.backend

    @property
    def started(self) -> bool:
        return bool(self._procs)

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    @property
    def tmp_dir(self) -> Optional[str]:
        """The live generation's private directory (RankContext.tmp_dir); None when stopped."""
        return self._tmp_dir

    def start(self) -> None:
        """Start the ranks now (``run`` does it on demand)."""
        with self._lock:
            if not self._procs:
                try:
                    self._start()
                except (RankFailure, RankSkip):
                    raise
                except BaseException:
                    self._kill()
                    raise

    def run(self, fn: Callable[..., Any] | str, *args: Any, timeout_s: Optional[float] = None) -> list[Any]:
        """Call ``fn(ctx, *args)`` on every rank; return the results ordered by rank.

        ``fn`` is a module-level function or its ``"module:qualname"``. Raises RankFailure
        (a rank raised or exited), RankTimeout (not done within ``timeout_s``, default the
        pool's), or RankSkip (the ranks skipped; the pool stays live).
        """
        ref = function_ref(fn)
        limit_s = self.timeout_s if timeout_s is None else check_seconds("timeout_s", timeout_s)
        with self._lock:
            self._call_id += 1
            # Pickled once, before any rank is told anything: unpicklable args fail here, cleanly.
            message = ForkingPickler.dumps(Call(self._call_id, ref, tuple(args)))
            try:
                if not self._procs:
                    self._start()
                self._native_offsets = {r: _size(self._native_log_path(r)) for r in range(len(self._procs))}
                for conn in self._conns:
                    try:
                        conn.send_bytes(message)
                    except (BrokenPipeError, OSError):
                        pass  # that rank is gone; collecting reports its exit
                return self._collect(ref, self._call_id, limit_s)
            except (RankFailure, RankSkip):
                raise
            except BaseException:  # e.g. KeyboardInterrupt: the ranks' state is unknown
                self._kill()
                raise
            finally:
                self._report_output()
                self.idle_since = time.monotonic()

    def close(self) -> None:
        """Stop the ranks: destroy_process_group with a bounded wait, then kill. Never hangs.

        A later ``run`` on a closed pool starts a fresh group.
        """
        with self._lock:
            self._close()

    def __enter__(self) -> RankPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"generation {self.generation}, pids {self.pids}" if self._procs else "stopped"
        return f"RankPool(world_size={self.world_size}, backend={self.backend!r}, {state})"

    # -- start ----------------------------------------------------------------------------
    def _start(self) -> None:
        self.generation += 1
        self._tmp_dir = rendezvous.make_pool_dir()
        self._stack_offsets = {}
        child_ends = []
        self.start_method = start_method(self.choice.device_type)
        context = _FORK if self.start_method == "fork" else _MP
        for rank in range(self.world_size):
            parent_end, child_end = context.Pipe(duplex=True)
            out_read, out_write = context.Pipe(duplex=False)
            proc = context.Process(
                target=rank_main.main,
                name=f"lwsplit-w{self.world_size}-rank{rank}",
                daemon=True,
                kwargs=dict(
                    rank=rank,
                    world_size=self.world_size,
                    backend=self.choice.backend,
                    device=self.choice.device(rank),
                    tmp_dir=self._tmp_dir,
                    conn=child_end,
                    parent_pid=os.getpid(),
                    pg_timeout_s=max(300.0, 10 * self.timeout_s),
                    output=out_write,
                ),
            )
            self._procs.append(proc)
            self._conns.append(parent_end)
            self._outputs.append(_Output(out_read))
            child_ends += [child_end, out_write]
        try:
            start_processes(self._procs)
        except BaseException:
            self._kill()
            raise
        finally:
            for end in child_ends:  # so a dead rank reads as EOF here
                end.close()
        try:
            self._collect("start-up", 0, self.start_timeout_s, expect="ready")
        finally:
            self._report_output()

    # -- collect ----------------------------------------------------------------------------
    def _collect(self, what: str, call_id: int, limit_s: float, expect: str = "ok") -> list[Any]:
        n = self.world_size
        results: dict[int, Any] = {}
        errors: dict[int, tuple[str, str]] = {}
        origins: dict[int, Origin] = {}
        pending = set(range(n))
        deadline = time.monotonic() + limit_s
        # After a first failure, stop waiting once no rank has reported for grace_s AND no
        # unfinished rank used CPU meanwhile: ranks stuck in a gloo collective sleep, while a
        # rank merely slowed by a loaded machine keeps computing.
        first_bad: Optional[float] = None
        last_event = 0.0
        cpu_seen: dict[int, int] = {}
        by_conn = {id(c): r for r, c in enumerate(self._conns)}
        by_output = {id(o.conn): o for o in self._outputs}
        by_sentinel = {p.sentinel: r for r, p in enumerate(self._procs)}
        while pending:
            until = deadline if first_bad is None else min(deadline, last_event + self.grace_s)
            now = time.monotonic()
            if now >= until:
                if first_bad is not None and now < deadline and self._progressing(pending, cpu_seen):
                    last_event = now
                    continue
                break
            left = until - now
            waitables = [self._conns[r] for r in pending] + [self._procs[r].sentinel for r in pending]
            waitables += [o.conn for o in self._outputs if not o.eof]
            ready = mp_connection.wait(waitables, timeout=left)
            # Messages before exits: a rank may have reported and then died.
            ready.sort(key=lambda o: isinstance(o, int))
            for obj in ready:
                if id(obj) in by_output:  # its output: read now, so a rank that prints never blocks on the pipe
                    by_output[id(obj)].drain()
                    continue
                r = by_sentinel[obj] if isinstance(obj, int) else by_conn[id(obj)]
                if r not in pending:
                    continue
                msg = self._receive(r, call_id) if not isinstance(obj, int) or self._conns[r].poll() else None
                if msg is None:
                    errors[r] = ("exit", self._describe_exit(r))
                    origins[r] = origin_of_dump(errors[r][1], errors[r][1].splitlines()[0].split(") ", 1)[-1])
                elif expect == "ready" and isinstance(msg, Ready):
                    results[r] = msg.pid
                elif expect == "ok" and isinstance(msg, Done) and msg.call_id == call_id:
                    results[r] = msg.result
                elif isinstance(msg, Failed) and (expect == "ready" or msg.call_id in (call_id, None)):
                    errors[r] = (msg.kind, msg.text)
                    if msg.origin is not None:
                        origins[r] = msg.origin
                else:
                    continue  # a stale message from an earlier call
                pending.discard(r)
                last_event = time.monotonic()
                if r in errors and first_bad is None:
                    first_bad = last_event
                    self._progressing(pending, cpu_seen)  # baseline CPU times
        if not pending and not errors:
            return [results[r] for r in range(n)]
        raise self._failure(what, limit_s, errors, pending, origins)

    def _progressing(self, ranks: set[int], cpu_seen: dict[int, int]) -> bool:
        """Did any of ``ranks`` use CPU (>= 2 clock ticks) since the last look? False without /proc."""
        moved = False
        for r in ranks:
            ticks = _cpu_ticks(self._procs[r].pid)
            if ticks is None:
                continue
            if r in cpu_seen and ticks - cpu_seen[r] >= 2:
                moved = True
            cpu_seen[r] = ticks
        return moved

    def _receive(self, rank: int, call_id: int) -> Optional[ToParent]:
        try:
            return self._conns[rank].recv()
        except (EOFError, OSError):
            return None
        except Exception as exc:  # the result does not unpickle here (e.g. a class only the rank has)
            return Failed(call_id, "exception", f"rank {rank}'s reply could not be unpickled by the parent: {exc!r}")

    def _failure(self, what: str, limit_s: float, errors: dict[int, tuple[str, str]], pending: set[int],
                 origins: dict[int, Origin]) -> Exception:
        failure = self._failure_of(what, limit_s, errors, pending)
        if isinstance(failure, RankFailure):  # where the root failure comes from: its rank's own origin
            rank = failure.failed_rank
            if rank is None:  # an agreed check: the lowest rank that raised it
                rank = min((r for r, (k, _) in errors.items() if k == "check"), default=None)
            if rank in origins:
                failure.origin = origins[rank]
            elif rank in pending:
                failure.origin = origin_of_dump(failure.rank_errors.get(rank, ""), f"did not finish within {limit_s:g} s")
        return failure

    def _failure_of(self, what: str, limit_s: float, errors: dict[int, tuple[str, str]], pending: set[int]) -> Exception:
        stacks = self._dump_stacks(sorted(pending)) if pending else {}
        keep = what != "start-up" and not pending and "exit" not in {k for k, _ in errors.values()} and self._in_step()
        if not keep:
            self._kill()
        ranks = f"{self.world_size} rank{'s' if self.world_size > 1 else ''}"
        head = f"{what} on {ranks} ({self.backend}, pool generation {self.generation})"
        exits = {r: t for r, (k, t) in errors.items() if k == "exit"}
        raised = {r: t for r, (k, t) in errors.items() if k == "exception"}
        checks = {r: t for r, (k, t) in errors.items() if k == "check"}
        skips = {r: t for r, (k, t) in errors.items() if k == "skip"}
        if not (exits or raised or checks) and skips:
            return RankSkip(skips[min(skips)])
        summary, sections = [], []
        # A dead rank is always a root cause; peers then raise connection errors, so it goes first.
        for label, group in (("exited", exits), ("raised", raised)):
            if group:
                # The root cause's own words on the first line: exit codes; the exception when no rank died.
                why = _root_cause(label, group) if label == "exited" or not exits else ""
                summary.append(f"rank{'s' if len(group) > 1 else ''} {_ranks(group)} {label}{why}")
                sections += [f"--- rank {r} {label} ---\n{group[r].rstrip()}" for r in sorted(group)]
        if checks:
            last_line = next(iter(checks.values())).rstrip().splitlines()[-1]
            summary.append(f"agreed check raised on ranks {_ranks(checks)}: {last_line}")
            sections += ["--- agreed check ---\n" + t.rstrip() for t in sorted(set(checks.values()))]
        if pending and errors:
            summary.append(f"rank{'s' if len(pending) > 1 else ''} {_ranks(pending)} still running "
                           f"(idle, no report for {self.grace_s:g} s after the first failure)")
        sections += [f"--- rank {r} stack ---\n{stacks[r].rstrip()}{self._native_tail(r)}" for r in sorted(stacks)]
        every = {**{r: t for r, (_, t) in errors.items() if r not in skips}, **{r: stacks.get(r, "") for r in pending}}
        if not errors:
            msg = f"{head} did not finish within {limit_s:g} s; unfinished ranks: {_ranks(pending)}"
            msg += _where_stuck(stacks)
            return RankTimeout(msg + "\n" + "\n".join(sections), rank_errors=every, pool_rebuilt=True)
        msg = f"{head} failed: " + "; ".join(summary)
        sections.append(
            "(every rank reported and ran the same collectives: the live group was kept)"
            if keep else "(the ranks were killed; the next run starts a fresh group)"
        )
        return RankFailure(msg + "\n" + "\n".join(sections), rank_errors=every, pool_rebuilt=not keep)

    def _in_step(self) -> bool:
        """After a failure in which every rank reported: did all ranks run the same collectives?

        If so the live group is kept (no rebuild); any doubt means rebuild.
        """
        states = []
        for conn in self._conns:
            try:
                conn.send(StateQuery())
                if not conn.poll(max(10.0, 5 * self.grace_s)):  # idle ranks answer at once; allow for load
                    return False
                reply = conn.recv()
            except Exception:  # noqa: BLE001 - a broken pipe, or anything odd: rebuild
                return False
            if not isinstance(reply, State) or reply.state is None:
                return False
            states.append(reply.state)
        if len({(s["group_count"], tuple(map(str, s["created"]))) for s in states}) != 1:
            return False
        seqs: dict[Any, set[int]] = {}
        for state in states:
            for key, seq in state["seq"].items():
                seqs.setdefault(key, set()).add(seq)
        return all(len(v) == 1 for v in seqs.values())

    def _describe_exit(self, rank: int) -> str:
        proc = self._procs[rank]
        proc.join(timeout=1.0)
        code = proc.exitcode
        if code is None:
            text = "closed its pipe but is still running"
        elif code < 0:
            text = f"killed by signal {signal.Signals(-code).name} (exit code {code})"
        else:
            text = f"exit code {code}"
        crash = self._read_stack_file(rank)
        return f"rank {rank} (pid {proc.pid}) {text}" + (f"\n{crash}" if crash.strip() else "") + self._native_tail(rank)

    def _native_log_path(self, rank: int) -> str:
        return os.path.join(self._tmp_dir or "", rank_main.NATIVE_LOG_FILE.format(rank=rank))

    def _native_tail(self, rank: int) -> str:
        """The last lines the rank's compiled code logged during this call (``rank_main.NATIVE_LOG_FILE``), as a
        paragraph; empty when it logged none."""
        start = self._native_offsets.get(rank, 0)
        try:
            with open(self._native_log_path(rank), "rb") as f:
                end = f.seek(0, os.SEEK_END)
                f.seek(max(start, end - NATIVE_TAIL_BYTES))
                data = f.read(NATIVE_TAIL_BYTES)
        except OSError:
            return ""
        lines = data.decode(errors="replace").splitlines()[-NATIVE_TAIL_LINES:]
        return ("\nits compiled code's last log lines:\n" + "\n".join(lines)) if lines else ""

    def _stack_path(self, rank: int) -> str:
        return os.path.join(self._tmp_dir or "", rank_main.STACK_FILE.format(rank=rank))

    def _read_stack_file(self, rank: int) -> str:
        try:
            with open(self._stack_path(rank), "rb") as f:
                f.seek(self._stack_offsets.get(rank, 0))
                data = f.read()
        except OSError:
            return ""
        self._stack_offsets[rank] = self._stack_offsets.get(rank, 0) + len(data)
        return data.decode(errors="replace")

    def _dump_stacks(self, ranks: list[int]) -> dict[int, str]:
        """Each rank's live Python stack, via its faulthandler SIGUSR1 hook."""
        for r in ranks:
            self._read_stack_file(r)  # skip anything written earlier
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._procs[r].pid, signal.SIGUSR1)
        sizes: dict[int, int] = {}
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            time.sleep(0.1)
            now = {r: _size(self._stack_path(r)) for r in ranks}
            if now == sizes and all(now[r] > self._stack_offsets.get(r, 0) for r in ranks):
                break  # every rank wrote and nothing grew for 0.1 s
            sizes = now
        return {r: self._read_stack_file(r) or "(no stack: the rank did not answer SIGUSR1)" for r in ranks}

    # -- stop -----------------------------------------------------------------------------
    def _close(self, *, polite: bool = True) -> None:
        if not self._procs or os.getpid() != self._owner_pid:
            return
        if polite:
            self._kill_descendants()
            for conn in self._conns:
                with contextlib.suppress(OSError):
                    conn.send(Close())
            _wait_exit(self._procs, self.close_timeout_s)
        self._kill()

    def _kill_descendants(self) -> None:
        """SIGKILL everything the live ranks started (each rank is a child subreaper, so a ``setsid()``
        grandchild whose parent exited is still its descendant), walking again until none is left."""
        ranks = [p.pid for p in self._procs if p.pid is not None and p.exitcode is None]
        for _ in range(100):
            found = [kid for pid in ranks for kid in procfs.descendants(pid)]
            if not found:
                return
            for kid in found:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(kid, signal.SIGKILL)
            time.sleep(0.001)

    def _report_output(self) -> None:
        """Each rank's output since the last report (its tail), on this process's standard error."""
        for rank, out in enumerate(self._outputs):
            out.drain()
            out.report(rank)

    def _kill(self) -> None:
        """Everything the ranks started, then the ranks: SIGTERM, a short grace, SIGKILL; then drop pipes and
        the temp dir."""
        self._kill_descendants()
        alive = [p for p in self._procs if p.pid is not None and p.exitcode is None]
        for p in alive:
            with contextlib.suppress(OSError):
                p.terminate()
        _wait_exit(alive, 0.5)
        for p in alive:
            if p.exitcode is None:
                with contextlib.suppress(OSError):
                    p.kill()
        for p in self._procs:
            if p.pid is not None:
                p.join(timeout=5.0)
        for conn in self._conns:
            conn.close()
        self._report_output()
        for out in self._outputs:
            out.conn.close()
        if self._tmp_dir:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
        self._procs, self._conns, self._outputs, self._tmp_dir = [], [], [], None


def function_ref(fn: Callable[..., Any] | str) -> str:
    """``"module:qualname"`` for a module-level function, checked by importing it here."""
    if isinstance(fn, str):
        ref = fn
        if ":" not in ref:
            raise ValueError(f"function reference must look like 'package.module:function', got {ref!r}")
        rank_main.resolve(ref)
        return ref
    module, qualname = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or "<" in qualname:
        raise TypeError(f"run() needs a module-level function (ranks import it by name); got {fn!r}")
    ref = f"{module}:{qualname}"
    if rank_main.resolve(ref) is not fn:
        raise TypeError(f"{ref} does not name {fn!r}; pass a module-level function")
    return ref


def close_live_pools() -> None:
    """Kill every pool of this process (interpreter exit). Skips pools busy in another thread."""
    for pool in list(_live_pools):
        if pool._lock.acquire(timeout=1.0):
            try:
                pool._close()
            finally:
                pool._lock.release()
        else:
            pool._close(polite=False)


atexit.register(close_live_pools)


def _ranks(ranks: Any) -> str:
    return ", ".join(str(r) for r in sorted(ranks))


def _root_cause(label: str, group: dict[int, str]) -> str:
    """`` (exit code 3)`` for exits; ``: ValueError: ...`` (lowest rank's exception line) for raises."""
    if label == "exited":
        codes = {r: t.splitlines()[0].split(") ", 1)[-1] for r, t in group.items() if t.strip()}
        if len(codes) == 1 and len(group) == 1:
            return f" ({next(iter(codes.values()))})"
        return " (" + "; ".join(f"rank {r}: {c}" for r, c in sorted(codes.items())) + ")" if codes else ""
    lines = group[min(group)].rstrip().splitlines()
    last = lines[-1].strip() if lines else ""
    return f": {last[:200]}" if last else ""


def _where_stuck(stacks: dict[int, str]) -> str:
    """`` (rank 3 at faulty.py:127 in _sleep_forever; ranks 0, 1, 2 at ...)``: the body's innermost frame.

    Names the hung rank on the summary line: peers waiting in a collective show a
    torch.distributed frame, the culprit shows its own.
    """
    by_frame: dict[str, list[int]] = {}
    for rank, text in stacks.items():
        frame = _body_frame(text)
        if frame:
            by_frame.setdefault(frame, []).append(rank)
    if not by_frame:
        return ""
    parts = sorted((sorted(r), f) for f, r in by_frame.items())
    return " (" + "; ".join(f"rank{'s' if len(r) > 1 else ''} {_ranks(r)} at {f}" for r, f in parts) + ")"


def _body_frame(stack: str) -> Optional[str]:
    """Innermost frame of the thread running the body (the one through ``rank_main.serve``)."""
    for block in stack.split("\n\n"):
        frames = [line.strip() for line in block.splitlines() if line.strip().startswith("File ")]
        if any("rank_main.py" in f and f.endswith(" in serve") for f in frames):
            match = _FRAME_RE.match(frames[0])
            return f"{os.path.basename(match.group(1))}:{match.group(2)} in {match.group(3)}" if match else frames[0]
    return None


_FRAME_RE = re.compile(r'File "(.+)", line (\d+) in (\S+)')


def _cpu_ticks(pid: int) -> Optional[int]:
    """utime + stime of a process, in clock ticks (``harness.procfs``); None when it cannot be read."""
    found = procfs.stat(pid)
    return None if found is None else found.cpu_ticks


NATIVE_TAIL_LINES = 8
NATIVE_TAIL_BYTES = 16 * 1024
"""How much of a failed rank's native log its failure shows: at most these lines of the last bytes."""


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _wait_exit(procs: list[Any], timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    waiting = [p.sentinel for p in procs if p.pid is not None and p.exitcode is None]
    while waiting and time.monotonic() < end:
        done = mp_connection.wait(waiting, timeout=max(0.0, end - time.monotonic()))
        waiting = [s for s in waiting if s not in done]
