"""Allocation of one worker's KV cache with torch (FEATURE sections 5 and 7; TC-01).

Plans here are laid out by hand (not by the planner) so allocation is tested on
its own; expected bytes come from FEATURE section 5's formulas, written again
below independently of ``implementations.reference``. ``test_engine`` reuses the
helpers.
"""

from __future__ import annotations

import gc
from dataclasses import replace
from typing import Optional

import pytest
import torch
from torch.multiprocessing.reductions import StorageWeakRef

from contract.errors import ConfigError, PlanError
from contract.plan_types import KVPlan, RankPlan
from contract.specs import (
    CacheSpec,
    HardwareProfile,
    LayerwiseFlags,
    ModelSpec,
    ParallelSpec,
    RunSpec,
    Topology,
)
from implementations.reference import ReferenceImplementation
from implementations.reference.allocation import (
    allocate_worker_cache,
    cache_bytes,
    distinct_storage_bytes,
    layer_own_bytes,
    release,
)
from testcases.unit._models import QWEN3_5_MOE  # noqa: E402

pytestmark = pytest.mark.unit

MiB = 1 << 20

# 4-layer DeepSeek-V3.2-shaped model: MLA 512 + 64, DSA indexer 64 heads x 128.
MLA_DSA = ModelSpec(
    name="tiny_dsa", model_type="deepseek_v32", num_hidden_layers=4, attention="mla",
    kv_lora_rank=512, qk_rope_head_dim=64, index_n_heads=64, index_head_dim=128,
)
# 8-layer Qwen3.5-shaped hybrid: full attention every 4th layer (3, 7), GQA 2 KV heads x 256,
# GDN 16 key / 32 value heads of 128, conv kernel 4.
HYBRID = replace(QWEN3_5_MOE, name="tiny_hybrid", num_hidden_layers=8)
# 2-layer dense GQA control: 8 KV heads x 64.
GQA = ModelSpec(
    name="tiny_gqa", model_type="llama", num_hidden_layers=2, attention="gqa",
    num_key_value_heads=8, head_dim=64,
)
MODELS = {"mla_dsa": MLA_DSA, "hybrid": HYBRID, "gqa": GQA}

DTYPE_BYTES = {"bfloat16": 2, "float32": 4, "int8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}


def cpu_hardware(world_size: int, *, kv_layout: str = "heads_major",
                 budget_bytes: int = 64 * MiB) -> HardwareProfile:
    cards = tuple(f"GPU{i}" for i in range(world_size))
    links = tuple(tuple("X" if i == j else "PIX" for j in range(world_size)) for i in range(world_size))
    return HardwareProfile(
        name="cpu_test", device_type="cpu", kv_layout=kv_layout, num_cards=world_size,
        hbm_bytes_per_card=budget_bytes + 8 * MiB, reserved_bytes_per_card=8 * MiB,
        topology=Topology(cards=cards, links=links),
    )


def run_spec(model: ModelSpec, *, world_size: int = 4, dp_size: int = 1, split_size: int = 2,
             enable: bool = True, kv_layout: str = "heads_major", block_size: int = 16,
             kv_cache_dtype: str = "auto", indexer_cache_dtype: str = "auto",
             draft: Optional[ModelSpec] = None, budget_bytes: int = 64 * MiB) -> RunSpec:
    return RunSpec(
        model=model,
        parallel=ParallelSpec(world_size=world_size, dp_size=dp_size),
        cache=CacheSpec(block_size=block_size, kv_cache_dtype=kv_cache_dtype,
                        indexer_cache_dtype=indexer_cache_dtype),
        layerwise=LayerwiseFlags(enable=enable, split_size=split_size),
        hardware=cpu_hardware(world_size, kv_layout=kv_layout, budget_bytes=budget_bytes),
        draft=draft,
    )


# ---- FEATURE section 5, written independently -------------------------------------


def expected_full_bytes_per_block(model: ModelSpec, run: RunSpec, attn_tp: int) -> int:
    d = DTYPE_BYTES[model.dtype]
    kv_dtype = run.cache.kv_cache_dtype
    d_kv = d if kv_dtype == "auto" else DTYPE_BYTES[kv_dtype]
    quantized = kv_dtype != "auto"
    if model.attention == "mla":
        slot = d_kv * (model.kv_lora_rank + model.qk_rope_head_dim)
        scale = 4 if quantized else 0
    else:
        heads = max(1, model.num_key_value_heads // attn_tp)
        slot = 2 * d_kv * model.head_dim * heads
        scale = 2 * 4 * heads if quantized else 0
    index = 0
    if model.index_n_heads > 0:
        index = model.index_head_dim + 4 if run.cache.indexer_cache_dtype == "int8" else d * model.index_head_dim
    return run.cache.block_size * (slot + scale + index)


LINEAR_SLOTS = 6
"""Linear-state slots the hand-built plans give (what a planner decided; allocation follows the plan)."""


def expected_linear_layer_bytes(model: ModelSpec, run: RunSpec, attn_tp: int, slots: int = LINEAR_SLOTS) -> int:
    d = DTYPE_BYTES[model.dtype]
    d_ssm = DTYPE_BYTES[model.mamba_ssm_dtype or model.dtype]
    nk = max(1, model.linear_num_key_heads // attn_tp)
    nv = max(1, model.linear_num_value_heads // attn_tp)
    conv = d * (2 * model.linear_key_head_dim * nk + model.linear_value_head_dim * nv) * (
        model.linear_conv_kernel_dim - 1)
    recurrent = d_ssm * nv * model.linear_key_head_dim * model.linear_value_head_dim
    return slots * (conv + recurrent)


def full_layer_ids(model: ModelSpec) -> tuple[int, ...]:
    k = model.full_attention_interval
    return tuple(l for l in range(model.num_hidden_layers) if k <= 1 or (l + 1) % k == 0)


# ---- a hand-built plan -------------------------------------------------------------


def hand_plan(model: ModelSpec, run: RunSpec, *, n_blocks: int = 3) -> KVPlan:
    """A plan laid out by hand: consecutive split groups, round robin over full layers."""
    world, dp = run.parallel.world_size, run.parallel.dp_size
    tp = world // dp
    active = run.layerwise.enable and run.layerwise.split_size > 1
    s = run.layerwise.split_size if active else 1
    full = full_layer_ids(model)
    owner = {layer: k % s for k, layer in enumerate(full)}
    groups = tuple(tuple(range(g, g + s)) for g in range(0, world, s))
    full_bpb = expected_full_bytes_per_block(model, run, tp)
    linear_bytes = expected_linear_layer_bytes(model, run, tp) * (model.num_hidden_layers - len(full))
    ranks = []
    for rank in range(world):
        split_rank = rank % s
        owned = tuple(l for l in full if owner[l] == split_rank)
        estimated = n_blocks * full_bpb * (len(owned) + (1 if active else 0)) + linear_bytes
        ranks.append(RankPlan(
            rank=rank, node=0, card=rank, dp_rank=rank // tp, cp_rank=0, tp_rank=rank % tp,
            split_group=rank // s, split_rank=split_rank, owned_full_layers=owned,
            estimated_bytes=estimated))
    peak = max(r.estimated_bytes for r in ranks)
    uniform_peak = n_blocks * full_bpb * len(full) + linear_bytes
    return KVPlan(
        implementation="hand", model=model.name, world_size=world, dp_size=dp, cp_size=1,
        attn_tp_size=tp, split_size=s, active=active, block_size=run.cache.block_size,
        kv_layout=run.hardware.kv_layout, num_layers=model.num_hidden_layers, full_layers=full,
        layer_bytes_per_block=tuple(full_bpb if l in full else 0 for l in range(model.num_hidden_layers)),
        scratch_bytes_per_block=full_bpb if active else 0, additional_bytes_per_block=0,
        linear_state_bytes=linear_bytes, budget_bytes=run.hardware.kv_budget_bytes,
        available_bytes=run.hardware.kv_budget_bytes - linear_bytes, split_groups=groups,
        layer_owner=tuple(owner.items()) if active else (), n_blocks=n_blocks,
        uniform_n_blocks=n_blocks, peak_bytes=peak, mean_bytes=sum(r.estimated_bytes for r in ranks) // world,
        uniform_peak_bytes=uniform_peak, savings_bytes=uniform_peak - peak, capacity_gain=1.0,
        ranks=tuple(ranks), num_linear_state_blocks=LINEAR_SLOTS,
    )


def mask_of(plan: KVPlan, rank: int) -> tuple[bool, ...]:
    owned = set(next(r for r in plan.ranks if r.rank == rank).owned_full_layers)
    full = set(plan.full_layers)
    return tuple(l in owned or l not in full for l in range(plan.num_layers))



# ---- tests ----------------------------------------------------------------------------

N_BLOCKS = 3


def allocate(plan: KVPlan, run: RunSpec, rank: int, *, role: str = "target", mask=None):
    mask = mask_of(plan, rank) if mask is None else mask
    return allocate_worker_cache(plan, run, rank=rank, role=role, mask=mask, device="cpu")


def storage_ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


@pytest.fixture(params=sorted(MODELS))
def split_case(request):
    model = MODELS[request.param]
    run = run_spec(model, world_size=4, split_size=2)
    return model, run, hand_plan(model, run, n_blocks=N_BLOCKS)


def test_worked_number_deepseek_v32_layer_is_180224_bytes_per_block():
    # FEATURE section 6: one DeepSeek-V3.2 layer (bf16, block 128) costs 180,224 B/block.
    run = run_spec(MLA_DSA, split_size=1, enable=False, block_size=128)
    cache = allocate(hand_plan(MLA_DSA, run, n_blocks=1), run, rank=0)
    assert [layer_own_bytes(cache, l) for l in range(4)] == [180_224] * 4


def test_owned_layers_hold_their_own_storage_of_the_formula_bytes(split_case):
    model, run, plan = split_case
    expected = N_BLOCKS * expected_full_bytes_per_block(model, run, attn_tp=4)
    for rank in range(4):
        cache = allocate(plan, run, rank)
        owned = [l for l in plan.full_layers if mask_of(plan, rank)[l]]
        assert owned, "every rank of the hand plan owns a full layer"
        ptrs = set()
        for layer_id in owned:
            layer = cache.layer(layer_id)
            assert layer.owned and cache.owns_layer_cache(layer_id)
            assert layer_own_bytes(cache, layer_id) == expected
            ptrs |= {storage_ptr(t) for t in layer.tensors.values()}
        assert len(ptrs) == sum(len(cache.layer(l).tensors) for l in owned), "owned storages are distinct"
        assert not ptrs & {storage_ptr(t) for t in cache.scratch.values()}


def test_non_owned_full_layers_are_views_of_the_one_scratch(split_case):
    model, run, plan = split_case
    cache = allocate(plan, run, rank=1)
    not_owned = [l for l in plan.full_layers if not mask_of(plan, 1)[l]]
    assert not_owned
    scratch_ptrs = {name: storage_ptr(t) for name, t in cache.scratch.items()}
    assert distinct_storage_bytes(cache.scratch.values()) == N_BLOCKS * expected_full_bytes_per_block(model, run, 4)
    for layer_id in not_owned:
        layer = cache.layer(layer_id)
        assert not layer.owned and not cache.owns_layer_cache(layer_id)
        assert layer_own_bytes(cache, layer_id) == 0
        assert {n: storage_ptr(t) for n, t in layer.tensors.items()} == scratch_ptrs


def test_rank_total_is_owned_layers_plus_scratch_plus_linear_state(split_case):
    model, run, plan = split_case
    full_bpb = expected_full_bytes_per_block(model, run, 4)
    n_linear = model.num_hidden_layers - len(full_layer_ids(model))
    linear = n_linear * expected_linear_layer_bytes(model, run, 4)
    for rank in range(4):
        cache = allocate(plan, run, rank)
        n_owned = sum(1 for l in plan.full_layers if mask_of(plan, rank)[l])
        expected = N_BLOCKS * full_bpb * (n_owned + 1) + linear
        assert distinct_storage_bytes(cache.all_tensors()) == expected
        assert cache_bytes(cache) == expected
        assert cache_bytes(cache, "linear") == linear
        assert cache_bytes(cache, "full") == expected - linear
        own = sum(layer_own_bytes(cache, l) for l in range(model.num_hidden_layers))
        assert own + distinct_storage_bytes(cache.scratch.values()) == expected


def test_one_walk_measures_the_distinct_storages_and_tracks_each_tensor_and_storage(split_case):
    """``bring_up.walked`` (the explorer's one walk over a worker's tensors: facts, measured bytes, leak
    references) measures what ``measure.distinct_storage_bytes`` measures (the union of the storages' byte
    ranges: the scratch views once, two storage objects over shared bytes once) and tracks every tensor and
    distinct storage, all dead once the cache is dropped."""
    from harness.suites.bring_up import Worker, walked
    from harness.suites.measure import distinct_storage_bytes as union_of_storages

    model, run, plan = split_case
    cache = allocate(plan, run, 1)
    pool = torch.empty(1024, dtype=torch.uint8)
    overlapping = torch.empty(0, dtype=torch.uint8).set_(pool.untyped_storage()[400:])  # a storage over its last 624 B
    next(layer for layer in cache.layers if layer.owned).tensors.update(pool=pool, overlapping=overlapping)
    del pool, overlapping
    tensors = cache.all_tensors()
    want, storages = union_of_storages(tensors), {storage_ptr(t) for t in tensors}
    worker = Worker("target", 1, cache, None, plan)  # measured_bytes None: the walk measures
    facts, refs = walked(worker, "cpu")
    assert facts(None).measured_bytes == want
    assert refs.tracked() == len(tensors) + len(storages) == refs.alive()
    del tensors, cache
    worker.cache = None
    gc.collect()
    assert refs.alive() == 0, "the walk kept a reference to the cache"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_walk_reads_layers_sharing_views_once_and_finds_what_a_walk_of_each_finds(name):
    """A non-owned layer holding the very tensors of one walked before (the reference gives its non-owned layers
    one set of scratch views) is read once (``facts.walked_worker``): its facts, the measured bytes and the
    references tracked are those of a cache whose non-owned layers each hold views of their own; a layer whose
    tensors are the earlier layer's but one is read anew (its own storage counts)."""
    from harness.suites.bring_up import Worker, walked

    run = run_spec(MODELS[name], world_size=4, split_size=4)  # rank 3: two full layers or more, not owned
    plan = hand_plan(MODELS[name], run, n_blocks=N_BLOCKS)
    shared = allocate(plan, run, 3)
    views = [layer for layer in shared.layers if not layer.owned]
    assert len(views) >= 2 and all(a.tensors[n] is b.tensors[n] for a, b in zip(views, views[1:]) for n in a.tensors)
    apart = allocate(plan, run, 3)
    for layer in apart.layers:
        if not layer.owned:
            layer.tensors = {name: t.view_as(t) for name, t in apart.scratch.items()}
    facts = {which: walked(Worker("target", 3, cache, None, plan), "cpu") for which, cache in
             (("shared", shared), ("apart", apart))}
    assert facts["shared"][0](None) == facts["apart"][0](None)
    assert facts["shared"][1].tracked() == facts["apart"][1].tracked()

    name = list(views[1].tensors)[-1]  # (its last: the walk knows the layer before by its first tensor)
    views[1].tensors = {**views[1].tensors, name: torch.empty_like(views[1].tensors[name])}  # its own storage
    got = walked(Worker("target", 3, shared, None, plan), "cpu")[0](None)
    by_id = {layer.layer: layer for layer in got.layers}
    assert by_id[views[1].layer_id].own_bytes == views[1].tensors[name].untyped_storage().nbytes() > 0
    assert not by_id[views[1].layer_id].scratch_view and by_id[views[2 if len(views) > 2 else 0].layer_id].scratch_view


def test_hybrid_linear_layers_are_allocated_on_every_rank_and_never_split():
    run = run_spec(HYBRID, world_size=4, split_size=4)
    plan = hand_plan(HYBRID, run)
    linear_ids = [l for l in range(8) if l not in (3, 7)]
    per_layer = expected_linear_layer_bytes(HYBRID, run, 4)
    # conv: 2 B * (2*128*4 + 128*8) * 3 = 12,288; recurrent: 2 B * 8*128*128 = 262,144; 6 slots
    assert per_layer == 6 * (12_288 + 262_144)
    for rank in range(4):
        # the mask's linear entries are ignored: linear state is never split
        mask = tuple(False if l in linear_ids else m for l, m in enumerate(mask_of(plan, rank)))
        cache = allocate(plan, run, rank, mask=mask)
        for l in linear_ids:
            layer = cache.layer(l)
            assert layer.kind == "linear" and layer.owned
            assert set(layer.tensors) == {"conv", "recurrent"}
            assert layer_own_bytes(cache, l) == per_layer
            assert layer.tensors["recurrent"].shape == (6, 8, 128, 128)


def test_disabled_allocates_every_full_layer_and_no_scratch():
    for model in MODELS.values():
        run = run_spec(model, split_size=2, enable=False)
        plan = hand_plan(model, run)
        cache = allocate(plan, run, rank=2)
        assert cache.scratch == {}
        assert (cache.split_size, cache.split_rank, cache.split_group) == (1, 0, (2,))
        full_bpb = expected_full_bytes_per_block(model, run, 4)
        for l in plan.full_layers:
            assert cache.owns_layer_cache(l)
            assert layer_own_bytes(cache, l) == N_BLOCKS * full_bpb
        n_linear = model.num_hidden_layers - len(plan.full_layers)
        assert cache_bytes(cache) == (N_BLOCKS * full_bpb * len(plan.full_layers)
                                      + n_linear * expected_linear_layer_bytes(model, run, 4))


def test_split_position_comes_from_the_plan():
    run = run_spec(MLA_DSA, world_size=4, split_size=2)
    plan = hand_plan(MLA_DSA, run)
    cache = allocate(plan, run, rank=3)
    assert (cache.split_size, cache.split_rank, cache.split_group) == (2, 1, (2, 3))
    assert cache.plan_digest == plan.digest and cache.n_blocks == N_BLOCKS
    assert [l.layer_id for l in cache.layers] == [0, 1, 2, 3]
    # round robin over 4 full layers: split rank 1 owns layers 1 and 3
    assert [cache.owns_layer_cache(l) for l in range(4)] == [False, True, False, True]


@pytest.mark.parametrize("layout", ["heads_major", "tokens_major"])
def test_gqa_shapes_follow_the_layout(layout):
    run = run_spec(GQA, world_size=2, split_size=2, kv_layout=layout, block_size=16)
    cache = allocate(hand_plan(GQA, run), run, rank=0)
    k = cache.layer(0).tensors["k"]
    # 8 KV heads on attention TP 2 -> 4 local heads of 64
    expected = (N_BLOCKS, 4, 16, 64) if layout == "heads_major" else (N_BLOCKS, 16, 4, 64)
    assert k.shape == expected and cache.layer(0).tensors["v"].shape == expected
    assert k.dtype == torch.bfloat16 and cache.kv_layout == layout


@pytest.mark.parametrize("layout", ["heads_major", "tokens_major"])
def test_mla_shapes_follow_the_layout(layout):
    run = run_spec(MLA_DSA, split_size=2, kv_layout=layout, block_size=16)
    tensors = allocate(hand_plan(MLA_DSA, run), run, rank=0).layer(0).tensors
    assert set(tensors) == {"latent", "rope", "index"}

    def shape(dim):
        return (N_BLOCKS, 1, 16, dim) if layout == "heads_major" else (N_BLOCKS, 16, 1, dim)

    assert tensors["latent"].shape == shape(512)
    assert tensors["rope"].shape == shape(64)
    assert tensors["index"].shape == shape(128)


def test_gqa_kv_heads_fewer_than_tp_are_replicated_one_per_rank():
    run = run_spec(HYBRID, world_size=4, split_size=2)  # 2 KV heads on TP 4
    k = allocate(hand_plan(HYBRID, run), run, rank=0).layer(3).tensors["k"]
    assert k.shape == (N_BLOCKS, 1, 16, 256)


@pytest.mark.parametrize("kv_dtype, torch_dtype", [
    ("int8", torch.int8), ("fp8_e4m3", torch.float8_e4m3fn), ("fp8_e5m2", torch.float8_e5m2)])
@pytest.mark.parametrize("model_key", ["mla_dsa", "hybrid", "gqa"])
def test_quantized_kv_adds_float32_scales(kv_dtype, torch_dtype, model_key):
    model = MODELS[model_key]
    run = run_spec(model, split_size=2, kv_cache_dtype=kv_dtype)
    plan = hand_plan(model, run)
    cache = allocate(plan, run, rank=0)
    layer_id = plan.full_layers[0]
    tensors = cache.layer(layer_id).tensors
    heads = 1 if model.attention == "mla" else max(1, model.num_key_value_heads // 4)
    if model.attention == "mla":
        assert tensors["latent"].dtype == tensors["rope"].dtype == torch_dtype
        scales = {"latent_scale": 4}
        assert tensors["index"].dtype == torch.bfloat16  # indexer cache stays in the model dtype
    else:
        assert tensors["k"].dtype == tensors["v"].dtype == torch_dtype
        scales = {"k_scale": 4 * heads, "v_scale": 4 * heads}
    for name, slot_bytes in scales.items():
        assert tensors[name].dtype == torch.float32
        assert tensors[name].nbytes == N_BLOCKS * 16 * slot_bytes
        # Upstream's scale shape: the cache tensor's shape without its last dim (heads-major here).
        assert tuple(tensors[name].shape) == (N_BLOCKS, heads, 16)
    assert layer_own_bytes(cache, layer_id) == N_BLOCKS * expected_full_bytes_per_block(model, run, 4)
    assert distinct_storage_bytes(cache.scratch.values()) == layer_own_bytes(cache, layer_id)


def test_int8_index_cache_has_a_float32_scale():
    run = run_spec(MLA_DSA, split_size=2, indexer_cache_dtype="int8", block_size=16)
    cache = allocate(hand_plan(MLA_DSA, run), run, rank=0)
    tensors = cache.layer(0).tensors
    assert tensors["index"].dtype == torch.int8 and tensors["index"].nbytes == N_BLOCKS * 16 * 128
    assert tensors["index_scale"].dtype == torch.float32 and tensors["index_scale"].nbytes == N_BLOCKS * 16 * 4
    # slot: 2 * (512 + 64) + 128 + 4 = 1,284 bytes per token
    assert layer_own_bytes(cache, 0) == N_BLOCKS * 16 * 1_284


def test_writing_a_non_owned_layer_writes_the_scratch_only():
    run = run_spec(MLA_DSA, split_size=2)
    plan = hand_plan(MLA_DSA, run)
    cache = allocate(plan, run, rank=0)  # owns 0 and 2; 1 and 3 are scratch views
    owned = [cache.layer(l).tensors["latent"] for l in (0, 2)]
    for t in owned:
        t[0].fill_(7.0)
    cache.layer(1).tensors["latent"][0].fill_(1.0)
    assert torch.all(cache.scratch["latent"][0] == 1.0)
    assert torch.all(cache.layer(3).tensors["latent"][0] == 1.0)  # the same scratch storage
    assert all(torch.all(t[0] == 7.0) for t in owned)
    cache.layer(3).tensors["latent"][0].fill_(2.0)
    assert torch.all(cache.layer(1).tensors["latent"][0] == 2.0)
    assert all(torch.all(t[0] == 7.0) for t in owned)


def test_release_frees_every_storage():
    run = run_spec(HYBRID, split_size=2)
    cache = allocate(hand_plan(HYBRID, run), run, rank=0)
    refs = [StorageWeakRef(t.untyped_storage()) for t in cache.all_tensors()]  # torch 2.1: not weakref.ref
    assert refs and not any(r.expired() for r in refs)
    release(cache)
    gc.collect()
    assert cache.layers == [] and cache.scratch == {}
    assert [r for r in refs if not r.expired()] == []


def test_draft_role_allocates_the_draft_model():
    run = run_spec(MLA_DSA, split_size=2, draft=GQA, world_size=4)
    draft_run = run_spec(GQA, split_size=1, enable=False, world_size=4)
    draft_plan = hand_plan(GQA, draft_run)
    cache = allocate(draft_plan, run, rank=1, role="draft")
    assert cache.role == "draft" and len(cache.layers) == 2
    assert set(cache.layer(0).tensors) == {"k", "v"}
    assert (cache.split_size, cache.split_rank) == (1, 0)
    assert cache_bytes(cache) == 2 * N_BLOCKS * expected_full_bytes_per_block(GQA, draft_run, 4)


def test_draft_role_without_a_draft_model_is_a_config_error():
    run = run_spec(MLA_DSA, split_size=2)
    with pytest.raises(ConfigError, match="draft"):
        allocate(hand_plan(MLA_DSA, run), run, rank=0, role="draft")


def test_rank_outside_the_plan_is_a_plan_error():
    run = run_spec(MLA_DSA, split_size=2)
    plan = hand_plan(MLA_DSA, run)
    with pytest.raises(PlanError, match="rank 9"):
        allocate(plan, run, rank=9, mask=(True,) * 4)


def test_mask_of_the_wrong_length_is_refused():
    run = run_spec(MLA_DSA, split_size=2)
    with pytest.raises(ValueError, match="3 entries for 4 layers"):
        allocate(hand_plan(MLA_DSA, run), run, rank=0, mask=(True,) * 3)


def test_not_owned_layer_without_an_active_split_is_refused():
    run = run_spec(MLA_DSA, split_size=2, enable=False)
    with pytest.raises(ValueError, match="not active"):
        allocate(hand_plan(MLA_DSA, run), run, rank=0, mask=(True, False, True, True))


def test_unknown_kv_cache_dtype_names_the_field():
    plan = hand_plan(MLA_DSA, run_spec(MLA_DSA, split_size=2))
    run = run_spec(MLA_DSA, split_size=2, kv_cache_dtype="fp4")
    with pytest.raises(ConfigError, match="cache.kv_cache_dtype"):
        allocate(plan, run, rank=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA (or Iluvatar CoreX) device")
def test_cuda_allocator_counts_match_the_distinct_storage_bytes():
    run = run_spec(MLA_DSA, split_size=2, block_size=128)
    # 1280 blocks: every tensor is a whole number of 2 MiB (rope 20 MiB), so the caching
    # allocator's rounding adds nothing on NVIDIA; 660 MiB in all.
    plan = hand_plan(MLA_DSA, run, n_blocks=1280)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated(0)
    cache = allocate_worker_cache(plan, run, rank=0, role="target", mask=mask_of(plan, 0), device="cuda:0")
    allocated = torch.cuda.memory_allocated(0) - before
    expected = 1280 * 180_224 * 3  # two owned layers + scratch
    assert distinct_storage_bytes(cache.all_tensors()) == expected
    assert expected <= allocated <= expected * 1.01  # vendor allocators may round a little more
    release(cache)
    del cache
    gc.collect()
    assert torch.cuda.memory_allocated(0) == before


@pytest.mark.parametrize("n_spec", [0, 2])
def test_linear_state_takes_upstream_shapes(n_spec):
    # FEATURE 7: conv [slots, conv_state_len, channels], recurrent [slots * (n_spec + 1), v_heads, k_dim, v_dim].
    run = run_spec(HYBRID, split_size=2)
    run = replace(run, cache=replace(run.cache, num_speculative_tokens=n_spec))
    cache = allocate(hand_plan(HYBRID, run), run, rank=0)
    tensors = cache.layer(0).tensors
    channels = 2 * 128 * (16 // 4) + 128 * (32 // 4)
    assert tuple(tensors["conv"].shape) == (LINEAR_SLOTS, 3 + n_spec, channels)
    assert tuple(tensors["recurrent"].shape) == (LINEAR_SLOTS * (n_spec + 1), 32 // 4, 128, 128)


def test_conv_value_channels_counted_with_key_head_dim():
    # Upstream init_conv_cache_shape: value channels use linear_key_head_dim, so the allocation
    # departs from the estimate only when key and value head dims differ (FEATURE 7).
    model = replace(HYBRID, linear_key_head_dim=4, linear_value_head_dim=8, linear_num_key_heads=8,
                    linear_num_value_heads=8)
    run = run_spec(model, split_size=2)
    conv = allocate(hand_plan(model, run), run, rank=0).layer(0).tensors["conv"]
    assert conv.shape[2] == 4 * 2 * 2 + 4 * 2 != 4 * 2 * 2 + 8 * 2


def test_mamba_ssm_dtype_sets_the_recurrent_dtype():
    model = replace(HYBRID, mamba_ssm_dtype="float32")
    run = run_spec(model, split_size=2)
    tensors = allocate(hand_plan(model, run), run, rank=0).layer(0).tensors
    assert (tensors["recurrent"].dtype, tensors["conv"].dtype) == (torch.float32, torch.bfloat16)


def test_draft_allocates_the_targets_cache_shape():
    # FEATURE 6: the draft's KV takes the target's shape (index included) unless its body runs at TP 1.
    run = run_spec(MLA_DSA, split_size=2, draft=replace(MLA_DSA, name="mtp", num_hidden_layers=1, index_n_heads=0))
    impl = ReferenceImplementation()
    plan = impl.plan(run)
    message = impl.engine_message(plan, run, "draft")
    cache = impl.init_worker(message, run, rank=0, role="draft", device="cpu", expected_digest=message.digest)
    assert sorted(cache.layer(0).tensors) == ["index", "latent", "rope"]
    assert distinct_storage_bytes(cache.all_tensors()) == plan.ranks[0].draft_estimated_bytes
