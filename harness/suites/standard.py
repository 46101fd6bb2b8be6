"""The standard cases of the TCs (the matrix's axes, the regrouped topology, the allocating profiles) and the
standard rank body: bring up, report, tear down."""

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
