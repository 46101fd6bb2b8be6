"""Rank side: what a worker really holds, measured from its tensors (plain data for the parent)."""

from __future__ import annotations

from harness.suites.measure import storage_key, tensor_bytes


def worker_facts(worker, device: str) -> dict:
    """Per layer: owned flag, tensor names/shapes/dtypes and bytes of its own storage."""
    cache = worker.cache
    scratch_keys = {storage_key(t) for t in cache.scratch.values()}
    seen: set = set(scratch_keys)
    layers = []
    for layer in cache.layers:
        own_bytes = 0
        tensors = {}
        for name, t in layer.tensors.items():
            key = storage_key(t)
            tensors[name] = {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "bytes": tensor_bytes(t)}
            if key not in seen:
                seen.add(key)
                own_bytes += t.untyped_storage().nbytes()
        layers.append({
            "layer": layer.layer_id,
            "kind": layer.kind,
            "owned": bool(layer.owned),
            "own_bytes": own_bytes,
            "scratch_view": bool(layer.tensors) and all(storage_key(t) in scratch_keys for t in layer.tensors.values()),
            "tensors": tensors,
        })
    scratch_bytes = sum(t.untyped_storage().nbytes() for t in {storage_key(t): t for t in cache.scratch.values()}.values())
    return {
        "role": worker.role,
        "plan_rank": worker.plan_rank,
        "device": device,
        "digest": cache.plan_digest,
        "n_blocks": cache.n_blocks,
        "split_size": cache.split_size,
        "split_rank": cache.split_rank,
        "split_group": list(cache.split_group),
        "kv_layout": cache.kv_layout,
        "measured_bytes": worker.measured_bytes,
        "scratch_bytes": scratch_bytes,
        "scratch_tensors": {n: list(t.shape) for n, t in cache.scratch.items()},
        "layers": layers,
    }


def owned_full(wf: dict) -> list[int]:
    return [l["layer"] for l in wf["layers"] if l["kind"] == "full" and l["owned"]]
