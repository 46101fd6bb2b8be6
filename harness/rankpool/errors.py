"""What the distributed runner raises in the parent (and what bodies may raise in a rank).

``RankFailure`` and ``RankTimeout`` are harness outcomes (a test fails); ``RankSkip``
is a verdict (the test is skipped); ``PoolUnavailable`` says this machine cannot host
the requested pool (the pytest layer skips with ``reason``). A wrong world size or
backend name is a user mistake and raises ``implementations.errors.ConfigError``.
"""

from __future__ import annotations

from collections.abc import Mapping


class DistRunnerError(RuntimeError):
    """Base of the runner's own failures."""


class RankFailure(DistRunnerError):
    """A rank raised, exited, or (see ``RankTimeout``) hung during ``RankPool.run``.

    ``rank_errors`` maps rank -> formatted error text (traceback, exit code or stack);
    ``pool_rebuilt`` is False only when every rank reported cleanly (an agreed check
    failure, see ``RankContext.assert_all``) so the live group was kept.
    """

    def __init__(
        self,
        message: str,
        *,
        rank_errors: Mapping[int, str] | None = None,
        pool_rebuilt: bool = True,
    ) -> None:
        super().__init__(message)
        self.rank_errors = dict(rank_errors or {})
        self.pool_rebuilt = pool_rebuilt


class RankTimeout(RankFailure):
    """``run`` did not finish within its timeout; the message holds each unfinished rank's stack."""


class RankSkip(Exception):
    """Raised by a body to skip (on the ranks) and re-raised by the parent with the same reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PoolUnavailable(DistRunnerError):
    """This machine cannot host the pool (e.g. NCCL asked for more ranks than it has cards)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CollectiveCheckFailed(AssertionError):
    """Raised on every rank by ``RankContext.assert_all`` when any rank's verdict is False."""
