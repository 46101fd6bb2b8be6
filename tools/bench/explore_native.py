"""Exploring a compiled tree: drawn configurations judged per CPU second through the host, beside the reference.

    python -m tools.bench.explore_native --source /path/to/xllm [--source /path/to/port ...]
    python -m tools.bench.explore_native --source ... --base-source /path/to/upstream --docs

The explorer's plan-level draws (``tools.bench.explore.drawn``: the fixed seed, nothing judged) are drawn once
and judged by the reference and by ``implementation=xllm_native`` on each tree given, in this one process, one
after the other: the same configurations, side by side. A compiled tree's code runs in its host process
(``implementations.xllm_native.runtime.host``), so its CPU time counts: this process's (``time.process_time``) plus
every host's (``/proc/<pid>/stat``, read before and after; a host that ended meanwhile, a crash's or a closed
one's, through this process's reaped children, ``os.times``; the row says how many ended). The draws' own CPU time, after the same warm-up as ``tools.bench.explore``'s
(``warm_up_drawing``: imports, compositions, a few draws decoded), is added to every row (the
explorer pays it for each implementation alike). A configuration a tree fails is still counted: the rate is what exploring it costs.
Goal: 500 configurations per CPU second at plan level through the host (2 cores).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from harness.usage import command, fail

GOAL = 500.0
"""Configurations per CPU second at plan level, through the host."""
COLUMNS = ("implementation", "tree", "configs", "failing", "CPU s here", "CPU s hosts", "judged / CPU s",
           "explored / CPU s", "vs reference", "goal (explored)")


def host_cpu_seconds() -> dict:
    """{pid: CPU seconds} of every live host of this process: the process started (the keeper) and every live
    descendant (the host it forked, which calls the tree's code, and whatever the tree started), each's user and
    system time and that of its children that ended (``/proc/<pid>/stat``)."""
    from implementations.xllm_native.runtime.host import descendants
    from implementations.xllm_native.runtime.host_client import host_pids

    out = {}
    for pid in host_pids():
        own = _proc_cpu_seconds(pid)
        if own is None:
            continue
        out[pid] = own + sum(_proc_cpu_seconds(kid) or 0.0 for kid in descendants(pid))
    return out


def _proc_cpu_seconds(pid: int):
    """utime + stime + cutime + cstime of ``pid`` in seconds, or None where it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def judge(implementation: str, overrides: Sequence[str], runs: list) -> tuple:
    """(failing configurations, CPU seconds here, CPU seconds in hosts, hosts that ended) judging ``runs``."""
    from harness.explore.runner import runner_for
    from harness.suites.matrix import load_matrix

    runner = runner_for(load_matrix("ci", [f"implementation={implementation}", *overrides]), implementation)
    for run in runs[:5]:  # warm-up: the build (cached), the host's start, imports
        runner.verdict(run, allocate=False)
    hosts_before, reaped_before = host_cpu_seconds(), reaped_cpu_seconds()
    start = time.process_time()
    failing = sum(1 for run in runs if runner.verdict(run, allocate=False).failures)
    here = time.process_time() - start
    hosts_after, reaped = host_cpu_seconds(), reaped_cpu_seconds() - reaped_before
    ended = set(hosts_before) - set(hosts_after)
    # a host that ended (and was reaped) meanwhile: its whole life is in ``reaped``, less what it spent before
    hosts = sum(after - hosts_before.get(pid, 0.0) for pid, after in hosts_after.items()) \
        + max(0.0, reaped - sum(hosts_before[pid] for pid in ended))
    return failing, here, hosts, len(ended)


def reaped_cpu_seconds() -> float:
    """CPU seconds (user + system) of this process's children that ended and were reaped (``os.times``)."""
    times = os.times()
    return times.children_user + times.children_system


def rows(results: list, draw_s: float) -> list[tuple]:
    """One row per implementation and tree: the judging rate (here + hosts) and the explored rate (the draws'
    CPU added), the explored rate against the reference's, the goal."""
    reference_rate = None
    out = []
    for implementation, tree, n, failing, here, hosts, ended in results:
        judged = n / (here + hosts) if here + hosts else float("inf")
        rate = n / (here + hosts + draw_s)
        reference_rate = rate if implementation == "reference" else reference_rate
        ratio = f"{rate / reference_rate:.2f}x" if reference_rate else "-"
        goal = "-" if implementation == "reference" else f">= {GOAL:.0f}: {'met' if rate >= GOAL else 'MISSED'}"
        out.append((implementation, tree + (f" ({ended} hosts ended)" if ended else ""), n, failing, f"{here:.2f}",
                    f"{hosts:.2f}", f"{judged:.0f}", f"{rate:.0f}", ratio, goal))
    return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        fail(f"{message} (see python -m tools.bench.explore_native --help)")


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    p = _Parser(prog="python -m tools.bench.explore_native", description=__doc__.splitlines()[0])
    p.add_argument("--source", action="append", default=[], help="a tree to explore (repeatable; default: "
                   "$LWSPLIT_XLLM_SRC)")
    p.add_argument("--base-source", help="the tree of a manifest's base (implementation.base_source_dir)")
    p.add_argument("--examples", type=int, default=1000, help="plan-level configurations (default 1000)")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--docs", action="store_true", help="also record the figures into docs/benchmarks.md")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    if args.examples < 1:
        fail(f"--examples: {args.examples}; allowed: a whole number >= 1")
    sources = args.source or ([os.environ["LWSPLIT_XLLM_SRC"]] if os.environ.get("LWSPLIT_XLLM_SRC") else [])
    if not sources:
        fail("--source: none given; allowed: an xLLM tree (or a port's), or set LWSPLIT_XLLM_SRC")
    for source in sources + ([args.base_source] if args.base_source else []):
        if not Path(source).is_dir():
            fail(f"--source: {source!r}; allowed: an existing folder holding an xLLM tree")
    from tools.bench.explore import drawn, show, warm_up_drawing

    warm_up_drawing(args.seed)  # what a process pays once (imports, compositions), as tools.bench.explore does
    start = time.process_time()
    runs = drawn(args.examples, args.seed)
    draw_s = time.process_time() - start
    results = [("reference", "-", len(runs), *judge("reference", (), runs)[:3], 0)]
    for source in sources:
        overrides = [f"implementation.source_dir={Path(source).resolve()}"]
        if args.base_source:
            overrides.append(f"implementation.base_source_dir={Path(args.base_source).resolve()}")
        failing, here, hosts, ended = judge("xllm_native", overrides, runs)
        results.append(("xllm_native", Path(source).name, len(runs), failing, here, hosts, ended))
    table = rows(results, draw_s)
    notes = [f"the draws' own CPU ({draw_s:.2f} s for {len(runs)}) is in every row; seed {args.seed}; "
             f"load {os.getloadavg()[0]:.2f} when measured"]
    command_line = "python -m tools.bench.explore_native " + " ".join(
        f"--source {Path(s).name}" for s in sources) + (" --base-source ..." if args.base_source else "") + " --docs"
    show("bench_explore_native", COLUMNS, table, notes, align="llrrrrrrrl", docs=command_line if args.docs else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
