"""Worker mutants: what a worker checks before allocating (FEATURE section 8)."""

from __future__ import annotations

from implementations.errors import PlanError
from implementations.mutants.base import Mutant


class DigestUnchecked(Mutant):
    """Workers do not compare the message's digest with the master's, so a diverging layout is accepted (FEATURE 8, identical layout)."""

    name = "mutant_digest_unchecked"
    component = "worker"
    expected_catchers = ("TC-04",)

    def check_message(self, message, expected_digest, rank):
        if not any(r.rank == rank for r in message.ranks):
            raise PlanError("rank", rank, f"a rank of the plan (0..{message.world_size - 1})")
