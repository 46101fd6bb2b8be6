"""Flag mutants: when the feature is on (FEATURE section 2)."""

from __future__ import annotations

from implementations.mutants.base import Mutant


class DisabledStillSplits(Mutant):
    """The split is active whenever s > 1, even with enable_layerwise_split=false (FEATURE 2, active iff enabled and s > 1)."""

    name = "mutant_disabled_still_splits"
    component = "flags"
    expected_catchers = ("TC-06",)

    def is_active(self, flags):
        return flags.split_size > 1
