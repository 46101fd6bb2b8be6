"""``lw_run``: a case's body on the per-worker rank pools; idle pools closed between tests, all at the end."""

from __future__ import annotations

import pytest

from harness.pytest_plugin import keys
from harness.rankpool import PoolUnavailable, RankSkip, close_all, registry
from harness.rankpool.rendezvous import remove_stale_dirs


def pytest_runtest_setup(item) -> None:
    registry.close_idle()  # a worker busy with other tests does not keep idle ranks polling


@pytest.fixture
def lw_run(request, lw_case):
    """``lw_run(body, *args, world_size=None)``: run ``body(ctx, run, impl_cfg, *args)`` on every rank.

    Returns the per-rank results. A skip raised on the ranks, or a machine that cannot
    host the pool (e.g. NCCL without enough cards), skips the test with the reason.
    """
    # harness.suites.execute (54 ms, python -X importtime): a bad --lw-* option is one line without it
    from harness.suites.execute import pool_runner

    run_body = pool_runner(lw_case)

    def run(body, *args, world_size=None):
        try:
            facts = run_body(body, *args, world_size=world_size)
        except (RankSkip, PoolUnavailable) as exc:
            pytest.skip(exc.reason)
        request.node.stash[keys.FACTS] = {"facts": facts}
        return facts

    return run


def pytest_sessionfinish(session) -> None:
    config = session.config
    if not hasattr(config, "workerinput"):
        remove_stale_dirs()  # temp folders of workers killed outright (SIGKILL)
    if config.getoption("lw_keep_pools"):
        return

    close_all()
