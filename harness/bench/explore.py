"""Exploring cost: configurations checked per CPU second, at plan level and with allocation.

    python -m harness.bench.explore                 # measure and print
    python -m harness.bench.explore --docs          # ... and record the figures in docs/explore.md

The explorer (``harness.explore``) runs the reference on configurations drawn from the
fixed seed, once judging plans only and once also allocating every rank in-process; a
configuration counts whether the spec accepts or refuses it (both are checked). CPU time
of this process (``time.process_time``), after a warm-up that imports and composes once.
Beside the explorer's rate (draw + judge, the goal's), the same configurations judged alone,
drawn beforehand: where the time goes.
Goals: 500 configurations per CPU second at plan level, 20 with allocation.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Optional, Sequence

from harness.cli import command, fail

GOALS = {False: 500.0, True: 20.0}
"""Configurations per CPU second: plan level (False), with allocation (True)."""
DOCS = "docs/explore.md"


def drawn(examples: int, seed: int) -> list:
    """The configurations the explorer draws from ``seed`` (Hypothesis's generate phase, nothing judged)."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed

    from harness.explore.strategies import explorable

    out = []

    @settings(max_examples=examples, deadline=None, database=None, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck))
    @fixed_seed(seed)
    @given(explorable())
    def collect(run):
        out.append(run)

    collect()
    return out


def judging_only(runner, runs: list, allocate: bool) -> float:
    """CPU seconds the runner takes to judge ``runs`` drawn beforehand."""
    start = time.process_time()
    for run in runs:
        runner.verdict(run, allocate=allocate)
    return time.process_time() - start


def measure(examples: dict, seed: int) -> dict:
    """(configurations, CPU seconds exploring, refused, CPU seconds judging alone) per level, on the reference."""
    from harness.explore.runner import runner_for
    from harness.explore.search import Count, explore
    from harness.suites.matrix import load_matrix

    runner = runner_for(load_matrix("ci", ["implementation=reference"]), "reference")
    for allocate in (False, True):  # warm-up: imports, compositions, caches
        explore(runner, examples=5, allocate=allocate, seed=seed + 1, shrink=False)
    out = {}
    for allocate in (False, True):
        count = Count()
        start = time.process_time()
        finding = explore(runner, examples=examples[allocate], allocate=allocate, seed=seed, shrink=False, count=count)
        seconds = time.process_time() - start
        if finding is not None:
            fail(f"the reference failed a drawn configuration; nothing measured:\n{finding.report()}")
        runs = drawn(examples[allocate], seed)
        out[allocate] = (count.judged, seconds, count.refused, judging_only(runner, runs, allocate) / len(runs))
    return out


COLUMNS = ("level", "configs", "CPU s", "configs / CPU s", "refused", "judging alone / CPU s", "goal (explored)")


def rows(results: dict) -> list[tuple]:
    """One row per level: configurations, CPU seconds, the explored rate, refusals, the judging-alone rate, goal."""
    out = []
    for allocate, name in ((False, "plan"), (True, "with allocation")):
        n, seconds, refused, judge_s = results[allocate]
        rate = n / seconds if seconds else float("inf")
        verdict = "met" if rate >= GOALS[allocate] else "MISSED"
        out.append((name, n, f"{seconds:.2f}", f"{rate:.0f}", refused, f"{1 / judge_s if judge_s else float('inf'):.0f}",
                    f">= {GOALS[allocate]:.0f}: {verdict}"))
    return out


def ratio_note(results: dict) -> str:
    plan_rate = results[False][0] / results[False][1]
    alloc_rate = results[True][0] / results[True][1]
    return f"plan level / with allocation: {plan_rate / alloc_rate:.1f}x (load {os.getloadavg()[0]:.2f} when measured)"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        fail(f"{message} (see python -m harness.bench.explore --help)")


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    p = _Parser(prog="python -m harness.bench.explore", description=__doc__.splitlines()[0])
    p.add_argument("--plan-examples", type=int, default=1000, help="configurations at plan level (default 1000)")
    p.add_argument("--allocation-examples", type=int, default=200, help="configurations with allocation (default 200)")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--docs", action="store_true", help=f"also record the figures into {DOCS}")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    for name in ("plan_examples", "allocation_examples"):
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')}: {getattr(args, name)}; allowed: a whole number >= 1")
    results = measure({False: args.plan_examples, True: args.allocation_examples}, args.seed)
    table_rows = rows(results)
    print(" | ".join(COLUMNS))
    for row in table_rows:
        print(" | ".join(str(c) for c in row))
    print(ratio_note(results))
    if args.docs:
        from harness import docs_blocks

        page = docs_blocks.publish(docs_blocks.measured(
            "bench_explore", command="python -m harness.bench.explore --docs", columns=COLUMNS, rows=table_rows,
            align="lrrrrrl", notes=[ratio_note(results)]))
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
