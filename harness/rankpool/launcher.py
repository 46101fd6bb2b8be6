"""External-launcher mode: run a pool body under torchrun (env:// rendezvous), e.g. for 2 nodes x 4 cards.

    torchrun --standalone --nproc-per-node 4 -m harness.rankpool.launcher testcases.rank_bodies:rank_info
    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m harness.rankpool.launcher --multi-node package.module:body '[1, "two"]'

``testcases.rank_bodies:rank_info`` is the project's own body (run from a checkout: the wheel ships no test code);
an installed harness names a body of yours. Each rank builds the same RankContext as in a RankPool (backend chosen per node: nccl
with one card per local rank when available, else gloo; ``--backend`` overrides), calls
``body(ctx, *json_args)``, and rank 0 prints ONE JSON line on stdout:
``{"ref": ..., "world_size": N, "backend": ..., "results": [rank 0's, rank 1's, ...], "skipped": {rank: reason}}``
(results must be JSON-serialisable; anything else is written as its repr()).
A rank that raises prints its traceback on stderr and exits 1, which makes torchrun stop
the other ranks and exit non-zero; a rank that hangs past ``--timeout-s`` dumps its stack
and exits 1 the same way. ``ctx.tmp_dir`` has the same path on every node but is node-local
(after a failure, a node without the failing rank may keep its empty copy). A rank whose launcher
agent is gone (killed outright, so it could not stop its ranks) says so on stderr, removes its
``tmp_dir`` and exits 1 within about a second, wherever it was: no rank outlives its agent.

Unlike the pool (FileStore, no ports), torchrun's c10d rendezvous listens on a TCP port:
with ``--standalone`` a free port on loopback that it picks itself. This mode is explicit.

Network: with one launcher agent (``--nnodes 1`` / ``--standalone``) gloo is pinned to
loopback whatever ``GLOO_SOCKET_IFNAME`` says. A world that spans several agents needs
``--multi-node``: only then is an inherited ``GLOO_SOCKET_IFNAME`` honoured (set it to the
interface the hosts share, e.g. ``GLOO_SOCKET_IFNAME=eth0``; ``lo`` for agents on one host);
without it such a run stops at once with exit code 2 instead of hanging on a loopback
address the other host cannot reach.
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import shutil
import sys
import tempfile
import threading
from typing import Any, Optional

from contract.errors import UserError

from . import rendezvous
from .backend import BACKENDS, DEVICE_TYPES, check_seconds, resolve_backend
from .errors import PoolUnavailable
from .rank_main import classify, die_with_parent, resolve


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m harness.rankpool.launcher", description=__doc__.split("\n")[0])
    parser.add_argument("body", help="module-level body as package.module:function")
    parser.add_argument("args", nargs="?", default="[]", help="JSON list of positional arguments for the body")
    parser.add_argument("--backend", default="auto", choices=BACKENDS)
    parser.add_argument("--device-type", default="auto", choices=DEVICE_TYPES)
    parser.add_argument("--timeout-s", type=float, default=600.0, help="limit for the body on each rank")
    parser.add_argument("--multi-node", action="store_true",
                        help="the world spans several launcher agents (hosts): honour GLOO_SOCKET_IFNAME "
                             "instead of pinning gloo to loopback")
    return parser.parse_args(argv)


def agent_count(env: dict[str, Optional[str]]) -> int:
    """Launcher agents (nodes) in the world: torchrun's GROUP_WORLD_SIZE, else WORLD_SIZE / LOCAL_WORLD_SIZE."""
    if env.get("GROUP_WORLD_SIZE"):
        return int(env["GROUP_WORLD_SIZE"] or 1)
    world, local = int(env.get("WORLD_SIZE") or 1), int(env.get("LOCAL_WORLD_SIZE") or env.get("WORLD_SIZE") or 1)
    return max(1, -(-world // max(1, local)))


def choose_gloo_interface(agents: int, multi_node: bool) -> Optional[str]:
    """Pin gloo to loopback for one agent; honour the inherited interface only in multi-node mode.

    Returns the interface gloo will use (None: gloo resolves the hostname). ValueError when
    a world spans several agents without ``--multi-node``.
    """
    if not multi_node:
        if agents > 1:
            raise ValueError(
                f"the world spans {agents} launcher agents: pass --multi-node (and set GLOO_SOCKET_IFNAME to the "
                "interface the hosts share; lo for agents on one host)"
            )
        rendezvous.pin_gloo_to_loopback()
    return os.environ.get("GLOO_SOCKET_IFNAME")


def main(argv: Optional[list[str]] = None) -> int:
    opts = parse_args(argv)
    env = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_WORLD_SIZE")}
    if env["RANK"] is None or env["WORLD_SIZE"] is None:
        print("harness.rankpool.launcher: RANK/WORLD_SIZE not set; start it with torchrun", file=sys.stderr)
        return 2
    try:
        args = json.loads(opts.args)
        if not isinstance(args, list):
            raise ValueError("not a JSON list")
        timeout_s = check_seconds("--timeout-s", opts.timeout_s)
        choose_gloo_interface(agent_count(env), opts.multi_node)
        local_rank = int(env["LOCAL_RANK"] or 0)
        choice = resolve_backend(opts.backend, int(env["LOCAL_WORLD_SIZE"] or env["WORLD_SIZE"]),
                                 device_type=opts.device_type)
        body = resolve(opts.body)
    except (ValueError, UserError, PoolUnavailable, ImportError, AttributeError) as exc:
        print(f"harness.rankpool.launcher: {exc}", file=sys.stderr)
        return 2
    left_behind: list[str] = []
    agent = os.getppid()
    die_with_parent(agent, pdeathsig=False, before_exit=lambda: _orphaned(agent, left_behind))
    ctx = join_group(choice.backend, choice.device(local_rank), local_rank, timeout_s)
    left_behind.append(ctx.tmp_dir)

    faulthandler.enable()
    watchdog = threading.Timer(timeout_s, fail, args=(ctx, f"did not finish within {timeout_s:g} s", True))
    watchdog.daemon = True
    watchdog.start()
    outcome: dict[str, Any]
    try:
        outcome = {"result": body(ctx, *args)}
    except BaseException as exc:  # noqa: BLE001 - reported, then this rank exits non-zero
        failed = classify(exc)
        if failed.kind != "skip":
            fail(ctx, f"failed:\n{failed.text}")
        outcome = {"skipped": failed.text}
    watchdog.cancel()
    report(ctx, opts.body, outcome)
    # torch (3.7 s, python -X importtime) once the command line is checked: a bad one is one line at once
    import torch.distributed as dist

    dist.destroy_process_group()
    return 0


def _orphaned(agent: int, tmp_dirs: list[str]) -> None:
    print(f"harness.rankpool.launcher: rank {os.environ.get('RANK')}: the launcher agent (pid {agent}) is gone; "
          "leaving", file=sys.stderr, flush=True)
    for path in tmp_dirs:
        shutil.rmtree(path, ignore_errors=True)


def fail(ctx: Any, what: str, dump_stacks: bool = False) -> None:
    """Report on stderr and leave at once: peers may be stuck in a collective, and torchrun
    stops them when this rank exits non-zero. The node's tmp_dir goes first (nobody else will)."""
    sys.stdout.flush()
    print(f"harness.rankpool.launcher: rank {ctx.rank} {what}", file=sys.stderr, flush=True)
    if dump_stacks:
        faulthandler.dump_traceback(all_threads=True)
    shutil.rmtree(ctx.tmp_dir, ignore_errors=True)
    os._exit(1)


def join_group(backend: str, device: str, local_rank: int, timeout_s: float):
    # torch, and RankContext, which imports it (3.7 s, python -X importtime), once the command line is checked: a
    # bad one is one line at once
    import torch

    from .context import RankContext

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    if device.startswith("cuda"):
        torch.cuda.set_device(torch.device(device))
    rendezvous.init_from_env(backend=backend, timeout_s=max(300.0, 10 * timeout_s))
    ctx = RankContext.after_init(local_rank=local_rank, device=device, tmp_dir="")
    name = ctx.broadcast_object(tempfile.mkdtemp(prefix="lwsplit-torchrun-") if ctx.rank == 0 else None, src=0)
    os.makedirs(name, exist_ok=True)
    ctx.tmp_dir = name
    return ctx


def report(ctx: Any, ref: str, outcome: dict[str, Any]) -> None:
    """Gather every rank's outcome on rank 0, which prints the JSON line; then clean tmp_dir."""
    # torch (3.7 s, python -X importtime) once the command line is checked: a bad one is one line at once
    import torch.distributed as dist

    gathered: Optional[list[Any]] = [None] * ctx.world_size if ctx.rank == 0 else None
    dist.gather_object(outcome, gathered, dst=0, group=ctx.control_group)
    ctx.barrier()
    if ctx.local_rank == 0:
        shutil.rmtree(ctx.tmp_dir, ignore_errors=True)
    if gathered is None:
        return
    line = {
        "ref": ref,
        "world_size": ctx.world_size,
        "backend": ctx.backend,
        "results": [o.get("result") for o in gathered],
        "skipped": {str(r): o["skipped"] for r, o in enumerate(gathered) if "skipped" in o},
    }
    print(json.dumps(line, default=repr), flush=True)


if __name__ == "__main__":
    sys.exit(main())
