"""Helpers of scripts/check_cards.sh: count the cards, read the topology, run NCCL groups.

    python scripts/card_tools.py count                         # cards torch sees (0 on CPU), then torch's version
    python scripts/card_tools.py topology --cards N [--file F] [--save F]
    python scripts/card_tools.py nccl --world N                # NCCL groups over N cards

``topology`` runs ``ixsmi topo -m`` (Iluvatar) or ``nvidia-smi topo -m``, whichever is on
PATH (or reads ``--file``), parses it with the harness's topology parser and checks that
it lists at least the N cards torch sees. ``nccl`` starts a rank pool of N ranks on NCCL,
one per card, and checks a world all_reduce, pairwise subgroups and that rank i runs on
``cuda:i``. Each prints what it saw and exits non-zero with one ``error:`` line on a mismatch.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parents[1]
SMI_TOOLS = ("ixsmi", "nvidia-smi")


def card_count() -> int:
    from harness.rankpool.backend import cuda_device_count

    return cuda_device_count()


def parse_topology(text: str, name: str):
    """The harness's parser of ``topo -m`` text (one owner; contract.topology_text)."""
    try:
        from contract.topology_text import parse_topo_text
    except ImportError:
        from implementations.reference.topology import parse_topo_text
    return parse_topo_text(text, name=name)


def read_topology_text(file: Optional[str]) -> tuple[str, str]:
    """(text, source): from ``file``, else from the first SMI tool on PATH."""
    if file:
        return Path(file).read_text(), file
    for tool in SMI_TOOLS:
        if shutil.which(tool):
            done = subprocess.run([tool, "topo", "-m"], capture_output=True, text=True, timeout=60)
            if done.returncode != 0:
                raise RuntimeError(f"`{tool} topo -m` exited {done.returncode}: {done.stderr.strip()[:200]}")
            return done.stdout, f"{tool} topo -m"
    raise RuntimeError(f"neither {' nor '.join(SMI_TOOLS)} is on PATH")


def topology(cards: int, file: Optional[str], save: Optional[str]) -> int:
    try:
        text, source = read_topology_text(file)
    except (OSError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"error: topology: {exc}", file=sys.stderr)
        return 1
    if save:
        Path(save).parent.mkdir(parents=True, exist_ok=True)
        Path(save).write_text(text)
    try:
        topo = parse_topology(text, source)
    except Exception as exc:  # noqa: BLE001 - the parser's own error names the rule it broke
        print(f"error: topology: {source}: {exc}", file=sys.stderr)
        return 1
    names = list(topo.cards)
    print(f"topology from {source}: {len(names)} card(s)")
    width = max(len(n) for n in names)
    print(" " * width + "  " + "  ".join(n.rjust(width) for n in names))
    for name, row in zip(names, topo.links):
        print(name.rjust(width) + "  " + "  ".join(str(code).rjust(width) for code in row))
    if len(names) < cards:
        print(f"error: topology: {source} lists {len(names)} card(s) but torch sees {cards}", file=sys.stderr)
        return 1
    return 0


def nccl(world: int) -> int:
    from harness.rankpool import RankFailure, RankPool, RankTimeout
    from harness.rankpool.errors import PoolUnavailable

    expected_sum = float(world * (world + 1) // 2)
    try:
        with RankPool(world, backend="nccl", timeout_s=120) as pool:
            infos = pool.run("testcases.rank_bodies:rank_info")
            pairs = tuple(tuple(range(i, min(i + 2, world))) for i in range(0, world, 2))
            split = pool.run("testcases.rank_bodies:split_all_reduce", pairs)
    except (PoolUnavailable, RankFailure, RankTimeout) as exc:
        print(f"error: nccl: world {world}: {exc}", file=sys.stderr)
        return 1
    problems = []
    for info in infos:
        if (info["backend"], info["device"], info["world_sum"]) != ("nccl", f"cuda:{info['rank']}", expected_sum):
            problems.append(f"rank {info['rank']}: backend {info['backend']}, device {info['device']}, "
                            f"all_reduce sum {info['world_sum']} (want nccl, cuda:{info['rank']}, {expected_sum})")
    for rank, got in enumerate(split):
        part = next(p for p in pairs if rank in p)
        want = float(sum(r + 1 for r in part))
        if got["sum"] != want or list(got["group_ranks"]) != list(part):
            problems.append(f"rank {rank}: subgroup {got['group_ranks']} sum {got['sum']} (want {list(part)}, {want})")
    print(f"nccl: world {world}, ranks on {[i['device'] for i in infos]}, all_reduce sum {infos[0]['world_sum']}, "
          f"subgroups {[list(p) for p in pairs]}")
    for problem in problems:
        print(f"error: nccl: {problem}", file=sys.stderr)
    return 1 if problems else 0


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/card_tools.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("count")
    topo = sub.add_parser("topology")
    topo.add_argument("--cards", type=int, default=0)
    topo.add_argument("--file")
    topo.add_argument("--save")
    group = sub.add_parser("nccl")
    group.add_argument("--world", type=int, required=True)
    opts = parser.parse_args(argv)
    if opts.cmd == "count":
        import torch

        print(card_count(), torch.__version__)  # one torch import for both (the no-card line names the version)
        return 0
    if opts.cmd == "topology":
        return topology(opts.cards, opts.file, opts.save)
    return nccl(opts.world)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
