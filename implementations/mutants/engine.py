"""Engine mutants: what an engine hands its workers (FEATURE section 8)."""

from __future__ import annotations

from dataclasses import replace

from implementations.mutants.base import Mutant
from implementations.reference import estimation, layout


class DraftKeepsSplit(Mutant):
    """The draft engine's message keeps the target's split, so draft workers allocate only their owned draft layers (FEATURE 6/8, draft resets split to 1)."""

    name = "mutant_draft_keeps_split"
    component = "engine"
    expected_catchers = ("TC-07",)

    def draft_message(self, plan, run):
        message = super().draft_message(plan, run)
        if not plan.active:
            return message
        s, tp = plan.split_size, plan.attn_tp_size
        owners = self.assign_owners(message.full_layers, s)
        scratch = self.scratch_bytes_per_block(run.draft, run.cache, tp)
        ranks = []
        for draft_rank, target_rank in zip(message.ranks, plan.ranks):
            owned = layout.owned_layers(owners, target_rank.split_rank)
            owned_bytes = estimation.owned_bytes_per_block(message.layer_bytes_per_block, owned)
            ranks.append(replace(
                draft_rank, split_group=target_rank.split_group, split_rank=target_rank.split_rank,
                owned_full_layers=owned,
                estimated_bytes=estimation.rank_bytes(plan.n_blocks, owned_bytes, scratch, 0),
            ))
        per_rank = {r.rank: r.estimated_bytes for r in ranks}
        return replace(
            message, split_size=s, active=True, split_groups=plan.split_groups, layer_owner=owners,
            scratch_bytes_per_block=scratch, ranks=tuple(ranks),
            peak_bytes=estimation.peak_bytes(per_rank), mean_bytes=estimation.mean_bytes(per_rank),
            notes=(f"draft engine of {plan.model}: split kept at {s}",),
        )


_KEPT: list = []
"""Storages the leaking mutant keeps (the last few only, so a long-lived rank does not grow)."""


class DraftLeaksStorage(Mutant):
    """The draft engine keeps a reference to one of its KV storages after its workers are torn down (FEATURE 10, TC-05: no storage leaked by any engine)."""

    name = "mutant_draft_leaks_storage"
    component = "engine"
    expected_catchers = ("TC-04", "TC-07")

    def init_worker(self, message, run, *, rank, role, device, expected_digest):
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        if role == "draft":
            tensor = next(iter(cache.layers[0].tensors.values()))
            _KEPT.append(tensor.untyped_storage())
            del _KEPT[:-2]
        return cache


class DraftMessageSplitFields(Mutant):
    """The draft engine's message carries the target's split size, split groups and each rank's split rank, though it is not active, so its workers still reset to 1 / rank 0 (FEATURE 6/8: the draft engine never splits; its message says so)."""

    name = "mutant_draft_message_split_fields"
    component = "engine"
    expected_catchers = ("TC-04", "TC-07")

    def draft_message(self, plan, run):
        message = super().draft_message(plan, run)
        if not plan.active:
            return message
        ranks = tuple(replace(d, split_group=t.split_group, split_rank=t.split_rank)
                      for d, t in zip(message.ranks, plan.ranks))
        return replace(message, split_size=plan.split_size, split_groups=plan.split_groups, ranks=ranks)
