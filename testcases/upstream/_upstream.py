"""Shared by the ported upstream tests: provenance, the implementations they run on, RunSpec builders.

Upstream xLLM's unit tests call its estimator and cache shapes directly. Here each
one becomes a harness configuration (a ``RunSpec``) handed to an implementation
through the harness's interface (``plan``, ``engine_message``, ``init_worker``;
``SpeculativeCapacityEstimator`` for the two tests that take engine figures), so
the same cases run on any implementation. Inputs and expected numbers are
upstream's, copied verbatim; only the spelling changes (upstream
``options.n_local_kv_heads = 2`` at world size 1 is ``num_key_value_heads=2`` on
one rank; ``options.cache_size_in_bytes`` is ``cache.kv_budget_bytes``).
"""

from __future__ import annotations

from dataclasses import replace

from omegaconf import OmegaConf

from contract.interface import KVShardingImplementation, WorkerKVCache
from contract.plan_types import KVPlan
from contract.specs import CacheSpec, HardwareProfile, ModelSpec, ParallelSpec, RunSpec, Topology
from harness.config.build import build_implementation
from harness.paths import CONF_DIR

UPSTREAM_REPO = "xLLM-AI/xllm"
UPSTREAM_COMMIT = "494f293b5629b96499312d2e5af18b159cacd5a4"
ESTIMATION_TEST = "tests/core/framework/kv_cache/kv_cache_estimation_test.cpp"
KV_CACHE_TEST = "tests/core/framework/kv_cache/kv_cache_test.cpp"

IMPLEMENTATIONS = ("reference", "xllm_upstream")
"""Implementations (``conf/implementation/<name>.yaml``) the ported tests run on; both must pass."""
CONF_IMPLEMENTATION = CONF_DIR / "implementation"

UNIT_TEST_DEVICE = HardwareProfile(
    name="upstream_unit_test",
    device_type="cpu",
    kv_layout="tokens_major",  # upstream's default [n_blocks, block_size, n_heads, head_dim]
    num_cards=1,
    hbm_bytes_per_card=1 << 40,  # never the limit: the budget is cache.kv_budget_bytes
    reserved_bytes_per_card=0,
    topology=Topology(cards=("card0",), links=(("X",),), name="one_card"),
    quantized_kv_cache_dtypes=("int8", "fp8_e4m3", "fp8_e5m2"),
    int8_indexer_cache=True,
)
"""One simulated card allowing every cache kind upstream's tests exercise (CPU tensors, as upstream's)."""
HEADS_MAJOR_DEVICE = replace(UNIT_TEST_DEVICE, name="upstream_unit_test_heads_major", kv_layout="heads_major")
"""Upstream ``KVCacheShape::apply_device_layout`` transposes to heads-major on MLU and ILU alike."""


def source(test_file: str, test_name: str) -> str:
    """Provenance line of one ported TEST."""
    return f"{UPSTREAM_REPO}@{UPSTREAM_COMMIT[:9]}:{test_file} TEST({test_name})"


def implementation(name: str) -> KVShardingImplementation:
    """The implementation ``conf/implementation/<name>.yaml`` names, built as the harness builds it."""
    node = OmegaConf.load(CONF_IMPLEMENTATION / f"{name}.yaml")
    return build_implementation(OmegaConf.create({"implementation": node}))


def run_spec(model: ModelSpec, *, cache_size_in_bytes: int, block_size: int, max_seqs_per_batch: int = 0,
             device: HardwareProfile = UNIT_TEST_DEVICE, **cache: object) -> RunSpec:
    """One rank (upstream ``world_size = 1``), upstream's estimate options as ``CacheSpec``.

    Upstream ``KVCacheEstimateOptions`` defaults: prefix cache off, no speculative
    tokens, ``kv_cache_dtype`` / ``indexer_cache_dtype`` ``auto``.
    """
    cache.setdefault("enable_prefix_cache", False)
    return RunSpec(
        model=model,
        parallel=ParallelSpec(world_size=1),
        cache=CacheSpec(kv_budget_bytes=cache_size_in_bytes, block_size=block_size,
                        max_seqs_per_batch=max_seqs_per_batch, **cache),
        hardware=device,
    )


def allocate(impl: KVShardingImplementation, run: RunSpec) -> tuple[KVPlan, WorkerKVCache]:
    """Plan, hand the target message to rank 0 and allocate there (CPU tensors, like upstream's tests)."""
    plan = impl.plan(run)
    message = impl.engine_message(plan, run, "target")
    cache = impl.init_worker(message, run, rank=0, role="target", device="cpu", expected_digest=message.digest)
    return plan, cache
