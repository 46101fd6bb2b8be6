"""Each role of a compiled tree called on its own, fed the inputs its caller gives (the spec's figures for
what the other roles would have computed), so that no other role's failure hides it: what
``harness.departures`` judges role by role. Every answer is the tree's code (or, for upstream's manifest,
the same calls its plan makes); a CHECK comes back as the ``UserError`` naming its field, a crash as
``ImplementationFailure``, a role the manifest marks absent or uncalled as ``AbsentRoleError``."""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from contract.specs import RunSpec
from implementations.xllm_native.impl import ENGINE_COMPUTED, TORCH_SCALAR_TYPES, XllmNativeImplementation, layout_facts


def state(impl: XllmNativeImplementation, role: str) -> tuple[str, str, str, str]:
    """(``played``/``absent``/``none``/``base``, the reason when not played, the function, its file) of ``role``
    (one of the manifest's roles, or ``allocation``);
    ``allocation`` is ``absent`` when the manifest names none and ``torch`` when it is compiled against torch
    (run in a rank, judged end to end by TC-01 and TC-05)."""
    m = impl.manifest
    if role == "allocation":
        if m.allocation is None:
            return "absent", "the manifest names no allocation", "", ""
        if m.allocation.none:
            return "none", m.allocation.none, "", ""
        kind = "torch" if m.tensors is not None else "played"
        return kind, "", m.allocation.function, m.allocation.file
    r = m.role(role)
    if role in ("worker_checks", "allocation_checks", "engine_options") and r.state == "played" and not r.file:
        return r.state, "", r.function, impl.native.tree.files.get(role, "")  # an upstream-cut tree's own cut
    return r.state, r.absent or r.none or r.base, r.function, r.file


def validation(impl: XllmNativeImplementation, run: RunSpec) -> None:
    """The tree's start-up validation of ``run``: returns when it accepts, raises its refusal (a port: its
    validation role alone, the worker's start-up checks being role ``worker_checks``; upstream's tree: its master's and
    its worker's, in order; the allocation's refusals are role ``allocation_checks`` for every tree)."""
    impl.validate(run, workers=not impl.port)


def worker_checks(impl: XllmNativeImplementation, run: RunSpec) -> None:
    """The worker's start-up checks of ``run`` alone (role ``worker_checks``): returns when they let it through,
    raises the CHECK's refusal, or ``AbsentRoleError`` where the tree has none and the case needs them."""
    impl.worker_checks(run)


def allocation_checks(impl: XllmNativeImplementation, run: RunSpec) -> None:
    """The worker's allocation's refusals of the split with sleep mode and xtensor (role ``allocation_checks``) on
    ``run`` alone: returns when it lets the run through (or the case does not need it), raises the CHECK's refusal,
    or ``AbsentRoleError`` where the tree has none and the case needs it."""
    impl.allocation_checks(run)


def estimation(impl: XllmNativeImplementation, run: RunSpec, split_size: int, *, engine: Optional[dict] = None) -> dict:
    """The target's capacity alone (no draft), at ``split_size`` (1: the uniform count). ``engine``: the option values
    the engine would compute (``{"target": {ENGINE_COMPUTED key: value}}``, the spec's), handed to the estimation
    instead of the tree's ``engine_options`` answers, so that a departure of the engine does not read as one of
    the estimation (nor an absent engine hide it)."""
    return _fed(impl, engine, lambda: impl.native_estimate(replace(run, draft=None), split_size))


def _fed(impl: XllmNativeImplementation, engine: Optional[dict], call):
    """``call()`` with the engine's option values ``engine`` handed to the tree and its base instead of their
    ``engine_options`` answers (None: their own)."""
    if engine is None:
        return call()
    players = [impl] + ([impl.base] if impl.base is not None else [])
    try:
        for p in players:
            p._fed_engine = engine
        return call()
    finally:
        for p in players:
            p._fed_engine = None


def engine_options(impl: XllmNativeImplementation, run: RunSpec, *, draft: bool = False) -> dict:
    """The option values the tree's engine computes for the run's target (``draft``: its draft engine) at the run's
    split size (role ``engine_options``): ``ENGINE_COMPUTED``'s keys and the worker's layer count ``n_layers``."""
    model = run.draft if draft else run.model
    s = run.layerwise.split_size if impl.is_active(run.layerwise) else 1
    answer = impl.engine_options(run, model, split_size=s, draft=draft)
    return {k: answer[k] for k in ENGINE_COMPUTED + ("n_layers",)}


def speculative(impl: XllmNativeImplementation, run: RunSpec, split_size: int, *, engine: Optional[dict] = None) -> dict:
    """The target and draft capacities and their common block count (``run`` has a draft); ``engine``: as for
    ``estimation``, with the draft engine's values (and its layer count ``n_layers``) under ``"draft"``."""
    return _fed(impl, engine, lambda: impl.native_estimate(run, split_size))


def ownership(impl: XllmNativeImplementation, run: RunSpec, split_size: int) -> list:
    """Each split rank's mask from the tree's ownership role."""
    impl.require("ownership")
    return impl.owned_masks(run, split_size)


def worker(impl: XllmNativeImplementation, run: RunSpec, *, rank: int, split_size: int) -> list:
    """The mask the worker of global ``rank`` builds (a port: its worker role; upstream: its compiled start-up,
    ``worker_checks``: ``build_layer_cache_owned`` over the split rank its worker takes, every layer owned when
    it builds none at s 1)."""
    impl.require("worker")
    if not impl.port:
        reply = impl.call(run, "worker_checks", {**impl.model_args(run.model), "layerwise_split_size": split_size,
                                                 "rank": rank})
        if "absent" in reply:
            impl.worker_checks(run)  # the refusal naming implementation.files.worker_checks
        owned = reply.get("owned")
        return [True] * run.model.num_hidden_layers if owned == [] else [bool(v) for v in owned]
    reply = impl.call(run, "worker", {"layer_types": impl.model_args(run.model)["layer_types"],
                                      "layerwise_split_size": split_size, "rank": rank,
                                      "n_layers": run.model.num_hidden_layers})
    return [bool(v) for v in reply["owned"]]


def master_layout(impl: XllmNativeImplementation, run: RunSpec, *, full: tuple, split_size: int, n_blocks: int) -> tuple:
    """The master's layout (a port's ``layout`` role) given the spec's block count: ((layer, ranks, heads), ...)."""
    impl.require("layout")
    model = run.model
    reply = impl.call(run, "master_layout", {
        "layer_types": impl.model_args(model)["layer_types"], "kv_heads": _kv_heads(run),
        "world_size": impl.port_tp(run), "n_blocks": n_blocks, "block_size": run.cache.block_size,
        "head_dim": model.head_dim, "max_tokens": 0, "dtype_code": TORCH_SCALAR_TYPES[model.dtype],
        "layerwise_split_size": split_size, "enable": run.layerwise.enable})
    return layout_facts(reply.get("layout"), full)


def activation(impl: XllmNativeImplementation, run: RunSpec) -> tuple[bool, str]:
    """Whether the tree's start-up code runs the split for the run's flags, and whose rule said so (a port: its
    engine function called with the flag; upstream's engine: s > 1 alone)."""
    return impl.activation(run.layerwise)


def engine_layout(impl: XllmNativeImplementation, run: RunSpec, *, full: tuple, split_size: int) -> tuple:
    """What an engine passes on (a port's ``engine`` role), given the spec's full layers."""
    impl.require("engine")
    reply = impl.call(run, "engine", {"per_layer_kv_heads": [_kv_heads(run)] * len(full),
                                      "world_size": impl.port_tp(run), "layerwise_split_size": split_size,
                                      "enable": run.layerwise.enable})
    return layout_facts(reply.get("layout"), full)


def groups(impl: XllmNativeImplementation, run: RunSpec) -> tuple:
    """The split groups the tree forms for ``run`` (role ``groups``; ``none``: read off its workers' masks)."""
    return impl.split_groups(run)


def allocation(impl: XllmNativeImplementation, run: RunSpec, *, owned: list, rank: int, n_blocks: int) -> Optional[dict]:
    """What the tree's allocation (run in the host: a manifest ``allocation`` without ``torch``) answers for the
    spec's mask and block count; None when it is compiled against torch (it runs in a rank)."""
    if impl.manifest.tensors is not None or impl.manifest.allocation is None:
        return None
    return impl.call(run, "allocate", {"owned": [int(m) for m in owned], "n_layers": run.model.num_hidden_layers,
                                       "rank": rank, "n_blocks": n_blocks, "block_size": run.cache.block_size})


def _kv_heads(run: RunSpec) -> int:
    return run.model.num_key_value_heads if run.model.attention == "gqa" else 1


def allocation_terms(impl: XllmNativeImplementation) -> dict:
    """How the manifest has the allocation run: ``unsplit`` (who allocates with the split off: ``port`` or
    ``base``), ``split_only`` (it runs only with the split active), ``function`` (its name)."""
    m = impl.manifest
    alloc = m.allocation
    return {"unsplit": m.unsplit_allocation, "split_only": bool(alloc is not None and alloc.split_only),
            "function": alloc.function if alloc is not None else ""}
