"""Estimation mutants: bytes per layer, reservations and the block count (FEATURE sections 5 and 6)."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from contract.errors import PlanError
from implementations.mutants.base import Mutant
from implementations.reference import estimation, kv_bytes, layers


class NoScratchInEstimate(Mutant):
    """The scratch layer is left out of the split cost and per-rank estimate (FEATURE 6, cost = owned + scratch + additional)."""

    name = "mutant_no_scratch_in_estimate"
    component = "estimation"
    # Not TC-01: it measures the allocation at the plan's own n_blocks, and the allocation is right.
    expected_catchers = ("TC-02", "TC-07")

    def scratch_bytes_per_block(self, model, cache, attn_tp_size):
        return 0


class MaxBlockCount(Mutant):
    """The common block count is the maximum over split ranks, not the minimum (FEATURE 6, n_blocks = min over r)."""

    name = "mutant_max_block_count"
    component = "estimation"
    expected_catchers = ("TC-01", "TC-02", "TC-07")

    # On unbalanced splits the max overruns the card, so the reference's own card check
    # refuses the plan (PlanError); on balanced ones it equals the reference.
    def block_count(self, available_bytes, costs_per_block):
        costs = list(costs_per_block)
        super().block_count(available_bytes, costs)  # keep the reference's refusals
        return max(0, max(available_bytes // c for c in costs))


class IndexSlotDropped(Mutant):
    """The DSA indexer slot is left out of each layer's bytes per block (FEATURE 5, index slot added on indexer layers)."""

    name = "mutant_index_slot_dropped"
    component = "estimation"
    # Not TC-01: the allocation keeps the slot; only the estimate and block count lose it.
    expected_catchers = ("TC-02", "TC-06")

    def layer_bytes_per_block(self, model, cache, attn_tp_size):
        plain = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=False).block_bytes
        full = set(self.full_layers(model))
        return tuple(plain if l in full else 0 for l in range(model.num_hidden_layers))


class LinearSlotsUnpadded(Mutant):
    """Linear-state reservation drops upstream's 2 padding slots (FEATURE 5, slots padded by 2)."""

    name = "mutant_linear_slots_unpadded"
    component = "estimation"
    expected_catchers = ("TC-02", "TC-06", "TC-07")

    def linear_state_slots(self, cache, **figures):
        slots = super().linear_state_slots(cache, **figures)
        return slots - estimation.LINEAR_STATE_PADDING_SLOTS if figures["num_linear_layers"] > 0 else slots


class ScaleBytesMissing(Mutant):
    """Quantized KV (int8/fp8) is estimated without its float32 scale bytes (FEATURE 5, scale slot)."""

    name = "mutant_scale_bytes_missing"
    component = "estimation"
    # TC-02 once it runs quantized caches (the allocation keeps the scales, so TC-01 cannot see it).
    expected_catchers = ("TC-02",)

    @staticmethod
    def _unscaled_block_bytes(model, cache, attn_tp_size, *, with_indexer: bool) -> int:
        spec = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=with_indexer)
        return replace(spec, quantized=False).block_bytes

    def layer_bytes_per_block(self, model, cache, attn_tp_size):
        full = set(self.full_layers(model))
        indexed = set(layers.indexer_layers(model))
        plain = self._unscaled_block_bytes(model, cache, attn_tp_size, with_indexer=False)
        with_index = self._unscaled_block_bytes(model, cache, attn_tp_size, with_indexer=True)
        return tuple(0 if l not in full else (with_index if l in indexed else plain)
                     for l in range(model.num_hidden_layers))

    def scratch_bytes_per_block(self, model, cache, attn_tp_size):
        with_indexer = bool(layers.indexer_layers(model))
        return self._unscaled_block_bytes(model, cache, attn_tp_size, with_indexer=with_indexer)


class DraftAdditionalIgnored(Mutant):
    """The target's budget ignores the draft's KV (additional = 0, card check on target bytes only), so target + draft overrun it (FEATURE 6, speculative)."""

    name = "mutant_draft_additional_ignored"
    component = "estimation"
    expected_catchers = ("TC-07",)

    def plan(self, run):
        # The target is planned as if not speculative; the draft is attached afterwards.
        if run.draft is None:
            return super().plan(run)
        self.validate(run)
        target = super().plan(replace(run, draft=None))
        draft = self.draft_plan(run, target.attn_tp_size,
                                self.target_capacity(run, target.attn_tp_size,
                                                     linear_cache_bytes=target.linear_state_bytes))
        ranks = tuple(replace(r, draft_estimated_bytes=target.n_blocks * draft.bytes_per_block)
                      for r in target.ranks)
        return replace(target, draft=draft, ranks=ranks)


def _with_estimates(plan, estimates: dict[int, int], *, uniform_peak: Optional[int] = None):
    """``plan`` with new per-rank estimates and the figures recomputed from them, as a report would."""
    ranks = tuple(replace(r, estimated_bytes=estimates[r.rank]) for r in plan.ranks)
    peak = estimation.peak_bytes(estimates)
    uniform = plan.uniform_peak_bytes if uniform_peak is None else uniform_peak
    return replace(plan, ranks=ranks, peak_bytes=peak, mean_bytes=estimation.mean_bytes(estimates),
                   uniform_peak_bytes=uniform, savings_bytes=uniform - peak)


class PeakScratchOmitted(Mutant):
    """At s = 2 a rank owning more than half of the full layers is estimated without its scratch layer (and so is the reported peak); the block count is right (FEATURE 6, estimate = owned + scratch)."""

    name = "mutant_peak_scratch_omitted"
    component = "estimation"
    # DeepSeek's 61 full layers: the 31-layer ranks lose 1/32 of their KV, inside the seed's 5%;
    # TC-02 compares exactly.
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        if not plan.active or plan.split_size != 2:
            return plan
        half = len(plan.full_layers) / 2
        scratch = plan.n_blocks * plan.scratch_bytes_per_block
        return _with_estimates(plan, {r.rank: r.estimated_bytes - (scratch if len(r.owned_full_layers) > half else 0)
                                      for r in plan.ranks})


class ScaleMissingInEstimate(Mutant):
    """Per-rank estimates and the reported figures leave out the float32 scale bytes of a quantized cache; the block count keeps them (FEATURE 5, scale slot)."""

    name = "mutant_scale_missing_in_estimate"
    component = "estimation"
    # 0.5-1.5% of a rank's bytes: inside the seed's 5%; TC-02 compares exactly.
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        if run.cache.kv_cache_dtype == "auto":
            return plan
        unscaled = ScaleBytesMissing()
        tp = plan.attn_tp_size
        layer_bytes = unscaled.layer_bytes_per_block(run.model, run.cache, tp)
        scratch = unscaled.scratch_bytes_per_block(run.model, run.cache, tp) if plan.active else 0
        est = {r.rank: plan.n_blocks * (sum(layer_bytes[l] for l in r.owned_full_layers)
                                        + (scratch if plan.active else 0)) + plan.linear_state_bytes
               for r in plan.ranks}
        return _with_estimates(plan, est)


class SavingsAtUniformBlocks(Mutant):
    """The reported uniform peak (and so the savings) is taken at the uniform block count, not at the split's own n_blocks (FEATURE 6, savings at the same n_blocks)."""

    name = "mutant_savings_at_uniform_blocks"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        full_bytes = sum(plan.layer_bytes_per_block[l] for l in plan.full_layers)
        uniform = plan.uniform_n_blocks * full_bytes + plan.linear_state_bytes
        return replace(plan, uniform_peak_bytes=uniform, savings_bytes=uniform - plan.peak_bytes)


class MeanRounded(Mutant):
    """The mean across ranks is rounded to the nearest byte (half up) instead of rounded down (FEATURE 6, report: the mean of the per-rank estimates)."""

    name = "mutant_mean_rounded"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        n = len(plan.ranks)
        return replace(plan, mean_bytes=(sum(r.estimated_bytes for r in plan.ranks) + n // 2) // n)


class GqaHeadsNotDivided(Mutant):
    """The GQA estimate counts every KV head on each rank, not max(1, num_key_value_heads / attn_tp) (FEATURE 5)."""

    name = "mutant_gqa_heads_not_divided"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def layer_bytes_per_block(self, model, cache, attn_tp_size):
        return super().layer_bytes_per_block(model, cache, 1 if model.attention == "gqa" else attn_tp_size)


class MlaRopeDropped(Mutant):
    """The MLA estimate leaves out qk_rope_head_dim: slot = d * kv_lora_rank (FEATURE 5, MLA slot)."""

    name = "mutant_mla_rope_dropped"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def layer_bytes_per_block(self, model, cache, attn_tp_size):
        if model.attention == "mla":
            model = replace(model, qk_rope_head_dim=0)
        return super().layer_bytes_per_block(model, cache, attn_tp_size)


class SpeculativeStateIgnored(Mutant):
    """A Qwen3.5 target's linear state ignores num_speculative_tokens (n_spec = 0) (FEATURE 5, conv/SSM growth)."""

    name = "mutant_speculative_state_ignored"
    component = "estimation"
    expected_catchers = ("TC-01", "TC-02")

    def speculative_state_tokens(self, model, cache):
        return 0


class SsmDtypeIgnored(Mutant):
    """The recurrent state takes the model dtype even when mamba_ssm_dtype is set (FEATURE 5, d_ssm)."""

    name = "mutant_ssm_dtype_ignored"
    component = "estimation"
    expected_catchers = ("TC-01", "TC-02")

    def linear_slot_bytes(self, model, cache, attn_tp_size):
        return super().linear_slot_bytes(replace(model, mamba_ssm_dtype=None), cache, attn_tp_size)


class FixedSlotsUnpadded(Mutant):
    """max_linear_state_cache_slots > 0 reserves that many slots, without upstream's + 2 (FEATURE 5)."""

    name = "mutant_fixed_slots_unpadded"
    component = "estimation"
    expected_catchers = ("TC-01", "TC-02")

    def linear_state_slots(self, cache, **figures):
        slots = super().linear_state_slots(cache, **figures)
        return slots - 2 if cache.max_linear_state_cache_slots > 0 and figures["num_linear_layers"] else slots


class PrefixCacheIgnored(Mutant):
    """With prefix cache on, linear-state slots are sized as without it (max_seqs_per_batch + 2, capped) (FEATURE 5)."""

    name = "mutant_prefix_cache_ignored"
    component = "estimation"
    expected_catchers = ("TC-01", "TC-02")

    def linear_state_slots(self, cache, **figures):
        return super().linear_state_slots(replace(cache, enable_prefix_cache=False), **figures)


class CapacityGainInverted(Mutant):
    """The capacity gain is reported as uniform n_blocks / split n_blocks (FEATURE 6, report)."""

    name = "mutant_capacity_gain_inverted"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        return replace(plan, capacity_gain=plan.uniform_n_blocks / plan.n_blocks if plan.active else 1.0)


class CapacityGainInfinite(Mutant):
    """With a split block but no uniform one, the capacity gain is reported as infinity, not null (FEATURE 6, undefined gain)."""

    name = "mutant_capacity_gain_infinite"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        return replace(plan, capacity_gain=float("inf")) if plan.active and plan.uniform_n_blocks == 0 else plan


class RaisesPeakUnnoted(Mutant):
    """A plan whose split cannot lower the peak does not say "the split raises the peak" (FEATURE 6, the note)."""

    name = "mutant_raises_peak_unnoted"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        return replace(plan, notes=tuple(n for n in plan.notes if "raises the peak" not in n))


class DraftBodyTp1Ignored(Mutant):
    """A draft body at TP 1 still costs the target's cache shape, not its own (FEATURE 6, enable_mtp_draft_body_tp1)."""

    name = "mutant_draft_body_tp1_ignored"
    component = "estimation"
    expected_catchers = ("TC-07",)

    def draft_layer_bytes_per_block(self, target, draft, *, draft_body_tp1):
        return super().draft_layer_bytes_per_block(target, draft, draft_body_tp1=False)


class UniformIgnoresDraft(Mutant):
    """The uniform block count (and so the capacity gain) leaves out the draft's D per block (FEATURE 6)."""

    name = "mutant_uniform_ignores_draft"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def plan(self, run):
        plan = super().plan(run)
        if plan.draft is None:
            return plan
        uniform = self.block_count(plan.available_bytes, [sum(plan.layer_bytes_per_block)])
        gain = plan.n_blocks / uniform if plan.active else plan.capacity_gain
        return replace(plan, uniform_n_blocks=uniform, capacity_gain=gain)


class Int8IndexScaleMissing(Mutant):
    """The int8 indexer slot is index_head_dim bytes, without its 4-byte scale (FEATURE 5, int8 index slot)."""

    name = "mutant_int8_index_scale_missing"
    component = "estimation"
    expected_catchers = ("TC-02",)

    def layer_bytes_per_block(self, model, cache, attn_tp_size):
        per_layer = super().layer_bytes_per_block(model, cache, attn_tp_size)
        if cache.indexer_cache_dtype != "int8":
            return per_layer
        indexed = set(layers.indexer_layers(model))
        return tuple(b - cache.block_size * 4 if l in indexed else b for l, b in enumerate(per_layer))


class SlotCapUnchecked(Mutant):
    """max_linear_state_cache_slots above the cap is reserved anyway instead of refused (FEATURE 5, slot cap)."""

    name = "mutant_slot_cap_unchecked"
    component = "estimation"
    expected_catchers = ("TC-01",)

    def linear_state_slots(self, cache, **figures):
        try:
            return super().linear_state_slots(cache, **figures)
        except PlanError as exc:
            if exc.field != "cache.max_linear_state_cache_slots":
                raise
            return cache.max_linear_state_cache_slots + 2  # the mutation: no cap


class DraftOwnShape(Mutant):
    """The draft's KV takes its own cache shape, not the target's, and a larger draft slot is not refused (FEATURE 6)."""

    name = "mutant_draft_own_shape"
    component = "estimation"
    expected_catchers = ("TC-01", "TC-07")

    def draft_layer_bytes_per_block(self, target, draft, *, draft_body_tp1):
        return super().draft_layer_bytes_per_block(target, draft, draft_body_tp1=True)


class DraftIndexFromTarget(Mutant):
    """A draft's index slot is counted only where the target carries an indexer: an indexed draft at TP 1 beside an unindexed target costs no index slot (FEATURE 5-6: the index slot is added on the layers that carry an indexer, the draft's own included)."""

    name = "mutant_draft_index_from_target"
    component = "estimation"
    expected_catchers = ("TC-07",)

    def draft_capacity(self, run, attn_tp_size):
        capacity = super().draft_capacity(run, attn_tp_size)
        if layers.has_indexer(run.model):
            return capacity
        return replace(capacity, index_slot_size=0, num_indexer_layers=0)  # the mutation: the target decides
