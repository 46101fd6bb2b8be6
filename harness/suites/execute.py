"""How one case of a TC runs: the call convention every TC test and the mutation self-test share.

``run_body(body, *args, world_size=None) -> facts`` runs a rank body on a pool (the
``lw_run`` fixture in pytest, ``pool_runner`` outside it). Every suite declares the hooks
of ``harness.suites.Suite``: ``missing_baseline(run)`` (a reason to skip),
``separate_draft(case)`` (an extra body argument) and ``world_size(case)``.
"""

from __future__ import annotations

from typing import Any, Callable, NoReturn

from harness.rankpool import RankSkip, get_pool, preload
from harness.suites import TC_MODULES

RANK_SIDE_MODULES = (
    "hydra.utils",  # bring_up locates the implementation class with Hydra's locator
    "implementations.reference",
    *TC_MODULES.values(),
)
"""What the rank bodies import: loaded once in the pools' forkserver (``preload``) instead
of once per rank on its first call."""

RunBody = Callable[..., list]


def _raise_skip(reason: str) -> NoReturn:
    raise RankSkip(reason)


def run_case(suite, case, run_body: RunBody, *, skip: Callable[[str], Any] = _raise_skip) -> list[str]:
    """Run ``case`` of ``suite`` and return its problems (empty: pass).

    ``skip(reason)`` is called for a case with nothing to compare with (pytest passes
    ``pytest.skip``; the default raises RankSkip). Rank failures propagate.
    """
    resolved = case.resolved
    reason = suite.missing_baseline(resolved.run)
    if reason:
        skip(reason)
        return []
    args = (True,) if suite.separate_draft(case) else ()
    facts = run_body(suite.body, *args, world_size=suite.world_size(case))
    return suite.check(facts, resolved.run)


def pool_runner(case, pool_getter: Callable[..., Any] = get_pool) -> RunBody:
    """``run_body`` for ``case`` on pools from ``pool_getter`` (as ``lw_run`` does, without pytest)."""
    resolved = case.resolved

    def run_body(body, *args, world_size=None):
        preload(*RANK_SIDE_MODULES, body.__module__)
        pool = pool_getter(world_size or resolved.world_size, resolved.backend, timeout_s=resolved.timeout_s)
        return pool.run(body, resolved.run, resolved.impl_cfg, *args)

    return run_body
