"""The reference implementation: master, engine and worker steps of layerwise split KV.

One overridable method per rule, and ``plan``/``engine_message``/``init_worker``
call them through ``self``, so a variant (``xllm_upstream``, or a deliberately
broken mutant) overrides exactly one step. Planning never imports torch; only
``init_worker`` does, through ``allocation``.
"""

from __future__ import annotations

import itertools
from typing import Iterable, Optional, Sequence

from contract.errors import ConfigError, PlanError
from contract.frozen import made
from contract.interface import ROLES, WorkerKVCache
from contract.plan_types import CacheCapacity, DraftPlan, KVPlan, RankPlan
from contract.specs import CacheSpec, LayerwiseFlags, ModelSpec, ParallelSpec, RunSpec
from implementations.reference import estimation, kv_bytes, layers, layout, topology, validation

Placement = tuple[tuple[int, int], ...]
"""(node, card) of each global rank."""


def _rank_plan(**fields) -> RankPlan:
    """``RankPlan(**fields)`` (``contract.frozen.made``: per rank of every plan and draft message)."""
    return made(RankPlan, fields)


def _kv_plan(**fields) -> KVPlan:
    """``KVPlan(**fields)`` (``contract.frozen.made``: its forty fields set one by one cost about as much as
    building them)."""
    return made(KVPlan, fields)


class ReferenceImplementation:
    """Layerwise split KV cache sharding as FEATURE.md sections 2 to 8 specify."""

    name = "reference"
    supported_model_types: tuple[str, ...] = validation.SUPPORTED_MODEL_TYPES
    """Model types an active split accepts (FEATURE section 3: upstream's two plus the adaptation's)."""

    # ---- rules (one method each) ---------------------------------------------------

    def is_active(self, flags: LayerwiseFlags) -> bool:
        """Active iff enabled and s > 1 (the enable flag is the adaptation's)."""
        return flags.enable and flags.split_size > 1

    def validate(self, run: RunSpec) -> None:
        """Startup rules (FEATURE section 3) in upstream's order: the master's, then the worker-side ones;
        raises ``ConfigError`` for the first rule broken."""
        validation.check_model(run.model)
        validation.check_cache(run.cache)
        validation.check_hardware(run.hardware)
        validation.check_split_size_positive(run.layerwise)
        validation.check_parallel(run.parallel)
        active = self.is_active(run.layerwise)
        if active:  # upstream's master: the model type before attention tp % s
            self.check_supported_model(run)
        self.check_split_size(run)
        if active:
            self.check_active_master(run)
        # the worker-side rules, after the master's
        validation.check_quantized_support(run)
        validation.check_linear_with_indexer(run.model)
        if run.draft is not None:
            validation.check_linear_with_indexer(run.draft, prefix="draft")
        if active:
            self.check_active_worker(run)
        if run.draft is not None:
            validation.check_draft(run.draft)

    def check_split_size(self, run: RunSpec) -> None:
        """s <= attention tp and divides it (attention tp = world / (dp * cp), not the world size)."""
        validation.check_split_size(run.layerwise, self.attn_tp_size(run.parallel))

    def check_active_master(self, run: RunSpec) -> None:
        """Active split, the master's rules: no host cache, cp or KV split."""
        validation.check_active_master(run)

    def check_active_worker(self, run: RunSpec) -> None:
        """Active split, the worker-side rules: no sleep mode or xtensor."""
        validation.check_active_worker(run)

    def check_supported_model(self, run: RunSpec) -> None:
        """Active split: ``model_type`` in ``supported_model_types``."""
        validation.check_supported_model(run.model, self.supported_model_types, run.layerwise.split_size)

    def attn_tp_size(self, parallel: ParallelSpec) -> int:
        """Attention TP size = world_size / (dp_size * cp_size) (the one place it is computed; a subclass or a
        mutant changes it here); ``validation.check_parallel`` first."""
        return parallel.world_size // (parallel.dp_size * parallel.cp_size)

    def full_layers(self, model: ModelSpec) -> tuple[int, ...]:
        return layers.full_layers(model)

    def full_layer_spec(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> kv_bytes.FullSpec:
        """One full-attention layer of ``model`` on one rank, with the index slot when it has an indexer."""
        return kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=layers.has_indexer(model))

    def layer_bytes_per_block(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> tuple[int, ...]:
        """Bytes per block of each layer id; 0 for linear-attention layers."""
        # ``plan`` asks, then ``full_bytes_per_block`` again: kept for the last arguments (held) of this instance
        kept = self.__dict__.get("_layer_bytes_of")
        if kept is not None and kept[0] is model and kept[1] is cache and kept[2] is attn_tp_size:
            return kept[3]
        full = self.full_layers(model)
        indexed = set(layers.indexer_layers(model))
        plain = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=False).block_bytes
        # (the index slot's spec only for a model with indexed layers: a model without reads no such entry)
        with_index = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=True).block_bytes if indexed else 0
        per_full = {l: with_index if l in indexed else plain for l in full}
        # each layer id's entry, 0 where none (a linear layer): looked up in C, not a generator per layer
        out = tuple(map(per_full.get, range(model.num_hidden_layers), itertools.repeat(0)))
        self.__dict__["_layer_bytes_of"] = (model, cache, attn_tp_size, out)
        return out

    def full_bytes_per_block(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> int:
        """Uniform F: the sum over full layers of ``layer_bytes_per_block`` (upstream
        ``standard_full_cache_block_size_in_bytes``, which counts max(full layers, 1))."""
        full = self.full_layers(model)
        if full:
            layer_bytes = self.layer_bytes_per_block(model, cache, attn_tp_size)
            return estimation.owned_bytes_per_block(layer_bytes, full)
        spec = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=False)
        return estimation.full_bytes_per_block(
            block_size=cache.block_size, num_full_layers=0, slot_bytes=spec.slot_bytes,
            scale_slot_bytes=spec.scale_slot_bytes, num_indexer_layers=0, index_slot_bytes=0)

    def scratch_bytes_per_block(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> int:
        """One full layer, with the index slot if any layer has an indexer."""
        spec = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=bool(layers.indexer_layers(model)))
        return spec.block_bytes

    def speculative_state_tokens(self, model: ModelSpec, cache: CacheSpec) -> int:
        """n_spec of the target's linear state: num_speculative_tokens for a Qwen3.5 target, else 0."""
        return kv_bytes.speculative_state_tokens(model, cache, is_draft=False)

    def linear_slot_bytes(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> int:
        """ls: one sequence slot of one linear layer (conv + recurrent). As upstream's ``linear_slot_size``, it
        depends on the linear heads alone (0 without linear value heads), not on how many layers are linear:
        with none, the reservation is 0 bytes all the same (FEATURE 5)."""
        if model.linear_num_value_heads <= 0:
            return 0
        n_spec = self.speculative_state_tokens(model, cache)
        return kv_bytes.linear_spec(model, cache, attn_tp_size, speculative_tokens=n_spec).seq_bytes

    def linear_state_slots(self, cache: CacheSpec, *, budget_bytes: int, num_linear_layers: int,
                           linear_slot_bytes: int, full_bytes_per_block: int) -> int:
        """Sequence slots per linear layer (upstream ``calculate_linear_state_blocks``)."""
        return estimation.linear_state_slots(
            budget_bytes=budget_bytes, num_linear_layers=num_linear_layers, linear_slot_bytes=linear_slot_bytes,
            full_bytes_per_block=full_bytes_per_block, max_seqs_per_batch=cache.max_seqs_per_batch,
            max_linear_state_cache_slots=cache.max_linear_state_cache_slots,
            enable_prefix_cache=cache.enable_prefix_cache)

    def place_ranks(self, run: RunSpec) -> Placement:
        return topology.place_ranks(run)

    def split_groups(self, run: RunSpec, placement: Optional[Placement] = None) -> tuple[tuple[int, ...], ...]:
        """Split groups of every attention TP group, in TP-group order (one-rank groups when inactive)."""
        if placement is None:
            placement = self.place_ranks(run)
        s = run.layerwise.split_size if self.is_active(run.layerwise) else 1
        tp = self.attn_tp_size(run.parallel)
        groups: list[tuple[int, ...]] = []
        for tp_group in layout.tp_groups(run.parallel, tp):
            groups.extend(topology.form_split_groups(tp_group, s, placement, run.hardware.topology))
        return tuple(groups)

    def assign_owners(self, full_layers: tuple[int, ...], split_size: int) -> tuple[tuple[int, int], ...]:
        """Round-robin over the full-attention layers: the k-th is owned by split rank k % s."""
        return layout.round_robin_owners(full_layers, split_size)

    def worker_split_rank(self, message: KVPlan, rank: int) -> int:
        """The worker's split rank: its position in its split group, as the master published it."""
        split_rank = next((r.split_rank for r in message.ranks if r.rank == rank), None)
        if split_rank is None:
            raise PlanError("rank", rank, f"a rank of the plan (0..{message.world_size - 1})")
        return split_rank

    def block_count(self, available_bytes: int, costs_per_block: Iterable[int]) -> int:
        """Min over ranks of available // cost."""
        return estimation.block_count(available_bytes, costs_per_block)

    def card_bytes(self, rank_plan: RankPlan) -> int:
        """What one rank plans on its card: its target KV and its draft engine's KV (FEATURE 4 and 6)."""
        return rank_plan.estimated_bytes + rank_plan.draft_estimated_bytes

    def check_cards(self, split_groups: tuple[tuple[int, ...], ...], placement: Placement,
                    per_rank_bytes: dict[int, int], run: RunSpec) -> None:
        """No card holds two ranks of a split group, nor more than its HBM."""
        hw = run.hardware
        topology.check_cards(split_groups, placement, per_rank_bytes, hw.hbm_bytes_per_card,
                             hw.reserved_bytes_per_card)

    # ---- speculative decoding ---------------------------------------------------------

    def draft_attn_tp_size(self, run: RunSpec, attn_tp_size: int) -> int:
        """The draft body's TP: 1 with ``draft.body_tp1``, else the target's."""
        return 1 if run.draft is not None and run.draft.body_tp1 else attn_tp_size

    def target_capacity(self, run: RunSpec, attn_tp_size: int, *, linear_cache_bytes: int) -> CacheCapacity:
        """The target engine's figures that the speculative block count reads."""
        model, cache = run.model, run.cache
        spec = self.full_layer_spec(model, cache, attn_tp_size)
        return CacheCapacity(
            cache_size_bytes=run.kv_budget_bytes, block_size=cache.block_size, slot_size=spec.slot_bytes,
            index_slot_size=spec.index_slot_bytes, scale_slot_size=spec.scale_slot_bytes,
            num_full_attention_layers=len(self.full_layers(model)),
            num_indexer_layers=len(layers.indexer_layers(model)), n_layers=model.num_hidden_layers,
            linear_cache_bytes=linear_cache_bytes)

    def draft_capacity(self, run: RunSpec, attn_tp_size: int) -> CacheCapacity:
        """The draft engine's figures (its own shape, at the draft body's TP)."""
        draft, cache = run.draft, run.cache
        n_layers = validation.draft_num_layers(draft)
        spec = self.full_layer_spec(draft, cache, self.draft_attn_tp_size(run, attn_tp_size))
        return CacheCapacity(
            cache_size_bytes=run.kv_budget_bytes, block_size=cache.block_size, slot_size=spec.slot_bytes,
            index_slot_size=spec.index_slot_bytes, scale_slot_size=spec.scale_slot_bytes,
            num_full_attention_layers=n_layers,
            num_indexer_layers=n_layers if layers.has_indexer(draft) else 0, n_layers=n_layers)

    def draft_layer_bytes_per_block(self, target: CacheCapacity, draft: CacheCapacity, *,
                                    draft_body_tp1: bool) -> tuple[int, ...]:
        """Bytes per block of each draft layer (upstream ``SpeculativeEngine::calculate_kv_cache``).

        The draft's KV takes the target's cache shape (slot + index + scale of the
        target), and its own slot may not exceed the target's; only a draft body at
        TP 1 costs its own shape.
        """
        target_slot = target.slot_size + target.index_slot_size + target.scale_slot_size
        draft_slot = draft.slot_size + draft.index_slot_size + draft.scale_slot_size
        if draft_body_tp1:
            per_layer = draft.slot_size + draft.scale_slot_size
            return tuple(target.block_size * (per_layer + (draft.index_slot_size if l < draft.num_indexer_layers
                                                           else 0))
                         for l in range(draft.n_layers))
        if draft_slot > target_slot:
            raise ConfigError(
                "draft", f"slot {draft_slot} B",
                f"a draft slot <= the target's {target_slot} B, or draft.body_tp1=true",
                f"draft slot {draft.slot_size} + index {draft.index_slot_size} + scale {draft.scale_slot_size}"
                f" > target slot {target.slot_size} + index {target.index_slot_size} + scale "
                f"{target.scale_slot_size}: the draft's KV takes the target's cache shape",
            )
        return (target.block_size * target_slot,) * draft.n_layers

    def speculative_n_blocks(self, target: CacheCapacity, draft: CacheCapacity, *, share_device: bool = True,
                             draft_body_tp1: bool = False) -> int:
        """Upstream ``estimate_speculative_kv_cache_blocks`` on the engines' figures (no split)."""
        if not share_device:
            return min(target.n_blocks, draft.n_blocks)
        if target.block_size != draft.block_size:
            raise ConfigError("cache.block_size", draft.block_size,
                              f"the target's block size {target.block_size}")
        budget = min(target.cache_size_bytes, draft.cache_size_bytes)
        full = estimation.full_bytes_per_block(
            block_size=target.block_size, num_full_layers=target.num_full_attention_layers,
            slot_bytes=target.slot_size, scale_slot_bytes=target.scale_slot_size,
            num_indexer_layers=target.num_indexer_layers, index_slot_bytes=target.index_slot_size)
        additional = sum(self.draft_layer_bytes_per_block(target, draft, draft_body_tp1=draft_body_tp1))
        return self.block_count(budget - target.linear_cache_bytes, [full + additional])

    # ---- master ---------------------------------------------------------------------

    def draft_plan(self, run: RunSpec, attn_tp_size: int, target: CacheCapacity) -> Optional[DraftPlan]:
        """The draft's KV (never split), or None when not speculative."""
        if run.draft is None:
            return None
        draft = self.draft_capacity(run, attn_tp_size)
        return DraftPlan(
            model=run.draft.name,
            num_layers=draft.n_layers,
            full_layers=tuple(range(draft.n_layers)),
            layer_bytes_per_block=self.draft_layer_bytes_per_block(target, draft, draft_body_tp1=run.draft.body_tp1),
            body_tp1=run.draft.body_tp1,
        )

    def plan(self, run: RunSpec) -> KVPlan:
        self.validate(run)
        model, cache = run.model, run.cache
        tp = self.attn_tp_size(run.parallel)
        active = self.is_active(run.layerwise)
        s = run.layerwise.split_size if active else 1

        full = self.full_layers(model)
        n_linear = model.num_hidden_layers - len(full)
        layer_bytes = self.layer_bytes_per_block(model, cache, tp)
        spec = self.full_layer_spec(model, cache, tp)
        full_bytes = self.full_bytes_per_block(model, cache, tp)
        scratch = self.scratch_bytes_per_block(model, cache, tp) if active else 0
        budget = run.kv_budget_bytes
        linear_slot = self.linear_slot_bytes(model, cache, tp)
        slots = self.linear_state_slots(cache, budget_bytes=budget, num_linear_layers=n_linear,
                                        linear_slot_bytes=linear_slot, full_bytes_per_block=full_bytes)
        linear = n_linear * slots * linear_slot
        estimation.check_linear_reservation(budget_bytes=budget, linear_state_bytes=linear,
                                            linear_bytes_per_slot=n_linear * linear_slot,
                                            max_seqs_per_batch=cache.max_seqs_per_batch)
        available = budget - linear
        draft = self.draft_plan(run, tp, self.target_capacity(run, tp, linear_cache_bytes=linear))
        additional = draft.bytes_per_block if draft is not None else 0

        uniform_cost = estimation.uniform_bytes_per_block([full_bytes], additional)
        uniform_n_blocks = self.block_count(available, [uniform_cost])
        notes: list[str] = []
        if active:
            layer_owner = self.assign_owners(full, s)
            costs = estimation.owner_costs(layer_bytes, layer_owner, scratch_bytes_per_block=scratch,
                                           additional_bytes_per_block=additional)
            n_blocks = self.block_count(available, costs.values())
            needed = max(costs.values())
            idle = [r for r in range(s) if r not in costs]
            if idle:
                notes.append(f"split ranks {idle} own no full-attention layer ({len(full)} full layers, s={s})")
            if uniform_n_blocks < 1 <= n_blocks:
                notes.append(f"{estimation.GAIN_UNDEFINED_NOTE} at this budget ({n_blocks} split blocks): the capacity gain is "
                             f"undefined (null)")
        else:
            layer_owner, n_blocks, needed = (), uniform_n_blocks, uniform_cost
        estimation.require_blocks(n_blocks, budget_bytes=budget, linear_state_bytes=linear,
                                  bytes_per_block=needed)

        placement = self.place_ranks(run)
        groups = self.split_groups(run, placement)
        ranks = self._rank_plans(run, tp, placement, groups, full, layer_owner, layer_bytes,
                                 split_size=s, n_blocks=n_blocks, scratch=scratch, linear=linear,
                                 draft_bytes_per_block=additional)
        per_rank = {r.rank: r.estimated_bytes for r in ranks}
        uniform_peak = estimation.rank_bytes(n_blocks, estimation.owned_bytes_per_block(layer_bytes, full), 0,
                                             linear)
        peak = estimation.peak_bytes(per_rank)
        if peak > uniform_peak:
            notes.append(f"{estimation.RAISES_PEAK_NOTE}: split peak {peak} B > uniform peak {uniform_peak} B at the "
                         f"same n_blocks (the busiest owner's layers plus the scratch outweigh all full layers)")
        self.check_cards(groups, placement, {r.rank: self.card_bytes(r) for r in ranks}, run)
        return _kv_plan(
            implementation=self.name,
            model=model.name,
            world_size=run.parallel.world_size,
            dp_size=run.parallel.dp_size,
            cp_size=run.parallel.cp_size,
            attn_tp_size=tp,
            split_size=s,
            active=active,
            block_size=cache.block_size,
            kv_layout=run.hardware.kv_layout,
            num_layers=model.num_hidden_layers,
            full_layers=full,
            layer_bytes_per_block=layer_bytes,
            scratch_bytes_per_block=scratch,
            additional_bytes_per_block=additional,
            linear_state_bytes=linear,
            budget_bytes=budget,
            available_bytes=available,
            split_groups=groups,
            layer_owner=layer_owner,
            n_blocks=n_blocks,
            uniform_n_blocks=uniform_n_blocks,
            peak_bytes=peak,
            mean_bytes=estimation.mean_bytes(per_rank),
            uniform_peak_bytes=uniform_peak,
            savings_bytes=uniform_peak - peak,
            capacity_gain=estimation.capacity_gain(n_blocks, uniform_n_blocks) if active else 1.0,
            ranks=ranks,
            draft=draft,
            notes=tuple(notes),
            slot_size=spec.slot_bytes,
            index_slot_size=spec.index_slot_bytes,
            scale_slot_size=spec.scale_slot_bytes,
            num_indexer_layers=len(layers.indexer_layers(model)),
            linear_slot_size=linear_slot,
            num_linear_state_blocks=slots,
        )

    def _rank_plans(self, run: RunSpec, tp: int, placement: Placement,
                    groups: tuple[tuple[int, ...], ...], full: tuple[int, ...],
                    layer_owner: tuple[tuple[int, int], ...], layer_bytes: Sequence[int], *,
                    split_size: int, n_blocks: int, scratch: int, linear: int,
                    draft_bytes_per_block: int) -> tuple[RankPlan, ...]:
        positions = layout.split_positions(groups)
        owned_by = layout.owned_by_split_rank(layer_owner, split_size) if layer_owner else None
        target_bytes: dict[int, int] = {}  # id of an owned-layers tuple -> the rank's target KV (once per split rank)
        out = []
        for rank in range(run.parallel.world_size):
            if rank not in positions:
                raise PlanError("parallel.world_size", run.parallel.world_size,
                                "every rank in exactly one split group", f"rank {rank} is in none")
            group, split_rank = positions[rank]
            owned = owned_by.get(split_rank, ()) if owned_by is not None else full
            dp_rank, cp_rank, tp_rank = layout.rank_coords(rank, run.parallel, tp)
            node, card = placement[rank]
            if id(owned) not in target_bytes:  # (the ranks at one split position share one tuple, held above)
                target_bytes[id(owned)] = estimation.rank_bytes(
                    n_blocks, estimation.owned_bytes_per_block(layer_bytes, owned), scratch, linear)
            out.append(_rank_plan(
                rank=rank, node=node, card=card, dp_rank=dp_rank, cp_rank=cp_rank, tp_rank=tp_rank,
                split_group=group, split_rank=split_rank, owned_full_layers=owned,
                estimated_bytes=target_bytes[id(owned)], draft_estimated_bytes=n_blocks * draft_bytes_per_block,
            ))
        return tuple(out)

    # ---- engine ---------------------------------------------------------------------

    def engine_message(self, plan: KVPlan, run: RunSpec, role: str) -> KVPlan:
        """``target``: the plan itself; ``draft``: the draft's plan with the split reset to 1."""
        if role not in ROLES:
            raise ConfigError("role", role, f"one of {', '.join(ROLES)}")
        if role == "target":
            return plan
        if run.draft is None or plan.draft is None:
            raise ConfigError("draft", None, "a draft model (speculative decoding) for role 'draft'")
        # The draft's message of one plan is made once (the master hashes it, the leader hands it to every
        # worker): asked again for the same plan and run objects (held here), it is the same message, whose
        # digest is then hashed once, not once per ask.
        made = self.__dict__.get("_draft_message_of")
        if made is not None and made[0] is plan and made[1] is run:
            return made[2]
        message = self.draft_message(plan, run)
        self.__dict__["_draft_message_of"] = (plan, run, message)
        return message

    def draft_message(self, plan: KVPlan, run: RunSpec) -> KVPlan:
        """The draft engine's plan: never split, the target's n_blocks, every draft layer owned."""
        draft = plan.draft
        draft_bytes = plan.n_blocks * draft.bytes_per_block
        draft_tp = self.draft_attn_tp_size(run, plan.attn_tp_size)
        shape = self.full_layer_spec(self.draft_shape_model(run), run.cache, draft_tp)
        ranks = tuple(
            _rank_plan(rank=r.rank, node=r.node, card=r.card, dp_rank=r.dp_rank, cp_rank=r.cp_rank,
                       tp_rank=r.tp_rank, split_group=i, split_rank=0,
                       owned_full_layers=draft.full_layers, estimated_bytes=draft_bytes, draft_estimated_bytes=0)
            for i, r in enumerate(plan.ranks)
        )
        return _kv_plan(
            implementation=plan.implementation,
            model=draft.model,
            world_size=plan.world_size,
            dp_size=plan.dp_size,
            cp_size=plan.cp_size,
            attn_tp_size=draft_tp,
            split_size=1,
            active=False,
            block_size=plan.block_size,
            kv_layout=plan.kv_layout,
            num_layers=draft.num_layers,
            full_layers=draft.full_layers,
            layer_bytes_per_block=draft.layer_bytes_per_block,
            scratch_bytes_per_block=0,
            additional_bytes_per_block=0,
            linear_state_bytes=0,
            budget_bytes=plan.budget_bytes,
            available_bytes=plan.available_bytes,
            split_groups=tuple((r.rank,) for r in plan.ranks),
            layer_owner=(),
            n_blocks=plan.n_blocks,
            uniform_n_blocks=plan.n_blocks,
            peak_bytes=draft_bytes,
            mean_bytes=draft_bytes,
            uniform_peak_bytes=draft_bytes,
            savings_bytes=0,
            capacity_gain=1.0,
            ranks=ranks,
            notes=(f"draft engine of {plan.model}: split reset to 1",),
            slot_size=shape.slot_bytes,
            index_slot_size=shape.index_slot_bytes,
            scale_slot_size=shape.scale_slot_bytes,
            num_indexer_layers=draft.num_layers if shape.index_slot_bytes else 0,
            num_linear_state_blocks=0,
        )

    def draft_shape_model(self, run: RunSpec) -> ModelSpec:
        """Whose cache shape the draft's KV takes: the target's, unless the draft body runs at TP 1."""
        return run.draft if run.draft.body_tp1 else run.model

    # ---- worker ---------------------------------------------------------------------

    def check_message(self, message: KVPlan, expected_digest: str, rank: int) -> None:
        """The message is the layout the master published, and names this rank."""
        if message.digest != expected_digest:
            raise PlanError("plan digest", message.digest, f"the master's published digest {expected_digest}",
                            f"rank {rank} received a diverging layout")
        if not any(r.rank == rank for r in message.ranks):
            raise PlanError("rank", rank, f"a rank of the plan (0..{message.world_size - 1})")

    def ownership_mask(self, message: KVPlan, rank: int) -> tuple[bool, ...]:
        """Per layer id: True where this rank holds real storage (linear layers always)."""
        if not message.active:
            return (True,) * message.num_layers
        split_rank = self.worker_split_rank(message, rank)
        # the same for every worker of one split rank: worked out once per message (held here) and split rank
        kept = self.__dict__.get("_masks_of")
        if kept is None or kept[0] is not message:
            kept = self.__dict__["_masks_of"] = (message, {})
        mask = kept[1].get(split_rank)
        if mask is None:
            owners = dict(message.layer_owner)
            full = set(message.full_layers)
            mask = kept[1][split_rank] = tuple(l not in full or owners.get(l) == split_rank
                                               for l in range(message.num_layers))
        return mask

    def init_worker(self, message: KVPlan, run: RunSpec, *, rank: int, role: str, device: str,
                    expected_digest: str) -> WorkerKVCache:
        if role not in ROLES:
            raise ConfigError("role", role, f"one of {', '.join(ROLES)}")
        self.check_message(message, expected_digest, rank)
        mask = self.ownership_mask(message, rank)
        from implementations.reference import allocation  # torch only where tensors are made

        shape_model = run.model if role == "target" else self.draft_shape_model(run)
        return allocation.allocate_worker_cache(message, run, rank=rank, role=role, mask=mask, device=device,
                                                shape_model=shape_model)
