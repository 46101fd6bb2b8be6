"""Measured bytes, independent of the implementation under test.

CPU: the distinct bytes behind a worker's tensors, by address: the union of the byte ranges of
their storages, per device, so a view of the scratch counts once and so do tensors carved out of one
pool at overlapping offsets (``at::from_blob``: each its own storage object over shared bytes). Card:
the device allocator's own counter around the allocation.
"""

from __future__ import annotations

from collections.abc import Iterable


def storage_key(tensor, storage=None) -> tuple[str, int]:
    """(device, address) of the storage behind ``tensor`` (``storage``: that storage, when at hand)."""
    storage = tensor.untyped_storage() if storage is None else storage
    return (str(tensor.device), storage.data_ptr())


def distinct_storage_bytes(tensors: Iterable) -> int:
    """Bytes of the union of ``[data_ptr, data_ptr + nbytes)`` over the storages behind ``tensors``, per device:
    memory two storages share is counted once."""
    ranges: dict = {}  # device -> spans (by the device object: its name once per device, not per tensor)
    for t in tensors:
        storage = t.untyped_storage()
        nbytes = storage.nbytes()
        if nbytes:
            start = storage.data_ptr()
            device = t.device
            spans = ranges.get(device)
            if spans is None:
                spans = ranges[device] = set()
            spans.add((start, start + nbytes))
    by_name: dict[str, set] = {}
    for device, spans in ranges.items():
        by_name.setdefault(str(device), set()).update(spans)
    return sum(union_bytes(spans) for spans in by_name.values())


def union_bytes(spans: Iterable[tuple[int, int]]) -> int:
    """The length of the union of half-open ``[start, end)`` ranges."""
    total, reach = 0, None
    for start, end in sorted(spans):
        if reach is None or start >= reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total


def tensor_bytes(tensor) -> int:
    return tensor.numel() * tensor.element_size()


def allocator_bytes(device: str) -> int:
    """Bytes the device allocator holds for live tensors (0 on CPU: use storages there)."""
    if not device.startswith("cuda"):
        return 0
    # torch (3.7 s, python -X importtime): only a CUDA rank reads its allocator; the controller imports this module
    import torch

    torch.cuda.synchronize(device)
    return int(torch.cuda.memory_allocated(device))
