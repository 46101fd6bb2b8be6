"""Drive the explorer: draw, judge, and on a failure shrink to a minimal configuration.

``explore(runner, examples=N, allocate=..., seed=S)`` returns None when every drawn
configuration passed, else the ``Finding`` of the minimal failing one: its configuration, the
failing checks' messages and a ready ``python -m harness.plan`` command. The byte strings are
derived from S (``drawn_strings``: BLAKE2b of S and each string's index, the same strings in every
process and on every platform, the first N of a seed the same whatever the count), decoded one
configuration each (``strategies.decode``) and judged in order until one fails; the failing
configuration's bytes are then shrunk towards 0 (``shrunk``). Exploring writes nothing (the command of
a ``Finding`` writes its spec file).
"""

from __future__ import annotations

import gc
import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterator, Optional

from contract.specs import RunSpec
from harness.explore import reproduce
from harness.explore.runner import InProcessRunner
from harness.explore.strategies import DRAWN_BYTES, bytes_read, decode

DEFAULT_SEED = 20261201
CI_EXAMPLES = {False: 1000, True: 40}
"""Configurations CI draws per implementation: plan level (False) and with allocation (True)."""


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

    with heap_frozen():
        for one in drawn_strings(seed, examples):
            failures = failures_of(one)
            if failures:
                if shrink:
                    one, failures = shrunk(one, failures, failures_of)
                return Finding(implementation=runner.implementation, run=decode(one), failures=failures,
                               impl_overrides=runner.overrides, checked=count.judged)
    return None


@contextmanager
def heap_frozen() -> Iterator[None]:
    """The objects alive on entry (the imports, torch's, the configurations and oracle answers kept from earlier
    explorations) left out of the cyclic garbage collector's full collections until exit (``gc.freeze``, then
    ``gc.unfreeze``). An exploration keeps the oracle's answers of thousands of configurations, so the collector
    runs a full collection once or twice per 1000 draws, each over the whole heap: about 75 ms, a tenth of the
    exploration. Frozen, a full collection reads only what the exploration made. Nothing is lost: a frozen object
    is still freed when nothing refers to it, and a frozen cycle is collected after exit. Left alone where the
    caller has frozen objects itself (``gc.get_freeze_count``): a pytest process has, once its collection ends
    (``harness.pytest_plugin.gc_freeze``), so this serves the other processes that explore (the bench, a
    script)."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


STRINGS_REMEMBERED = 16
"""(seed, count) pairs whose strings ``drawn_strings`` keeps: CI's implementations, the mutants the explorer must
catch and the reach test each explore the same seed and count."""


@lru_cache(maxsize=STRINGS_REMEMBERED)
def drawn_strings(seed: int, examples: int) -> tuple[bytes, ...]:
    """``examples`` byte strings of ``DRAWN_BYTES`` each, one configuration each (``strategies.decode``): string k
    of a seed is ``drawn_string(seed, k)``, so the same bytes in every process, on every platform and Python
    version, and the first strings of a seed the same whatever the count (a shorter exploration judges the start
    of a longer one). Kept per (seed, count) (``STRINGS_REMEMBERED``)."""
    return tuple(drawn_string(seed, k) for k in range(examples))


def drawn_string(seed: int, k: int) -> bytes:
    """The k-th string of ``seed``: BLAKE2b of the two numbers, ``DRAWN_BYTES`` long, every byte uniform over 0..255
    (the decoder's option lists carry the weighting: a repeated option, the boundary options of budgets and
    reserves). About a microsecond per configuration, where a Hypothesis example cost 0.3 to 0.5 ms: the
    shrinking is the explorer's own (``shrunk``), so no property-testing library is paid per draw."""
    return hashlib.blake2b(f"lwsplit explore {seed} {k}".encode(), digest_size=DRAWN_BYTES).digest()


SHRINK_PASSES = 4


def shrunk(data: bytes, failures: tuple[str, ...], failures_of: Callable[[bytes], tuple]) -> tuple[bytes, tuple]:
    """The failing configuration's bytes moved towards 0 one at a time (each byte is one decision, 0 its simplest
    option) while it still fails, until a pass changes nothing (at most ``SHRINK_PASSES``); the bytes decoding
    does not read are set to 0 first."""
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
