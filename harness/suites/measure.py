"""Measured bytes, independent of the implementation under test.

CPU: the distinct storages behind a worker's tensors (a view of the scratch counts
once). Card: the device allocator's own counter around the allocation.
"""

from __future__ import annotations

from collections.abc import Iterable


def storage_key(tensor, storage=None) -> tuple[str, int]:
    """(device, address) of the storage behind ``tensor`` (``storage``: that storage, when at hand)."""
    storage = tensor.untyped_storage() if storage is None else storage
    return (str(tensor.device), storage.data_ptr())


def distinct_storage_bytes(tensors: Iterable) -> int:
    seen: dict[tuple[str, int], int] = {}
    for t in tensors:
        storage = t.untyped_storage()
        seen[storage_key(t, storage)] = storage.nbytes()
    return sum(seen.values())


def tensor_bytes(tensor) -> int:
    return tensor.numel() * tensor.element_size()


def allocator_bytes(device: str) -> int:
    """Bytes the device allocator holds for live tensors (0 on CPU: use storages there)."""
    if not device.startswith("cuda"):
        return 0
    import torch

    torch.cuda.synchronize(device)
    return int(torch.cuda.memory_allocated(device))
