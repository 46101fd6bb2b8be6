"""The reference implementation: master, engine and worker steps of layerwise split KV.

One overridable method per rule, and ``plan``/``engine_message``/``init_worker``
call them through ``self``, so a variant (``xllm_upstream``, or a deliberately
broken mutant) overrides exactly one step. Planning never imports torch; only
``init_worker`` does, through ``allocation``.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from implementations.errors import ConfigError, PlanError
from implementations.interface import ROLES, WorkerKVCache
from implementations.plan_types import DraftPlan, KVPlan, RankPlan
from implementations.reference import estimation, kv_bytes, layers, layout, topology, validation
from implementations.specs import CacheSpec, LayerwiseFlags, ModelSpec, ParallelSpec, RunSpec

Placement = tuple[tuple[int, int], ...]
"""(node, card) of each global rank."""


class ReferenceImplementation:
    """Layerwise split KV cache sharding as FEATURE.md sections 2 to 8 specify."""

    name = "reference"

    # ---- rules (one method each) ---------------------------------------------------

    def is_active(self, flags: LayerwiseFlags) -> bool:
        """Active iff enabled and s > 1."""
        return flags.enable and flags.split_size > 1

    def validate(self, run: RunSpec) -> None:
        """Startup rules (FEATURE section 3); raises ``ConfigError``."""
        validation.check_model(run.model)
        validation.check_cache(run.cache)
        validation.check_hardware(run.hardware)
        validation.check_parallel(run.parallel)
        validation.check_split_size(run.layerwise, self.attn_tp_size(run.parallel))
        if self.is_active(run.layerwise):
            validation.check_active_split(run, self.full_layers(run.model))
        if run.draft is not None:
            validation.check_draft(run.draft)

    def attn_tp_size(self, parallel: ParallelSpec) -> int:
        return validation.attn_tp_size(parallel)

    def full_layers(self, model: ModelSpec) -> tuple[int, ...]:
        return layers.full_layers(model)

    def layer_bytes_per_block(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> tuple[int, ...]:
        """Bytes per block of each layer id; 0 for linear-attention layers."""
        full = set(self.full_layers(model))
        indexed = set(layers.indexer_layers(model))
        plain = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=False).block_bytes
        with_index = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=True).block_bytes
        return tuple(
            0 if l not in full else (with_index if l in indexed else plain)
            for l in range(model.num_hidden_layers)
        )

    def scratch_bytes_per_block(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> int:
        """One full layer, with the index slot if any layer has an indexer."""
        spec = kv_bytes.full_spec(model, cache, attn_tp_size, with_indexer=bool(layers.indexer_layers(model)))
        return spec.block_bytes

    def linear_state_bytes(self, model: ModelSpec, cache: CacheSpec, attn_tp_size: int) -> int:
        """Per-rank reservation for every linear layer's conv + recurrent state."""
        n_linear = model.num_hidden_layers - len(self.full_layers(model))
        if n_linear == 0:
            return 0
        per_seq = kv_bytes.linear_spec(model, cache, attn_tp_size).seq_bytes
        return n_linear * kv_bytes.linear_state_slots(cache) * per_seq

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

    def block_count(self, available_bytes: int, costs_per_block: Iterable[int]) -> int:
        """Min over ranks of available // cost."""
        return estimation.block_count(available_bytes, costs_per_block)

    def check_cards(self, split_groups: tuple[tuple[int, ...], ...], placement: Placement,
                    per_rank_bytes: dict[int, int], run: RunSpec) -> None:
        """No card holds two ranks of a split group, nor more than its HBM."""
        hw = run.hardware
        topology.check_cards(split_groups, placement, per_rank_bytes, hw.hbm_bytes_per_card,
                             hw.reserved_bytes_per_card)

    # ---- master ---------------------------------------------------------------------

    def draft_plan(self, run: RunSpec, attn_tp_size: int) -> Optional[DraftPlan]:
        """The draft's KV (never split), or None when not speculative."""
        if run.draft is None:
            return None
        return DraftPlan(
            model=run.draft.name,
            num_layers=run.draft.num_hidden_layers,
            full_layers=self.full_layers(run.draft),
            layer_bytes_per_block=self.layer_bytes_per_block(run.draft, run.cache, attn_tp_size),
        )

    def plan(self, run: RunSpec) -> KVPlan:
        self.validate(run)
        model, cache = run.model, run.cache
        tp = self.attn_tp_size(run.parallel)
        active = self.is_active(run.layerwise)
        s = run.layerwise.split_size if active else 1

        full = self.full_layers(model)
        layer_bytes = self.layer_bytes_per_block(model, cache, tp)
        scratch = self.scratch_bytes_per_block(model, cache, tp) if active else 0
        draft = self.draft_plan(run, tp)
        additional = draft.bytes_per_block if draft is not None else 0
        linear = self.linear_state_bytes(model, cache, tp)
        budget = run.hardware.kv_budget_bytes
        available = budget - linear

        full_bytes = estimation.owned_bytes_per_block(layer_bytes, full)
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
                notes.append("the uniform allocation would not fit one block at this budget")
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
        uniform_peak = estimation.rank_bytes(n_blocks, full_bytes, 0, linear)
        peak = estimation.peak_bytes(per_rank)
        if peak > uniform_peak:
            notes.append(f"split peak {peak} B exceeds the uniform peak {uniform_peak} B at the same "
                         f"n_blocks: the busiest owner's layers plus the scratch outweigh all full layers")
        self.check_cards(groups, placement,
                         {r.rank: r.estimated_bytes + r.draft_estimated_bytes for r in ranks}, run)
        return KVPlan(
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
        )

    def _rank_plans(self, run: RunSpec, tp: int, placement: Placement,
                    groups: tuple[tuple[int, ...], ...], full: tuple[int, ...],
                    layer_owner: tuple[tuple[int, int], ...], layer_bytes: Sequence[int], *,
                    split_size: int, n_blocks: int, scratch: int, linear: int,
                    draft_bytes_per_block: int) -> tuple[RankPlan, ...]:
        positions = layout.split_positions(groups)
        owned_by = {r: layout.owned_layers(layer_owner, r) for r in range(split_size)} if layer_owner else None
        out = []
        for rank in range(run.parallel.world_size):
            if rank not in positions:
                raise PlanError("parallel.world_size", run.parallel.world_size,
                                "every rank in exactly one split group", f"rank {rank} is in none")
            group, split_rank = positions[rank]
            owned = owned_by.get(split_rank, ()) if owned_by is not None else full
            dp_rank, cp_rank, tp_rank = layout.rank_coords(rank, run.parallel, tp)
            node, card = placement[rank]
            out.append(RankPlan(
                rank=rank, node=node, card=card, dp_rank=dp_rank, cp_rank=cp_rank, tp_rank=tp_rank,
                split_group=group, split_rank=split_rank, owned_full_layers=owned,
                estimated_bytes=estimation.rank_bytes(
                    n_blocks, estimation.owned_bytes_per_block(layer_bytes, owned), scratch, linear),
                draft_estimated_bytes=n_blocks * draft_bytes_per_block,
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
        return self.draft_message(plan, run)

    def draft_message(self, plan: KVPlan, run: RunSpec) -> KVPlan:
        """The draft engine's plan: never split, the target's n_blocks, every draft layer owned."""
        draft = plan.draft
        draft_bytes = plan.n_blocks * draft.bytes_per_block
        ranks = tuple(
            RankPlan(rank=r.rank, node=r.node, card=r.card, dp_rank=r.dp_rank, cp_rank=r.cp_rank,
                     tp_rank=r.tp_rank, split_group=i, split_rank=0,
                     owned_full_layers=draft.full_layers, estimated_bytes=draft_bytes)
            for i, r in enumerate(plan.ranks)
        )
        return KVPlan(
            implementation=plan.implementation,
            model=draft.model,
            world_size=plan.world_size,
            dp_size=plan.dp_size,
            cp_size=plan.cp_size,
            attn_tp_size=plan.attn_tp_size,
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
        )

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
        split_rank = next((r.split_rank for r in message.ranks if r.rank == rank), None)
        if split_rank is None:
            raise PlanError("rank", rank, f"a rank of the plan (0..{message.world_size - 1})")
        owners = dict(message.layer_owner)
        full = set(message.full_layers)
        return tuple(l not in full or owners.get(l) == split_rank for l in range(message.num_layers))

    def init_worker(self, message: KVPlan, run: RunSpec, *, rank: int, role: str, device: str,
                    expected_digest: str) -> WorkerKVCache:
        if role not in ROLES:
            raise ConfigError("role", role, f"one of {', '.join(ROLES)}")
        self.check_message(message, expected_digest, rank)
        mask = self.ownership_mask(message, rank)
        from implementations.reference import allocation  # torch only where tensors are made

        return allocation.allocate_worker_cache(message, run, rank=rank, role=role, mask=mask, device=device)
