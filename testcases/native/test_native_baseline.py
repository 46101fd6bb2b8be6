"""``xllm_upstream`` (the Python model of upstream) against the recorded outputs of upstream's own
compiled planning code (``harness/baselines/native_planning.json``), field by field; refusals by the
field they name."""

from __future__ import annotations

import json
from functools import lru_cache

from harness.baselines import native_grid as G
from harness.baselines.record_native import NATIVE_BASELINE_PATH
from implementations.xllm_upstream import XllmUpstreamImplementation


@lru_cache(maxsize=1)
def baseline() -> dict:
    return json.loads(NATIVE_BASELINE_PATH.read_text())


def differences(impl) -> list[str]:
    doc = baseline()
    models = {name: G.model_from_json(node) for name, node in doc["models"].items()}
    out = []
    for cfg, want in zip(doc["configs"], doc["results"]):
        got = G.observe_run(impl, G.run_for(cfg, models))
        if got != want:
            keys = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k))
            out.append(f"{cfg}: " + ", ".join(f"{k} compiled {want.get(k)!r} != {impl.name} {got.get(k)!r}"
                                              for k in keys))
    return out


def test_xllm_upstream_matches_upstreams_compiled_planning_code():
    diffs = differences(XllmUpstreamImplementation())
    assert not diffs, f"{len(diffs)} configurations differ:\n" + "\n".join(diffs[:10])


def test_the_comparison_catches_one_block_too_many():
    class OneMoreBlock(XllmUpstreamImplementation):
        def block_count(self, available_bytes, costs_per_block):
            return super().block_count(available_bytes, costs_per_block) + 1

    accepted = sum(1 for r in baseline()["results"] if "refused" not in r)
    diffs = differences(OneMoreBlock())
    assert len(diffs) == accepted and all("n_blocks compiled" in d for d in diffs)


def test_the_baseline_is_the_grid_on_todays_models():
    doc = baseline()
    assert doc["configs"] == G.grid(), "grid changed: re-record with " + doc["provenance"]["command"]
    models = G.load_models()
    today = json.loads(json.dumps({name: G.model_to_json(m) for name, m in models.items()}))
    assert doc["models"] == today, \
        "model numbers changed: re-record with " + doc["provenance"]["command"]
    cfgs, results = doc["configs"], doc["results"]
    assert len(cfgs) == len(results) >= 1000
    assert {c["s"] for c in cfgs} == set(range(7))
    assert {c["model"] for c in cfgs} >= set(G.CONF_MODELS) | set(G.TINY)
    assert {(c.get("draft"), c.get("body_tp1")) for c in cfgs if c.get("draft")} >= \
        {(d, tp1) for d in G.CONF_DRAFTS for tp1 in (False, True)}
    assert {c.get("kv_dtype", "auto") for c in cfgs} == {"auto", "int8", "fp8_e4m3", "fp8_e5m2"}
    accepted = [r for r in results if "refused" not in r]
    assert sum(r["active"] for r in accepted) >= 100 and any(r["n_blocks"] == 1 for r in accepted)
    provenance = doc["provenance"]
    assert provenance["source_commit"].startswith("494f293b5") and provenance["compiler"] and provenance["flags"]
