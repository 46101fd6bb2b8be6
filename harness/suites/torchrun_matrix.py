"""The TC suites under an external launcher: one rank body that runs a whole case matrix.

    torchrun --nnodes 2 --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint HOST:29400 \\
        -m harness.rankpool.launcher harness.suites.torchrun_matrix:run_matrix '["smoke", []]'

Every rank loads the same matrix and walks the same cases in the same order. For each
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

import importlib
from typing import Any

PASS, PROBLEMS, FAILED, SKIPPED = "pass", "problems", "failed", "skipped"


def suite_module(tc: str):
    """``TC-03`` -> ``harness.suites.tc03``."""
    return importlib.import_module(f"harness.suites.tc{tc[3:]}")


def case_world_size(suite, case) -> int:
    return suite.world_size(case) if hasattr(suite, "world_size") else case.world_size


def run_matrix(ctx, matrix_name: str = "smoke", overrides: list[str] | None = None,
               variants: list[str] | None = None) -> dict[str, Any]:
    """Run every TC case of ``conf/matrix/<matrix_name>.yaml`` (narrowed by ``overrides``) on this group.

    ``variants``: run only the cases whose ``Case.variant`` is in the list (``""``: a TC's plain
    cases); None runs every variant.
    """
    from harness.rankpool import RankSkip
    from harness.rankpool.errors import CollectiveCheckFailed
    from harness.suites.execute import run_case
    from harness.suites.matrix import load_matrix

    matrix = load_matrix(matrix_name, list(overrides or []))
    out = []
    for tc in matrix.tcs:
        suite = suite_module(tc)
        for case in suite.cases(matrix):
            entry = {"tc": tc, "id": case.id, "verdict": PASS, "detail": ""}
            out.append(entry)
            if variants is not None and case.variant not in variants:
                entry.update(verdict=SKIPPED, detail=f"variant {case.variant or '(plain)'} not among {variants}")
                continue
            needed = case_world_size(suite, case)
            if needed != ctx.world_size:
                entry.update(verdict=SKIPPED, detail=f"needs {needed} processes, the launched world is {ctx.world_size}")
                continue
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
