"""The one interface between the harness and an implementation under test.

The harness never imports an implementation's internals: it builds a
``RunSpec`` from config, instantiates the implementation named by the
``implementation`` config group (Hydra ``_target_``), and calls the three
methods below, one per role of the upstream change:

* master  -> ``plan``            validate the config, map topology, lay out, estimate
* engine  -> ``engine_message``  what an engine hands each of its workers
* worker  -> ``init_worker``     check the message, build the ownership mask, allocate

An out-of-tree implementation only has to satisfy ``KVShardingImplementation``;
a variant of the reference subclasses ``ReferenceImplementation`` and overrides
one step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from contract.plan_types import CacheCapacity, KVPlan
from contract.specs import RunSpec

if TYPE_CHECKING:  # torch only where tensors exist
    import torch

ROLES = ("target", "draft")

NATIVE_LOG_ENV = "LWSPLIT_NATIVE_LOG"
"""The environment variable naming the file where compiled code an implementation loads appends its log lines
(one per message, written at once so that a crash keeps them). A harness rank sets it to a file of its own
and shows a failed or hung rank's last lines; an implementation's helper process may point it at its own
standard error. Unset: the compiled code logs nowhere."""


@dataclass
class LayerCache:
    """One layer's cache on one worker."""

    layer_id: int
    kind: str
    """``full`` (attention KV) or ``linear`` (conv + recurrent state)."""
    owned: bool
    """upstream ``owns_layer_cache()``; False for a full layer served by the scratch."""
    tensors: dict[str, torch.Tensor] = field(default_factory=dict)
    """full: k/v (GQA) or latent/rope (MLA), plus index and *_scale; linear: conv/recurrent."""


@dataclass
class WorkerKVCache:
    """What ``init_worker`` returns: the worker's allocated caches and its view of the layout."""

    rank: int
    role: str
    plan_digest: str
    split_size: int
    split_rank: int
    split_group: tuple[int, ...]
    n_blocks: int
    kv_layout: str
    device: str
    layers: list[LayerCache]
    scratch: dict[str, torch.Tensor] = field(default_factory=dict)

    def layer(self, layer_id: int) -> LayerCache:
        return self.layers[layer_id]

    def owns_layer_cache(self, layer_id: int) -> bool:
        return self.layers[layer_id].owned

    def all_tensors(self) -> list[torch.Tensor]:
        out = [t for layer in self.layers for t in layer.tensors.values()]
        return out + list(self.scratch.values())


@runtime_checkable
class KVShardingImplementation(Protocol):
    """Layerwise split KV cache sharding, as the harness drives it."""

    name: str

    def plan(self, run: RunSpec) -> KVPlan:
        """Master: validate (raise ``contract.errors.UserError``), lay out, estimate."""
        ...

    def engine_message(self, plan: KVPlan, run: RunSpec, role: str) -> KVPlan:
        """Engine: the plan its workers receive. ``draft`` engines reset split to 1."""
        ...

    def init_worker(
        self,
        message: KVPlan,
        run: RunSpec,
        *,
        rank: int,
        role: str,
        device: str,
        expected_digest: str,
    ) -> WorkerKVCache:
        """Worker: check the message against ``expected_digest``, build the mask, allocate.

        Raises ``contract.errors.PlanError`` if the message is not the
        layout the master published or does not fit this rank.
        """
        ...


@runtime_checkable
class SpeculativeCapacityEstimator(Protocol):
    """Optional: the speculative block count on two engines' cache figures.

    Upstream's ``estimate_speculative_kv_cache_blocks`` takes the target's and the
    draft's ``KVCacheCapacity`` directly; its unit tests call it with figures no
    real model has. An implementation offering this lets the harness run those
    tests as written (``testcases/upstream``).
    """

    def speculative_n_blocks(self, target: CacheCapacity, draft: CacheCapacity, *, share_device: bool = True,
                             draft_body_tp1: bool = False) -> int:
        ...
