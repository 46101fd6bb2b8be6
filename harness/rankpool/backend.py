"""Backend choice and device per rank: NCCL with one rank per card, else gloo on CPU.

Pure except for ``cuda_device_count`` (which asks torch); Iluvatar cards appear to
torch as CUDA devices, so the same rule serves them.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from contract.errors import ConfigError

from .errors import PoolUnavailable

BACKENDS = ("auto", "gloo", "nccl")
DEVICE_TYPES = ("auto", "cpu", "cuda")
DEFAULT_MAX_WORLD_SIZE = 8
DEVICE_ENV = "LWSPLIT_RUNNER_DEVICE"
"""Environment variable that replaces a device_type of ``auto`` (``cuda`` puts every rank of a
1-card box on that card under gloo; scripts/check_cards.sh sets it). Unset: no effect."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class BackendChoice:
    """The resolved data-plane backend for one pool."""

    backend: str
    """``gloo`` or ``nccl`` (the default process group's backend)."""
    device_type: str
    """``cpu``, or ``cuda``: one card per local rank under nccl; cards shared round-robin under gloo."""
    card_count: int = 0
    """Cards visible to each rank (0 on CPU)."""

    def device(self, local_rank: int) -> str:
        if self.device_type == "cpu":
            return "cpu"
        return f"cuda:{local_rank % self.card_count}"


def cuda_device_count() -> int:
    """Cards torch can see; 0 where torch has no CUDA (the CPU wheel)."""
    # the controller chooses a backend without importing torch (3.7 s, python -X importtime): only a question about cards pays it
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def nccl_available() -> bool:
    # the controller chooses a backend without importing torch (3.7 s, python -X importtime): only a question about NCCL pays it
    import torch.distributed as dist

    return dist.is_available() and dist.is_nccl_available()


def check_world_size(world_size: object, max_world_size: int = DEFAULT_MAX_WORLD_SIZE) -> int:
    """A world size in 1..max_world_size, else ConfigError naming the field."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or not 1 <= world_size <= max_world_size:
        raise ConfigError(
            "parallel.world_size",
            world_size,
            f"an integer in 1..{max_world_size} (the runner's limit, runner.max_world_size)",
        )
    return world_size


MAX_TIMEOUT_S = 86_400.0
"""Longest timeout accepted (a day): ``inf`` or ``1e30`` would overflow the pool's waits."""


def check_seconds(field: str, value: object) -> float:
    """A finite number of seconds in (0, a day], else ConfigError naming the field."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= MAX_TIMEOUT_S:
        raise ConfigError(field, value, f"a number of seconds > 0 and <= {MAX_TIMEOUT_S:g} (finite)")
    return float(value)


def resolve_backend(
    requested: str,
    local_world_size: int,
    *,
    device_type: str = "auto",
    card_count: Optional[int] = None,
    nccl_ok: Optional[bool] = None,
) -> BackendChoice:
    """``auto`` -> nccl when every local rank gets its own card, else gloo on CPU.

    ``device_type="cuda"`` with gloo puts rank tensors on cards shared round-robin (gloo
    carries CUDA tensors), the way to use a machine with fewer cards than ranks. A request
    the machine cannot serve (nccl without a card per rank, cuda without cards) raises
    PoolUnavailable, which the pytest layer reports as a skip; an unknown name or
    nccl on CPU is a ConfigError. ``card_count`` / ``nccl_ok`` default to asking torch.
    A ``device_type`` of ``auto`` takes the value of ``$LWSPLIT_RUNNER_DEVICE`` when that is set.
    """
    if requested not in BACKENDS:
        raise ConfigError("runner.backend", requested, "one of " + ", ".join(BACKENDS))
    if device_type not in DEVICE_TYPES:
        raise ConfigError("runner.device", device_type, "one of " + ", ".join(DEVICE_TYPES))
    if device_type == "auto" and os.environ.get(DEVICE_ENV):
        device_type = os.environ[DEVICE_ENV]
        if device_type not in DEVICE_TYPES:
            raise ConfigError(DEVICE_ENV, device_type, "one of " + ", ".join(DEVICE_TYPES) + " (or unset)")
    if requested == "nccl" and device_type == "cpu":
        raise ConfigError("runner.device", device_type, "auto or cuda when runner.backend=nccl")
    if requested == "gloo" and device_type == "cpu":
        return BackendChoice(backend="gloo", device_type="cpu")  # the cards do not matter: torch is not asked
    cards = cuda_device_count() if card_count is None else card_count
    has_nccl = (nccl_available() if cards else False) if nccl_ok is None else nccl_ok
    if requested != "gloo" and device_type != "cpu" and has_nccl and cards >= local_world_size:
        return BackendChoice(backend="nccl", device_type="cuda", card_count=cards)
    if requested == "nccl":
        if cards and not has_nccl:
            raise PoolUnavailable("backend 'nccl' requested but this torch build has no NCCL")
        raise PoolUnavailable(
            f"backend 'nccl' needs one card per rank: {local_world_size} ranks on this node, "
            f"{cards} CUDA device(s) visible"
        )
    if device_type == "cuda":
        if not cards:
            raise PoolUnavailable("runner.device=cuda requested but no CUDA device is visible")
        return BackendChoice(backend="gloo", device_type="cuda", card_count=cards)
    return BackendChoice(backend="gloo", device_type="cpu")
