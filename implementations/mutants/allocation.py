"""Allocation mutants: what a worker's tensors look like (FEATURE section 7)."""

from __future__ import annotations

from dataclasses import replace

import torch

from contract.interface import WorkerKVCache
from implementations.mutants.base import Mutant
from implementations.reference import allocation

_SWAPPED_LAYOUT = {"heads_major": "tokens_major", "tokens_major": "heads_major"}


class NonownerRealStorage(Mutant):
    """Non-owned full layers get fresh tensors of their own instead of views of the scratch (FEATURE 7, non-owned = scratch view)."""

    name = "mutant_nonowner_real_storage"
    component = "allocation"
    expected_catchers = ("TC-01", "TC-02", "TC-07")

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        for layer in cache.layers:
            if layer.kind == "full" and not layer.owned:
                layer.tensors = {name: torch.empty_like(t) for name, t in layer.tensors.items()}
        return cache


class WrongLayoutAxes(Mutant):
    """Full-layer KV is allocated in the other layout's axis order (heads_major <-> tokens_major) (FEATURE 7, profile picks the layout)."""

    name = "mutant_wrong_layout_axes"
    component = "allocation"
    # Not TC-01: the axis order leaves every byte count unchanged; TC-06 compares shapes with its baseline.
    expected_catchers = ("TC-05", "TC-06")

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        self.check_message(message, expected_digest, rank)
        mask = self.ownership_mask(message, rank)
        swapped = replace(message, kv_layout=_SWAPPED_LAYOUT.get(message.kv_layout, message.kv_layout))
        shape_model = run.model if role == "target" else self.draft_shape_model(run)
        cache = allocation.allocate_worker_cache(swapped, run, rank=rank, role=role, mask=mask, device=device,
                                                 shape_model=shape_model)
        # Report the layout it was asked for: only the tensors' axis order is wrong.
        cache.plan_digest, cache.kv_layout = message.digest, message.kv_layout
        return cache


class QuantizedViewReshaped(Mutant):
    """On a quantized cache, non-owned layers expose their float32 scale tensors as raw uint8 views of the scratch (other shape and dtype, same bytes) (FEATURE 7, a view shaped like the layer)."""

    name = "mutant_quantized_view_reshaped"
    component = "allocation"
    # Same bytes, same storage, same blocks: only a comparison of names, shapes and dtypes sees it.
    expected_catchers = ("TC-01", "TC-05")

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        if run.cache.kv_cache_dtype != "auto":
            for layer in cache.layers:
                if layer.kind == "full" and not layer.owned:
                    layer.tensors = {name: t.view(torch.uint8) if t.dtype == torch.float32 else t
                                     for name, t in layer.tensors.items()}
        return cache


class ConvStateTransposed(Mutant):
    """With the split active, linear layers' conv state is allocated [slots, channels, conv_state_len] (MUSA's order) instead of upstream's [slots, conv_state_len, channels] (FEATURE 7, upstream's shapes)."""

    name = "mutant_conv_state_transposed"
    component = "allocation"
    # Same bytes, same dtype, own storage: only a comparison with the spec's tensor shapes sees it (TC-01). The
    # disabled path keeps the right shape, so TC-06's baseline does not.
    expected_catchers = ("TC-01",)

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        if message.split_size > 1:
            for layer in cache.layers:
                conv = layer.tensors.get("conv") if layer.kind == "linear" else None
                if conv is not None:
                    layer.tensors["conv"] = torch.empty((conv.shape[0], conv.shape[2], conv.shape[1]),
                                                        dtype=conv.dtype, device=conv.device)
        return cache


class ConvValueChannelsValueDim(Mutant):
    """The conv state counts its value channels with linear_value_head_dim (as the estimate does) instead of upstream's linear_key_head_dim (FEATURE 7, upstream's shapes: only a model whose key and value head dims differ shows it)."""

    name = "mutant_conv_value_channels_value_dim"
    component = "allocation"
    expected_catchers = ("TC-01", "TC-02")

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        for layer in cache.layers:
            conv, recurrent = layer.tensors.get("conv"), layer.tensors.get("recurrent")
            if layer.kind == "linear" and conv is not None and recurrent is not None:
                v_heads, key_dim, value_dim = recurrent.shape[1], recurrent.shape[2], recurrent.shape[3]
                channels = conv.shape[2] + (value_dim - key_dim) * v_heads
                layer.tensors["conv"] = torch.empty((conv.shape[0], conv.shape[1], channels), dtype=conv.dtype,
                                                    device=conv.device)
        return cache
