"""Upstream xLLM at 494f293b5 (PR #2260), every rule, one overridden step each.

Where upstream and the BI-V100 adaptation differ (FEATURE sections 2 to 4), this
variant keeps upstream's rule:

* no enable flag: ``layerwise_split_size > 1`` alone turns the split on
  (``master.cpp`` ``validate_layerwise_split_size_startup_config``);
* support by ``model_type``: ``deepseek_v32`` and ``glm_moe_dsa`` only
  (``layerwise_split_layout.h`` ``is_layerwise_split_supported_model``), so the
  hybrids and DeepSeek-V3 the adaptation adds are refused;
* consecutive split groups (``get_layerwise_split_group``), no topology regrouping;
* owner ``layer_id % s`` (``LayerwiseSplitLayout::owner_rank``);
* a worker's split rank is its global ``rank % s`` (``worker_impl.cpp``).

Everything else (byte math, linear-state slots, the speculative draft cost at the
target's cache shape) is the reference's, which follows upstream there.
"""

from __future__ import annotations

from typing import Optional

from contract.plan_types import KVPlan
from contract.specs import LayerwiseFlags, RunSpec
from implementations.reference import layout, validation
from implementations.reference.impl import Placement, ReferenceImplementation


class XllmUpstreamImplementation(ReferenceImplementation):
    name = "xllm_upstream"
    supported_model_types = validation.UPSTREAM_SPLIT_MODEL_TYPES

    def is_active(self, flags: LayerwiseFlags) -> bool:
        """No enable flag upstream: s > 1 alone activates the split."""
        return flags.split_size > 1

    def split_groups(self, run: RunSpec, placement: Optional[Placement] = None) -> tuple[tuple[int, ...], ...]:
        """Consecutive runs of s ranks inside each attention TP group, whatever the topology."""
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        tp = self.attn_tp_size(run.parallel)
        return tuple(group for tp_group in layout.tp_groups(run.parallel, tp)
                     for group in layout.consecutive_split_groups(tp_group, s))

    def assign_owners(self, full_layers: tuple[int, ...], split_size: int) -> tuple[tuple[int, int], ...]:
        return layout.layer_id_owners(full_layers, split_size)

    def worker_split_rank(self, message: KVPlan, rank: int) -> int:
        """Global ``rank % s``: the position in the group only while groups are consecutive."""
        super().worker_split_rank(message, rank)  # the rank must be in the plan
        return rank % message.split_size
