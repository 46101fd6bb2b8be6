"""Module-level rank bodies for the runner's own tests, the card check and fault injection: test support, not in
the wheel. The pools load them by name (``"testcases.rank_bodies:echo"``); a test that starts pools adds this
module to the forkserver's preloads (``harness.rankpool.preload``, the registry of what ranks import).

Each takes the RankContext first. Fault hooks (``raise_on_rank``, ``exit_on_rank``,
``hang_on_rank``, ``hang_on_rank_after_saying_so``, ``crash_on_rank``, ``differ_on_rank``)
misbehave on one rank ``k`` while the others carry on into a collective, as a real bug
would leave them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from typing import Any

import torch
import torch.distributed as dist

from harness import procfs
from harness.rankpool.context import RankContext
from harness.rankpool.errors import RankSkip


def rank_info(ctx: RankContext) -> dict[str, Any]:
    """Who am I, plus a world all_reduce of rank+1 (sum over ranks, computed on every rank), and the
    interface gloo was told to use (``GLOO_SOCKET_IFNAME`` in this rank; None: gloo picks), the
    process that started it and whether SIGTERM still kills it."""
    t = torch.tensor([float(ctx.rank + 1)], device=ctx.device)
    dist.all_reduce(t)
    return {
        "rank": ctx.rank,
        "world_size": ctx.world_size,
        "local_rank": ctx.local_rank,
        "device": ctx.device,
        "backend": ctx.backend,
        "pid": os.getpid(),
        "parent_pid": os.getppid(),
        "sigterm_default": signal.getsignal(signal.SIGTERM) == signal.SIG_DFL,
        "tmp_dir": ctx.tmp_dir,
        "world_sum": t.item(),
        "gloo_socket_ifname": os.environ.get("GLOO_SOCKET_IFNAME"),
    }


def echo(ctx: RankContext, value: Any) -> Any:
    return value


def collective_round(ctx: RankContext) -> float:
    """One round of collectives: a tensor all_reduce, an object broadcast and a barrier."""
    t = torch.ones(1024, device=ctx.device)
    dist.all_reduce(t)
    ctx.broadcast_object({"step": 1}, src=0)
    ctx.barrier()
    return t[0].item()


def split_all_reduce(ctx: RankContext, partition: tuple[tuple[int, ...], ...]) -> dict[str, Any]:
    """all_reduce of rank+1 inside this rank's part of ``partition``."""
    group = ctx.split_groups(partition)
    t = torch.tensor([float(ctx.rank + 1)], device=ctx.device)
    dist.all_reduce(t, group=group)
    return {"sum": t.item(), "group_ranks": dist.get_process_group_ranks(group)}


def groups_and_threads(ctx: RankContext) -> dict[str, Any]:
    """The subgroups this rank keeps and its native thread count (each live gloo group runs threads)."""
    return {"groups": [list(g) for g in ctx.live_groups], "threads": procfs.thread_count()}


def gather_objects(ctx: RankContext, base: int) -> list[Any]:
    return ctx.all_gather_object(base + ctx.rank)


def broadcast_from(ctx: RankContext, src: int) -> Any:
    return ctx.broadcast_object(f"from rank {ctx.rank}", src=src)


def gather_sized(ctx: RankContext, sizes: list[int]) -> list[Any]:
    """Rank r contributes ``sizes[r]`` bytes (a pattern naming r) to an all-gather, then a
    broadcast from the last rank: objects on both sides of the one-frame limit."""
    mine = bytes([ctx.rank]) * sizes[ctx.rank]
    return [ctx.all_gather_object(mine), ctx.broadcast_object(mine, src=ctx.world_size - 1)]


def unpicklable_on_rank(ctx: RankContext, k: int, collective: str) -> Any:
    """Rank ``k`` passes a lambda (it does not pickle) to an object collective; the others an int."""
    obj = (lambda: None) if ctx.rank == k else ctx.rank
    if collective == "broadcast":
        return ctx.broadcast_object(obj, src=k)
    return ctx.all_gather_object(obj)


def write_then_read(ctx: RankContext) -> str:
    """Rank 0 writes a file in the shared tmp_dir; everyone reads it after a barrier."""
    path = os.path.join(ctx.tmp_dir, "fixture.txt")
    if ctx.rank == 0:
        with open(path, "w") as f:
            f.write("written by rank 0")
    ctx.barrier()
    with open(path) as f:
        return f.read()


def check_on_all(ctx: RankContext, bad_rank: int) -> None:
    ctx.assert_all(ctx.rank != bad_rank, f"value differs on rank {ctx.rank}")


def skip_on_all(ctx: RankContext, reason: str) -> None:
    raise RankSkip(reason)


def pytest_skip_on_all(ctx: RankContext, reason: str) -> None:
    import pytest

    pytest.skip(reason)


# -- fault hooks -------------------------------------------------------------------------
def raise_on_rank(ctx: RankContext, k: int, message: str = "injected failure") -> None:
    """All ranks do one all_reduce; then rank k raises while the others enter a second one."""
    t = torch.ones(1, device=ctx.device)
    dist.all_reduce(t)
    if ctx.rank == k:
        raise ValueError(f"{message} on rank {k}")
    dist.all_reduce(t)


def exit_on_rank(ctx: RankContext, k: int, code: int = 3) -> None:
    """Rank k leaves with os._exit(code) after the first collective; the others wait in a second."""
    t = torch.ones(1, device=ctx.device)
    dist.all_reduce(t)
    if ctx.rank == k:
        os._exit(code)
    dist.all_reduce(t)


def crash_on_rank(ctx: RankContext, k: int) -> None:
    """Rank k dereferences NULL (SIGSEGV; faulthandler writes its stack); the others wait."""
    if ctx.rank == k:
        ctypes.string_at(0)
    ctx.barrier()


def log_natively(ctx: RankContext, lines: list) -> None:
    """Each rank appends ``lines`` to its native log (``contract.interface.NATIVE_LOG_ENV``), as compiled code
    would."""
    from contract.interface import NATIVE_LOG_ENV

    with open(os.environ[NATIVE_LOG_ENV], "a") as f:
        f.writelines(f"{line}\n" for line in lines)


def log_natively_then_crash(ctx: RankContext, k: int, lines: list) -> None:
    """``log_natively``, then ``crash_on_rank``."""
    log_natively(ctx, lines)
    crash_on_rank(ctx, k)


def hang_on_rank(ctx: RankContext, k: int) -> None:
    """Rank k sleeps forever in ``sleep_forever``; the others wait for it in a barrier."""
    if ctx.rank == k:
        sleep_forever()
    ctx.barrier()


def hang_on_rank_after_saying_so(ctx: RankContext, k: int) -> None:
    """``hang_on_rank``, after each rank creates ``in-body-<rank>`` in tmp_dir: the owner can see
    that every rank has left its pipe for the body."""
    with open(os.path.join(ctx.tmp_dir, f"in-body-{ctx.rank}"), "w"):
        pass
    hang_on_rank(ctx, k)


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


def differ_on_rank(ctx: RankContext, k: int, value: Any = "layout-A", other: Any = "layout-B") -> Any:
    """Every rank returns ``value`` except rank k, which returns ``other``."""
    return other if ctx.rank == k else value


def fail_check_on_rank(ctx: RankContext, k: int) -> float:
    """Every rank completes the same all_reduce; then rank k alone fails an assertion."""
    t = torch.tensor([float(ctx.rank + 1)], device=ctx.device)
    dist.all_reduce(t)
    if ctx.rank == k:
        raise AssertionError(f"rank {k} disagrees with sum {t.item()}")
    return t.item()


def raise_out_of_step_on_rank(ctx: RankContext, k: int) -> None:
    """Rank k raises at once; the others start an async broadcast it never joins and return.

    Every rank reports, but their collective counters differ: the pool must not be kept.
    """
    if ctx.rank == k:
        raise RuntimeError(f"rank {k} left before the broadcast")
    src = 1 if k == 0 else 0
    dist.broadcast(torch.zeros(1, device=ctx.device), src=src, async_op=True)


def write_output(ctx: RankContext, n_bytes: int) -> None:
    """Each rank writes about ``n_bytes``: half through ``print``, half straight to file descriptor 1, then one
    line naming it on file descriptor 2."""
    line = "x" * 1023
    for _ in range(n_bytes // 2048):
        print(line)
    sys.stdout.flush()
    block = b"y" * 1023 + b"\n"
    for _ in range(n_bytes // 2048):
        os.write(1, block)
    os.write(2, f"the end of rank {ctx.rank}\n".encode())


ORPHAN_SLEEP = "654322"
"""The argument of the ``sleep`` that ``start_orphan`` leaves running."""


def start_orphan(ctx: RankContext, mark: str) -> None:
    """Rank 0 forks a child that calls ``setsid()``, starts ``sleep ORPHAN_SLEEP`` (``LWSPLIT_TEST_MARK=mark`` in
    its environment) and exits: the sleeper's parent is gone, and it is in a session of its own."""
    if ctx.rank != 0:
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child leaves by _exit
        try:
            os.setsid()
            subprocess.Popen(["sleep", ORPHAN_SLEEP], env={**os.environ, "LWSPLIT_TEST_MARK": mark},
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def temp_dirs(ctx: RankContext) -> tuple:
    """The rank's temporary folder as Python's ``tempfile`` and its child processes (``TMPDIR``) see it."""
    import tempfile

    return tempfile.gettempdir(), os.environ.get("TMPDIR")
