"""Time to detect each injected fault, whether the pool recovers, and what is left behind.

    python -m tools.bench.faults [--timeout 8] [--cases fault_raise fault_hang ...] [--json PATH]

Each fault case is an implementation option (``conf/implementation/fault_*.yaml``:
the reference misbehaving on one rank) run through TC-01's body on a warm pool of
real rank processes, as ``pytest --lw-override implementation=fault_*`` runs it.
Per case: how it was detected (``broken``: the runner raised RankFailure /
RankTimeout; ``failed``: TC-01's check found the problem; ``passed``: missed) with
the reason's first line, the seconds from sending the work to the verdict (the pool
is started first, so a rebuild is not counted), the timeout in force, the ranks of
the failed generation still alive afterwards, and whether the next run (the
reference, same world size) passes. Last, after every pool is closed, the
processes that carry this run's tag other than this one and its forkserver.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from typing import Optional

from harness import procfs
from harness.usage import command

TAG_ENV = "LWSPLIT_RUN_TAG"
CASES = (
    "fault_raise", "fault_raise_master", "fault_exit", "fault_crash", "fault_hang", "fault_layout", "fault_overalloc",
)
BASE = ("model=deepseek_v32", "layerwise=s2", "parallel=tp4", "hardware=cpu", "draft=none")


def overrides(implementation: str, timeout_s: float) -> tuple[str, ...]:
    return BASE + (f"implementation={implementation}", f"runner.timeout_s={timeout_s}")


def run_case(implementation: str, timeout_s: float) -> dict:
    """One run of TC-01's body on the shared pool; the verdict as pytest would give it."""
    from harness.rankpool import RankFailure, get_pool
    from harness.suites import tc01
    from harness.suites.case import resolve

    resolved = resolve(overrides(implementation, timeout_s))
    pool = get_pool(resolved.world_size, resolved.backend, timeout_s=timeout_s)
    pool.start()
    pids, generation = pool.pids, pool.generation
    start = time.perf_counter()
    try:
        facts = pool.run(tc01.SUITE.body, resolved.run, resolved.impl_cfg)
    except RankFailure as exc:
        outcome, reason = "broken", _summary(str(exc).splitlines()[0])
    else:
        problems = tc01.check(facts, resolved.run)
        outcome, reason = ("failed", problems[0]) if problems else ("passed", "")
    detect_s = time.perf_counter() - start
    live = set(pool.pids) if pool.generation == generation else set()
    left = [pid for pid in pids if pid not in live and procfs.alive(pid)]
    return {"case": implementation, "outcome": outcome, "reason": reason, "detect_s": round(detect_s, 3),
            "timeout_s": timeout_s, "left": len(left), "rebuilt": pool.generation != generation or not pool.started}


def _summary(line: str) -> str:
    """The runner's first line without its head (``<body> on 4 ranks (gloo, pool generation 3)``)."""
    for marker in (" failed: ", " did not finish "):
        if marker in line:
            return line.split(marker, 1)[1] if marker == " failed: " else "did not finish " + line.split(marker, 1)[1]
    return line


def recovered(timeout_s: float) -> tuple[bool, float]:
    """Does the reference pass on the same pool right after a fault? (and the seconds, rebuild included)"""
    start = time.perf_counter()
    result = run_case("reference", timeout_s)
    return result["outcome"] == "passed", round(time.perf_counter() - start, 3)


def leftovers(tag: str) -> list[int]:
    """Processes carrying ``tag`` in their environment, other than this one and the multiprocessing
    helpers it keeps until it exits (forkserver, resource tracker)."""
    from harness.private_apis import multiprocessing_helper_pids

    mine = {os.getpid(), *multiprocessing_helper_pids()}
    return [pid for pid in tagged(tag) if pid not in mine]


def tagged(tag: str) -> list[int]:
    needle = f"{TAG_ENV}={tag}".encode()
    return [pid for pid in procfs.pids() if needle in (procfs.environ(pid) or ())]


def left_behind(tag: str) -> list[str]:
    """The live processes carrying ``tag``, each as ``pid (parent P, state S): command line``."""
    out = []
    for pid in tagged(tag):
        command, found = procfs.cmdline(pid), procfs.stat(pid)
        if command is None or found is None:  # gone meanwhile
            continue
        out.append(f"pid {pid} (parent {found.ppid}, state {found.state}): {command[:200]}")
    return out


def table(rows: list[dict]) -> str:
    lines = [
        "| fault case | detected as | reason (first line) | time to detect (s) | timeout (s) | ranks left | "
        "next run passes (s) |",
        "| --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        reason = r["reason"] if len(r["reason"]) <= 200 else r["reason"][:197] + "..."
        lines.append(f"| {r['case']} | {r['outcome']} | {reason.replace('|', '/')} | {r['detect_s']:.2f} | "
                     f"{r['timeout_s']:g} | {r['left']} | {'yes' if r['recovered'] else 'NO'} ({r['recover_s']:.2f}) |")
    return "\n".join(lines)


def _cells(line: str) -> list[str]:
    """The cells of one row of ``table`` (its cells hold no '|')."""
    return [c.strip() for c in line.strip().strip("|").split("|")]


@command
def main(argv: Optional[list[str]] = None) -> int:
    from harness.files import check_output_file
    from harness.rankpool.backend import check_seconds
    from harness.usage import Parser

    parser = Parser(prog="python -m tools.bench.faults", description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=8.0, help="runner.timeout_s for every case (default 8)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES, metavar="CASE",
                        help=f"fault cases (default all: {' '.join(CASES)})")
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--docs", action="store_true", help="also record the table into docs/faults.md")
    args = parser.parse_args(argv)
    check_seconds("--timeout", args.timeout)
    if args.json:
        check_output_file(args.json, "--json")
    tag = os.environ.setdefault(TAG_ENV, f"bench-faults-{uuid.uuid4().hex[:8]}")  # inherited by every rank

    from harness.rankpool import close_all

    run_case("reference", args.timeout)  # warm: forkserver and first pool start are not a fault's cost
    rows = []
    for case in args.cases:
        row = run_case(case, args.timeout)
        row["recovered"], row["recover_s"] = recovered(args.timeout)
        rows.append(row)
        print(f"{case}: {row['outcome']} in {row['detect_s']:.2f} s", file=sys.stderr, flush=True)
    close_all()
    deadline = time.monotonic() + 5.0
    left = leftovers(tag)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = leftovers(tag)
    print(table(rows))
    missed = [r["case"] for r in rows if r["outcome"] == "passed"]
    print(f"\n{len(rows)} fault cases, {len(rows) - len(missed)} detected; load average "
          f"{os.getloadavg()[0]:.1f}; processes left after closing every pool: {len(left)} {left or ''}")
    if args.json:
        from harness.files import write_json_atomic

        write_json_atomic(args.json, {"rows": rows, "left_after_close": left})
    if args.docs:
        from tools import docs_blocks

        head, _, *body = table(rows).splitlines()
        page = docs_blocks.publish(docs_blocks.measured(
            "faults", command="python -m tools.bench.faults --docs", columns=_cells(head), align="lllrrrl",
            rows=[_cells(line) for line in body],
            notes=[f"{len(rows)} fault cases, {len(rows) - len(missed)} detected, {len(left)} processes left after "
                   f"closing every pool (timeout {args.timeout:g} s)."]))
        print(f"wrote {page}")
    return 1 if missed or left or any(r["left"] or not r["recovered"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
