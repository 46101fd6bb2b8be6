"""Mutants of the rules the first mutants left without one: each breaks exactly one rule of FEATURE 3-6.

Same conventions as the other mutant modules: the reference with one rule changed, overriding the
smallest method that reaches it (by ``replace`` on what the reference's own step receives where the
step is a module function).
"""

from __future__ import annotations

from dataclasses import replace

from implementations.mutants.base import Mutant
from implementations.reference import layers, validation

# ---- startup rules (FEATURE 3) ----------------------------------------------------------------


class WorldRemainderDropped(Mutant):
    """A world size dp * cp does not divide is accepted, its remainder dropped (FEATURE 3, world % (dp * cp) == 0)."""

    name = "mutant_world_remainder_dropped"
    component = "validation"
    expected_catchers = ("TC-01",)

    def validate(self, run):
        p = run.parallel
        rest = p.world_size % (p.dp_size * p.cp_size) if p.dp_size >= 1 and p.cp_size >= 1 else 0
        if rest:  # the mutation: the rules that follow see the whole part of the world
            run = replace(run, parallel=replace(p, world_size=p.world_size - rest))
        super().validate(run)


class TpModSBeforeModelType(Mutant):
    """attention tp % s is checked before the model type (FEATURE 3, upstream's order: the model type first)."""

    name = "mutant_tp_mod_s_before_model_type"
    component = "validation"
    expected_catchers = ("TC-01",)

    def check_supported_model(self, run):
        validation.check_split_size(run.layerwise, self.attn_tp_size(run.parallel))  # the mutation: first
        super().check_supported_model(run)


class SplitSizeBelowOneAccepted(Mutant):
    """layerwise.split_size 0 or negative is accepted as 1 instead of refused (FEATURE 3, s >= 1 even when disabled)."""

    name = "mutant_split_size_below_one_accepted"
    component = "validation"
    expected_catchers = ("TC-01",)

    def validate(self, run):
        if run.layerwise.split_size < 1:  # the mutation: seen as 1 (off)
            run = replace(run, layerwise=replace(run.layerwise, split_size=1))
        super().validate(run)


class SleepModeAccepted(Mutant):
    """Sleep mode is accepted with an active split (FEATURE 3, no sleep mode with split)."""

    name = "mutant_sleep_mode_accepted"
    component = "validation"
    expected_catchers = ("TC-01",)

    def check_active_worker(self, run):
        super().check_active_worker(replace(run, cache=replace(run.cache, enable_sleep_mode=False)))


class XtensorAccepted(Mutant):
    """xtensor is accepted with an active split (FEATURE 3, no xtensor with split)."""

    name = "mutant_xtensor_accepted"
    component = "validation"
    expected_catchers = ("TC-01",)

    def check_active_worker(self, run):
        super().check_active_worker(replace(run, cache=replace(run.cache, enable_xtensor=False)))


class QuantizedCacheAccepted(Mutant):
    """Quantized caches are accepted on hardware whose profile supports none (FEATURE 3, int8 KV on MLU only)."""

    name = "mutant_quantized_cache_accepted"
    component = "validation"
    expected_catchers = ("TC-01",)

    def validate(self, run):
        every = replace(run.hardware, quantized_kv_cache_dtypes=("int8", "fp8_e4m3", "fp8_e5m2"),
                        int8_indexer_cache=True)
        super().validate(replace(run, hardware=every))


class LinearWithIndexerAccepted(Mutant):
    """A target with both linear-attention layers and a DSA indexer is accepted (FEATURE 3, never both)."""

    name = "mutant_linear_with_indexer_accepted"
    component = "validation"
    expected_catchers = ("TC-01",)

    def validate(self, run):
        if layers.linear_layers(run.model) and run.model.index_n_heads > 0:  # validated without the indexer
            run = replace(run, model=replace(run.model, index_n_heads=0))
        super().validate(run)


# ---- layers (FEATURE 4) ---------------------------------------------------------------------------


class IntervalOffByOne(Mutant):
    """Without layer_types, layer l is full iff l % full_attention_interval == 0, not (l + 1) % interval (FEATURE 4)."""

    name = "mutant_interval_off_by_one"
    component = "layout"
    expected_catchers = ("TC-01", "TC-02")

    def full_layers(self, model):
        if model.layer_types is not None or model.full_attention_interval <= 1:
            return super().full_layers(model)
        return tuple(l for l in range(model.num_hidden_layers) if l % model.full_attention_interval == 0)


# ---- bytes per slot and linear state (FEATURE 5) ---------------------------------------------------


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


# ---- block count and report (FEATURE 6) ------------------------------------------------------------


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


class AttentionSpellingLinear(Mutant):
    """A layer_types entry `attention` counts as linear; only `full_attention` is full (FEATURE 4, both spellings)."""

    name = "mutant_attention_spelling_linear"
    component = "layout"
    expected_catchers = ("TC-01", "TC-02")

    def full_layers(self, model):
        if model.layer_types is None:
            return super().full_layers(model)
        return tuple(l for l in super().full_layers(model) if model.layer_types[l] == "full_attention")


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
        from contract.errors import PlanError

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
