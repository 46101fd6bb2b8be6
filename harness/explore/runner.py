"""One configuration through one implementation, in-process on the CPU, judged like the TCs.

The master's ``plan`` and each engine's ``engine_message`` are called once, then
``init_worker`` for every rank of every engine in turn (no process group: each rank's
caches are measured with ``bring_up.walked`` and torn down with ``RankSession.teardown``
before the next rank allocates). The facts are the ones the TCs' rank bodies send, so the
TCs' own check functions judge them:

- a config the spec refuses at startup: the startup verdict every TC shares (TC-01, TC-03);
- a placement the spec refuses (the oracle's ``spec_refuses_cards``): TC-03 alone;
- a config that passes startup but cannot be planned (``oracle.expected_estimation_rejection``:
  no memory for one block, explicit linear-state slots above the cap, a draft slot larger
  than the target's, no full layer to split; or ``expectations.card_overflow``: the spec's
  plan overfills a card): the master must refuse it with a UserError (a compiled tree, which has no card
  check and says so in its plan, is judged by TC-03 there: its card problem names that);
- otherwise, at plan level: every field of the plan against the spec (TC-02's plan figures, layout
  and draft figures: ranks, split groups, owners, slot sizes), TC-03 (its facts built from the plan as
  its rank body builds them), the ownership properties (``properties``); with allocation
  also TC-01, TC-02 (measured), TC-06 (where a uniform baseline is recorded) and TC-07
  (with a draft).

Every TC's problems go through ``expectations.judge``: a variant the spec predicts to fail
must fail exactly as predicted. TC-02's plan figures alone cannot show a measured
prediction (the peak a rank allocates), so at plan level only what they find must be
predicted.
"""

from __future__ import annotations

import dataclasses
import gc
import re
from dataclasses import dataclass
from typing import Optional

from contract.errors import UserError
from contract.frozen import made
from contract.plan_types import TREE_CARDS_NOTE
from harness import oracle
from harness.config.targets import check_arguments, check_implementation_node
from harness.explore.known import open_question
from harness.explore.properties import owner_rule, ownership_problems
from harness.oracle import SPEC_OWNER_RULE
from harness.oracle import UPSTREAM_GROUP_RULE as UPSTREAM_GROUPS
from harness.private_apis import StorageWeakRefs
from harness.suites import tc01, tc02, tc03, tc06, tc07
from harness.suites.bring_up import LeakRefs, Published, RankSession, Worker, engines_for, master_plan, walked
from harness.suites.case import resolve
from harness.suites.checks import draft_plan_problems, plan_layout_problems
from harness.suites.expectations import (
    PREDICTIONS,
    card_overflow,
    judge,
    native_planning_prediction,
    native_upstream_prediction,
    predicted_name,
    prediction,
    upstream_prediction,
)
from harness.suites.facts import RankFacts, master_error_of

DEVICE = "cpu"
GROUPING_FACT = re.compile(r"^(split_groups|rank \d+ (split group|split_rank|owned_full_layers)|rank \d+: estimated)\b")
"""Plan problems that follow from the split groups chosen (a rank's owned layers set its estimate)."""


@dataclass(frozen=True)
class InProcessRank:
    """The part of a rank context that ``RankSession.teardown`` reads."""

    rank: int
    world_size: int
    device: str = DEVICE


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What one configuration showed: the failures (empty: pass) and what judged it."""

    failures: tuple[str, ...]
    judged_by: tuple[str, ...]
    refused: bool
    open_question: str = ""
    """Set when the spec leaves this configuration open (``known``): its failures are reported, not failed."""


class InProcessRunner:
    """Runs configurations through one implementation of the matrix.

    ``implementation`` is the matrix option name (predictions key on it); ``impl_cfg`` its
    composed config node (``_target_`` and arguments), built anew for every configuration,
    as each rank builds its own. ``runner_for`` makes one from the session's matrix."""

    def __init__(self, implementation: str, impl_cfg: dict, overrides: tuple[str, ...] = ()):
        self.implementation = implementation
        self.judged_as = predicted_name(implementation, impl_cfg)
        """The name predictions key on, as for a TC case (``xllm_native`` on upstream's tree: upstream's; on a tree
        another manifest builds, ``xllm_native[<manifest>]``: the spec alone)."""
        self.impl_cfg = impl_cfg
        self.overrides = tuple(overrides) or (f"implementation={implementation}",)
        """The overrides that chose it (``implementation=<name>``, ``implementation._target_=...``)."""
        # checked once (a bad node fails here), built per configuration as ``instantiate`` builds it
        self._cls = check_implementation_node(impl_cfg)
        self._arguments = check_arguments(self._cls, impl_cfg)

    def verdict(self, run, *, allocate: bool) -> Verdict:
        try:
            verdict = self._verdict(run, allocate=allocate)
        except Exception as exc:  # noqa: BLE001 - a plan the checks cannot read (a field of the wrong type) is a finding
            return Verdict(failures=(f"unreadable plan: the checks raised {type(exc).__name__}: {exc}",),
                           judged_by=("crash",), refused=False)
        question = open_question(run) if verdict.failures else None
        if question:
            return dataclasses.replace(verdict, open_question=question)
        return verdict

    def _verdict(self, run, *, allocate: bool) -> Verdict:
        impl = self._cls(**self._arguments)
        engines = engines_for(run.parallel.world_size, run)
        try:
            published = master_plan(impl, run, engines) if allocate else _plan_only(impl, run, engines)
        except Exception as exc:  # noqa: BLE001 - any crash of the code under test is a finding, reported by type
            return Verdict(failures=(f"master crashed: {type(exc).__name__}: {exc}",), judged_by=("crash",),
                           refused=True)
        if oracle.split_size(run) == 1 < run.layerwise.split_size and prediction("TC-06", self.judged_as, run) is not None:
            # (the flag off at s > 1: a TC-06 prediction at s 1 is another one, a compiled worker's stop)
            return self._flag_ignored(impl, published, run, engines, allocate=allocate)
        refusal = self._refusal(run, published)
        if refusal is not None:
            return refusal
        plan = published.plan
        checks = {}
        if owner_rule(self.judged_as) == SPEC_OWNER_RULE or not oracle.spec_refuses_cards(run):
            # (TC-03's card bound is the spec's round-robin; a variant whose own owner rule fits is not judged by it)
            checks["TC-03"] = tc03.check(topology_facts(plan, run), run)
        failures = [f"ownership: {p}" for p in ownership_problems(plan, run, self.judged_as)]
        if allocate:
            facts, crashed = self._allocate(impl, plan, run, engines, published.digests)
            if crashed:
                return Verdict(failures=tuple(failures + crashed), judged_by=("init_worker",), refused=False)
            checks["TC-01"] = tc01.check(facts, run)
            checks["TC-02"] = self._grouped(run, tc02.check(facts, run))
            if oracle.split_size(run) == 1 and tc06.missing_baseline(run) is None:
                checks["TC-06"] = tc06.check(facts, run)
            if run.draft is not None:
                checks["TC-07"] = tc07.check(facts, run)
        else:  # every field of the plan: TC-02's figures, the layout (ranks, groups, owners, slots), the draft's
            problems = self._grouped(run, tc02.plan_problems(plan, run) + plan_layout_problems(plan, run)) \
                + draft_plan_problems(plan, run)
            failures += [f"TC-02: {p}" for p in self._unexplained("TC-02", run, problems)]
        for tc, problems in checks.items():
            failures += [f"{tc}: {p}" for p in judge(tc, self.judged_as, run, problems)]
        return Verdict(failures=tuple(failures), judged_by=("ownership", *(["TC-02 plan"] if not allocate else []),
                                                            *checks), refused=False)

    def _flag_ignored(self, impl, published, run, engines, *, allocate: bool) -> Verdict:
        """The flag is off but s > 1, and the spec predicts that this variant splits anyway (upstream has no
        enable flag, FEATURE 2). The TC rows holding such a config are TC-06's: judged there where a uniform
        baseline is recorded; elsewhere the prediction's one plan-level fact, an active plan, is checked. The
        spec's block count is the uniform one, not the split the variant plans: a UserError (no block fits
        its split) makes no claim."""
        plan, error = published.plan, published.error
        if error is not None:
            failures = () if error.user_error else (f"flag: master refused with {error}, not a UserError",)
            return Verdict(failures=failures, judged_by=("flag",), refused=True)
        if allocate and tc06.missing_baseline(run) is None:
            facts, crashed = self._allocate(impl, plan, run, engines, published.digests)
            failures = crashed or [f"TC-06: {p}" for p in judge("TC-06", self.judged_as, run,
                                                                 tc06.check(facts, run))]
            return Verdict(failures=tuple(failures), judged_by=("TC-06",), refused=False)
        failures = () if plan.active else (f"flag: the spec predicts {self.implementation} splits with the enable flag "
                                           f"off at s={run.layerwise.split_size} (FEATURE 2); its plan is inactive",)
        return Verdict(failures=failures, judged_by=("flag",), refused=False)

    # ---- refusals --------------------------------------------------------------------

    def _refusal(self, run, published) -> Optional[Verdict]:
        """The verdict when the spec or the master refuses; None when both accept."""
        error = published.error
        if oracle.expected_rejection(run) is not None:  # a startup rule (FEATURE 3): TC-01 names its field
            return self._judged(run, _master_facts(run, published), ("TC-01", "TC-03"), refused=True)
        rule = owner_rule(self.judged_as)
        if oracle.spec_refuses_cards(run) and (rule == SPEC_OWNER_RULE or oracle.expected_split_group_tuples(run) is None):
            return self._judged(run, topology_facts(published.plan, run) if error is None else _master_facts(run, published),
                                ("TC-03",), refused=True)
        rejection = oracle.expected_estimation_rejection(run)
        why = (f"{rejection.reason} ({rejection.field}; FEATURE 5-6)" if rejection is not None
               else card_overflow(run, rule))  # a predicted variant: by its own owner rule
        if why and rejection is None and error is None and TREE_CARDS_NOTE in published.plan.notes:
            # a card the plan overfills, planned by a tree with no card check: TC-03's verdict (its card problem
            # names that the tree has none; upstream's tree is predicted to fail so)
            return self._judged(run, topology_facts(published.plan, run), ("TC-03",), refused=True)
        if why:
            if error is None:
                failure = f"estimation: master accepted a config the spec cannot plan: {why}"
            elif not error.user_error:
                failure = f"estimation: master refused with {error} (not a UserError); the spec cannot plan it: {why}"
            else:
                failure = None
            return Verdict(failures=(failure,) if failure else (), judged_by=("estimation",), refused=True)
        if error is not None:  # the spec accepts: TC-01's startup verdict (a variant may be predicted to refuse)
            return self._judged(run, _master_facts(run, published), ("TC-01",), refused=True)
        return None

    def _judged(self, run, facts, tcs, *, refused: bool) -> Verdict:
        checks = {"TC-01": tc01.check, "TC-03": tc03.check}
        failures = [f"{tc}: {p}" for tc in tcs for p in judge(tc, self.judged_as, run, checks[tc](facts, run))]
        return Verdict(failures=tuple(failures), judged_by=tuple(tcs), refused=refused)

    def _unexplained(self, tc: str, run, problems: list) -> list[str]:
        """Problems no prediction of ``tc`` explains (a prediction's own problems are not required here)."""
        pred = prediction(tc, self.judged_as, run)
        if pred is None:
            return list(problems)
        return [p for p in problems if not any(want.matches(p) for want in pred.required)
                and getattr(p, "rule", "") not in pred.consequences]

    def _grouped(self, run, problems: list) -> list:
        """``problems``; for a variant predicted to keep upstream's consecutive groups where the spec regroups,
        without the facts that follow from its groups (split groups, split ranks, owned layers, estimates per
        rank): TC-03 judges its groups, as predicted."""
        if PREDICTIONS.get(self.judged_as) not in (upstream_prediction, native_upstream_prediction,
                                                   native_planning_prediction) or not problems:
            return problems
        if oracle.expected_split_groups(run) == oracle.expected_split_groups(run, rule=UPSTREAM_GROUPS):
            return problems
        return [p for p in problems if not GROUPING_FACT.search(str(p))]

    # ---- allocation ------------------------------------------------------------------

    def _allocate(self, impl, plan, run, engines, digests) -> tuple[list, list[str]]:
        """Every rank's workers, one rank at a time: their facts, measured and torn down (one walk over each
        worker's tensors takes its facts, its measured bytes and the leak check's references)."""
        collecting = gc.isenabled()
        gc.disable()  # (see ``_allocate_ranks``)
        try:
            return self._allocate_ranks(impl, plan, run, engines, digests)
        finally:
            if collecting:
                gc.enable()

    def _allocate_ranks(self, impl, plan, run, engines, digests) -> tuple[list, list[str]]:
        """``_allocate``'s work, run with the cyclic garbage collector paused: a rank's workers make thousands of
        tensors, dicts and facts, each 700 of them a young-generation collection (a few percent of an allocating
        draw), and none is garbage before teardown. Nothing judged depends on it: where anything of a worker is
        still alive after teardown, teardown collects (``gc.collect``) and counts again."""
        world = run.parallel.world_size
        messages = {e.role: impl.engine_message(plan, run, e.role) for e in engines}
        per_rank, crashed = [], []
        seen_digests: dict[str, list] = {e.role: [] for e in engines}
        for rank in range(world):
            session = RankSession(ctx=InProcessRank(rank=rank, world_size=world), run=run, impl=impl, plan=plan)
            for engine in engines:
                if rank not in engine.ranks:
                    continue
                try:
                    session.workers[engine.role] = _worker(impl, messages[engine.role], run, engine.role,
                                                           engine.ranks.index(rank), digests[engine.role])
                except Exception as exc:  # noqa: BLE001 - a worker that raises on the published plan is a finding
                    crashed.append(f"rank {rank} {engine.role}: init_worker raised {master_error_of(exc)}")
            with_leak, refs = {}, {}
            for role, w in session.workers.items():
                try:
                    with_leak[role], refs[role] = walked(w, DEVICE)
                except Exception as exc:  # noqa: BLE001 - a cache the harness cannot read (a tensor that is None) is a finding
                    crashed.append(f"rank {rank} {role}: the cache init_worker returned cannot be measured: "
                                   f"{master_error_of(exc)}")
                    refs[role] = LeakRefs([], StorageWeakRefs())  # (teardown drops it; nothing of it was read)
            for role in seen_digests:
                seen_digests[role].append(session.workers[role].cache.plan_digest if role in with_leak else None)
            leaks = session.teardown(refs)
            per_rank.append({role: facts_of(leaks.get(role)) for role, facts_of in with_leak.items()})
        digests_seen = {role: tuple(d) for role, d in seen_digests.items()}
        facts = [RankFacts(rank=rank, plan=plan if rank == 0 else None, run=run if rank == 0 else None,
                           workers=workers, digests=digests_seen) for rank, workers in enumerate(per_rank)]
        return facts, crashed


def _master_facts(run, published) -> list:
    """Rank 0's facts as a refusal's checks read them (built only where a refusal is judged: most draws are not)."""
    return [RankFacts(rank=0, error=published.error, plan=published.plan, run=run)]


def _plan_only(impl, run, engines) -> Published:
    """``master_plan`` without the messages' digests (only workers compare them): the plan and each engine's
    message, a UserError of either being the master's refusal."""
    try:
        plan = impl.plan(run)
        for engine in engines:
            impl.engine_message(plan, run, engine.role)
    except UserError as exc:
        return Published(plan=None, digests={}, error=master_error_of(exc))
    return Published(plan=plan, digests={}, error=None)


def _worker(impl, message, run, role: str, plan_rank: int, digest: str) -> Worker:
    """One worker's caches, measured when its facts are taken (the session holds the only reference: teardown
    drops it)."""
    cache = impl.init_worker(message, run, rank=plan_rank, role=role, device=DEVICE, expected_digest=digest)
    return Worker(role, plan_rank, cache, None, message)


def topology_facts(plan, run) -> list:
    """What TC-03's rank body reports, built from the published plan in-process: each rank's split
    group as its members (rank, node, card, owned layers) and the cards counted once per member."""
    base = {"device": DEVICE, "error": None}
    world = run.parallel.world_size
    unusable = tc03.unusable_groups(plan, world)
    if unusable:
        return [tc03.TopologyFacts(rank=r, plan=plan if r == 0 else None, unusable=unusable, **base)
                for r in range(world)]
    by_rank = {rp.rank: rp for rp in plan.ranks}
    slots = tc03.card_slots(plan, run.hardware.num_cards)
    live_of = {}
    for group in plan.split_groups:  # every member of a group reports the same group: built once per group
        members = []
        counts: dict[str, int] = {}
        for m in group:  # (one pass: each rank's plan read once, no generator per group)
            rp = by_rank[m]
            node, card = rp.node, rp.card
            members.append(made(tc03.Member, {"rank": m, "node": node, "card": card,
                                              "owned": tuple(rp.owned_full_layers)}))
            key = _card_text((node, card)) if (node, card) in slots else "invalid"
            counts[key] = counts.get(key, 0) + 1
        live = made(tc03.LiveGroup, {"members": tuple(members), "card_counts": counts})
        live_of.update((r, live) for r in group)
    first = tc03.TopologyFacts(rank=0, plan=plan, group=live_of[0], **base)
    facts = [first]
    other = vars(tc03.TopologyFacts(rank=1, **base))
    new, cls = object.__new__, tc03.TopologyFacts
    for r in range(1, world):  # ``_copied`` inlined: no keyword dict nor call per rank (about half its cost)
        copy = new(cls)
        fields = vars(copy)
        fields.update(other)
        fields["rank"], fields["group"] = r, live_of[r]
        facts.append(copy)
    return facts


_CARDS_REMEMBERED = 4096
_card_texts: dict[tuple[int, int], str] = {}
"""(node, card) of two ints -> ``str`` of it (a card's key in TC-03's counts), for up to ``_CARDS_REMEMBERED``."""


def _card_text(where: tuple) -> str:
    """``str(where)``, remembered where both are ints (a bool is not: ``(True, 0)`` reads otherwise than ``(1, 0)``):
    the text is made once per card, not per member of every plan."""
    if type(where[0]) is not int or type(where[1]) is not int:
        return str(where)
    text = _card_texts.get(where)
    if text is None:
        text = str(where)
        if len(_card_texts) < _CARDS_REMEMBERED:
            _card_texts[where] = text
    return text


def implementation_overrides(matrix, implementation: str) -> tuple[str, ...]:
    """``implementation=<name>`` plus the matrix's ``implementation.*`` key overrides (``_target_``, arguments)."""
    keys = tuple(o for o in matrix.extra if o.lstrip("+~").split("=", 1)[0].split(".", 1)[0] == "implementation")
    return (f"implementation={implementation}", *keys)


def runner_for(matrix, implementation: str) -> InProcessRunner:
    """The runner of one implementation of the matrix, composed as the TCs compose it."""
    overrides = implementation_overrides(matrix, implementation)
    return InProcessRunner(implementation, resolve(overrides).impl_cfg, overrides)
