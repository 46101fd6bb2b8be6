"""Upstream xLLM's KV-cache allocation (494f293b5, ``framework/kv_cache``, ``-DUSE_ILU``) compiled on CPU
(``scripts/build_upstream_alloc.sh``) and loaded into this process: the tensors it allocates for a GQA,
an MLA+indexer and a hybrid model, taken over DLPack, against ``harness/oracle/tensors.py``.

A real-tree test (``LWSPLIT_REAL_TREES=1 pytest -n 0 -m real_tree``): the build takes ~15-25 s on two
cores (``LWSPLIT_UPSTREAM_ALLOC_LIB`` names a library built already), the checks ~1 s."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from testcases.native.test_ports import ROOT, UPSTREAM, real_tree

pytestmark = [pytest.mark.real_tree, real_tree(UPSTREAM)]

PROBE_PATH = ROOT / "scripts" / "probe_upstream_alloc.py"


def _probe_module():
    spec = importlib.util.spec_from_file_location("probe_upstream_alloc", PROBE_PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def probe():
    return _probe_module()


@pytest.fixture(scope="module")
def library(probe, tmp_path_factory):
    given = os.environ.get("LWSPLIT_UPSTREAM_ALLOC_LIB")
    if given:
        return probe.Library(given)
    out = tmp_path_factory.mktemp("upstream_alloc") / "liblwsplit_upstream_alloc.so"
    env = {**os.environ, "LWSPLIT_XLLM_SRC": str(UPSTREAM), "LWSPLIT_ALLOC_TORCH": "light",
           "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(ROOT / "scripts" / "build_upstream_alloc.sh"), str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return probe.Library(str(out))


@pytest.mark.parametrize("case", ["a", "b", "c", "d"])
def test_upstream_allocates_what_the_oracle_expects(probe, library, case):
    result = probe.run_case(library, case, out=lambda *a, **k: None)
    assert result["layers"], result
    assert not result["findings"], "\n".join(result["findings"])
    owned = [owned for _, owned, _ in result["layers"]]
    if not all(owned):
        # every non-owned layer is a view of the one scratch cache
        assert result["scratch_pointer_sets"] == 1


def test_hybrid_ranks_split_the_full_layers_by_layer_id(probe, library):
    """Upstream's owner rule (layer % s): on 3 linear + 1 full x 2, both full layers (3, 7) go to split
    rank 1; rank 0 keeps only views."""
    rank1 = {i: owned for i, owned, _ in probe.run_case(library, "c", out=lambda *a, **k: None)["layers"]}
    rank0 = {i: owned for i, owned, _ in probe.run_case(library, "d", out=lambda *a, **k: None)["layers"]}
    assert rank1[3] and rank1[7] and not rank0[3] and not rank0[7]


def test_allocation_picks_linear_layers_by_interval_not_layer_types(probe, library):
    """A divergence of upstream's own: with layer_types but no full_attention_interval, KVCacheShape has
    conv/ssm shapes, yet create_kv_cache_impl (kv_cache.cpp) tests is_linear_attention_layer(layer,
    full_attention_interval) only, so the linear layers get K/V and no state."""
    result = probe.run_case(library, "e", out=lambda *a, **k: None)
    assert len(result["findings"]) == 6
    assert all("['k', 'v'] but the oracle expects ['conv', 'ssm']" in f for f in result["findings"])


def test_a_check_in_the_allocation_is_answered(probe, library):
    reply = probe.check_reply(library)
    assert reply["check"]["file"].endswith("framework/kv_cache/kv_cache_shape.cpp")
    assert "world_size must be positive" in reply["check"]["message"]
