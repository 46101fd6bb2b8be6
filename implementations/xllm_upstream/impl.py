"""Upstream xLLM's owner rule, otherwise the reference (FEATURE section 4).

Upstream assigns ``owner = layer_id % s``. On all-full-attention models this
equals the reference's round-robin; on hybrid models it is unbalanced (Qwen3.5's
full layers 3, 7, ..., 39 are all odd), which the suites show by running both.
"""

from __future__ import annotations

from implementations.reference import layout
from implementations.reference.impl import ReferenceImplementation


class XllmUpstreamImplementation(ReferenceImplementation):
    name = "xllm_upstream"

    def assign_owners(self, full_layers: tuple[int, ...], split_size: int) -> tuple[tuple[int, int], ...]:
        return layout.layer_id_owners(full_layers, split_size)
