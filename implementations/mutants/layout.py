"""Layout mutants: who owns which layer (FEATURE section 4)."""

from __future__ import annotations

from contract.interface import WorkerKVCache
from implementations.mutants.base import Mutant


class OwnerOffByOne(Mutant):
    """The k-th full-attention layer is owned by split rank (k + 1) % s, not k % s (FEATURE 4, owner rule)."""

    name = "mutant_owner_off_by_one"
    component = "layout"
    expected_catchers = ("TC-01",)

    def assign_owners(self, full_layers, split_size):
        return tuple((layer_id, (k + 1) % split_size) for k, layer_id in enumerate(full_layers))


class LinearSplit(Mutant):
    """Linear-attention layers are split too: the k-th linear layer keeps state only on split rank k % s (FEATURE 4, only full layers split)."""

    name = "mutant_linear_split"
    component = "layout"
    expected_catchers = ("TC-01", "TC-02", "TC-05")

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        if message.active:
            full = set(message.full_layers)
            linear = [l for l in range(message.num_layers) if l not in full]
            for k, layer_id in enumerate(linear):
                if k % cache.split_size != cache.split_rank:
                    layer = cache.layer(layer_id)
                    layer.owned = False
                    layer.tensors = {}
        return cache


class IntervalOffByOne(Mutant):
    """Without layer_types, layer l is full iff l % full_attention_interval == 0, not (l + 1) % interval (FEATURE 4)."""

    name = "mutant_interval_off_by_one"
    component = "layout"
    expected_catchers = ("TC-01", "TC-02")

    def full_layers(self, model):
        if model.layer_types is not None or model.full_attention_interval <= 1:
            return super().full_layers(model)
        return tuple(l for l in range(model.num_hidden_layers) if l % model.full_attention_interval == 0)


class AttentionSpellingLinear(Mutant):
    """A layer_types entry `attention` counts as linear; only `full_attention` is full (FEATURE 4, both spellings)."""

    name = "mutant_attention_spelling_linear"
    component = "layout"
    expected_catchers = ("TC-01", "TC-02")

    def full_layers(self, model):
        if model.layer_types is None:
            return super().full_layers(model)
        return tuple(l for l in super().full_layers(model) if model.layer_types[l] == "full_attention")
