"""The standard cases of the TCs (the matrix's axes, the regrouped topology, the allocating profiles), the case
data more than one TC runs (the cache variants, the spelling and value-dim models, the target/draft pairs) and
the standard rank body: bring up, report, tear down. A TC imports these from here, never from another TC."""

from __future__ import annotations

import dataclasses
from itertools import product
from typing import Optional

from harness.suites.bring_up import EngineLayout, bring_up
from harness.suites.case import Case
from harness.suites.expectations import expected_rejection
from harness.suites.facts import RankFacts, worker_facts

REGROUPED = "pcie_2switch_8_interleaved"
"""A topology whose split groups are not consecutive (even/odd switches): a rank's position in its
split group differs from ``rank % s``. TCs that start workers also run on it, at world 4 and 8."""
REGROUPED_PARALLEL = ("tp4", "dp2_tp4")
ALLOCATING_PROFILES = (("bi_v100", "deepseek_v32", "s2"), ("cuda_generic", "qwen3_5_moe", "s2"))
"""Workers allocated on the card profiles (the CPU profile is heads-major like BI-V100; ``cuda_generic`` is
tokens-major): (hardware, model, layerwise option). Their cards are shrunk to the CPU profile's KV budget
(``SMALL_CARDS``) so the tensors fit in host memory; the layout and the byte math are the profile's."""
SMALL_CARDS = ("hardware.hbm_mib_per_card=512", "hardware.reserved_mib_per_card=384")


# Exact byte math of quantized caches (FEATURE section 5) on the CPU profile, which supports them:
# (variant, layerwise option, parallel option, key overrides).
VARIANTS = (
    ("int8", "s2", "tp4", ("cache.kv_cache_dtype=int8", "cache.indexer_cache_dtype=int8")),
    ("fp8", "s4", "tp4", ("cache.kv_cache_dtype=fp8_e4m3",)),
    # the int8 KV cache without the int8 indexer, and fp8_e5m2 with it: the two dtypes read apart
    ("int8kv", "s2", "tp4", ("cache.kv_cache_dtype=int8",)),
    ("e5m2", "s4", "tp4", ("cache.kv_cache_dtype=fp8_e5m2", "cache.indexer_cache_dtype=int8")),
    # boundaries that must be accepted: block size 64, host cache factor 1.0 (off), KV split 0 (follows cp 1)
    ("bounds", "s2", "tp4", ("cache.block_size=64", "cache.host_blocks_factor=1.0", "parallel.kv_split_size=0")),
    # FEATURE 5's speculative conv/SSM growth of a Qwen3.5 target and a float32 SSM state
    ("nspec", "s2", "tp4", ("cache.num_speculative_tokens=2", "model.mamba_ssm_dtype=float32")),
    # linear-state slots without prefix cache at max_seqs_per_batch 0 (2 padding slots), and fixed slots
    ("slots0", "s2", "tp4", ("cache.enable_prefix_cache=false", "cache.max_seqs_per_batch=0")),
    ("slots8", "s4", "tp4", ("cache.max_linear_state_cache_slots=8",)),
)
VARIANT_MODELS = ("deepseek_v32", "qwen3_5_moe")

ATTENTION_SPELLING = ("qwen3_5_moe", "s2", "model.layer_types=[" + ",".join(
    "attention" if (layer + 1) % 4 == 0 else "linear_attention" for layer in range(40)) + "]")
"""Qwen3.5 with its full layers spelled ``attention`` (FEATURE 4: full as well as ``full_attention``)."""


VALUE_HEAD_DIM = ("qwen3_next", "s2", "model.linear_value_head_dim=256")
"""Qwen3-Next with its GDN value head dim (256) apart from its key head dim (128), as in upstream's tiny
test fixtures: the conv state counts its value channels with the key head dim (FEATURE 7), the estimate
with the value head dim (FEATURE 5)."""

PAIRS = (("deepseek_v3", "deepseek_mtp"), ("deepseek_v32", "deepseek_v32_mtp"), ("qwen3_5_moe", "qwen3_5_mtp"))
"""Each target with its own MTP draft (conf/draft)."""


def value_dim_cases(tc: str, matrix) -> list:
    """A hybrid model whose linear value head dim differs from its key head dim (``VALUE_HEAD_DIM``)."""
    return _one_override_cases(tc, matrix, "value-dim", VALUE_HEAD_DIM)


def _one_override_cases(tc: str, matrix, variant: str, spec: tuple) -> list:
    """``spec`` = (model, layerwise option, one key override) at tp 4 on the CPU profile, per implementation."""
    model, lw, override = spec
    if model not in matrix.models or not matrix.offers("layerwise", lw):
        return []
    return [Case(tc=tc, model=model, layerwise=lw, parallel="tp4", implementation=impl, hardware="cpu",
                 variant=variant, extra=(*matrix.extra_for(lw), override))
            for impl in matrix.implementations]


def spelling_cases(tc: str, matrix) -> list:
    return _one_override_cases(tc, matrix, "attention-spelling", ATTENTION_SPELLING)


def variant_cases(tc: str, matrix, names=None) -> list:
    out = []
    for variant, lw, par, extra in VARIANTS:
        if names is not None and variant not in names:
            continue
        if not matrix.offers("layerwise", lw):
            continue  # a narrowed matrix (one job's split size) keeps only its own variants
        for model in (m for m in VARIANT_MODELS if m in matrix.models):
            for impl in matrix.implementations:
                out.append(Case(tc=tc, model=model, layerwise=lw, parallel=par, implementation=impl,
                                hardware=matrix.hardware[0], variant=variant, extra=tuple(matrix.extra) + extra))
    return out


def standard_cases(tc: str, matrix, *, layerwise=None, parallel=None, models=None) -> list[Case]:
    """models x layerwise x parallel x implementations x hardware from the matrix."""
    out = []
    for hw, model, lw, par, impl in product(
        matrix.hardware,
        models if models is not None else matrix.models,
        layerwise if layerwise is not None else matrix.layerwise,
        parallel if parallel is not None else matrix.parallel,
        matrix.implementations,
    ):
        out.append(Case(tc=tc, model=model, layerwise=lw, parallel=par, implementation=impl,
                        hardware=hw, extra=matrix.extra_for(lw, par)))
    return out


def regrouped_cases(tc: str, matrix, models, *, layerwise=("s2",), draft: Optional[dict] = None) -> list[Case]:
    """Workers on the regrouped topology at world 4 (tp4) and 8 (dp2_tp4), CPU profile: the first
    model the matrix offers of ``models``, each split size of ``layerwise`` the matrix offers (s = 2:
    at s = 4 a TP group of 4 is one split group, whose positions equal ``rank % s``). These options
    are the TC's own, as shipped: run when the layerwise axis offers the same split."""
    if REGROUPED not in matrix.topologies and matrix.topologies:
        return []
    model = preferred(models, matrix.models)[0]
    out = []
    for lw, par, impl in product([lw for lw in layerwise if matrix.offers("layerwise", lw)], REGROUPED_PARALLEL,
                                 matrix.implementations):
        out.append(Case(tc=tc, model=model, layerwise=lw, parallel=par, implementation=impl, hardware="cpu",
                        draft=(draft or {}).get(model, "none"), variant=REGROUPED,
                        extra=(f"hardware.topology={REGROUPED}", *matrix.extra)))
    return out


def profile_cases(tc: str, matrix) -> list[Case]:
    """``ALLOCATING_PROFILES`` at tp4, where the matrix runs the model and offers the split, CPU-only matrices
    (a card matrix runs its own profile)."""
    if list(matrix.hardware) != ["cpu"]:
        return []
    return [Case(tc=tc, model=model, layerwise=lw, parallel="tp4", implementation=impl, hardware=hw,
                 variant="alloc", extra=(*SMALL_CARDS, *matrix.extra_for(lw)))
            for hw, model, lw in ALLOCATING_PROFILES if model in matrix.models and matrix.offers("layerwise", lw)
            for impl in matrix.implementations]


def standard_body(ctx, run, impl_cfg, engines: Optional[tuple[EngineLayout, ...]] = None) -> RankFacts:
    """Bring up, report what each worker on this rank holds, tear down and check nothing survived."""
    session = bring_up(ctx, run, impl_cfg, engines=engines, plan_only=expected_rejection(run) is not None,
                       record_user_refusals=True)
    workers = {role: worker_facts(w, ctx.device) for role, w in session.workers.items()}
    leaks = session.teardown()
    workers = {role: dataclasses.replace(wf, leak=leaks.get(role)) for role, wf in workers.items()}
    return RankFacts(rank=ctx.rank, error=session.error, plan=session.plan if ctx.rank == 0 else None,
                     run=session.run if ctx.rank == 0 else None, workers=workers, digests=session.digests,
                     refusals=session.refusal_errors())


def preferred(values, axis) -> list[str]:
    """The ``values`` a TC prefers that the matrix axis still offers; the whole axis if none do
    (a run narrowed to other values gets those, rather than no cases). For models; the layerwise
    and parallel axes compare values instead (``Matrix.preferred``)."""
    return [v for v in values if v in axis] or list(axis)
