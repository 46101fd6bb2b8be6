"""Exploring cost: configurations checked per CPU second, at plan level and with allocation.

    python -m tools.bench.explore                 # measure and print
    python -m tools.bench.explore --against REV   # ... and the same at commit REV, side by side
    python -m tools.bench.explore --against REV --docs   # ... and record both in docs/explore.md
    python -m tools.bench.explore --against REV --step   # ... and CI's exploration step there and here

The explorer (``harness.explore``) runs the reference on configurations drawn from the
fixed seed, once judging plans only and once also allocating every rank in-process; a
configuration counts whether the spec accepts or refuses it (both are checked). CPU time
of this process (``time.process_time``), after a warm-up that imports and composes once.
Beside the explorer's rate (draw + judge, the goal's), the same configurations judged alone,
drawn beforehand: where the time goes.
Goals: 500 configurations per CPU second at plan level, 20 with allocation. Below the table,
what the plan-level draws reach (``harness.explore.reach``: verdicts, placements, refusal orders).

``--against REV`` runs this same command on a copy of commit REV (a shared clone, in a temporary
folder, as ``tools.bench.suite_cost --against`` makes it) before measuring here, and prints
both, each in its own process: a change to the explorer side by side with what it replaced.
``--step`` also runs CI's exploration step (``pytest -n 0 testcases/explore``, the test command's
explorer tests at ``search.CI_EXAMPLES``) there and here, and gives the CPU of each and the
plan-level draws each makes.

``--repeat N`` (with ``--against``; default 3) measures each side N times, each run in a process of its own,
the two sides taking turns (before, now, before, now, ...), and keeps each side's best run per level (the
highest rate; for the step, the least CPU): on a shared machine another process's load only ever slows a run,
so the best run is the truest, and taking turns exposes both sides to the same spells of load.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Optional, Sequence

from harness.usage import command, fail

GOALS = {False: 500.0, True: 20.0}
"""Configurations per CPU second: plan level (False), with allocation (True)."""
DOCS = "docs/explore.md"


def drawn(examples: int, seed: int) -> list:
    """The configurations the explorer draws from ``seed`` (``search.drawn_strings``, nothing judged), in order."""
    from harness.explore.search import drawn_strings
    from harness.explore.strategies import decode

    return [decode(one) for one in drawn_strings(seed, examples)]


def judging_only(runner, runs: list, allocate: bool) -> float:
    """CPU seconds the runner takes to judge ``runs`` drawn beforehand."""
    start = time.process_time()
    for run in runs:
        runner.verdict(run, allocate=allocate)
    return time.process_time() - start


def measure(examples: dict, seed: int) -> dict:
    """(configurations, CPU seconds exploring, refused, CPU seconds judging alone) per level, on the reference."""
    from harness.explore.runner import runner_for
    from harness.explore.search import Count, drawn_strings, explore
    from harness.explore.strategies import decode
    from harness.suites.matrix import load_matrix

    runner = runner_for(load_matrix("ci", ["implementation=reference"]), "reference")
    warm_up_drawing(seed)
    for allocate in (False, True):  # warm-up: imports, compositions, caches
        explore(runner, examples=5, allocate=allocate, seed=seed + 1, shrink=False)
    out = {}
    for allocate in (False, True):
        decode.cache_clear()  # each level draws and decodes afresh (the levels draw the same first strings)
        drawn_strings.cache_clear()
        count = Count()
        start = time.process_time()
        finding = explore(runner, examples=examples[allocate], allocate=allocate, seed=seed, shrink=False, count=count)
        seconds = time.process_time() - start
        if finding is not None:
            fail(f"the reference failed a drawn configuration; nothing measured:\n{finding.report()}")
        decode.cache_clear()  # judged alone: configuration objects of their own, not the ones the oracle remembers
        runs = drawn(examples[allocate], seed)
        out[allocate] = (count.judged, seconds, count.refused, judging_only(runner, runs, allocate) / len(runs))
    return out


def warm_up_drawing(seed: int) -> None:
    """What a process pays once before its first draws, paid before a bench times them: the imports, the shipped
    configurations composed (``_compose_recorded``), and a few draws from another seed decoded (and forgotten)."""
    from harness.explore.strategies import decode

    _compose_recorded()
    drawn(16, seed + 1)
    decode.cache_clear()


def _compose_recorded() -> None:
    """Compose the shipped configurations the explorer may draw (once per process, not per draw)."""
    from harness.explore import strategies

    for entry in getattr(strategies, "recorded_entries", lambda: ())():
        strategies.recorded_run(*entry)


def reach_counts(examples: int, seed: int) -> Counter:
    """What the plan-level draws reach (``harness.explore.reach``), counted over the same configurations."""
    from harness.explore.reach import reached

    return Counter(what for run in drawn(examples, seed) for what in reached(run))


def reach_note(counts: Counter, examples: int) -> str:
    from harness.explore.reach import REACHES

    return (f"what the {examples} plan-level configurations (now) reach: "
            + ", ".join(f"{what} {counts.get(what, 0)}" for what in REACHES))


STEP_ARGS = ("-n", "0", "-q", "-p", "no:randomly", "-p", "no:cacheprovider", "testcases/explore")
"""CI's exploration step: the test command's ``testcases/explore`` run, alone."""


def step_cost(tree: Path, env: Optional[dict] = None) -> tuple[float, int, int]:
    """(CPU seconds, exit code, plan-level draws per implementation) of CI's exploration step run in ``tree``
    (a checkout): the CPU of the pytest process and all it waited for; the draws are that tree's
    ``search.CI_EXAMPLES``."""
    from tools.bench.suite_cost import timed_run

    with tempfile.TemporaryDirectory(prefix="lwsplit-step-") as tmp:
        timed = timed_run([sys.executable, "-m", "pytest", *STEP_ARGS], Path(tmp), tree, env)
    draws = subprocess.run([sys.executable, "-c", "from harness.explore.search import CI_EXAMPLES; "
                            "print(CI_EXAMPLES[False])"], cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)},
                           capture_output=True, text=True)
    return timed["tree_cpu_s"], timed["proc"].returncode, int(draws.stdout.strip() or 0)


def step_note(before: Optional[tuple], now: tuple, commit: str) -> str:
    def one(cost: tuple) -> str:
        failed = "" if cost[1] == 0 else f", exit {cost[1]}"
        return f"{cost[0]:.1f} CPU s at {cost[2]} plan-level draws per implementation{failed}"

    text = f"CI's exploration step (pytest {' '.join(STEP_ARGS)}): "
    if before is None:
        return text + one(now)
    return (text + f"before ({commit[:12]}) {one(before)}, now {one(now)}: now/before = {now[0] / before[0]:.2f} "
            f"in CPU, {now[2] / max(1, before[2]):.1f}x the draws")


def bytecode_env(pycache: Path) -> dict:
    """This process's environment with Python's compiled modules written under ``pycache``
    (``PYTHONPYCACHEPREFIX``, whatever ``PYTHONDONTWRITEBYTECODE`` says), nothing in either checkout: both sides
    compile (``compiled``) before any run is timed, so no side pays compiling where the other reads bytecode (a
    commit's fresh checkout has none; a module imported lazily compiles inside the timed draws)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(pycache)}


def compiled(tree: Path, env: dict) -> None:
    """Compile ``tree``'s project packages where ``env`` writes bytecode (``bytecode_env``)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", *PACKAGES], cwd=tree, env=env,
                   capture_output=True, text=True, timeout=600)


PACKAGES = ("contract", "harness", "implementations", "tools", "testcases")
"""The packages a bench run imports from the checkout."""


def measured_rows(tree: Path, examples: dict, seed: int, env: dict) -> list[tuple]:
    """This command's plan and allocation rows measured in ``tree`` (a checkout, this one or another commit's), in a
    process of its own (``--plan-examples`` and ``--allocation-examples`` as here), in ``env``: a fresh process
    per run, so that no run finds what an earlier one remembered."""
    env = {**env, "PYTHONPATH": str(tree)}
    done = subprocess.run([sys.executable, "-m", "tools.bench.explore", "--plan-examples", str(examples[False]),
                           "--allocation-examples", str(examples[True]), "--seed", str(seed)],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        fail(f"the bench in {tree} exited {done.returncode}: "
             f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    found = [tuple(c.strip() for c in line.split("|")) for line in done.stdout.splitlines()
             if line.startswith(("plan |", "with allocation |"))]
    if len(found) != 2:
        fail(f"the bench in {tree}: no plan and allocation rows in its output")
    return found


def best_rows(runs: list[list[tuple]]) -> list[tuple]:
    """Per level, the row of the run with the highest rate (column ``configs / CPU s``): the least slowed."""
    rate = COLUMNS.index("configs / CPU s")
    return [max((run[level] for run in runs), key=lambda row: float(row[rate])) for level in range(2)]


def side_by_side(commit: str, examples: dict, seed: int, *, repeat: int, step: bool) -> tuple:
    """(before rows, now rows, before step, now step): each side measured ``repeat`` times, taking turns, the best
    run of each kept (``best_rows``; the step's least CPU); the steps None without ``step``."""
    from harness.paths import REPO_ROOT
    from tools.bench.suite_cost import export_commit

    before, now, step_before, step_now = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="lwsplit-against-") as tmp:
        tree = export_commit(commit, Path(tmp))
        env = bytecode_env(Path(tmp) / "pycache")
        for checkout in (tree, REPO_ROOT):
            compiled(checkout, env)
        for _ in range(repeat):
            before.append(measured_rows(tree, examples, seed, env))
            now.append(measured_rows(REPO_ROOT, examples, seed, env))
            if step:
                step_before.append(step_cost(tree, env))
                step_now.append(step_cost(REPO_ROOT, env))
    least = (lambda costs: min(costs, key=lambda cost: cost[0])) if step else (lambda costs: None)
    return best_rows(before), best_rows(now), least(step_before), least(step_now)


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


def ratio_note(now: list[tuple]) -> str:
    rate = COLUMNS.index("configs / CPU s")
    plan_rate, alloc_rate = (float(row[rate]) for row in now)
    return f"plan level / with allocation: {plan_rate / alloc_rate:.1f}x (load {os.getloadavg()[0]:.2f} when measured)"


def against_note(before: list[tuple], now: list[tuple], commit: str, repeat: int) -> str:
    """Each level's rate now over its rate at ``commit``: the ratios the explorer's goals are set in."""
    rate = COLUMNS.index("configs / CPU s")
    ratios = ", ".join(f"{b[0]} {float(n[rate]) / float(b[rate]):.2f}x" for b, n in zip(before, now))
    return (f"now / before ({commit[:12]}) in configurations per CPU s: {ratios} (each side's best of {repeat} runs, "
            f"each run a process of its own, the sides taking turns)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        fail(f"{message} (see python -m tools.bench.explore --help)")


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    p = _Parser(prog="python -m tools.bench.explore", description=__doc__.splitlines()[0])
    p.add_argument("--plan-examples", type=int, default=1000, help="configurations at plan level (default 1000)")
    p.add_argument("--allocation-examples", type=int, default=200, help="configurations with allocation (default 200)")
    p.add_argument("--seed", type=int, default=20261201)
    p.add_argument("--against", metavar="REV", help="also measure commit REV, side by side")
    p.add_argument("--docs", action="store_true", help=f"also record the figures into {DOCS}")
    p.add_argument("--step", action="store_true",
                   help="also measure CI's exploration step (pytest -n 0 testcases/explore), at REV too")
    p.add_argument("--repeat", type=int, default=3,
                   help="with --against: runs of each side, taking turns, the best of each kept (default 3)")
    args = p.parse_args(sys.argv[1:] if argv is None else list(argv))
    for name in ("plan_examples", "allocation_examples", "repeat"):
        if getattr(args, name) < 1:
            fail(f"--{name.replace('_', '-')}: {getattr(args, name)}; allowed: a whole number >= 1")
    examples = {False: args.plan_examples, True: args.allocation_examples}
    notes, step_now, step_before, commit = [], None, None, ""
    if args.against is not None:
        from tools.bench.suite_cost import resolve_commit

        commit = resolve_commit(args.against)
        before, now, step_before, step_now = side_by_side(commit, examples, args.seed, repeat=args.repeat,
                                                          step=args.step)
        table_rows = [r for b, n in zip(before, now)
                      for r in ((f"{b[0]}, before ({commit[:12]})", *b[1:]), (f"{n[0]}, now", *n[1:]))]
        notes.append(against_note(before, now, commit, args.repeat))
    else:
        now = table_rows = rows(measure(examples, args.seed))
    notes += [ratio_note(now), reach_note(reach_counts(args.plan_examples, args.seed), args.plan_examples)]
    if args.step:
        from harness.paths import REPO_ROOT

        notes.append(step_note(step_before, step_now if step_now is not None else step_cost(REPO_ROOT), commit))
    command_line = ("python -m tools.bench.explore" + (f" --against {args.against}" if commit else "")
                    + (f" --repeat {args.repeat}" if commit and args.repeat != 3 else "")
                    + (" --step" if args.step else "") + " --docs")
    show("bench_explore", COLUMNS, table_rows, notes, align="lrrrrrl", docs=command_line if args.docs else None)
    return 0


def show(block: str, columns: Sequence[str], table: Sequence[Sequence], notes: Sequence[str], *, align: str,
         docs: Optional[str]) -> None:
    """Print an exploring bench's table (``columns``, one line per row, cells joined by `` | ``) and its notes;
    with ``docs`` (the command line that measured it) also record them as the generated block ``block``
    (``tools.docs_blocks``). The one printer of ``tools.bench.explore`` and ``tools.bench.explore_native``."""
    print(" | ".join(columns))
    for row in table:
        print(" | ".join(str(c) for c in row))
    for note in notes:
        print(note)
    if docs is not None:
        from tools import docs_blocks

        page = docs_blocks.publish(docs_blocks.measured(block, command=docs, columns=columns, rows=table,
                                                        align=align, notes=notes))
        print(f"wrote {page}")


if __name__ == "__main__":
    sys.exit(main())
