"""Worker KV allocation with torch (FEATURE section 7, component 2).

A worker allocates, for the model of its role:

* each owned full-attention layer: real tensors, laid out as the hardware
  profile says (``heads_major`` [n_blocks, n_heads, block_size, dim] on ILU/MLU,
  ``tokens_major`` [n_blocks, block_size, n_heads, dim] on CUDA/NPU);
* each non-owned full-attention layer: views of the rank's one scratch layer
  (no storage of its own, ``owned=False``);
* each linear-attention layer: conv + recurrent state, on every rank, in
  upstream's shapes: conv ``[slots, conv_state_len, channels]`` (value channels
  counted with ``linear_key_head_dim``, as upstream's ``init_conv_cache_shape``),
  recurrent ``[slots * checkpoint_stride, v_heads, key_dim, value_dim]``;
* quantization scales as upstream: the cache tensor's shape without its last
  dim (``[n_blocks, heads, block_size]`` heads-major), float32.

Only ``torch.empty`` is used: untouched CPU pages cost no resident memory, so
the harness can allocate a plan's full byte count on a laptop. The byte helpers
at the bottom are what the harness measures with.
"""

from __future__ import annotations

from typing import Iterable, Optional

import torch

from contract.errors import ConfigError, PlanError
from contract.interface import LayerCache, WorkerKVCache
from contract.plan_types import KVPlan, RankPlan
from contract.specs import KV_LAYOUTS, QUANTIZED_KV_CACHE_DTYPES, ModelSpec, RunSpec
from implementations.reference import kv_bytes

_TORCH_DTYPE_NAMES = {
    "bfloat16": "bfloat16",
    "float16": "float16",
    "float32": "float32",
    "int8": "int8",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}


def torch_dtype(name: str, *, field: str) -> torch.dtype:
    """The torch dtype of a harness dtype name; ``field`` names the setting in errors."""
    attr = _TORCH_DTYPE_NAMES.get(name)
    if attr is None:
        raise ConfigError(field, name, f"one of {sorted(_TORCH_DTYPE_NAMES)}")
    dtype = getattr(torch, attr, None)
    if dtype is None:  # fp8 needs torch >= 2.1; vendor builds may be older
        raise ConfigError(field, name, f"a dtype this torch {torch.__version__} has",
                          f"torch.{attr} is missing")
    return dtype


def _resolve(name: str, model: ModelSpec, *, field: str) -> torch.dtype:
    return torch_dtype(model.dtype if name == "auto" else name, field=field)


def _block_shape(layout: str, n_blocks: int, block_size: int, heads: int, dim: Optional[int]) -> tuple:
    """A cache tensor's shape; ``dim`` None gives its scale's shape (the same without the last dim)."""
    shape = (n_blocks, heads, block_size) if layout == "heads_major" else (n_blocks, block_size, heads)
    return shape if dim is None else shape + (dim,)


def _makers(shapes: dict[str, tuple[tuple, torch.dtype]], device: torch.device) -> tuple:
    """(name, shape, a function making an empty tensor of the name's dtype on ``device`` given its size) per name
    of ``shapes`` (name -> (shape, dtype)): what ``_fresh`` makes a layer's tensors with (``_layer_makers``).

    The function is ``new_empty`` of an empty (0-element, no storage bytes) tensor of that dtype and device:
    it parses only the size, where ``torch.empty`` parses dtype and device again for each tensor (~0.4 us)."""
    empty: dict = {}  # dtype -> its 0-element tensor's new_empty
    for _, dtype in shapes.values():
        if dtype not in empty:
            empty[dtype] = torch.empty(size=(0,), dtype=dtype, device=device).new_empty
    return tuple((name, shape, empty[dtype]) for name, (shape, dtype) in shapes.items())


def _fresh(makers: tuple) -> dict[str, torch.Tensor]:
    """One fresh tensor per name of ``makers`` (``_makers``), each with its own storage."""
    # (``size=`` by keyword: torch parses a positional tuple against its other overloads first, ~0.5 us a tensor)
    return {name: make(size=shape) for name, shape, make in makers}


def _full_layer_shapes(model: ModelSpec, run: RunSpec, message: KVPlan, *,
                       with_index: bool) -> dict[str, tuple[tuple, torch.dtype]]:
    """Name -> (shape, dtype) of each tensor of one full-attention layer (the same for every full layer)."""
    cache = run.cache
    kv_dtype = _resolve(cache.kv_cache_dtype, model, field="cache.kv_cache_dtype")
    quantized = cache.kv_cache_dtype in QUANTIZED_KV_CACHE_DTYPES

    specs: dict[str, tuple[int, Optional[int], torch.dtype]] = {}  # name -> (heads, dim or None, dtype)
    if model.attention == "mla":
        specs["latent"] = (1, model.kv_lora_rank, kv_dtype)
        specs["rope"] = (1, model.qk_rope_head_dim, kv_dtype)
        if quantized:  # one float32 scale per token slot (FEATURE 5: scale slot 4 B)
            specs["latent_scale"] = (1, None, torch.float32)
    elif model.attention == "gqa":
        n_local_kv_heads = kv_bytes.local_heads(model.num_key_value_heads, message.attn_tp_size)
        specs["k"] = (n_local_kv_heads, model.head_dim, kv_dtype)
        specs["v"] = (n_local_kv_heads, model.head_dim, kv_dtype)
        if quantized:
            specs["k_scale"] = (n_local_kv_heads, None, torch.float32)
            specs["v_scale"] = (n_local_kv_heads, None, torch.float32)
    else:
        raise ConfigError("model", model.attention, "attention must be 'mla' or 'gqa'",
                          f"model {model.name}")
    if with_index:
        if cache.indexer_cache_dtype == "int8":
            specs["index"] = (1, model.index_head_dim, torch.int8)
            specs["index_scale"] = (1, None, torch.float32)
        else:
            index_dtype = torch_dtype(model.dtype, field="model")
            specs["index"] = (1, model.index_head_dim, index_dtype)
    return {name: (_block_shape(message.kv_layout, message.n_blocks, message.block_size, heads, dim), dtype)
            for name, (heads, dim, dtype) in specs.items()}


def _linear_layer_shapes(model: ModelSpec, run: RunSpec, message: KVPlan, *,
                         role: str) -> dict[str, tuple[tuple, torch.dtype]]:
    """Name -> (shape, dtype) of the conv and recurrent state of one linear-attention (GDN) layer, never split
    (upstream shapes; the same for each linear layer)."""
    spec = kv_bytes.linear_spec(
        model, run.cache, message.attn_tp_size,
        speculative_tokens=kv_bytes.speculative_state_tokens(model, run.cache, is_draft=role == "draft"))
    slots = message.num_linear_state_blocks
    # Upstream init_conv_cache_shape counts the value channels with linear_key_head_dim.
    conv_dim = spec.key_head_dim * spec.n_local_k_heads * 2 + spec.key_head_dim * spec.n_local_v_heads
    conv_dtype = torch_dtype(model.dtype, field="model.dtype")
    ssm_dtype = torch_dtype(kv_bytes.ssm_dtype(model), field="model.mamba_ssm_dtype")
    return {
        "conv": ((slots, spec.conv_state_len, conv_dim), conv_dtype),
        "recurrent": ((slots * spec.ssm_checkpoint_stride, spec.n_local_v_heads, spec.key_head_dim,
                       spec.value_head_dim), ssm_dtype),
    }


_MAKERS_KEPT = 8
_makers_kept: dict = {}
"""(kind, ids of the message, model and run, with_index or role, device) -> (message, model, run, its makers): what
``_layer_makers`` worked out for the last few messages (the objects held, so that an id names only them)."""


def _layer_makers(kind: str, message: KVPlan, model: ModelSpec, run: RunSpec, extra, device: torch.device) -> tuple:
    """``_makers`` of ``_full_layer_shapes`` (``extra``: with_index) or ``_linear_layer_shapes`` (``extra``: the
    role) on ``device``, once per message, model, run and device: every worker of an engine receives the same
    message (a plan's ranks ask again)."""
    key = (kind, id(message), id(model), id(run), extra, device)
    kept = _makers_kept.get(key)
    if kept is not None and kept[0] is message and kept[1] is model and kept[2] is run:
        return kept[3]
    shapes = (_full_layer_shapes(model, run, message, with_index=extra) if kind == "full"
              else _linear_layer_shapes(model, run, message, role=extra))
    makers = _makers(shapes, device)
    if len(_makers_kept) >= _MAKERS_KEPT:
        _makers_kept.clear()
    _makers_kept[key] = (message, model, run, makers)
    return makers


def _rank_plan(message: KVPlan, rank: int) -> RankPlan:
    for rank_plan in message.ranks:
        if rank_plan.rank == rank:
            return rank_plan
    raise PlanError("parallel.world_size", message.world_size,
                    f"rank {rank} is not in the plan's ranks", f"digest {message.digest}")


def allocate_worker_cache(message: KVPlan, run: RunSpec, *, rank: int, role: str,
                          mask: tuple[bool, ...], device: str,
                          shape_model: Optional[ModelSpec] = None) -> WorkerKVCache:
    """Allocate rank ``rank``'s caches for ``role`` as ``message`` and ``mask`` say.

    ``mask[layer_id]`` is True where this rank owns the full layer; entries of
    linear layers are ignored (linear state is never split). One scratch layer
    is allocated whenever the split is active, as the estimate counts it.
    ``shape_model`` is the model whose cache shape the layers take (a draft's KV
    takes the target's shape unless its body runs at TP 1); default: the role's model.
    """
    model = shape_model if shape_model is not None else (run.draft if role == "draft" else run.model)
    if model is None:
        raise ConfigError("draft", None, "a draft model is needed for role 'draft'")
    if message.kv_layout not in KV_LAYOUTS:
        raise ConfigError("hardware", message.kv_layout, f"kv_layout must be one of {KV_LAYOUTS}")
    if len(mask) != message.num_layers:
        raise ValueError(f"mask has {len(mask)} entries for {message.num_layers} layers")
    rank_plan = _rank_plan(message, rank)
    full = set(message.full_layers)
    if not message.active and not all(mask[l] for l in full):
        raise ValueError("a full layer is marked not owned but the split is not active")

    with_index = model.index_n_heads > 0
    where = torch.device(device)  # parsed once, not once per tensor
    # a kind's tensor shapes are the same for each of its layers: worked out once (at its first layer)
    full_makers = _layer_makers("full", message, model, run, with_index, where) if message.active else None
    linear_makers = None
    scratch = _fresh(full_makers) if message.active else {}  # one storage per tensor, as an owned layer
    views = {name: t.view_as(t) for name, t in scratch.items()}  # each non-owned layer's: the scratch, as a layer
    layers = []
    for layer_id in range(message.num_layers):
        if layer_id not in full:
            if linear_makers is None:
                linear_makers = _layer_makers("linear", message, model, run, role, where)
            layers.append(LayerCache(layer_id, "linear", True, _fresh(linear_makers)))
        elif mask[layer_id]:
            if full_makers is None:
                full_makers = _layer_makers("full", message, model, run, with_index, where)
            layers.append(LayerCache(layer_id, "full", True, _fresh(full_makers)))
        else:  # the same views in each (a mapping of its own: a layer's entries are its own to replace)
            layers.append(LayerCache(layer_id, "full", False, dict(views)))

    if message.active:
        split_size, split_rank = message.split_size, rank_plan.split_rank
        split_group = tuple(message.split_groups[rank_plan.split_group])
    else:
        split_size, split_rank, split_group = 1, 0, (rank,)
    return WorkerKVCache(
        rank=rank, role=role, plan_digest=message.digest, split_size=split_size,
        split_rank=split_rank, split_group=split_group, n_blocks=message.n_blocks,
        kv_layout=message.kv_layout, device=device, layers=layers, scratch=scratch,
    )


# ---- measuring what was allocated -------------------------------------------------


def _storage(tensor: torch.Tensor):
    if hasattr(tensor, "untyped_storage"):
        return tensor.untyped_storage()
    return tensor.storage()  # torch < 2.0


def _storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    return (str(tensor.device), _storage(tensor).data_ptr())


def distinct_storage_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages behind ``tensors`` (views of one storage count once)."""
    seen: dict[tuple[str, int], int] = {}
    for tensor in tensors:
        storage = _storage(tensor)
        seen[_storage_key(tensor)] = storage.nbytes()
    return sum(seen.values())


def layer_own_bytes(cache: WorkerKVCache, layer_id: int) -> int:
    """Bytes of storage layer ``layer_id`` holds apart from the scratch (0 when not owned)."""
    scratch_keys = {_storage_key(t) for t in cache.scratch.values()}
    own = [t for t in cache.layer(layer_id).tensors.values() if _storage_key(t) not in scratch_keys]
    return distinct_storage_bytes(own)


def cache_bytes(cache: WorkerKVCache, kind: Optional[str] = None) -> int:
    """Distinct storage bytes of the whole cache, or of its ``full`` layers (scratch
    included) or ``linear`` layers only."""
    if kind is None:
        return distinct_storage_bytes(cache.all_tensors())
    tensors = [t for layer in cache.layers if layer.kind == kind for t in layer.tensors.values()]
    if kind == "full":
        tensors += list(cache.scratch.values())
    return distinct_storage_bytes(tensors)


def release(cache: WorkerKVCache) -> None:
    """Drop every tensor reference the cache holds, so its storage can be freed."""
    for layer in cache.layers:
        layer.tensors.clear()
    cache.layers.clear()
    cache.scratch.clear()
