"""Object collectives per rank: torch's against the pool's frames (``harness.rankpool.wire``).

    python -m tools.bench.collectives [--worlds 4 8] [--repeats 200] [--json PATH] [--docs]

On one pool per world size (gloo on CPU), every rank times ``--repeats`` calls of each
object collective the TC bodies use, with a small object like theirs: (a) torch's
``broadcast_object_list`` / ``all_gather_object`` over the pool's control group, (b)
``RankContext.broadcast_object`` / ``all_gather_object``. The two alternate in blocks of
``--repeats / 5`` calls on the same pool. Printed per call: CPU seconds of a rank (user +
system, its gloo threads included; the mean over ranks) and wall time, and harness / torch.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional

from harness.usage import Parser, command
from tools.bench.runner_overhead import check_args, machine_facts

OPS = ("broadcast", "all_gather")
SIDES = ("torch", "harness")
BLOCKS = 5


def sample_object(rank: int) -> dict[str, Any]:
    """About 300 pickled bytes: a digest, a rank and a few block numbers (what a TC body exchanges)."""
    return {"digest": "0" * 64, "rank": rank, "blocks": list(range(32)), "role": "target"}


def call(ctx: Any, side: str, op: str) -> Callable[[Any], Any]:
    """The call ``side`` makes for ``op``, taking the object to send."""
    import torch.distributed as dist

    group = ctx.control_group
    if side == "torch" and op == "broadcast":
        return lambda obj: dist.broadcast_object_list([obj if ctx.rank == 0 else None], src=0, group=group)
    if side == "torch":
        return lambda obj: dist.all_gather_object([None] * ctx.world_size, obj, group=group)
    if op == "broadcast":
        return lambda obj: ctx.broadcast_object(obj, src=0)
    return ctx.all_gather_object


def time_calls(ctx: Any, side: str, op: str, repeats: int) -> tuple[float, float]:
    """Rank body: (CPU seconds of this process, wall seconds) for ``repeats`` calls."""
    obj, fn = sample_object(ctx.rank), call(ctx, side, op)
    cpu, start = time.process_time(), time.perf_counter()  # the process's CPU: its gloo threads too
    for _ in range(repeats):
        fn(obj)
    return time.process_time() - cpu, time.perf_counter() - start


def measure(world_size: int, repeats: int) -> list[dict[str, Any]]:
    from harness.rankpool import RankPool

    per_block = max(1, repeats // BLOCKS)
    totals = {(side, op): [0.0, 0.0, 0] for side in SIDES for op in OPS}
    with RankPool(world_size, backend="gloo", device_type="cpu") as pool:
        for side in SIDES:  # warm-up: the first collectives set up gloo's pairs
            for op in OPS:
                pool.run(time_calls, side, op, 3)
        for _ in range(BLOCKS):
            for op in OPS:
                for side in SIDES:
                    results = pool.run(time_calls, side, op, per_block)
                    total = totals[(side, op)]
                    total[0] += sum(cpu for cpu, _ in results) / world_size
                    total[1] += max(wall for _, wall in results)
                    total[2] += per_block
    rows = []
    for op in OPS:
        row: dict[str, Any] = {"world_size": world_size, "op": op, "calls": totals[("torch", op)][2]}
        for side in SIDES:
            cpu, wall, calls = totals[(side, op)]
            row[f"{side}_cpu_per_call_s"] = cpu / calls
            row[f"{side}_wall_per_call_s"] = wall / calls
        row["cpu_ratio"] = row["harness_cpu_per_call_s"] / row["torch_cpu_per_call_s"]
        row["wall_ratio"] = row["harness_wall_per_call_s"] / row["torch_wall_per_call_s"]
        rows.append(row)
    return rows


@command
def main(argv: Optional[list[str]] = None) -> int:
    parser = Parser(prog="python -m tools.bench.collectives", description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--repeats", type=int, default=200, help="calls of each collective per side")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--docs", action="store_true", help="also record the figures into docs/benchmarks.md")
    opts = parser.parse_args(argv)
    check_args(opts, counts=("--repeats",))
    os.environ["OMP_NUM_THREADS"] = "1"

    facts = machine_facts()
    print(f"machine: {facts['usable_cores']} usable cores, Python {facts['python']}, torch {facts['torch']}; "
          f"load average {facts['load_average_1min']}; gloo on CPU; {opts.repeats} calls per side, alternated")
    rows = [row for world in opts.worlds for row in measure(world, opts.repeats)]
    header = (f"{'world':>5} | {'collective':<10} | {'torch CPU/rank':>14} | {'harness CPU/rank':>16} | "
              f"{'CPU ratio':>9} | {'torch wall':>10} | {'harness wall':>12} | {'wall ratio':>10}")
    print(header)
    print("-" * len(header))
    for r in rows:
        print(f"{r['world_size']:>5} | {r['op']:<10} | {r['torch_cpu_per_call_s'] * 1e3:>11.3f} ms | "
              f"{r['harness_cpu_per_call_s'] * 1e3:>13.3f} ms | {r['cpu_ratio']:>9.2f} | "
              f"{r['torch_wall_per_call_s'] * 1e3:>7.2f} ms | {r['harness_wall_per_call_s'] * 1e3:>9.2f} ms | "
              f"{r['wall_ratio']:>10.2f}")
    if opts.json:
        from harness.files import write_json_atomic

        write_json_atomic(opts.json, {"machine": facts, "rows": rows, "repeats": opts.repeats})
    if opts.docs:
        from tools import docs_blocks

        page = docs_blocks.publish(docs_blocks.measured(
            "bench_collectives", command=f"python -m tools.bench.collectives --repeats {opts.repeats} --docs",
            columns=("world", "collective", "CPU per call and rank: torch / harness", "ratio",
                     "wall per call: torch / harness", "ratio"), align="rlllll",
            rows=[(r["world_size"], r["op"],
                   f"{r['torch_cpu_per_call_s'] * 1e3:.3f} ms / {r['harness_cpu_per_call_s'] * 1e3:.3f} ms",
                   f"**{r['cpu_ratio']:.2f}**",
                   f"{r['torch_wall_per_call_s'] * 1e3:.2f} ms / {r['harness_wall_per_call_s'] * 1e3:.2f} ms",
                   f"{r['wall_ratio']:.2f}") for r in rows]))
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
