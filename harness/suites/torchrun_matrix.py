"""The TC suites under an external launcher: one rank body that runs a whole case matrix.

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m harness.rankpool.launcher harness.suites.torchrun_matrix:run_matrix '["smoke", []]'

Every rank loads the same matrix and walks the same cases in the same order; rank 0
composes the cases that run and broadcasts them, so the group composes once. For each
case whose process count equals the launched world, every rank runs the TC's own rank
body on the launched group (the same ``RankContext`` a pool gives), the facts are
all-gathered, and the TC's own check runs on them (``harness.suites.execute.run_case``,
the call convention pytest and the mutation self-test use). A case that needs another
number of processes, or whose variant a ``variants`` list leaves out, is reported as
skipped with that reason, never silently dropped.

The body returns ``{"cases": [{"tc", "id", "verdict", "detail"}, ...]}`` where verdict is
``pass``, ``problems``, ``failed`` (all ranks raised the same collective check) or
``skipped``. A rank that raises anything else ends the run (the launcher reports it and
torchrun stops every rank), as a crashed rank would.
"""

from __future__ import annotations

from typing import Any, Optional

from harness.rankpool import RankSkip
from harness.rankpool.errors import CollectiveCheckFailed
from harness.suites import load_suite
from harness.suites.case import adopt, resolve
from harness.suites.execute import run_case
from harness.suites.matrix import load_matrix

PASS, PROBLEMS, FAILED, SKIPPED = "pass", "problems", "failed", "skipped"


def run_matrix(ctx, matrix_name: str = "smoke", overrides: Optional[list[str]] = None,
               variants: Optional[list[str]] = None) -> dict[str, Any]:
    """Run every TC case of ``conf/matrix/<matrix_name>.yaml`` (narrowed by ``overrides``) on this group.

    ``variants``: run only the cases whose ``Case.variant`` is in the list (``""``: a TC's plain
    cases); None runs every variant. Rank 0 composes the cases that run here and broadcasts
    them; the other ranks adopt them (``harness.suites.case.adopt``) instead of composing.
    """
    matrix = load_matrix(matrix_name, list(overrides or []))
    out, runs = [], []
    for tc in matrix.tcs:
        suite = load_suite(tc)
        for case in suite.cases(matrix):
            entry = {"tc": tc, "id": case.id, "verdict": PASS, "detail": ""}
            out.append(entry)
            if variants is not None and case.variant not in variants:
                entry.update(verdict=SKIPPED, detail=f"variant {case.variant or '(plain)'} not among {variants}")
                continue
            needed = suite.world_size(case)
            if needed != ctx.world_size:
                entry.update(verdict=SKIPPED, detail=f"needs {needed} processes, the launched world is {ctx.world_size}")
                continue
            runs.append((entry, suite, case))
    compose_on_rank_0(ctx, [case for _, _, case in runs])

    for entry, suite, case in runs:
        resolved = case.resolved

        def run_body(body, *args, world_size=None, _resolved=resolved):
            fact = body(ctx, _resolved.run, _resolved.impl_cfg, *args)
            return ctx.all_gather_object(fact)

        def skip(reason: str) -> None:
            raise RankSkip(reason)

        try:
            problems = run_case(suite, case, run_body, skip=skip)
        except RankSkip as exc:
            entry.update(verdict=SKIPPED, detail=exc.reason)
            continue
        except CollectiveCheckFailed as exc:
            entry.update(verdict=FAILED, detail=str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            continue
        if problems:
            entry.update(verdict=PROBLEMS, detail=problems[0])
    return {"cases": out}


def compose_on_rank_0(ctx, cases: list) -> None:
    """Rank 0 composes ``cases``; every other rank adopts its results. A configuration rank 0
    cannot compose ends the run on every rank with rank 0's message."""
    payload: dict[str, Any] = {}
    if ctx.rank == 0:
        try:
            payload["resolved"] = {key: resolve(key) for key in dict.fromkeys(tuple(c.overrides()) for c in cases)}
        except Exception as exc:  # the same error on every rank, not rank 0 alone while the others wait
            payload["error"] = f"{type(exc).__name__}: {exc}"
    payload = ctx.broadcast_object(payload)
    if "error" in payload:
        raise RuntimeError(f"rank 0 could not compose the matrix's cases: {payload['error']}")
    if ctx.rank != 0:
        adopt(payload["resolved"])
