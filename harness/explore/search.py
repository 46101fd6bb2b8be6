"""Drive the explorer with Hypothesis: draw, judge, and on a failure shrink to a minimal configuration.

``explore(runner, examples=N, allocate=..., seed=S)`` returns None when every drawn
configuration passed, else the ``Finding`` of the minimal failing one: its configuration, the
failing checks' messages and a ready ``python -m harness.plan`` command. Hypothesis draws
several configurations per example (``batch_size``) from a fixed seed with no example
database, so a run is repeatable and writes nothing; the strings it draws are kept per seed and
count (``drawn_batches``: each implementation explores the same ones) and judged in order until one
fails; the failing configuration's own bytes are then shrunk towards 0 (``shrunk``), not the batch
it came in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Optional

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as fixed_seed

from contract.specs import RunSpec
from harness.explore import reproduce
from harness.explore.runner import InProcessRunner
from harness.explore.strategies import batch_bytes, bytes_read, decode, slices

DEFAULT_SEED = 20261201
CI_EXAMPLES = {False: 1000, True: 40}
"""Configurations CI draws per implementation: plan level (False) and with allocation (True)."""
BATCHES = (8, 4, 2, 1)
"""Configurations per Hypothesis example, the largest that divides the count: Hypothesis's own cost per
example (about 0.5 ms, as much as judging a plan) is paid once per batch."""


def batch_size(examples: int) -> int:
    return next(b for b in BATCHES if examples % b == 0)


@dataclass(frozen=True, kw_only=True)
class Finding:
    """The minimal failing configuration of one exploration."""

    implementation: str
    run: RunSpec
    failures: tuple[str, ...]
    impl_overrides: tuple[str, ...]
    checked: int = 0
    """Configurations judged before (and while) shrinking."""

    def command(self) -> str:
        return reproduce.command(self.run, self.impl_overrides)

    def report(self) -> str:
        return "\n".join([f"{self.implementation}: a drawn configuration fails {len(self.failures)} check(s):",
                          *(f"  {f}" for f in self.failures), "reproduce its plan with:", f"  {self.command()}"])


@dataclass
class Count:
    """What an exploration judged: configurations, refusals, by which checks, and open questions."""

    judged: int = 0
    refused: int = 0
    open_questions: dict = field(default_factory=dict)
    """Open question -> configurations it left unjudged (``known``)."""
    judged_by: dict = field(default_factory=dict)


def explore(runner: InProcessRunner, *, examples: int, allocate: bool, seed: int = DEFAULT_SEED,
            shrink: bool = True, count: Optional[Count] = None) -> Optional[Finding]:
    """Judge ``examples`` drawn configurations; the minimal failing one, or None."""
    count = count if count is not None else Count()

    def failures_of(data: bytes) -> tuple[str, ...]:
        verdict = runner.verdict(decode(data), allocate=allocate)
        count.judged += 1
        count.refused += verdict.refused
        for name in verdict.judged_by:
            count.judged_by[name] = count.judged_by.get(name, 0) + 1
        if verdict.open_question:
            kind = verdict.open_question.split(":", 1)[0]
            count.open_questions[kind] = count.open_questions.get(kind, 0) + 1
            return ()
        return verdict.failures

    for data in drawn_batches(seed, examples):
        for one in slices(data):
            failures = failures_of(one)
            if failures:
                if shrink:
                    one, failures = shrunk(one, failures, failures_of)
                return Finding(implementation=runner.implementation, run=decode(one), failures=failures,
                               impl_overrides=runner.overrides, checked=count.judged)
    return None


BATCHES_REMEMBERED = 16
"""(seed, count) pairs whose drawn strings ``drawn_batches`` keeps: CI's implementations, the mutants the
explorer must catch and the reach test each explore the same seed and count."""


@lru_cache(maxsize=BATCHES_REMEMBERED)
def drawn_batches(seed: int, examples: int) -> tuple[bytes, ...]:
    """The byte strings Hypothesis draws from ``seed`` for ``examples`` configurations, one per batch of
    ``batch_size(examples)`` (``slices``): its generate phase, with no example database, so the same strings
    in every process. Drawn once per process and (seed, count) (``BATCHES_REMEMBERED``): every implementation
    explores from the same seed, and Hypothesis's draws do not depend on what judging finds (a failure only
    ends the exploration early)."""
    out = []
    per_example = batch_size(examples)

    @settings(max_examples=examples // per_example, deadline=None, database=None, derandomize=False,
              print_blob=False, phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @fixed_seed(seed)
    @given(batch_bytes(per_example))
    def collect(data):
        out.append(data)

    collect()
    return tuple(out)


SHRINK_PASSES = 4


def shrunk(data: bytes, failures: tuple[str, ...], failures_of: Callable[[bytes], tuple]) -> tuple[bytes, tuple]:
    """The failing configuration's bytes moved towards 0 one at a time (each byte is one decision, 0 its simplest
    option) while it still fails, until a pass changes nothing (at most ``SHRINK_PASSES``); the bytes decoding
    does not read are set to 0 first. Shrinks one configuration, not the batch Hypothesis drew it in."""
    read = bytes_read(data)
    best = bytearray(data[:read]) + bytearray(len(data) - read)  # the same configuration
    for _ in range(SHRINK_PASSES):
        progress = False
        for at in range(bytes_read(bytes(best))):
            for value in sorted(v for v in {0, 1, 2, 3, best[at] // 2, best[at] - 1} if 0 <= v < best[at]):
                trial = bytes(best[:at]) + bytes((value,)) + bytes(best[at + 1:])
                found = failures_of(trial)
                if found:
                    best[at], failures, progress = value, found, True
                    break
        if not progress:
            break
    return bytes(best), failures
