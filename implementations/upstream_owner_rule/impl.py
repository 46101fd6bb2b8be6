"""The reference with upstream's owner rule and nothing else changed (FEATURE sections 4 and 10).

This is what a port gets by adding the hybrids to upstream's model list without
changing the rule: upstream assigns ``owner = layer_id % s``. On
all-full-attention models that equals the reference's round-robin; on hybrid
models it is unbalanced (Qwen3.5's full layers 3, 7, ..., 39 are all odd), which
the suites show by running both.
"""

from __future__ import annotations

from implementations.reference import layout
from implementations.reference.impl import ReferenceImplementation


class UpstreamOwnerRuleImplementation(ReferenceImplementation):
    name = "upstream_owner_rule"

    def assign_owners(self, full_layers: tuple[int, ...], split_size: int) -> tuple[tuple[int, int], ...]:
        return layout.layer_id_owners(full_layers, split_size)
