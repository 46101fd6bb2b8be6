"""TC-04 (L1) Engine layout propagation.

The master's plan crosses real collectives to every worker (bring_up: control-group
broadcast, then each engine's leader over the engine's own subgroup), for world 4,
world 8 as dp 2 x tp 4, and target + draft engines of 4 workers each on 8 processes.
Pass when (FEATURE section 8):
- every worker of an engine holds the same layout: the all-gathered digests agree and
  equal the digest of the master's plan (hashed here by ``KVPlan.digest``);
- inside each split group, gathered over the REAL split subgroup, the owned full
  layers cover every full layer exactly once (checked on the ranks, re-checked here
  against ``harness.oracle``);
- draft workers reset the split to size 1 / rank 0 and hold every draft layer;
- each target worker owns what the published layout gives its POSITION in its split
  group (the spec's groups; also on a regrouped topology at world 4 and 8);
- every engine, target and draft, leaves nothing alive after teardown;
- every layout the implementation's own code publishes (a tree's master layout and what its
  engines pass on, ``KVPlan.published_layouts``) holds each full layer once per split group, at
  the rank the spec's owner rule gives;
- a tampered layout is rejected: plan rank 1 of each engine gets a message with one
  layer owner (or n_blocks) altered (bring_up's ``tamper`` hook), and its
  ``init_worker`` must raise PlanError while the untouched workers accept theirs.
  Not judged where the plan notes that no code of the implementation checks a received
  layout (``TREE_MESSAGE_NOTE``: a compiled tree, upstream's or a port's, whose workers take
  their split from their own s and rank, and whose worker-side checks are its start-up
  CHECKs, judged by TC-01 and TC-07): no tampered bring-up runs, nothing is credited, and
  the case's result shows the note as not judged (``not_judged``). Only the native adapter's
  plan (``XllmNativeImplementation``, harness-written code naming the tree's functions) is
  taken at its word: the note in any other implementation's plan is ignored, and its
  tampered layout is judged.
"""

from __future__ import annotations

import dataclasses
import itertools
import sys
from dataclasses import dataclass, field
from typing import Optional

import torch.distributed as dist

from contract.plan_types import TREE_MESSAGE_NOTE
from harness import oracle
from harness.suites import Suite
from harness.suites.bring_up import bring_up, engines_for
from harness.suites.case import Case
from harness.suites.checks import (
    draft_message_problems,
    leak_problems,
    ownership_problems,
    published_layout_problems,
    startup_problems,
    worker_layout_problems,
)
from harness.suites.expectations import upstream_worker_owners
from harness.suites.facts import (
    MasterError,
    RankFacts,
    fact_field,
    master_error,
    owned_full,
    plan_of,
    worker_facts,
)
from harness.suites.ownership import layer_owners, not_owned_once
from harness.suites.standard import preferred, regrouped_cases

TC = "TC-04"

MODELS = ("deepseek_v32", "glm_moe_dsa", "qwen3_5_moe")
PARALLEL = ("tp4", "dp2_tp4")
DRAFTS = {"deepseek_v3": "deepseek_mtp", "deepseek_v32": "deepseek_v32_mtp", "qwen3_5_moe": "qwen3_5_mtp"}
"""Speculative variant: target + draft engines of 4 workers each on 8 processes."""
SPEC_LAYERWISE = ("s2", "s4")
SPEC = "spec_w8"
VICTIM = 1
"""Plan rank (in each engine) whose message is tampered with."""


def cases(matrix) -> list[Case]:
    out = []
    for model, lw, par, impl in itertools.product(
        preferred(MODELS, matrix.models), matrix.layerwise, matrix.preferred("parallel", PARALLEL),
        matrix.implementations,
    ):
        out.append(Case(tc=TC, model=model, layerwise=lw, parallel=par, implementation=impl,
                        extra=matrix.extra_for(lw, par)))
    spec_models = [m for m in DRAFTS if m in matrix.models]  # a narrowed run keeps to its models
    for model, lw, impl in itertools.product(spec_models, matrix.preferred("layerwise", SPEC_LAYERWISE),
                                             matrix.implementations):
        out.append(Case(tc=TC, model=model, layerwise=lw, parallel="tp4", implementation=impl,
                        draft=DRAFTS[model], variant=SPEC, extra=matrix.extra_for(lw)))
    return out + regrouped_cases(TC, matrix, MODELS)


def separate_draft(case) -> bool:
    return case.variant == SPEC


def world_size(case) -> int:
    """Processes the case needs: the plan's world, doubled when the draft engine has its own ranks.

    Read from the case's options without composing (collection orders every case by it)."""
    n = case.world_size
    return 2 * n if separate_draft(case) else n


# ---- rank side --------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Holding:
    """What one member of a real split subgroup holds (all-gathered over that subgroup)."""

    rank: int
    owned: Optional[tuple[int, ...]]
    full: Optional[tuple[int, ...]]


@dataclass(frozen=True, kw_only=True)
class Coverage:
    members: Optional[tuple[Holding, ...]]
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class TamperResult:
    plan_rank: int
    tampered: bool
    refused: Optional[MasterError] = None

    @property
    def plan_error(self) -> bool:
        return self.refused is not None and "PlanError" in self.refused.classes


@dataclass(frozen=True, kw_only=True)
class PropagationFacts(RankFacts):
    engines: dict[str, tuple[int, ...]] = field(default_factory=dict)
    coverage: Optional[Coverage] = None
    tamper: dict[str, TamperResult] = field(default_factory=dict)
    tamper_error: Optional[MasterError] = None
    tamper_not_judged: Optional[str] = None
    """The plan's ``TREE_MESSAGE_NOTE`` where this rank took it at its word (``tamper_not_judged``): no tampered
    bring-up ran."""


def body(ctx, run, impl_cfg, separate: bool = False) -> PropagationFacts:
    """Bring up every engine; gather ownership over the real split subgroups; tear down (leak check);
    then bring up again with ``tamper_message`` (bring_up's tamper hook) recording the refusals."""
    engines = engines_for(ctx.world_size, run, separate_draft=separate)
    session = bring_up(ctx, run, impl_cfg, engines=engines, record_user_refusals=True)
    base = {"rank": ctx.rank, "error": session.error, "plan": session.plan if ctx.rank == 0 else None,
            "run": session.run if ctx.rank == 0 else None, "engines": {e.role: e.ranks for e in engines},
            "digests": session.digests, "refusals": session.refusal_errors()}
    if session.error:
        return PropagationFacts(**base)
    if session.refused_anywhere():  # nothing after a worker's refusal is checked
        session.teardown()
        return PropagationFacts(**base)
    workers = {role: worker_facts(w, ctx.device) for role, w in session.workers.items()}
    coverage = _live_coverage(ctx, session, engines[0])
    note = tamper_not_judged(session.plan, session.impl)  # (teardown drops the implementation)
    leaks = session.teardown()
    workers = {role: dataclasses.replace(wf, leak=leaks.get(role)) for role, wf in workers.items()}
    if note is not None:  # every rank holds the broadcast plan and the same implementation: all skip alike
        return PropagationFacts(**base, workers=workers, coverage=coverage, tamper_not_judged=note)

    tampered = bring_up(ctx, run, impl_cfg, engines=engines, tamper=tamper_message, record_refusals=True)
    results, problems = {}, []
    for engine in engines:
        if ctx.rank not in engine.ranks:
            continue
        refusal = tampered.refusals.get(engine.role)
        worker = tampered.workers.get(engine.role)
        results[engine.role] = TamperResult(
            plan_rank=engine.ranks.index(ctx.rank),
            tampered=refusal.tampered if refusal is not None else bool(worker and worker.tampered),
            refused=refusal.error if refusal is not None else None)
    for role, leak in tampered.teardown().items():
        if leak.alive:
            problems.append(f"rank {ctx.rank} {role} engine of the tampered bring-up: {leak.alive} of "
                            f"{leak.tracked} tensors/storages still alive after teardown (leaked)")
    return PropagationFacts(**base, workers=workers, coverage=coverage, tamper=results,
                            tamper_error=tampered.error, problems=tuple(problems))


def _live_coverage(ctx, session, target) -> Coverage:
    """Owned full layers all-gathered over this rank's REAL split subgroup, judged on the rank."""
    groups = [tuple(target.ranks[r] for r in g) for g in session.plan.split_groups]
    others = [(r,) for r in range(ctx.world_size) if r not in target.ranks]
    partition = groups + others
    if sorted(r for g in partition for r in g) != list(range(ctx.world_size)):
        return Coverage(members=None, problems=(f"plan split groups {groups} do not partition the target ranks",))
    group = ctx.split_groups(partition)  # same partition on every rank (from the broadcast plan)
    worker = session.workers.get("target")
    layers = worker.cache.layers if worker else []
    mine = Holding(rank=ctx.rank,
                   owned=tuple(l.layer_id for l in layers if l.kind == "full" and l.owned) if worker else None,
                   full=tuple(l.layer_id for l in layers if l.kind == "full") if worker else None)
    members = [None] * dist.get_world_size(group)
    dist.all_gather_object(members, mine, group=group)
    if worker is None:
        return Coverage(members=None)
    full = mine.full
    problems = []
    for m in members:
        if m.owned is None or m.full != full:
            problems.append(f"rank {m.rank} in this split group holds full layers {m.full}, rank "
                            f"{ctx.rank} holds {full}")
    wrong = [f"{l}: {rs}" for l, rs in not_owned_once(layer_owners(full, {m.rank: m.owned for m in members})).items()]
    if wrong:
        problems.append(f"split group {[m.rank for m in members]}: full layers not owned by exactly one "
                        f"rank (layer: owners) {', '.join(wrong[:6])}{' ...' if len(wrong) > 6 else ''}")
    return Coverage(members=tuple(members), problems=tuple(problems))


def tamper_not_judged(plan, impl) -> Optional[str]:
    """The plan's ``TREE_MESSAGE_NOTE`` (no code of the implementation checks a layout its workers receive) where
    ``impl`` is the native adapter, or None: the tampered layout is judged. The adapter is the harness's own code,
    and its note names the tree's functions; any other implementation could write the note to skip the check, so
    its note is not taken at its word."""
    if plan is None or not _native_adapter(impl):
        return None
    return next((n for n in plan.notes if n.startswith(TREE_MESSAGE_NOTE)), None)


def _native_adapter(impl) -> bool:
    """``impl`` is an ``XllmNativeImplementation`` (its module is loaded wherever one exists: nothing is imported
    for any other implementation, the adapter's import costing about half a second)."""
    adapter = sys.modules.get("implementations.xllm_native.impl")
    return adapter is not None and isinstance(impl, adapter.XllmNativeImplementation)


def tamper_message(message, plan_rank: int):
    """Plan rank VICTIM gets its engine's message with one full layer's owner (else n_blocks) changed."""
    if plan_rank != VICTIM:
        return message
    if message.layer_owner:
        (layer, owner), *rest = message.layer_owner
        return dataclasses.replace(message, layer_owner=((layer, (owner + 1) % message.split_size), *rest))
    return dataclasses.replace(message, n_blocks=message.n_blocks + 1)


# ---- parent side ------------------------------------------------------------------------


def check(facts: list[dict], run) -> list[str]:
    """Problems found (empty: pass). ``run`` is the composed RunSpec of the case."""
    verdict = startup_problems(facts, run)
    if verdict is not None:
        return verdict
    plan = plan_of(facts)
    engines = facts[0].engines
    problems = [p for f in facts for p in f.problems]
    for role, ranks in engines.items():
        problems += _check_engine(facts, plan, run, role, ranks)
        problems += worker_layout_problems(facts, run, role, spec_n_blocks=False)
    problems += draft_message_problems(facts, run)
    problems += _check_coverage(facts, plan, run, engines["target"])
    problems += published_layout_problems(plan, run)
    problems += ownership_problems(facts, run, owner=dict(plan.layer_owner))  # positions: the spec's
    if not not_judged(facts):
        problems += _check_tamper(facts, engines)
    problems += leak_problems(facts)
    return problems


def _check_engine(facts, plan, run, role, ranks) -> list[str]:
    """The engine's workers: on its ranks only, one per plan rank, one digest, draft reset to split 1."""
    problems = []
    hosts = [f.rank for f in facts if role in f.workers]
    if hosts != list(ranks):
        problems.append(f"{role} workers live on ranks {hosts}, engine spans {list(ranks)}")
    if len(ranks) != run.parallel.world_size:
        problems.append(f"{role} engine has {len(ranks)} workers, parallel.world_size is {run.parallel.world_size}")
    workers = {f.rank: f.workers[role] for f in facts if role in f.workers}
    plan_ranks = sorted(w.plan_rank for w in workers.values())
    if plan_ranks != list(range(len(ranks))):
        problems.append(f"{role} workers hold plan ranks {plan_ranks}, expected 0..{len(ranks) - 1} once each")
    gathered = tuple(facts[0].digests.get(role, ()))
    held = {r: gathered[r] for r in ranks} if len(gathered) == len(facts) else {}
    if not held:
        problems.append(f"{role}: no all-gathered digests ({gathered})")
    for f in facts:
        if tuple(f.digests.get(role, ())) != gathered:
            problems.append(f"rank {f.rank} all-gathered other {role} digests than rank 0")
    want = plan.digest if role == "target" else held.get(ranks[0])
    for r, digest in held.items():
        if digest != want:
            problems.append(f"{role} worker on rank {r} holds layout {digest}, expected {want}"
                            + (" (the master's plan)" if role == "target" else " (the engine leader's)"))
        received = next(f for f in facts if f.rank == r).workers[role].received_digest
        if received != digest:
            problems.append(f"{role} worker on rank {r} received a message hashing to {received} but reports {digest}")
    for r, w in workers.items():
        if w.n_blocks != plan.n_blocks:
            problems.append(f"{role} worker on rank {r}: n_blocks {w.n_blocks}, master's plan {plan.n_blocks}")
        if role == "draft":
            want_full = sorted(oracle.expected_full_layers(run.draft))
            if w.split_size != 1 or w.split_rank != 0 or len(w.split_group) != 1:
                problems.append(f"draft worker on rank {r}: split size {w.split_size}, split rank "
                                f"{w.split_rank}, group {w.split_group}; a draft resets to 1 / rank 0")
            if sorted(owned_full(w)) != want_full or w.scratch_bytes:
                problems.append(f"draft worker on rank {r} owns {owned_full(w)} (scratch {w.scratch_bytes} B); "
                                f"an unsplit draft owns all of {want_full}, no scratch")
    return problems


def _check_coverage(facts, plan, run, target_ranks) -> list[str]:
    """Each rank's verdict over its real split subgroup, and membership/coverage against the oracle."""
    s, full = oracle.split_size(run), sorted(oracle.expected_full_layers(run.model))
    groups = {target_ranks[r]: sorted(target_ranks[m] for m in g) for g in plan.split_groups for r in g}
    problems = []
    for f in facts:
        cov, r = f.coverage, f.rank
        if cov is None:
            problems.append(f"rank {r}: no coverage gathered")
            continue
        problems += [f"rank {r}: {p}" for p in cov.problems]
        if r not in target_ranks:
            continue
        members = sorted(m.rank for m in (cov.members or ()))
        if members != groups.get(r) or len(members) != s:
            problems.append(f"rank {r}: real split subgroup {members}, plan's {groups.get(r)} (s={s})")
        owned = sorted(l for m in (cov.members or ()) for l in (m.owned or ()))
        if owned != full:
            twice = sorted({l for l in owned if owned.count(l) > 1})
            problems.append(f"rank {r}: split group {members} must own each full layer of the spec exactly once; "
                            f"missing {sorted(set(full) - set(owned))}, more than once {twice}, "
                            f"not full {sorted(set(owned) - set(full))}")
    return problems


def _check_tamper(facts, engines) -> list[str]:
    problems = []
    for f in facts:
        if f.tamper_error is not None:
            return [f"tampered bring-up: master rejected the config: {f.tamper_error}"]
        for role, ranks in engines.items():
            if f.rank not in ranks:
                continue
            t = f.tamper.get(role)
            if t is None:
                problems.append(f"rank {f.rank}: no {role} result from the tampered bring-up")
            elif t.tampered and not t.plan_error:
                problems.append(f"{role} plan rank {t.plan_rank} (rank {f.rank}) accepted a tampered layout"
                                + (f" (raised {t.refused}, not PlanError)" if t.refused else ""))
            elif not t.tampered and t.refused:
                problems.append(f"{role} plan rank {t.plan_rank} (rank {f.rank}) refused the untouched "
                                f"layout: {t.refused}")
    victims = [t for f in facts for t in f.tamper.values() if t.tampered]
    if len(victims) != len(engines):
        problems.append(f"{len(victims)} tampered workers, expected one per engine ({len(engines)})")
    return problems


def not_judged(facts: list) -> tuple[str, ...]:
    """The tampered-layout check, where the ranks took the native adapter's note that no code of the tree makes
    one (``PropagationFacts.tamper_not_judged``)."""
    note = fact_field(facts[0], "tamper_not_judged") if facts else None
    return (note,) if note else ()


# ---- reports ----------------------------------------------------------------------------


def report_view(facts: list) -> dict:
    plan = plan_of(facts)
    if plan is None:
        return {"layout": None, "memory": None}
    rows = [f for f in facts if "target" in f.workers]
    return {
        "layout": {"ranks": [f.rank for f in rows], "layers": list(range(plan.num_layers)),
                   "full_layers": list(plan.full_layers),
                   "owned": {f.rank: owned_full(f.workers["target"]) for f in rows}},
        "memory": {"ranks": [f.rank for f in rows],
                   "estimated_bytes": [plan.ranks[f.workers["target"].plan_rank].estimated_bytes for f in rows],
                   "measured_bytes": [f.workers["target"].measured_bytes for f in rows]},
    }


def summarize(facts: list) -> dict:
    plan = plan_of(facts)
    if plan is None:
        return {"error": str(master_error(facts))}
    return {
        "digest": plan.digest,
        "engines": {role: list(ranks) for role, ranks in facts[0].engines.items()},
        "digests": {role: list(d) for role, d in facts[0].digests.items()},
        "split_groups": [list(g) for g in plan.split_groups],
        "n_blocks": plan.n_blocks,
        "tamper_rejected": [t.refused.type for f in facts for t in f.tamper.values() if t.tampered and t.refused],
    }


SUITE = Suite(
    TC=TC,
    LEVEL="L1",
    TITLE="Engine layout propagation",
    cases=cases,
    body=body,
    check=check,
    report_view=report_view,
    summarize=summarize,
    separate_draft=separate_draft,
    world_size=world_size,
    predict_upstream_layout=upstream_worker_owners,
    not_judged=not_judged,
)
