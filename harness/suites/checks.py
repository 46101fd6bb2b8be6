"""The checks several TCs share: startup verdict, leaks, ownership, the published layout, tensors and views."""

from __future__ import annotations

from typing import Optional

from harness import oracle
from harness.suites import ownership
from harness.suites.expectations import Problem, rejection_problems
from harness.suites.facts import fact_field, master_error, plan_of, rank_of


def startup_problems(facts: list, run) -> Optional[list[str]]:
    """The startup verdict shared by every TC: None when the config is valid and the master accepted
    it (go on checking); else the problems (empty when the spec's rejection came as it should)."""
    rejected = rejection_problems(master_error(facts), run)
    if rejected is not None:
        return rejected
    if master_error(facts) is not None:
        error = master_error(facts)
        return [Problem(f"master rejected a valid config: {error}", rule="refused", field=error.field)]
    refused = worker_refusal_problems(facts)
    return refused or None


def worker_refusal_problems(facts: list) -> list[str]:
    """A worker that refused, in ``init_worker``, a config the master planned and the spec accepts (FEATURE
    3: the worker-side CHECKs): one problem per rank and engine, naming the field; nothing after it is
    checked."""
    problems = []
    for f in facts:
        refusals = fact_field(f, "refusals")
        if refusals:  # (most ranks refused nothing: no empty mapping sorted per rank of every check)
            problems += [Problem(f"rank {rank_of(f)} {role} worker refused a config the spec accepts: {error}",
                                 rule="worker_refused", rank=rank_of(f), field=error.field)
                         for role, error in sorted(refusals.items())]
    return problems


def leak_problems(facts: list) -> list[str]:
    """Every engine a TC started, target and draft, left nothing alive after teardown."""
    out = []
    for f in facts:
        for role, wf in sorted(f.workers.items()):
            leak = wf.leak
            if leak is None:
                out.append(Problem(f"rank {f.rank} {role}: no after-teardown leak check ran", rule="leak",
                                   rank=f.rank))
                continue
            if leak.tracked == 0:
                out.append(Problem(f"rank {f.rank} {role}: no tensor tracked for the leak check", rule="leak",
                                   rank=f.rank))
            if leak.alive:
                out.append(Problem(f"rank {f.rank} {role} engine: {leak.alive} of {leak.tracked} tensors/storages "
                                   f"still alive after teardown (leaked)", rule="leak", rank=f.rank))
            if leak.allocator_after != leak.allocator_before:
                out.append(Problem(f"rank {f.rank} {role} engine: {wf.device} allocator holds {leak.allocator_after} "
                                   f"B after teardown, {leak.allocator_before} B before bring-up", rule="leak",
                                   rank=f.rank))
    return out


def ownership_problems(facts: list, run, role: str = "target", owner: Optional[dict] = None) -> list[str]:
    """Each worker owns the full layers the SPEC gives its position in its split group (FEATURE 4):
    groups from the parallel layout and the topology (harness.suites.ownership), never from the
    worker's own report of its split rank. ``owner`` (layer -> split rank) replaces the spec's
    round-robin where a TC judges propagation of the published layout, not the rule."""
    plan = plan_of(facts)
    groups, problem = ownership.groups_to_judge(run, plan.split_groups if plan is not None else ())
    if groups is None:
        return [problem]
    out = []
    for f in facts:
        wf = f.workers.get(role)
        if wf is None:
            continue
        if owner is None or oracle.split_size(run) == 1:
            want = ownership.expected_owned_full(run, groups, wf.plan_rank)
        else:
            position = ownership.expected_position(groups, wf.plan_rank)[1]
            want = sorted(l for l, o in owner.items() if o == position)
        got = sorted(wf.owned_full())
        if got != want:
            group, position = ownership.expected_position(groups, wf.plan_rank) if oracle.split_size(run) > 1 \
                else ((wf.plan_rank,), 0)
            out.append(Problem(f"rank {f.rank} (split rank {position}) owns full layers {got}, spec says {want} "
                               f"({role} plan rank {wf.plan_rank} at position {position} of split group "
                               f"{list(group)}; the worker reports split rank {wf.split_rank})",
                               rule="owner", rank=f.rank))
    return out


def published_layout_problems(plan, run) -> list[str]:
    """Every layout the implementation's own code publishes beside its owner map (a tree's master layout,
    what its engines pass on: ``KVPlan.published_layouts``) is the spec's: inside each split group of the
    first TP group, each full layer is held by exactly the rank at the spec's owner position (FEATURE 4),
    and the layout lists every full layer once. Expected owners come from the oracle, never from the plan."""
    if plan is None or not plan.published_layouts or oracle.split_size(run) == 1:
        return []
    groups, problem = ownership.groups_to_judge(run, plan.split_groups)
    if groups is None:
        return [problem]
    full = sorted(oracle.expected_full_layers(run.model))
    tp = oracle.attn_tp_size(run)
    out = []
    for source, layers in plan.published_layouts:
        listed = sorted(layer for layer, _, _ in layers)
        if listed != full:
            out.append(Problem(f"{source}: lists full layers {listed}, spec's full layers are {full}",
                               rule="published"))
        for r in range(tp):
            held = sorted(layer for layer, ranks, _ in layers if r in ranks)
            want = ownership.expected_owned_full(run, groups, r)
            if held != want:
                group, position = ownership.expected_position(groups, r)
                out.append(Problem(f"{source}: TP rank {r} holds full layers {held}, spec says {want} "
                                   f"(position {position} of split group {list(group)})", rule="published", rank=r))
    return out


def tensor_problems(facts: list, run, role: str = "target") -> list[str]:
    """Every layer exposes the spec's tensors (FEATURE 7; upstream's KVCacheShape decides what the page
    leaves open): an owned full layer and a non-owned view the full-layer tensors (names, shapes, dtypes)
    at the plan's block count, a linear layer its conv and recurrent state; a draft layer the draft's
    (``oracle.expected_draft_layer_tensors``). One problem per rank and kind."""
    plan = plan_of(facts)
    if plan is None:
        return []

    def geometry(specs: dict) -> dict:
        return {name: (tuple(t.shape), t.dtype) for name, t in sorted(specs.items())}

    if role == "draft":  # FEATURE 6-7: the target's cache shape, or the draft's own with its body at TP 1
        want = {"full": geometry(oracle.expected_draft_layer_tensors(run, plan.n_blocks))}
    else:
        want = {"full": geometry(oracle.expected_full_layer_tensors(run, plan.n_blocks))}
    if role == "target" and oracle.expected_linear_layers(run.model):
        want["linear"] = geometry(oracle.expected_linear_layer_tensors(run))
    out = []
    matched: set = set()  # (kind, id of a layer's tensors mapping) judged equal to the spec's (layers share one)
    for f in facts:
        wf = f.workers.get(role)
        if wf is None:
            continue
        reported = set()
        kind_before = tensors_before = object()  # (nothing a layer holds)
        for layer in wf.layers:
            kind, tensors = layer.kind, layer.tensors
            if tensors is tensors_before and kind == kind_before:
                continue  # judged as the layer before (matched, or its kind reported): a worker's layers share a few
            kind_before, tensors_before = kind, tensors
            expected = want.get(kind)
            if expected is None or kind in reported or (kind, id(tensors)) in matched:
                continue
            if layer.geometry == expected:
                matched.add((kind, id(tensors)))
                continue
            reported.add(kind)
            out.append(Problem(f"rank {f.rank} {role} layer {layer.layer} ({layer.kind}, "
                               f"{'owned' if layer.owned else 'a view'}): tensors {layer.geometry}, spec {expected}",
                               rule="tensors", rank=f.rank))
    return out


def view_problems(facts: list, role: str = "target") -> list[str]:
    """Every non-owned full layer's view exposes the same tensor names, shapes and dtypes as an owned
    full layer of the same rank (FEATURE 7: a view of the scratch, shaped like the layer it stands for)."""
    out = []
    for f in facts:
        wf = f.workers.get(role)
        if wf is None:
            continue
        full = [l for l in wf.layers if l.kind == "full"]
        owned = [l for l in full if l.owned]
        # layers of one tensors mapping (``facts.walked_worker`` shares it) are judged once
        shapes = {tuple(sorted(l.geometry.items())) for l in {id(l.tensors): l for l in owned}.values()}
        if len(shapes) > 1:
            out.append(Problem(f"rank {f.rank} {role}: owned full layers differ in tensors: {sorted(shapes)}",
                               rule="view", rank=f.rank))
        if not owned:
            continue
        want, same = owned[0].geometry, owned[0].tensors
        for l in full:
            if not l.owned and l.tensors is not same and l.geometry != want:
                out.append(Problem(f"rank {f.rank} {role} layer {l.layer}: non-owned view exposes {l.geometry}, an "
                                   f"owned layer (layer {owned[0].layer}) {want}", rule="view", rank=f.rank))
                break
    return out


def _differs(what: str, got, want, **kw) -> list[str]:
    return [] if got == want else [Problem(f"{what}: plan {got!r}, spec {want!r}", **kw)]


PLAN_FIELD_LABELS = {"available_bytes": "available_bytes (budget - linear state)"}
"""How ``plan_layout_problems`` names a plan field (``oracle.PLAN_FIELDS``) whose name alone does not say what it is."""

RANK_FIELDS = ("(node, card)", "(dp_rank, cp_rank, tp_rank)", "split group", "split_rank", "owned_full_layers")
"""What ``plan_layout_problems`` compares for each rank, in ``oracle.expected_rank_rows``'s order."""


def plan_layout_problems(plan, run) -> list[str]:
    """Every layout fact the plan states, against the spec (FEATURE 4-7): the run's shape (world, dp, cp,
    attention TP, split size, active, block size, the hardware profile's KV layout), the model's layers,
    the slot sizes of section 5, the split groups and owners of section 4, and per rank its node and card,
    its dp/cp/tp coordinates (``oracle.expected_rank_coordinates``), its split group and
    position, and its owned full layers. Owner problems carry rule ``owner-plan``; the rest ``layout``."""
    p = run.parallel
    out = []
    want = oracle.expected_plan_fields(run)  # one table per configuration (each field one function's answer)
    got = tuple(tuple(plan.full_layers) if name == "full_layers" else dict(plan.layer_owner) if name == "layer_owner"
                else getattr(plan, name) for name in oracle.PLAN_FIELDS)
    if got != want:  # (the messages are written only for a plan that differs)
        for name, got_one, want_one in zip(oracle.PLAN_FIELDS, got, want):
            out += _differs(PLAN_FIELD_LABELS.get(name, name), got_one, want_one,
                            rule="owner-plan" if name == "layer_owner" else "layout")
    groups = oracle.expected_split_groups(run)
    if groups is None:
        return out
    plan_groups = [list(g) for g in plan.split_groups]
    out += _differs("split_groups", plan_groups, groups, rule="layout")
    group_lists = tuple(plan_groups)  # each rank's row below reads its group's list, made once (a tuple as before)
    ranks = {rp.rank: rp for rp in plan.ranks}
    if sorted(ranks) != list(range(p.world_size)):
        return out + [Problem(f"plan ranks {sorted(ranks)}, spec 0..{p.world_size - 1}", rule="layout")]
    rows = oracle.expected_rank_rows(run)  # per rank: (node, card), coordinates, split group, split rank, owned
    for r in range(p.world_size):
        rp = ranks[r]
        got = ((rp.node, rp.card), (rp.dp_rank, rp.cp_rank, rp.tp_rank),
               group_lists[rp.split_group] if 0 <= rp.split_group < len(group_lists)
               else rp.split_group, rp.split_rank, tuple(rp.owned_full_layers))
        if got == rows[r]:  # (every field equal: the messages below are written only for a rank that differs)
            continue
        for what, got_one, want in zip(RANK_FIELDS, got, rows[r]):
            out += _differs(f"rank {r} {what}", got_one, want, rule="owner-plan" if what == "owned_full_layers"
                            else "layout", rank=r)
    return out


def draft_plan_problems(plan, run) -> list[str]:
    """The draft's figures in the plan (FEATURE 6): none without a draft; else its model and layers, its
    bytes per block per layer (D over its layers: the target's cache shape unless the body runs at TP 1),
    ``additional_bytes_per_block`` = D, and every rank's ``draft_estimated_bytes`` = n_blocks x D."""
    draft = getattr(run, "draft", None)
    if draft is None:
        out = [] if plan.draft is None else [Problem(f"plan has a draft {plan.draft.model!r}; the run has none",
                                                     rule="draft-plan")]
        out += _differs("additional_bytes_per_block (no draft)", plan.additional_bytes_per_block, 0, rule="draft-plan")
        return out + [Problem(f"rank {rp.rank}: draft_estimated_bytes {rp.draft_estimated_bytes}, no draft",
                              rule="draft-plan", rank=rp.rank) for rp in plan.ranks if rp.draft_estimated_bytes]
    if plan.draft is None:
        return [Problem(f"plan has no draft; the run's draft is {draft.name}", rule="draft-plan")]
    n_layers = oracle.draft_num_layers(draft)
    per_block = oracle.expected_draft_bytes_per_block(run)
    out = []
    for what, got, want in (
        ("draft model", plan.draft.model, draft.name), ("draft num_layers", plan.draft.num_layers, n_layers),
        ("draft full_layers", tuple(plan.draft.full_layers), tuple(range(n_layers))),
        ("draft body_tp1", plan.draft.body_tp1, oracle.draft_body_tp1(run)),
        ("draft layer_bytes_per_block", tuple(plan.draft.layer_bytes_per_block), (per_block // n_layers,) * n_layers),
        ("additional_bytes_per_block (the draft's D)", plan.additional_bytes_per_block, per_block),
    ):
        out += _differs(what, got, want, rule="draft-plan")
    want = oracle.expected_draft_rank_bytes(run, plan.n_blocks)
    out += [Problem(f"rank {rp.rank}: draft_estimated_bytes {rp.draft_estimated_bytes}, spec {want} "
                    f"({plan.n_blocks} blocks x {per_block} B/block)", rule="draft-plan", rank=rp.rank)
            for rp in plan.ranks if rp.draft_estimated_bytes != want]
    return out


def draft_message_problems(facts: list, run) -> list[str]:
    """The draft engine's own message, field by field (FEATURE 6 and 8: the draft never splits): split size 1,
    not active, one group per plan rank, no owners and no scratch; each worker's entry in split rank 0 of a
    group of itself, owning every draft layer. Its workers reset to 1 / rank 0 whatever the message says
    (``worker_layout_problems``), so only the message shows a draft engine that writes the target's split."""
    if getattr(run, "draft", None) is None:
        return []
    want_owned = tuple(oracle.expected_full_layers(run.draft))
    out = []
    for f in facts:
        wf = f.workers.get("draft")
        m = None if wf is None else wf.message
        if m is None:
            continue
        r, where = wf.plan_rank, f"rank {f.rank} draft engine message"
        for what, got, want in (
            ("split size", m.split_size, 1), ("active", m.active, False), ("layer owners", m.layer_owner, ()),
            ("scratch bytes per block", m.scratch_bytes_per_block, 0), ("its entry's split rank", m.split_rank, 0),
            ("its entry's group", m.split_groups[m.split_group] if m.split_group is not None
             and 0 <= m.split_group < len(m.split_groups) else None, (r,)),
            ("its entry's owned full layers", m.owned_full_layers, want_owned),
        ):
            if got != want:
                out.append(Problem(f"{where}: {what} {got!r}; a draft never splits: {want!r}", rule="draft-message",
                                   rank=f.rank))
        if sorted(len(g) for g in m.split_groups) != [1] * len(m.split_groups):
            out.append(Problem(f"{where}: split groups {[list(g) for g in m.split_groups]}; a draft never splits: "
                               f"one group per rank", rule="draft-message", rank=f.rank))
    return out


def worker_layout_problems(facts: list, run, role: str = "target", *, spec_n_blocks: bool = True) -> list[str]:
    """What each worker reports about its place in the layout (FEATURE 4, 7, 8), against the spec: its
    split size, its split group (plan ranks, the spec's grouping) and its position there, its block count
    (the spec's), the hardware profile's KV layout, and its own rank, role and device. A draft worker: split 1, a group of itself, rank 0.
    Rule ``owner`` (with the rank) for the split rank, ``groups`` for the split group, ``layout`` for the rest. ``spec_n_blocks``
    False: the block count is left to the caller (TC-04 compares it with the master's plan)."""
    plan = plan_of(facts)
    s = oracle.split_size(run) if role == "target" else 1
    groups = oracle.expected_split_groups(run) if role == "target" else None
    n_blocks = oracle.expected_block_counts(run, oracle.run_budget_bytes(run))[0]
    out = []
    for f in facts:
        wf = f.workers.get(role)
        if wf is None:
            continue
        r = wf.plan_rank
        if s > 1 and groups is not None:
            group = next(list(g) for g in groups if r in g)
            want_group, want_rank = group, group.index(r)
        else:
            want_group, want_rank = [r], 0
        where = f"rank {f.rank} {role} worker"
        if wf.split_size != s:
            out.append(Problem(f"{where}: split size {wf.split_size}, spec {s}", rule="layout", rank=f.rank))
        if wf.split_rank != want_rank:
            out.append(Problem(f"{where}: reports split rank {wf.split_rank}; spec: position {want_rank} of split "
                               f"group {want_group}", rule="owner", rank=f.rank))
        if list(wf.split_group) != want_group:
            out.append(Problem(f"{where}: reports split group {list(wf.split_group)}; spec {want_group}",
                               rule="groups", rank=f.rank))
        if spec_n_blocks and wf.n_blocks != n_blocks:
            out.append(Problem(f"{where}: n_blocks {wf.n_blocks}, spec {n_blocks}"
                               + (f" (plan {plan.n_blocks})" if plan is not None else ""), rule="n_blocks"))
        said = (wf.reported_rank, wf.reported_role, wf.reported_device)
        if said != (r, role, wf.device):
            out.append(Problem(f"{where}: its cache says rank {said[0]}, role {said[1]!r}, device {said[2]!r}; it is "
                               f"plan rank {r}, role {role!r} on {wf.device!r}", rule="layout", rank=f.rank))
        if wf.kv_layout != run.hardware.kv_layout:
            out.append(Problem(f"{where}: kv_layout {wf.kv_layout!r}, the hardware profile's "
                               f"{run.hardware.kv_layout!r}", rule="layout", rank=f.rank))
    return out
