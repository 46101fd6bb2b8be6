"""RankContext: what a body gets as its first argument on every rank.

Collective helpers (``group``, ``split_groups``, ``broadcast_object``,
``all_gather_object``, ``barrier``, ``assert_all``) must be called by every rank of the
world in the same order, like any torch.distributed collective. Object traffic goes
over the gloo control group, so under NCCL no pickled object touches a card.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any, Optional

import torch
import torch.distributed as dist

from harness.private_apis import c10d_group_count, c10d_sequence_number

from . import wire
from .errors import CollectiveCheckFailed

KEPT_GROUPS = 4
"""Subgroups a rank keeps between calls; the least recently used beyond these are destroyed when a
call ends (``end_call``). Every live gloo group keeps a thread in each member rank that wakes every
10 ms (gloo's TCP loop): pools that kept every split group of the TC matrix (24 on world 8) spent
a third of a 2-core machine on those wake-ups. Re-creating an evicted partition of 8 ranks costs
about 12 ms of CPU in all (four ``new_group``), less than its threads cost in 5 s of idling."""


class RankContext:
    """This rank's place in the live group, plus cached subgroups. Lives as long as the group."""

    def __init__(
        self,
        *,
        rank: int,
        world_size: int,
        local_rank: int,
        device: str,
        backend: str,
        control_group: Any,
        tmp_dir: str,
    ) -> None:
        self.rank = rank
        self.world_size = world_size
        self.local_rank = local_rank
        self.device = device
        """``cpu`` or ``cuda:<card>``: where this rank's tensors belong."""
        self.backend = backend
        """Backend of the default group and of subgroups: ``gloo`` or ``nccl``."""
        self.control_group = control_group
        """A gloo group over all ranks (the default group itself when backend is gloo)."""
        self.tmp_dir = tmp_dir
        """A directory shared by the ranks of this pool (on this node), removed with the pool."""
        self._groups: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        """Subgroups by their ranks, least recently used first (None on ranks outside one)."""
        self._partitions: dict[tuple[tuple[int, ...], ...], Any] = {}

    @classmethod
    def after_init(cls, *, local_rank: int, device: str, tmp_dir: str) -> RankContext:
        """Build the context once the default process group exists (creates the control group)."""
        backend = str(dist.get_backend())
        control = dist.group.WORLD if backend == "gloo" else dist.new_group(backend="gloo")
        return cls(
            rank=dist.get_rank(),
            world_size=dist.get_world_size(),
            local_rank=local_rank,
            device=device,
            backend=backend,
            control_group=control,
            tmp_dir=tmp_dir,
        )

    def group(self, ranks: Sequence[int]) -> Optional[Any]:
        """A real ``new_group`` over ``ranks`` (cached); None on ranks outside it.

        Collective over the WHOLE world: every rank calls it with the same ranks, in
        the same order relative to other group creations. To build several disjoint
        groups at once use ``split_groups``.
        """
        key = tuple(sorted(self._check_ranks(ranks)))
        if key in self._groups:
            self._groups.move_to_end(key)
        else:
            self._groups[key] = dist.new_group(list(key), backend=self.backend)
        return self._groups[key] if self.rank in key else None

    def split_groups(self, partition: Sequence[Sequence[int]]) -> Any:
        """Create (once per partition) a subgroup for every part, in order, on all ranks; return this rank's.

        ``partition`` must cover ``0..world_size-1`` exactly once, e.g. ``((0, 1), (2, 3))``.
        """
        parts = tuple(tuple(self._check_ranks(part)) for part in partition)
        covered = sorted(r for part in parts for r in part)
        if covered != list(range(self.world_size)):
            raise ValueError(
                f"split_groups needs a partition of ranks 0..{self.world_size - 1}, each exactly once; got {parts}"
            )
        if parts in self._partitions:
            for part in parts:  # in use again: the least recently used are evicted first
                self._groups.move_to_end(tuple(sorted(part)))
        else:
            own = None
            for part in parts:
                group = self.group(part)
                if self.rank in part:
                    own = group
            self._partitions[parts] = own
        return self._partitions[parts]

    @property
    def live_groups(self) -> tuple[tuple[int, ...], ...]:
        """The ranks of each subgroup kept (this rank's or not), least recently used first."""
        return tuple(self._groups)

    def end_call(self, keep: int = KEPT_GROUPS) -> None:
        """Destroy the least recently used subgroups beyond ``keep`` (the pool calls this after every
        body, on every rank: all ranks made the same group calls, so all evict the same groups)."""
        while len(self._groups) > keep:
            key, group = self._groups.popitem(last=False)
            self._partitions = {parts: own for parts, own in self._partitions.items()
                                if key not in (tuple(sorted(p)) for p in parts)}
            if group is not None:
                dist.destroy_process_group(group)

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        """``obj`` from rank ``src`` on every rank (pickled over the control group, ``wire``).

        One broadcast of a frame; a second, sized to fit, for an object over
        ``wire.INLINE_BYTES``. If ``obj`` does not pickle on ``src``, every rank raises
        ``wire.UnpicklableObject``.
        """
        self._check_ranks([src])
        kind, data = wire.encode(obj) if self.rank == src else (wire.PICKLED, b"")
        size = wire.INLINE_BYTES
        box = wire.frame(kind, data, size) if self.rank == src else wire.empty(size)
        dist.broadcast(box, src=src, group=self.control_group)
        [head] = wire.headers(box)
        if head[1] > size:
            box = wire.frame(kind, data, head[1]) if self.rank == src else wire.empty(head[1])
            dist.broadcast(box, src=src, group=self.control_group)
        return wire.decode(box, head, src)

    def all_gather_object(self, obj: Any) -> list[Any]:
        """Every rank's ``obj``, indexed by rank (``wire``: one gather to rank 0 and one broadcast).

        A second round, sized to the largest, when any object is over ``wire.INLINE_BYTES``.
        If any rank's object does not pickle, every rank raises ``wire.UnpicklableObject``
        naming the first such rank.
        """
        kind, data = wire.encode(obj)
        frames = self._gather_frames(kind, data, wire.INLINE_BYTES)
        heads = wire.headers(frames)
        longest = max(length for _, length in heads)
        if longest > wire.INLINE_BYTES:
            frames = self._gather_frames(kind, data, longest)
        return [wire.decode(f, head, sender) for sender, (f, head) in enumerate(zip(frames, heads))]

    def _gather_frames(self, kind: int, data: bytes, size: int) -> Any:
        """Every rank's frame of ``size`` payload bytes, on every rank (rows indexed by rank)."""
        frames = wire.empty(size, rows=self.world_size)
        mine = wire.frame(kind, data, size)
        dist.gather(mine, list(frames.unbind(0)) if self.rank == 0 else None, dst=0, group=self.control_group)
        dist.broadcast(frames, src=0, group=self.control_group)
        return frames

    def barrier(self) -> None:
        """Control-plane barrier (gloo): it orders host code, not pending NCCL kernels."""
        dist.barrier(group=self.control_group)

    def assert_all(self, ok: bool, detail: str = "") -> None:
        """All ranks agree on a verdict before anyone raises.

        If any rank passes ``ok=False``, EVERY rank raises CollectiveCheckFailed naming
        the failing ranks and their ``detail``. Because no rank is left waiting in a
        collective, the pool keeps its live group (no rebuild) for the next test.
        """
        verdicts = self.all_gather_object((bool(ok), str(detail)))
        failed = {r: d for r, (good, d) in enumerate(verdicts) if not good}
        if failed:
            lines = "; ".join(f"rank {r}: {d}" if d else f"rank {r}" for r, d in failed.items())
            raise CollectiveCheckFailed(f"check failed on {len(failed)}/{self.world_size} ranks: {lines}")

    def sync_state(self) -> Optional[dict[str, Any]]:
        """This rank's collective counters: group creations made, and each joined group's sequence number.

        The parent compares them across ranks after a failure in which every rank
        reported: equal counters mean no rank skipped a collective the others ran, so
        the live group can be kept. None where this torch does not expose them (both are torch
        internals: ``harness.private_apis``); unknown state means the pool is rebuilt.
        """
        device = torch.device("cuda" if self.backend == "nccl" else "cpu")
        groups = {"world": (dist.group.WORLD, device), "control": (self.control_group, torch.device("cpu"))}
        groups.update({key: (g, device) for key, g in self._groups.items() if self.rank in key})
        count = c10d_group_count()
        seq = {key: c10d_sequence_number(g, dev) for key, (g, dev) in groups.items()}
        if count is None or None in seq.values():
            return None
        return {"group_count": count, "created": sorted(self._groups), "seq": seq}

    def _check_ranks(self, ranks: Sequence[int]) -> tuple[int, ...]:
        out = tuple(ranks)
        if not out or any(not isinstance(r, int) or not 0 <= r < self.world_size for r in out) or len(set(out)) != len(out):
            raise ValueError(f"ranks must be distinct integers in 0..{self.world_size - 1}; got {out}")
        return out

    def __repr__(self) -> str:
        return (
            f"RankContext(rank={self.rank}, world_size={self.world_size}, local_rank={self.local_rank}, "
            f"device={self.device!r}, backend={self.backend!r})"
        )
