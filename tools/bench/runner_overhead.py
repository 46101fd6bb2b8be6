"""Per-test cost of the pooled runner vs a fresh process group per test, for world 4 and 8.

    python -m tools.bench.runner_overhead [--worlds 4 8] [--fresh-repeats 3] [--pooled-repeats 200] [--json PATH]

(a) fresh: what PyTorch MultiProcessTestCase / DeepSpeed DistributedTest pay per test:
    spawn N processes, each imports torch, init_process_group (FileStore), runs one
    round of collectives, destroy_process_group, exits; timed from spawn to last join.
(b) pooled: one ``RankPool.run`` of the same round of collectives on a live pool
    (and of an empty body: the runner's own share).
Both use gloo on CPU so the figures compare like with like on any machine.
"""

from __future__ import annotations

import multiprocessing
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from typing import Optional

from harness.files import write_json_atomic
from harness.usage import Parser, command

TARGET_RATIO = 1 / 50


def collective_round(rank: int, device: str = "cpu") -> None:
    """The per-test work in both modes: tensor all_reduce, object broadcast, barrier."""
    import torch
    import torch.distributed as dist

    t = torch.ones(1024, device=device)
    dist.all_reduce(t)
    box = [{"step": 1} if rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    dist.barrier()


def fresh_rank(rank: int, world_size: int, store_dir: str) -> None:
    """One rank of a fresh per-test group (spawned child)."""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    store = dist.FileStore(os.path.join(store_dir, "filestore"), world_size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size)
    collective_round(rank)
    dist.destroy_process_group()


def fresh_once(world_size: int) -> float:
    ctx = multiprocessing.get_context("spawn")
    store_dir = tempfile.mkdtemp(prefix="lwsplit-bench-fresh-")
    try:
        start = time.perf_counter()
        procs = [ctx.Process(target=fresh_rank, args=(r, world_size, store_dir)) for r in range(world_size)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - start
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)
    bad = [p.exitcode for p in procs if p.exitcode != 0]
    if bad:
        raise RuntimeError(f"fresh world {world_size}: ranks exited with {bad}")
    return elapsed


def pooled_body(ctx) -> None:  # noqa: ANN001 - RankContext
    collective_round(ctx.rank, ctx.device)


def empty_body(ctx) -> None:  # noqa: ANN001 - RankContext
    """No collectives: what the runner itself costs per call (pipes, pickling, wake-ups)."""


def pooled(world_size: int, repeats: int) -> tuple[float, list[float], list[float]]:
    from harness.rankpool import RankPool

    with RankPool(world_size, backend="gloo", device_type="cpu") as pool:
        start = time.perf_counter()
        pool.start()
        start_s = time.perf_counter() - start
        for _ in range(5):  # warm-up: first collectives set up gloo pairs
            pool.run(pooled_body)
        timed = {pooled_body: [], empty_body: []}
        for body, times in timed.items():
            for _ in range(repeats):
                t0 = time.perf_counter()
                pool.run(body)
                times.append(time.perf_counter() - t0)
    return start_s, timed[pooled_body], timed[empty_body]


def machine_facts() -> dict[str, object]:
    import torch

    return {
        "cpu_count": os.cpu_count(),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


@command
def main(argv: Optional[list[str]] = None) -> int:
    parser = Parser(prog="python -m tools.bench.runner_overhead", description=__doc__.split("\n")[0])
    parser.add_argument("--worlds", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--fresh-repeats", type=int, default=3)
    parser.add_argument("--pooled-repeats", type=int, default=200)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--docs", action="store_true", help="also record the figures into docs/benchmarks.md")
    opts = parser.parse_args(argv)
    check_args(opts)
    os.environ["OMP_NUM_THREADS"] = "1"  # the children of both modes inherit it

    facts = machine_facts()
    print(
        f"machine: {facts['usable_cores']} usable cores (cpu_count {facts['cpu_count']}), {facts['platform']}, "
        f"Python {facts['python']}, torch {facts['torch']}; load average {facts['load_average_1min']}; gloo on CPU"
    )
    rows = []
    for world in opts.worlds:
        fresh = [fresh_once(world) for _ in range(opts.fresh_repeats)]
        start_s, runs, empty = pooled(world, opts.pooled_repeats)
        fresh_med, pooled_med = statistics.median(fresh), statistics.median(runs)
        rows.append(
            {
                "world_size": world,
                "fresh_s": fresh,
                "fresh_median_s": fresh_med,
                "pool_start_s": start_s,
                "pooled_median_s": pooled_med,
                "pooled_p90_s": sorted(runs)[int(0.9 * (len(runs) - 1))],
                "pooled_repeats": len(runs),
                "runner_only_median_s": statistics.median(empty),
                "ratio": pooled_med / fresh_med,
            }
        )
    header = (
        f"{'world':>5} | {'fresh per test (median of ' + str(opts.fresh_repeats) + ')':>30} | "
        f"{'pool start (once)':>17} | {'pooled per test (median / p90 of ' + str(opts.pooled_repeats) + ')':>42} | "
        f"{'pooled/fresh':>12} | target <= 1/50"
    )
    print(header)
    print("-" * len(header))
    for r in rows:
        ok = "met" if r["ratio"] <= TARGET_RATIO else "MISSED"
        print(
            f"{r['world_size']:>5} | {r['fresh_median_s']:>28.2f} s | {r['pool_start_s']:>15.2f} s | "
            f"{r['pooled_median_s'] * 1e3:>24.1f} ms / {r['pooled_p90_s'] * 1e3:>6.1f} ms    | "
            f"{'1/' + format(1 / r['ratio'], '.0f'):>12} | {ok}"
        )
    shares = ", ".join(f"world {r['world_size']}: {r['runner_only_median_s'] * 1e3:.2f} ms" for r in rows)
    print(f"runner's own share of a pooled call (empty body, median): {shares}")
    if opts.json:
        write_json_atomic(opts.json, {"machine": facts, "rows": rows, "target_ratio": TARGET_RATIO})
    if opts.docs:
        from tools import docs_blocks

        page = docs_blocks.publish(docs_blocks.measured(
            "bench_runner_overhead", command="python -m tools.bench.runner_overhead --docs",
            columns=("what", "command", "result", "target"), align="llll",
            rows=[(f"per-test overhead, pooled vs fresh group, world {r['world_size']}",
                   "`python -m tools.bench.runner_overhead`",
                   f"fresh group {r['fresh_median_s']:.2f} s vs pooled {r['pooled_median_s'] * 1e3:.1f} ms: "
                   f"**1/{1 / r['ratio']:.0f}** (pool start {r['pool_start_s']:.2f} s once)",
                   f"pooled <= 1/{1 / TARGET_RATIO:.0f} of fresh") for r in rows]))
        print(f"wrote {page}")
    return 0


def check_args(opts, counts: tuple[str, ...] = ("--fresh-repeats", "--pooled-repeats")) -> None:
    """Every value before the first process starts: world sizes the pool can start, each of the
    ``counts`` flags >= 1, --json writable. (The pool benches share it: ``tools.bench.collectives``.)"""
    from contract.errors import ConfigError
    from harness.files import check_output_file
    from harness.rankpool.backend import check_world_size

    for world in opts.worlds:
        try:
            check_world_size(world)
        except ConfigError as exc:
            raise ConfigError("--worlds", world, exc.allowed) from None
    for flag in counts:
        value = getattr(opts, flag.lstrip("-").replace("-", "_"))
        if value < 1:
            raise ConfigError(flag, value, "a whole number >= 1 (the median of no runs is undefined)")
    if opts.json:
        check_output_file(opts.json, "--json")

if __name__ == "__main__":
    sys.exit(main())
