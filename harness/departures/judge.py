"""Each role a compiled tree plays, judged on its own against the oracle: fed the spec's figures for whatever
the other roles would have computed (the oracle's block count for the master's layout, its full layers and
split size for the worker), so that no other role's CHECK, crash or absence hides it. A CHECK or crash in a
role is that role's departure only; a role the manifest marks absent is one departure (never modelled), a
role the engine never calls (``none``) is judged as what the engine then does (no validation: every
configuration accepted). Expected figures come from ``harness.oracle`` alone."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Optional, Sequence

from contract.errors import ImplementationFailure, UserError
from harness import oracle
from harness.departures import ALL_TCS, ROLE_ORDER, Finding, TreeDepartures, group
from implementations.xllm_native import call_role

ROLE_TCS = {
    "validation": ("TC-01",), "estimation": ("TC-01", "TC-02", "TC-06"), "ownership": ("TC-01", "TC-02"),
    "layout": ("TC-04",), "engine": ("TC-04",), "worker": ("TC-01", "TC-05"), "speculative": ("TC-07",),
    "allocation": ("TC-01", "TC-05", "TC-06"), "groups": ("TC-03",), "worker_checks": ("TC-01",),
    "engine_options": ("TC-01", "TC-02", "TC-06", "TC-07"),
    "allocation_checks": ("TC-01",),
}
"""The TCs whose checks read a role's answer (besides every TC of a case a planning role stops)."""
PLAN_ROLES = ("validation", "worker_checks", "allocation_checks", "engine_options", "estimation", "ownership", "layout",
              "engine", "speculative")
"""Roles every plan calls: a refusal or crash in one stops every TC of its case."""
ESTIMATE_FIGURES = (
    ("slot_size", "slot_size", "KV slot bytes per token (FEATURE 5)"),
    ("index_slot_size", "index_slot_size", "DSA index slot bytes per token (FEATURE 5)"),
    ("scale_slot_size", "scale_slot_size", "scale slot bytes per token (FEATURE 5)"),
    ("num_indexer_layers", "num_indexer_layers", "layers carrying an indexer (FEATURE 4-5)"),
    ("linear_slot_size", "linear_slot_size", "linear-state bytes per slot (FEATURE 5)"),
    ("num_linear_state_blocks", "num_linear_state_blocks", "linear-state slots (FEATURE 5)"),
    ("linear_cache_size_in_bytes", "linear_cache_bytes", "linear-state reservation in bytes (FEATURE 5)"),
    ("n_blocks", "n_blocks", "block count (FEATURE 6)"),
)
"""(the tree's capacity key, the oracle's ``Capacity`` field, the rule)."""
ENGINE_FIGURES = (
    ("world_size", "the attention TP size the estimation is handed: world / (dp x cp) (FEATURE 3)"),
    ("n_local_kv_heads", "KV heads per TP rank: max(1, KV heads / attention TP) (FEATURE 5)"),
    ("n_local_linear_k_heads", "linear-attention key heads per TP rank: max(1, heads / attention TP) (FEATURE 5)"),
    ("n_local_linear_v_heads", "linear-attention value heads per TP rank: max(1, heads / attention TP) (FEATURE 5)"),
    ("layerwise_split_size", "the draft engine never splits: s 1 (FEATURE 6)"),
    ("n_layers", "the draft engine's layers: its MTP layers, else all (FEATURE 6)"),
)
"""(the tree's ``engine_options`` key, the rule) of the option values judged (``spec_engine_options``)."""
PER_CASE_FIGURES = ("num_indexer_layers", "num_linear_state_blocks", "linear_cache_size_in_bytes", "n_blocks")
"""Figures that follow the model and the budget: one departure reads them case by case (a dropped indexer is
one line on DeepSeek-V3.2's 61 layers and GLM-5's 78)."""
WORKER_CHECK_FIELDS = ("model.index_n_heads", "draft.index_n_heads")
"""The fields of FEATURE 3's worker-side rule (no model with both linear-attention layers and a DSA indexer): a port's
refusal of a case breaking it is its worker's start-up checks' (role ``worker_checks``), not its validation's."""
ALLOCATION_CHECK_FIELDS = ("cache.enable_sleep_mode", "cache.enable_xtensor")
"""The fields of FEATURE 3's rules no split with sleep mode or xtensor: a port's refusal of a case breaking one is its
worker's allocation's (role ``allocation_checks``), not its validation's."""
_CHECK = re.compile(r"CHECK at (\S+:\d+) `([^`]*)`")
_WHO = re.compile(r"^xllm_native tree .*?: (?=the compiled )")


@dataclass(frozen=True, kw_only=True)
class JudgedCase:
    """One configuration the roles are judged on: its id, its RunSpec, the TCs that run it, and whether it is
    one of TC-01's refusal cases (the spec refuses it)."""

    id: str
    run: object
    tcs: tuple[str, ...] = ALL_TCS
    refusal: bool = False
    only: str = ""
    """One role judged on this case alone (``speculative`` for a case with a draft, ``groups`` for a topology);
    empty: every role."""


def case_tcs(split_active: bool, draft: bool = False) -> tuple[str, ...]:
    """The TCs a standard case runs: TC-03 and TC-05 with the split on, TC-06 with it off, TC-07 with a draft."""
    tcs = ("TC-01", "TC-02") + (("TC-03",) if split_active else ()) + ("TC-04",) + \
        (("TC-05",) if split_active else ("TC-06",))
    return tcs + (("TC-07",) if draft else ())


def refusal_text(exc: BaseException) -> str:
    """A role's refusal or crash in words that are the same for every case it happens on."""
    if isinstance(exc, UserError):
        m = _CHECK.search(str(exc))
        where = f" (CHECK at {m.group(1)} `{m.group(2)}`)" if m else ""
        if getattr(exc, "role", None):
            return f"absent ({exc.detail})"
        return f"refuses naming {exc.field}{where}"
    text = (str(exc).splitlines() or [type(exc).__name__])[0].split("; its last output")[0]
    return "crashes: " + _WHO.sub("", text)[:200]  # the tree's folder named once, in the list's heading


class Judge:
    """The findings of one tree on a list of cases."""

    def __init__(self, impl, cases: Sequence[JudgedCase]) -> None:
        self.impl = impl
        self.facts = impl.facts()
        """The tree as the wing tells it (``TreeFacts``): its folder, manifest, whether it is a port."""
        self.cases = list(cases)
        self.findings: list[Finding] = []
        self.states = {role: call_role(impl, "state", role) for role in ROLE_ORDER}

    # ---- bookkeeping ---------------------------------------------------------------------------------

    def add(self, role: str, rule: str, tree: str, spec: str, case: JudgedCase, tcs: Optional[tuple] = None, *,
            detail: str = "") -> None:
        _, _, function, file = self.states[role]
        wanted = ROLE_TCS[role] if tcs is None else tcs
        self.findings.append(Finding(role=role, rule=rule, tree=tree, spec=spec, case=case.id, function=function,
                                     file=file, tcs=tuple(tc for tc in wanted if tc in case.tcs), detail=detail))

    def guarded(self, role: str, case: JudgedCase, call: Callable):
        """``call()``'s answer, or None after recording its refusal or crash as ``role``'s departure."""
        try:
            return call()
        except (UserError, ImplementationFailure) as exc:
            tcs = case.tcs if role in PLAN_ROLES else ROLE_TCS[role]
            self.add(role, "answers every configuration the spec accepts (FEATURE 3-8)", refusal_text(exc),
                     "an answer", case, tcs)
            return None

    def played(self, role: str, case: JudgedCase) -> bool:
        """Whether the role is judged on ``case``; an absent or uncalled role is recorded as such."""
        state, why, _, _ = self.states[role]
        if state in ("played", "torch", "base"):  # the base's code is the engine's, not a departure of the port
            return state == "played"
        what = "absent" if state == "absent" else "the engine calls nothing for it"
        tcs = case.tcs if role in PLAN_ROLES else ROLE_TCS[role]
        self.add(role, f"the tree plays role `{role}`", f"{what}: {why}", "the role's figures", case, tcs)
        return False

    # ---- the roles -----------------------------------------------------------------------------------

    def run(self) -> TreeDepartures:
        self.judge_validation()
        self.judge_worker_checks()
        self.judge_worker_checks("allocation_checks", ALLOCATION_CHECK_FIELDS)
        for case in self.cases:
            if not case.refusal:
                self.judge_case(case)
        found = sorted(self.findings, key=lambda f: ROLE_ORDER.index(f.role))
        return TreeDepartures(tree=str(self.facts.root), manifest=self.facts.manifest_name, departures=group(found),
                              roles={r: s[0] for r, s in self.states.items()}, cases=tuple(c.id for c in self.cases))

    def judge_validation(self) -> None:
        state, why, _, _ = self.states["validation"]
        if state == "base":  # the engine around the port validates: its refusals are not the port's
            return
        if state == "absent":
            for case in self.cases:
                if not case.only:
                    self.played("validation", case)
            return
        refused = [(c, oracle.expected_rejection(c.run)) for c in self.cases if not c.only]
        if self.facts.port:  # the worker-side rule is the worker's start-up checks' to refuse (``judge_worker_checks``)
            refused = [(c, r) for c, r in refused
                       if r is None or r.field not in WORKER_CHECK_FIELDS + ALLOCATION_CHECK_FIELDS]
        if state == "none":  # the engine validates nothing: every configuration is accepted, one root cause
            for case, rejection in refused:
                if rejection is not None:
                    self.add("validation", "start-up refuses what FEATURE 3 refuses",
                             f"accepts every configuration (the engine calls no validation: {why})",
                             "refuses each configuration breaking a startup rule", case,
                             detail=f"spec refuses naming {rejection.field}")
            return
        for case, rejection in refused:
            answered, answer = self.start_up("validation", "start-up answers every configuration (FEATURE 3)", case)
            if answered:
                self.judge_refusal(case, rejection, answer)

    def start_up(self, role: str, rule: str, case) -> tuple:
        """(answered, refusal) of a start-up role (``validation``, ``worker_checks``) on ``case``: (True, None)
        accepted, (True, the ``UserError``) refused; a crash or hang is one departure of ``rule`` and (False, None)."""
        try:
            call_role(self.impl, role, case.run)
        except UserError as exc:
            return True, exc
        except ImplementationFailure as exc:
            self.add(role, rule, refusal_text(exc), "an answer", case, case.tcs)
            return False, None
        return True, None

    def judge_worker_checks(self, role: str = "worker_checks", fields: tuple = WORKER_CHECK_FIELDS) -> None:
        """A worker-side start-up role (``worker_checks``; ``allocation_checks`` with ``ALLOCATION_CHECK_FIELDS``) on
        every case: each case breaking one of the role's rules (``fields``) refused naming its field, every other
        case the spec accepts let through. Left to the base: the engine's code, not the port's. Absent, or never
        called: one departure on the cases that need the checks (the role's refusal cases), never a model of the
        CHECK."""
        state = self.states[role][0]
        if state == "base":
            return
        for case in self.cases:
            if case.only:
                continue
            rejection = oracle.expected_rejection(case.run)
            worker_rule = rejection is not None and rejection.field in fields
            if state != "played":
                if worker_rule:
                    self.played(role, case)
                continue
            if rejection is not None and not worker_rule:
                continue  # refused by an earlier rule: the validation role's case
            answered, answer = self.start_up(role, "the worker starts every configuration the spec "
                                             "accepts (FEATURE 3)", case)
            if not answered:
                continue
            if worker_rule and (answer is None or answer.field not in rejection.fields):
                self.add(role, f"the worker refuses a configuration breaking `{rejection.field}` "
                         "(FEATURE 3)", "accepts" if answer is None else refusal_text(answer),
                         f"refuses naming {rejection.field}", case)
            elif not worker_rule and answer is not None:
                self.add(role, "the worker starts every configuration the spec accepts (FEATURE 3)",
                         refusal_text(answer), "accepts", case, case.tcs)

    def judge_refusal(self, case: JudgedCase, rejection, answer: Optional[UserError]) -> None:
        """A refusal the spec does not make is grouped by the tree's refusal (one CHECK, one line, each case with
        the spec's answer beside it); a rule the tree never checks is one line per rule."""
        wrong = "start-up refuses only what FEATURE 3 refuses, naming the broken rule's field"
        if rejection is not None and rejection.field in ALLOCATION_CHECK_FIELDS and answer is None:
            return  # the allocation's rule (``allocation_checks``): start-up lets it through to the allocation
        if rejection is None and answer is not None:
            self.add("validation", wrong, refusal_text(answer), "accepts, or names another field", case, case.tcs,
                     detail="spec accepts")
        elif rejection is not None and answer is None:
            self.add("validation", f"start-up refuses a configuration breaking `{rejection.field}` (FEATURE 3)",
                     "accepts", f"refuses naming {rejection.field}", case)
        elif rejection is not None and answer.field not in rejection.fields:
            self.add("validation", wrong, refusal_text(answer), "accepts, or names another field", case,
                     detail=f"spec refuses naming {' or '.join(rejection.fields)}")

    def judge_case(self, case: JudgedCase) -> None:
        run = case.run
        if case.only == "groups" or (not case.only and "TC-03" in case.tcs and oracle.split_size(run) > 1):
            self.judge_groups(case)
        if case.only == "groups":
            return
        if case.only == "speculative":
            self.judge_engine_options(case)
            if self.played("speculative", case):
                self.judge_speculative(case, oracle.split_size(run))
            return
        s = oracle.split_size(run)
        expected = oracle.expected_capacity(replace(run, draft=None))
        full = tuple(oracle.expected_full_layers(run.model))
        self.judge_engine_options(case)
        self.judge_activation(case, s)
        if self.played("estimation", case):
            self.judge_estimate(case, s, expected, full)
        if s > 1 and self.played("ownership", case):
            masks = self.guarded("ownership", case, lambda: call_role(self.impl, "ownership", run, s))
            if masks is not None:
                self.judge_masks("ownership", case, "split rank",
                                 [(r, masks[r], oracle.expected_owned_full_layers(run, r)) for r in range(s)])
        if s > 1 and self.facts.port:
            for role, call in (("layout", lambda: call_role(self.impl, "master_layout", run, full=full, split_size=s,
                                                                              n_blocks=expected.n_blocks)),
                               ("engine", lambda: call_role(self.impl, "engine_layout", run, full=full,
                                                                              split_size=s))):
                if self.played(role, case):
                    layout = self.guarded(role, case, call)
                    if layout is not None:
                        self.judge_layout(role, case, layout, full)
        if self.played("worker", case):
            answers = []
            for rank in range(oracle.attn_tp_size(run)):
                mask = self.guarded("worker", case, lambda r=rank: call_role(self.impl, "worker", run, rank=r,
                                                                                      split_size=s))
                if mask is None:
                    break
                answers.append((rank, mask, oracle.expected_rank_owned_layers(run, rank)))
            self.judge_masks("worker", case, "the worker of rank", answers)
        if getattr(run, "draft", None) is not None and self.played("speculative", case):
            self.judge_speculative(case, s)
        state = self.states["allocation"][0]
        if state != "torch":
            self.judge_allocation(case, s, expected)

    def judge_engine_options(self, case: JudgedCase) -> None:
        """The option values the tree's engine hands its estimation (role ``engine_options``) for the case's target
        and, with a draft, its draft engine, against the spec's (``spec_engine_options``). Left to the base: the
        engine's code, not the port's; absent: one departure on every case (each needs an estimate)."""
        state = self.states["engine_options"][0]
        if state == "base" or not self.played("engine_options", case):
            return
        run = case.run
        engines = (("target", False),) + ((("draft", True),) if run.draft is not None else ())
        for who, draft in engines:
            got = self.guarded("engine_options", case, lambda d=draft: call_role(self.impl, "engine_options", run,
                                                                               draft=d))
            if got is None:
                return
            spec = spec_engine_options(run, oracle.split_size(run), draft=draft)
            for key, rule in ENGINE_FIGURES:
                if key in spec and got.get(key) != spec[key]:
                    self.add("engine_options", f"{who}: {rule}", str(got.get(key)), str(spec[key]), case)

    def judge_activation(self, case: JudgedCase, s: int) -> None:
        """Whether the tree's start-up code runs the split (role ``engine``: it decides where a flag gates it)
        against FEATURE 2: active iff the enable flag is true and s > 1. A wrong answer feeds every role the
        wrong split size, so it reads on every TC of the case."""
        if self.states["engine"][0] != "played":  # the base's engine is the engine's rule, not the port's
            return
        answer = self.guarded("engine", case, lambda: call_role(self.impl, "activation", case.run))
        if answer is None or answer[0] == (s > 1):
            return
        flags = case.run.layerwise
        self.add("engine", "the split is active iff the enable flag is true and s > 1 (FEATURE 2)",
                 f"{'active' if answer[0] else 'inactive'} with the flag {'on' if flags.enable else 'off'}",
                 "active" if s > 1 else "inactive", case, case.tcs, detail=f"s {flags.split_size}: {answer[1]}")

    def judge_estimate(self, case: JudgedCase, s: int, expected, full: tuple) -> None:
        est = self.guarded("estimation", case, lambda: call_role(self.impl, "estimation", case.run, s,
                                                                 engine=fed_engine_options(case.run, s)))
        if est is None:
            return
        cap = est["target"]
        tree_full = tuple(layer for layer, f in enumerate(est["full_attention"]) if f)
        if tree_full != full:
            self.add("estimation", "full-attention layers (FEATURE 4)", _layers(tree_full), _layers(full), case)
        for key, field, rule in ESTIMATE_FIGURES:
            if key not in cap or cap[key] == getattr(expected, field):
                continue
            if key in PER_CASE_FIGURES:  # figures that follow the model and budget: each case's beside it
                self.add("estimation", rule, "0" if cap[key] == 0 else "another figure", "the spec's", case,
                         detail=f"tree {cap[key]}, spec {getattr(expected, field)}" + (f" at s {s}" if key == "n_blocks"
                                                                                          else ""))
            else:
                self.add("estimation", rule, str(cap[key]), str(getattr(expected, field)), case)

    def judge_masks(self, role: str, case: JudgedCase, who: str, answers: Sequence[tuple]) -> None:
        """Each (rank, mask, the spec's owned full layers) of one case: one departure for the full layers of every
        rank that departs, one for linear layers left unowned."""
        model = case.run.model
        full = oracle.expected_full_layers(model)
        linear = oracle.expected_linear_layers(model)
        wrong, least = [], len(linear)
        for rank, mask, want in answers:
            held = [layer for layer in full if layer < len(mask) and mask[layer]]
            if held != list(want):
                wrong.append((rank, held, list(want)))
            least = min(least, sum(1 for layer in linear if layer < len(mask) and mask[layer]))
        if wrong:
            self.add(role, "the k-th full layer is owned by split position k % s (FEATURE 4)",
                     f"{'split ranks' if who == 'split rank' else 'workers'} own other full layers",
                     "each its position's", case,
                     detail="; ".join(f"{who} {r} owns {_layers(h)}, spec {_layers(w)}" for r, h, w in wrong))
        if least < len(linear):
            what = "no linear-attention layer" if least == 0 else f"{least} of {len(linear)} linear-attention layers"
            self.add(role, "every rank owns every linear-attention layer (FEATURE 4, 7)", f"a rank owns {what}",
                     f"every rank owns all {len(linear)}", case)

    def judge_layout(self, role: str, case: JudgedCase, layout: tuple, full: tuple) -> None:
        run = case.run
        name = "the master's layout" if role == "layout" else "the engine's layout"
        if not layout:
            self.add(role, f"{name} places each full layer at its owner (FEATURE 4, 8)", "publishes no layout",
                     "a layout of every full layer", case)
            return
        listed = sorted(layer for layer, _, _ in layout)
        if listed != sorted(full):
            self.add(role, f"{name} lists every full layer once (FEATURE 8)", _layers(listed), _layers(full), case)
        tp = oracle.attn_tp_size(run)
        wrong = []
        for r in range(tp):
            held = sorted(layer for layer, ranks, _ in layout if r in ranks)
            want = list(oracle.expected_rank_owned_layers(run, r))
            if held != want:
                wrong.append((r, held, want))
        if wrong:
            r, held, want = wrong[0]
            every = all(len(ranks) == tp for _, ranks, _ in layout)
            self.add(role, f"{name} places each full layer at its owner (FEATURE 4, 8)",
                     "every full layer on every TP rank" if every else "full layers on other TP ranks",
                     "each full layer on its owner's rank of each split group", case,
                     detail="" if every else f"TP rank {r} holds {_layers(held)}, spec {_layers(want)} "
                                             f"({len(wrong)} of {tp} ranks wrong)")

    def judge_groups(self, case: JudgedCase) -> None:
        """The tree's split groups (its groups role; ``none``: the groups its workers' masks make, what the engine
        then runs) against the spec's per attention TP group (FEATURE 4's grouping key over the case's topology
        and placement). A tree forming upstream's consecutive groups reads as one line wherever they fall short."""
        state = self.states["groups"][0]
        if state == "base":  # the engine around the port forms them: not the port's departure
            return
        if state == "absent":
            self.played("groups", case)
            return
        run = case.run
        spec = oracle.expected_split_groups(run)
        if spec is None:  # no grouping keeps each group on distinct cards: the spec refuses (a card check's case)
            return
        got = self.guarded("groups", case, lambda: call_role(self.impl, "groups", run))
        if got is None or sorted(map(sorted, got)) == sorted(map(sorted, spec)):
            return
        consecutive = oracle.expected_split_groups(run, rule=oracle.UPSTREAM_GROUP_RULE) or []
        shape = ("consecutive runs of s ranks in each attention TP group"
                 if sorted(map(sorted, got)) == sorted(map(sorted, consecutive)) else "other groups")
        if state == "none":
            shape += " (the tree forms none: read off its workers' masks)"
        self.add("groups", "split groups sit on the best links the topology allows (FEATURE 4's grouping key)",
                 shape, "the grouping key's groups", case,
                 detail=f"{run.hardware.topology.name}: tree {[list(g) for g in got]}, spec {spec}")

    def judge_speculative(self, case: JudgedCase, s: int) -> None:
        est = self.guarded("speculative", case, lambda: call_role(self.impl, "speculative", case.run, s,
                                                                  engine=fed_engine_options(case.run, s)))
        if est is None:
            return
        target, _ = oracle.expected_capacities(case.run)
        if est.get("n_blocks") != target.n_blocks:
            self.add("speculative", "the common block count of target and draft (FEATURE 6)", "another figure",
                     "the spec's", case, detail=f"tree {est.get('n_blocks')}, spec {target.n_blocks} at s {s}")

    def judge_allocation(self, case: JudgedCase, s: int, expected) -> None:
        terms = call_role(self.impl, "allocation_terms")
        if s == 1 and terms["unsplit"] == "base":
            return  # with the split off the engine around the port allocates (``allocation.unsplit: base``)
        if not self.played("allocation", case):
            return
        if terms["split_only"] and s == 1:
            self.add("allocation", "the flag off or s 1 allocates every layer as without the split (FEATURE 7, TC-06)",
                     f"absent: {terms['function']} runs only with the split active and the tree has no ordinary "
                     "allocation", "every layer's tensors", case)
            return
        run = case.run
        owned = [1 if layer not in set(oracle.expected_full_layers(run.model)) or
                 layer in oracle.expected_rank_owned_layers(run, 0) else 0 for layer in range(run.model.num_hidden_layers)]
        reply = self.guarded("allocation", case, lambda: call_role(self.impl, "allocation", run, owned=owned, rank=0,
                                                                               n_blocks=expected.n_blocks))
        if reply is not None and not reply.get("tensors"):
            self.add("allocation", "each rank allocates its owned full layers' tensors and its linear state "
                     "(FEATURE 7)", "creates no tensor", "its owned full layers' tensors", case,
                     detail=f"rank 0 owns {len(oracle.expected_rank_owned_layers(run, 0))} full layers")


def spec_engine_options(run, s: int, *, draft: bool = False) -> dict:
    """The option values FEATURE 3-6 give the engine of ``run``'s target (``draft``: its draft engine), from the
    oracle: the attention TP size, the KV heads per TP rank (not for MLA, whose one latent head no slot divides),
    the linear heads per TP rank (models with linear-attention layers), and for a draft its split size 1, its layer
    count and, with its body at TP 1, every head on one rank. ``s``: the effective split size (unjudged for the
    target: it is the launch's flag)."""
    model = run.draft if draft else run.model
    tp = 1 if draft and model.body_tp1 else oracle.attn_tp_size(run)
    out = {"world_size": tp}
    if model.attention != "mla":
        out["n_local_kv_heads"] = oracle.n_local_kv_heads(model, tp)
    if oracle.expected_linear_layers(model):
        out["n_local_linear_k_heads"], out["n_local_linear_v_heads"] = oracle.linear_local_heads(model, tp)
    if draft:
        out.update(layerwise_split_size=1, n_layers=oracle.draft_num_layers(model))
    return out


def fed_engine_options(run, s: int) -> dict:
    """What ``roles.estimation`` and ``roles.speculative`` hand the estimation instead of the tree's engine's answers
    (``{"target": ..., "draft": ...}``): the spec's value of every option the engine computes
    (``spec_engine_options``; MLA's heads and a model without linear layers' linear heads as the spec's slots read
    them: max(1, heads / attention TP)), and the draft's layer count."""
    out = {}
    for who, model in (("target", run.model), ("draft", run.draft)):
        if model is None:
            continue
        draft = who == "draft"
        tp = 1 if draft and model.body_tp1 else oracle.attn_tp_size(run)
        k_heads, v_heads = oracle.linear_local_heads(model, tp)
        out[who] = {"world_size": tp, "n_local_kv_heads": oracle.n_local_kv_heads(model, tp),
                    "n_local_linear_k_heads": k_heads, "n_local_linear_v_heads": v_heads,
                    "layerwise_split_size": 1 if draft else s}
        if draft:
            out[who]["n_layers"] = oracle.draft_num_layers(model)
    return out


def _layers(layers: Sequence[int]) -> str:
    layers = list(layers)
    if len(layers) > 12:
        return f"[{', '.join(map(str, layers[:6]))}, ... {layers[-1]}] ({len(layers)} layers)"
    return str(layers)


def judge(impl, cases: Sequence[JudgedCase]) -> TreeDepartures:
    """``impl``'s departures on ``cases``: every role it plays judged on its own, grouped."""
    return Judge(impl, cases).run()
