"""Validation mutants: startup rules that let a bad configuration through (FEATURE section 3)."""

from __future__ import annotations

from dataclasses import replace

from contract.errors import PlanError
from implementations.mutants.base import Mutant
from implementations.reference import layers, validation


class NoValidationUnsupported(Mutant):
    """An active split is accepted on a model that does not support it (e.g. dense GQA llama3_8b) (FEATURE 3, supported models only)."""

    name = "mutant_no_validation_unsupported"
    component = "validation"
    # Not TC-06: it only runs disabled configs, where nothing is validated for a split.
    expected_catchers = ("TC-01", "TC-02")

    def check_supported_model(self, run):
        return None  # the mutation: every model type accepted


class CpSplitAccepted(Mutant):
    """An active split is accepted with context parallel (cp_size > 1) (FEATURE 3, no cp with split)."""

    name = "mutant_cp_split_accepted"
    component = "validation"
    # TC-01 runs the cp2 case; TC-04 runs no context-parallel config.
    expected_catchers = ("TC-01",)

    def check_active_master(self, run):
        # the mutation: cp_size seen as 1; the effective KV split (0 follows cp) stays what it was
        parallel = replace(run.parallel, cp_size=1,
                           kv_split_size=validation.effective_kv_split_size(run.parallel))
        super().check_active_master(replace(run, parallel=parallel))


class KvSplitAccepted(Mutant):
    """An active split is accepted with KV split (kv_split_size > 1) (FEATURE 3, no KV split with split)."""

    name = "mutant_kv_split_accepted"
    component = "validation"
    # TC-01's kv-split rejection case; no other TC runs a KV-split config.
    expected_catchers = ("TC-01",)

    def validate(self, run):
        super().validate(replace(run, parallel=replace(run.parallel, kv_split_size=1)))


class HostCacheWrongField(Mutant):
    """Host cache with an active split is refused as a block-budget PlanError, not as the host cache rule (FEATURE 3, refusal names its field)."""

    name = "mutant_host_cache_wrong_field"
    component = "validation"
    expected_catchers = ("TC-01",)

    def validate(self, run):
        if self.is_active(run.layerwise) and run.cache.host_blocks_factor > 1:
            super().validate(replace(run, cache=replace(run.cache, host_blocks_factor=1.0)))
            raise PlanError("n_blocks", 0, "at least one block", "the host cache leaves no device blocks")
        super().validate(run)


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


class SplitSizeAgainstWorld(Mutant):
    """s is checked against the world size, not the attention TP size (world / (dp * cp)), so at dp 2 an s that divides the world but not the TP group passes to the later rules (FEATURE 3, attention tp % s)."""

    name = "mutant_split_size_against_world"
    component = "validation"
    expected_catchers = ("TC-01",)

    def check_split_size(self, run):
        validation.check_split_size(run.layerwise, run.parallel.world_size)  # the mutation: the world, not tp


class Int8IndexerTargetOnly(Mutant):
    """The int8 indexer cache is refused only where the target carries an indexer, not where the draft alone does (FEATURE 3: the rule holds wherever an indexed cache is allocated, target or draft)."""

    name = "mutant_int8_indexer_target_only"
    component = "validation"
    expected_catchers = ("TC-01",)

    def validate(self, run):
        if run.model.index_n_heads == 0 and run.cache.indexer_cache_dtype == "int8":
            # the mutation: the rule asks the target alone; with no indexer there, int8 passes as auto would
            run = replace(run, cache=replace(run.cache, indexer_cache_dtype="auto"))
        super().validate(run)
