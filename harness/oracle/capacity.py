"""FEATURE sections 5-6: one engine's capacity as upstream's ``KVCacheCapacity``, and the run level:
the target and draft engines of one configuration, their block counts and bytes per rank."""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Optional

from harness.oracle.inputs import (
    SPEC_OWNER_RULE,
    _opt,
    attn_tp_size,
    draft_body_tp1,
    enable_prefix_cache,
    max_linear_state_cache_slots,
    max_seqs_per_batch,
    run_budget_bytes,
    split_size,
)
from harness.oracle.layers import draft_num_layers, expected_full_layers, is_full_attention_layer
from harness.oracle.layout import owner_of_layers
from harness.oracle.memo import per_run_any_reserve
from harness.oracle.slots import (
    SlotShape,
    _memoized,
    expected_block_cost_bytes,
    expected_layer_bytes_per_block,
    expected_linear_state_bytes,
    expected_linear_state_bytes_per_slot,
    expected_num_speculative_tokens,
    expected_scratch_bytes_per_block,
    index_slot_bytes,
    kv_slot_bytes,
    linear_state_slots,
    scale_slot_bytes,
    slot_shape,
)

# ---- one engine's capacity, as upstream's KVCacheCapacity -----------------------------------


@dataclass(frozen=True)
class Capacity:
    """One engine's estimate: the figures upstream's ``allocate_kv_cache`` logs (sections 5-6)."""

    cache_size_bytes: int
    block_size: int
    n_blocks: int
    slot_size: int
    index_slot_size: int
    scale_slot_size: int
    linear_slot_size: int
    n_layers: int
    num_full_attention_layers: int
    num_linear_attention_layers: int
    num_indexer_layers: int
    num_linear_state_blocks: int
    linear_cache_bytes: int
    linear_conv_state_len: int = 0
    linear_ssm_checkpoint_stride: int = 1

    @property
    def full_bytes_per_block(self) -> int:
        """Upstream ``standard_full_cache_block_size_in_bytes``."""
        return self.block_size * (
            max(self.num_full_attention_layers, 1) * (self.slot_size + self.scale_slot_size)
            + self.num_indexer_layers * self.index_slot_size
        )

    @property
    def full_slot_size(self) -> int:
        """slot + index slot + scale slot: the per-token shape a draft's KV takes (section 6)."""
        return self.slot_size + self.index_slot_size + self.scale_slot_size


def split_block_count(model, cap: Capacity, s: int, available_bytes: int, additional_bytes_per_block: int = 0,
                      owner_rule: str = SPEC_OWNER_RULE) -> int:
    """Section 6 (upstream ``layerwise_split_block_count``): min over split ranks that own a
    full layer of available // (owned + scratch + additional). 0 when no rank owns a layer."""
    if cap.n_layers == model.num_hidden_layers:  # (the model's full layers, found once per model: a shared tuple)
        full = expected_full_layers(model)
    elif cap.n_layers < model.num_hidden_layers:
        full = [layer for layer in expected_full_layers(model) if layer < cap.n_layers]
    else:
        full = [layer for layer in range(cap.n_layers) if is_full_attention_layer(model, layer)]
    has_index = cap.index_slot_size > 0
    layer_bytes = cap.block_size * (cap.slot_size + cap.scale_slot_size + (cap.index_slot_size if has_index else 0))
    scratch = layer_bytes
    best = None
    for count in _owned_counts(tuple(full), s, owner_rule):
        owned = count * layer_bytes
        if owned == 0:
            continue
        n = available_bytes // (owned + scratch + additional_bytes_per_block)
        best = n if best is None else min(best, n)
    return 0 if best is None else best


@lru_cache(maxsize=4096)
def _owned_counts(full: tuple, s: int, owner_rule: str) -> tuple:
    """How many of ``full`` each split rank owns under ``owner_rule``, once per distinct layers, s and rule (every
    split estimate asks; counted in one pass over the layers)."""
    owner = owner_of_layers(full, s, owner_rule)
    counts = [0] * s
    for layer in full:
        counts[owner[layer]] += 1
    return tuple(counts)


def _full_layer_count(model, n_layers: int) -> int:
    """How many of an engine's first ``n_layers`` layers are full attention (a draft may have more MTP layers than
    hidden layers: those past the model's are asked one by one)."""
    if n_layers <= model.num_hidden_layers:
        full = expected_full_layers(model)  # (rising: the count below n_layers found by bisection, not a walk)
        return len(full) if n_layers == model.num_hidden_layers else bisect_left(full, n_layers)
    return sum(1 for layer in range(n_layers) if is_full_attention_layer(model, layer))


def _slot_capacity(model, cache, *, attn_tp: int, is_draft: bool = False) -> Capacity:
    """``estimate_capacity``'s fields that read no budget (block size, slot sizes, layer counts), the budget's
    (its size, blocks, the linear state) 0: what the draft cost D reads (``expected_draft_cost_per_block``),
    without an estimate's linear-state reservation and block count."""
    n_layers = draft_num_layers(model) if is_draft else model.num_hidden_layers
    num_full = _full_layer_count(model, n_layers)
    index = index_slot_bytes(model, cache)
    return _capacity(dict(
        cache_size_bytes=0, block_size=cache.block_size, n_blocks=0, slot_size=kv_slot_bytes(model, cache, attn_tp),
        index_slot_size=index, scale_slot_size=scale_slot_bytes(model, cache, attn_tp), linear_slot_size=0,
        n_layers=n_layers, num_full_attention_layers=num_full, num_linear_attention_layers=n_layers - num_full,
        num_indexer_layers=num_full if index > 0 else 0, num_linear_state_blocks=0, linear_cache_bytes=0,
        linear_conv_state_len=0, linear_ssm_checkpoint_stride=1))


@_memoized
def estimate_capacity(model, cache, *, attn_tp: int, budget_bytes: int, split: int = 1,
                      owner_rule: str = SPEC_OWNER_RULE, is_draft: bool = False) -> Capacity:
    """Sections 5-6 for one engine on its own (upstream ``estimate_kv_cache_capacity``):
    slots, linear-state reservation, then the uniform or split block count."""
    n_layers = draft_num_layers(model) if is_draft else model.num_hidden_layers
    num_full = _full_layer_count(model, n_layers)
    num_linear = n_layers - num_full
    slot = kv_slot_bytes(model, cache, attn_tp)
    scale = scale_slot_bytes(model, cache, attn_tp)
    index = index_slot_bytes(model, cache)
    ls = expected_linear_state_bytes_per_slot(model, cache, attn_tp, is_draft=is_draft)
    n_spec = expected_num_speculative_tokens(model, cache, is_draft=is_draft)
    values = dict(
        cache_size_bytes=budget_bytes, block_size=cache.block_size, n_blocks=0, slot_size=slot,
        index_slot_size=index, scale_slot_size=scale, linear_slot_size=ls, n_layers=n_layers,
        num_full_attention_layers=num_full, num_linear_attention_layers=num_linear,
        num_indexer_layers=num_full if index > 0 else 0, num_linear_state_blocks=0, linear_cache_bytes=0,
        linear_conv_state_len=_opt(model, "linear_conv_kernel_dim", 0) - 1 + n_spec,
        linear_ssm_checkpoint_stride=n_spec + 1,
    )
    cap = _capacity(values)
    slots = linear_state_slots(
        budget_bytes, num_linear, ls, cap.full_bytes_per_block,
        max_seqs=max_seqs_per_batch(cache), max_linear_slots=max_linear_state_cache_slots(cache),
        prefix_cache=enable_prefix_cache(cache),
    )
    linear = num_linear * slots * ls
    available = budget_bytes - linear
    if split > 1:
        n_blocks = split_block_count(model, cap, split, available, 0, owner_rule)
    else:
        n_blocks = available // cap.full_bytes_per_block
    values.update(n_blocks=n_blocks, num_linear_state_blocks=slots, linear_cache_bytes=linear)
    return _capacity(values)


_CAPACITY_FIELDS = frozenset(f.name for f in fields(Capacity))


def _capacity(values: dict) -> Capacity:
    """``Capacity(**values)`` (every field named) without the frozen dataclass's ``__init__`` (one
    ``object.__setattr__`` per field): an estimate makes two per engine and configuration."""
    if values.keys() != _CAPACITY_FIELDS:
        raise TypeError(f"Capacity needs the fields {sorted(_CAPACITY_FIELDS)}; given {sorted(values)}")
    new = object.__new__(Capacity)
    new.__dict__.update(values)
    return new


def _replace(cap: Capacity, **changes) -> Capacity:
    """``dataclasses.replace`` of a Capacity (plain fields, no ``__post_init__``) at a tenth of its cost: the
    estimate makes two or three variants per engine and configuration. A name that is not a field is an error."""
    unknown = changes.keys() - _CAPACITY_FIELDS
    if unknown:
        raise TypeError(f"Capacity has no field(s) {sorted(unknown)}; its fields: {sorted(_CAPACITY_FIELDS)}")
    new = object.__new__(Capacity)
    new.__dict__.update(cap.__dict__)
    new.__dict__.update(changes)
    return new


def speculative_block_count(target: Capacity, draft: Capacity, *, share_device: bool = True,
                            draft_body_tp1: bool = False, split: int = 1, target_model=None,
                            owner_rule: str = SPEC_OWNER_RULE) -> int:
    """Section 6 (upstream ``SpeculativeEngine::calculate_kv_cache`` /
    ``estimate_speculative_kv_cache_blocks``): C = min of the two budgets, only the target
    reserves linear state, the draft costs D = block_size * draft layers * target full slot
    (its own shape only with ``draft_body_tp1``); uniform (C - linear) // (F + D), split: D
    is the split count's additional bytes. Different devices: the smaller own count."""
    if not share_device:
        return min(target.n_blocks, draft.n_blocks)
    bs = target.block_size
    budget = min(target.cache_size_bytes, draft.cache_size_bytes)
    available = budget - target.linear_cache_bytes
    target_full = bs * (
        max(target.num_full_attention_layers, 1) * (target.slot_size + target.scale_slot_size)
        + target.num_indexer_layers * target.index_slot_size
    )
    draft_cost = expected_draft_cost_per_block(target, draft, draft_body_tp1=draft_body_tp1)
    if split > 1:
        if target_model is None:
            raise TypeError("speculative_block_count: a split target needs target_model for its layers")
        return split_block_count(target_model, target, split, available, draft_cost, owner_rule)
    return available // (target_full + draft_cost)


def expected_draft_cost_per_block(target: Capacity, draft: Capacity, *, draft_body_tp1: bool = False) -> int:
    """Section 6: D, the draft's KV bytes per block: its layers at the target's full slot,
    or at its own shape when the draft body runs at TP 1."""
    bs = target.block_size
    if draft_body_tp1:
        return bs * (draft.n_layers * (draft.slot_size + draft.scale_slot_size)
                     + draft.num_indexer_layers * draft.index_slot_size)
    return bs * draft.n_layers * target.full_slot_size


# ---- run level: the target and draft engines of one configuration ---------------------------


def _target_capacity_alone(run, budget_bytes: int, owner_rule: str, s: int) -> Capacity:
    return estimate_capacity(run.model, run.cache, attn_tp=attn_tp_size(run), budget_bytes=budget_bytes,
                             split=s, owner_rule=owner_rule)


def _draft_capacity_alone(run, budget_bytes: int) -> Capacity:
    tp = 1 if draft_body_tp1(run) else attn_tp_size(run)
    return estimate_capacity(run.draft, run.cache, attn_tp=tp, budget_bytes=budget_bytes, is_draft=True)


@per_run_any_reserve
def expected_capacities(run, budget_bytes: Optional[int] = None, *, owner_rule: str = SPEC_OWNER_RULE,
                        s: Optional[int] = None, share_device: bool = True) -> tuple:
    """Sections 5-6: (target Capacity, draft Capacity or None) with the common n_blocks the
    engines allocate (upstream ``SpeculativeEngine::allocate_kv_cache``)."""
    budget = run_budget_bytes(run) if budget_bytes is None else budget_bytes
    s = split_size(run) if s is None else s
    target = _target_capacity_alone(run, budget, owner_rule, s)
    if getattr(run, "draft", None) is None:
        return target, None
    draft = _draft_capacity_alone(run, budget)
    n = speculative_block_count(target, draft, share_device=share_device, draft_body_tp1=draft_body_tp1(run),
                                split=s, target_model=run.model, owner_rule=owner_rule)
    common = min(target.cache_size_bytes, draft.cache_size_bytes)
    return (_replace(target, n_blocks=n, cache_size_bytes=common), _replace(draft, n_blocks=n, cache_size_bytes=common))


def expected_capacity(run, budget_bytes: Optional[int] = None, *, owner_rule: str = SPEC_OWNER_RULE) -> Capacity:
    """Sections 5-6: the target engine's Capacity (the figures of its ``kv cache capacity`` line)."""
    return expected_capacities(run, budget_bytes, owner_rule=owner_rule)[0]


def expected_draft_capacity(run, budget_bytes: Optional[int] = None, *, owner_rule: str = SPEC_OWNER_RULE) -> Optional[Capacity]:
    """Section 6: the draft engine's Capacity (its own slot sizes, the common n_blocks), or None."""
    return expected_capacities(run, budget_bytes, owner_rule=owner_rule)[1]


@per_run_any_reserve
def expected_draft_bytes_per_block(run) -> int:
    """Section 6: D for the run's draft (0 without one)."""
    if getattr(run, "draft", None) is None:
        return 0
    return _draft_cost(run.model, run.draft, slot_shape(run.cache), attn_tp_size(run), draft_body_tp1(run))


@_memoized
def _draft_cost(model, draft, shape: SlotShape, attn_tp: int, body_tp1: bool) -> int:
    """D of a target and draft model: the engines' slot sizes and layer counts, which read no budget and of the cache
    only its slot shape (``_slot_capacity``: an estimate's fields without its budget's, about a third of its cost).
    Once per distinct models, shape and TP: the explorer aims a budget with D, then the checks ask D of the aimed
    configuration."""
    target = _slot_capacity(model, shape, attn_tp=attn_tp)
    mtp = _slot_capacity(draft, shape, attn_tp=1 if body_tp1 else attn_tp, is_draft=True)
    return expected_draft_cost_per_block(target, mtp, draft_body_tp1=body_tp1)


def expected_block_counts(run, budget_bytes: int, additional_bytes_per_block: Optional[int] = None,
                          *, owner_rule: str = SPEC_OWNER_RULE) -> tuple:
    """Section 6: (split n_blocks, uniform n_blocks) at one per-rank budget C.

    ``additional_bytes_per_block`` None: the run's draft cost D (section 6; 0 without a
    draft); a number overrides it. With split inactive both are the uniform count. A
    value < 1 (0 when no split rank owns a layer) means the implementation must refuse."""
    return _block_counts(run, budget_bytes, additional_bytes_per_block, owner_rule)


@per_run_any_reserve  # (every argument given: one answer however the owner rule is passed, or left to its default)
def _block_counts(run, budget_bytes: int, additional_bytes_per_block: Optional[int], owner_rule: str) -> tuple:
    """``expected_block_counts`` with every argument given."""
    model, cache = run.model, run.cache
    tp = attn_tp_size(run)
    additional = expected_draft_bytes_per_block(run) if additional_bytes_per_block is None else additional_bytes_per_block
    target = _target_capacity_alone(run, budget_bytes, owner_rule, 1)
    available = budget_bytes - target.linear_cache_bytes
    uniform = available // (expected_block_cost_bytes(model, cache, tp) + additional)
    s = split_size(run)
    if s == 1:
        return uniform, uniform
    return split_block_count(model, target, s, available, additional, owner_rule), uniform


def expected_rank_bytes(run, n_blocks: int, owned_layers, *, include_linear_state: bool = True,
                        budget_bytes: Optional[int] = None) -> int:
    """Sections 6-7: target bytes one rank allocates: its owned full layers, one scratch
    layer whenever the split is active (even for a rank that owns every full layer), and
    (by default) its linear-layer state at the run's budget (or ``budget_bytes``)."""
    if budget_bytes is None and include_linear_state:  # (the budget sizes the linear state only)
        budget_bytes = run_budget_bytes(run)
    return _rank_bytes(run, n_blocks, owned_layers, include_linear_state, budget_bytes)


@per_run_any_reserve  # (every argument given: the report's ask and the card refusal's, the budget left out, meet)
def _rank_bytes(run, n_blocks: int, owned_layers, include_linear_state: bool, budget: Optional[int]) -> int:
    """``expected_rank_bytes`` with every argument given."""
    model, cache = run.model, run.cache
    tp = attn_tp_size(run)
    per_layer = expected_layer_bytes_per_block(model, cache, tp)
    per_block = sum(map(per_layer.__getitem__, set(owned_layers)))  # (the same sum, without a generator's frame a layer)
    if split_size(run) > 1:
        per_block += expected_scratch_bytes_per_block(model, cache, tp)
    total = n_blocks * per_block
    if include_linear_state:
        total += expected_linear_state_bytes(model, cache, tp, budget)
    return total


def expected_draft_rank_bytes(run, n_blocks: int) -> int:
    """Sections 6-7: the draft engine's bytes on one rank: n_blocks * D (never split)."""
    return n_blocks * expected_draft_bytes_per_block(run)
