"""Worker mutants: what a worker checks before allocating (FEATURE section 8)."""

from __future__ import annotations

from contract.errors import ConfigError, PlanError
from contract.interface import WorkerKVCache
from implementations.mutants.base import Mutant


class DigestUnchecked(Mutant):
    """Workers do not compare the message's digest with the master's, so a diverging layout is accepted (FEATURE 8, identical layout)."""

    name = "mutant_digest_unchecked"
    component = "worker"
    expected_catchers = ("TC-04",)

    def check_message(self, message, expected_digest, rank):
        if not any(r.rank == rank for r in message.ranks):
            raise PlanError("rank", rank, f"a rank of the plan (0..{message.world_size - 1})")


class SplitRankModS(Mutant):
    """A worker takes its split rank as upstream does, global rank % s, not its position in its split group (FEATURE 4, wrong on regrouped layouts)."""

    name = "mutant_split_rank_mod_s"
    component = "worker"
    # Only regrouped topologies tell the two apart; TC-03 plans without starting workers.
    expected_catchers = ("TC-01", "TC-04", "TC-05", "TC-07")

    def ownership_mask(self, message, rank):
        if not message.active:
            return (True,) * message.num_layers
        owners = dict(message.layer_owner)
        full = set(message.full_layers)
        split_rank = rank % message.split_size
        return tuple(l not in full or owners.get(l) == split_rank for l in range(message.num_layers))

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        cache = super().init_worker(message, run, rank=rank, role=role, device=device,
                                    expected_digest=expected_digest)
        if message.active:
            cache.split_rank = rank % message.split_size  # and it reports that split rank about itself
        return cache


class QuantizedRefusedByWorker(Mutant):
    """A worker refuses an int8 KV cache the hardware profile allows: its own backend's limit, not the profile's (FEATURE 3, the profile says which quantized caches)."""

    name = "mutant_quantized_refused_by_worker"
    component = "worker"
    # The master plans it; only a TC that starts the workers sees the refusal (TC-03 only plans).
    expected_catchers = ("TC-01", "TC-02", "TC-05")

    def init_worker(self, message, run, *, rank, role, device, expected_digest) -> WorkerKVCache:
        if run.cache.kv_cache_dtype == "int8":
            raise ConfigError("cache.kv_cache_dtype", "int8", "auto (this worker's backend has no int8 KV cache)")
        return super().init_worker(message, run, rank=rank, role=role, device=device,
                                   expected_digest=expected_digest)
