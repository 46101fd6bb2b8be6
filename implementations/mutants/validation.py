"""Validation mutants: startup rules that let a bad configuration through (FEATURE section 3)."""

from __future__ import annotations

from dataclasses import replace

from implementations.mutants.base import Mutant
from implementations.reference import validation


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
        from contract.errors import PlanError

        if self.is_active(run.layerwise) and run.cache.host_blocks_factor > 1:
            super().validate(replace(run, cache=replace(run.cache, host_blocks_factor=1.0)))
            raise PlanError("n_blocks", 0, "at least one block", "the host cache leaves no device blocks")
        super().validate(run)
