"""How the control plane's objects travel between ranks: pickled, in fixed-size frames.

``RankContext.broadcast_object`` and ``all_gather_object`` move small Python objects (plans,
digests, verdicts; a few KiB) between the ranks of one pool. torch's object collectives
spend two collectives on each (the sizes, then the bytes), and gloo's all_gather is a ring
of world - 1 steps, each a wake-up of the next rank: on a loaded host that costs
milliseconds of CPU per rank. Here an object of up to ``INLINE_BYTES`` travels in one
frame: a broadcast is one broadcast, an all-gather one gather to rank 0 and one broadcast
of the gathered frames. A larger object takes a second round sized to the largest. Side by
side with torch's: ``python -m tools.bench.collectives``.

A frame is ``HEADER_BYTES`` (kind, length: two int64) and then the payload, zero-padded.
A rank whose object does not pickle sends kind ``UNPICKLABLE`` with the error's text, so
every rank raises together and the group stays in step (nobody is left waiting).

Pickle, as torch.distributed's object collectives and multiprocessing's pipes use it: the
bytes come only from ranks of the same pool over its own group, never from a file.
"""

from __future__ import annotations

import pickle
from typing import Any

import torch

HEADER_BYTES = 16
INLINE_BYTES = 4096
"""Payload bytes a frame carries in the first round (every object the TC bodies send fits)."""

PICKLED = 0
UNPICKLABLE = 1


class UnpicklableObject(TypeError):
    """An object a rank passed to an object collective did not pickle. Raised on every rank
    of the collective (the collectives themselves completed, so the group stays usable)."""


def encode(obj: Any) -> tuple[int, bytes]:
    """(kind, bytes) of ``obj``: its pickle, or the pickling error's text."""
    try:
        return PICKLED, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # noqa: BLE001 - any pickling failure is reported to every rank
        return UNPICKLABLE, f"{type(exc).__name__}: {exc}".encode("utf-8", "replace")


def frame(kind: int, data: bytes, size: int) -> torch.Tensor:
    """A frame of ``size`` payload bytes holding (the first ``size`` bytes of) ``data``."""
    out = torch.zeros(HEADER_BYTES + size, dtype=torch.uint8)
    out[:HEADER_BYTES].view(torch.int64).copy_(torch.tensor([kind, len(data)], dtype=torch.int64))
    n = min(len(data), size)
    if n:
        out[HEADER_BYTES:HEADER_BYTES + n] = torch.frombuffer(bytearray(data[:n]), dtype=torch.uint8)
    return out


def empty(size: int, rows: int = 0) -> torch.Tensor:
    """Room for one frame (``rows`` = 0) or ``rows`` frames of ``size`` payload bytes."""
    shape = (rows, HEADER_BYTES + size) if rows else (HEADER_BYTES + size,)
    return torch.empty(shape, dtype=torch.uint8)


def headers(frames: torch.Tensor) -> list[tuple[int, int]]:
    """(kind, length) of each frame (one frame: a list of one)."""
    rows = frames.reshape(-1, frames.shape[-1])[:, :HEADER_BYTES].contiguous().view(torch.int64)
    return [(int(kind), int(length)) for kind, length in rows.tolist()]


def decode(one_frame: torch.Tensor, head: tuple[int, int], sender: int) -> Any:
    """The object in a frame that holds its whole payload (``head``: its ``headers`` entry);
    UnpicklableObject for a sender whose object did not pickle."""
    kind, length = head
    data = one_frame[HEADER_BYTES:HEADER_BYTES + length].numpy().tobytes()
    if kind == UNPICKLABLE:
        raise UnpicklableObject(f"rank {sender}'s object could not be pickled: {data.decode('utf-8', 'replace')}")
    if kind != PICKLED or len(data) != length:
        raise ValueError(f"rank {sender} sent a malformed frame (kind {kind}, length {length}, {len(data)} bytes)")
    return pickle.loads(data)
