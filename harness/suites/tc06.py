"""TC-06 (L2) Fallback when disabled.

With the flag off (``layerwise=off``), with s = 1 and the flag on (``layerwise=s1``), and
with the flag off but s = 2 (variant ``off-s2``), every rank must allocate exactly the
pre-feature uniform allocation: every layer owned, no scratch, the uniform block count,
and per layer the same tensor names, shapes, dtypes and bytes as the RECORDED baseline
``harness/baselines/uniform_allocation.json`` (made by ``harness/suites/baseline.py``
from FEATURE.md and the model numbers, never from an implementation; see the README
next to it).
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Optional

from harness import oracle
from harness.suites import Suite, baseline
from harness.suites.case import Case
from harness.suites.checks import leak_problems, startup_problems
from harness.suites.expectations import Predicted, Prediction, Problem
from harness.suites.facts import plan_of
from harness.suites.standard import standard_body

TC = "TC-06"

DISABLED = ("off", "s1")
OFF_S2_MODELS = ("deepseek_v32", "qwen3_5_moe")
"""Models also run with the flag off but split_size 2: a stray split_size must not split."""
OFF_S2 = ("layerwise.enable=false", "layerwise.split_size=2")
MAX_LISTED = 8


def cases(matrix) -> list[Case]:
    """Models x the layerwise axis's options that do not split (with the flag off: off and s1) x
    parallel x implementations, plus ``off-s2`` for two models at tp4."""
    asked = [lw for lw in matrix.layerwise if not matrix.layerwise_flags(lw).active]
    flag_off = any(not matrix.layerwise_flags(lw).enable for lw in asked)
    layerwise = list(asked)
    if flag_off:  # the flag off stands for the whole fallback row
        layerwise += [lw for lw in DISABLED if lw not in asked and not matrix.offers("layerwise", lw)]
    out = []
    for hw, model, lw, par, impl in itertools.product(
        matrix.hardware, matrix.models, layerwise, matrix.parallel, matrix.implementations
    ):
        out.append(Case(tc=TC, model=model, layerwise=lw, parallel=par, implementation=impl, hardware=hw,
                        extra=matrix.extra_for(lw if lw in asked else None, par)))
    if flag_off:
        off_s2 = [m for m in OFF_S2_MODELS if m in matrix.models] or list(matrix.models)[:1]
        pars = matrix.offered("parallel", ["tp4"]) or list(matrix.parallel)[:1]
        for hw, model, par, impl in itertools.product(matrix.hardware, off_s2, pars, matrix.implementations):
            out.append(Case(tc=TC, model=model, layerwise="off", parallel=par, implementation=impl, hardware=hw,
                            variant="off-s2", extra=(*OFF_S2, *matrix.extra_for(None, par))))
    return out


@lru_cache(maxsize=1)
def _recorded() -> dict:
    return baseline.load()["entries"]


def _entry(run) -> Optional[dict]:
    """The recorded entry for this run's model, parallel layout and hardware, if its conditions match."""
    for e in _recorded().values():
        if (e["model"] == run.model.name and e["hardware"] == run.hardware.name
                and e["world_size"] == run.parallel.world_size and e["dp_size"] == run.parallel.dp_size
                and e["conditions"] == baseline.conditions(run)):
            return e
    return None


def missing_baseline(run) -> Optional[str]:
    """Why this case has nothing to compare with (a skip reason), or None."""
    if _entry(run) is not None:
        return None
    return (f"no recorded uniform baseline for model={run.model.name} hardware={run.hardware.name} "
            f"world={run.parallel.world_size} dp={run.parallel.dp_size} {baseline.conditions(run)}; "
            f"record with: python -m harness.suites.baseline --record (after adding it there)")


def check(facts: list, run) -> list[str]:
    verdict = startup_problems(facts, run)
    if verdict is not None:
        return verdict
    want = _entry(run)
    if want is None:
        return [missing_baseline(run)]
    plan = plan_of(facts)
    problems = []
    if plan.active or plan.n_blocks != want["n_blocks"]:
        problems.append(Problem(f"plan: active={plan.active}, n_blocks {plan.n_blocks}; baseline: inactive, "
                                f"n_blocks {want['n_blocks']}", rule="baseline-plan"))
    if len(facts) != want["world_size"]:
        problems.append(f"{len(facts)} ranks reported, baseline has {want['world_size']}")
    for f in facts:
        problems += _rank_problems(f.rank, f.workers["target"], want)
    return problems + leak_problems(facts)


def _as_recorded(tensors: dict) -> dict:
    """A layer's tensor facts in the baseline file's form."""
    return {n: {"shape": list(t.shape), "dtype": t.dtype, "bytes": t.bytes} for n, t in tensors.items()}


def _rank_problems(r: int, wf, want: dict) -> list[str]:
    out = []  # every problem here: rule "baseline" on rank r
    if wf.n_blocks != want["n_blocks"]:
        out.append(f"rank {r}: n_blocks {wf.n_blocks}, baseline {want['n_blocks']}")
    if (wf.split_size, wf.split_rank) != (1, 0):
        out.append(f"rank {r}: split size {wf.split_size} rank {wf.split_rank}, baseline 1 / 0")
    if wf.scratch_bytes or wf.scratch_tensors:
        out.append(f"rank {r}: scratch {wf.scratch_tensors} ({wf.scratch_bytes} B), baseline none")
    if wf.measured_bytes != want["rank_bytes"]:
        out.append(f"rank {r}: allocated {wf.measured_bytes} B, baseline {want['rank_bytes']} B")
    got_layers = {l.layer: l for l in wf.layers}
    if sorted(got_layers) != [l["layer"] for l in want["layers"]]:
        out.append(f"rank {r}: layers {sorted(got_layers)}, baseline 0..{len(want['layers']) - 1}")
    differ = []
    for w in want["layers"]:
        g = got_layers.get(w["layer"])
        if g is None:
            continue
        own = sum(t["bytes"] for t in w["tensors"].values())
        got = _as_recorded(g.tensors)
        if g.kind != w["kind"] or not g.owned or g.own_bytes != own or got != w["tensors"]:
            differ.append(f"layer {w['layer']}: got {g.kind} owned={g.owned} own {g.own_bytes} B "
                          f"{_brief(got)}; baseline {w['kind']} owned own {own} B {_brief(w['tensors'])}")
    if differ:
        more = f" (+{len(differ) - MAX_LISTED} more)" if len(differ) > MAX_LISTED else ""
        out.append(f"rank {r}: {len(differ)} layers differ from the baseline{more}: " + "; ".join(differ[:MAX_LISTED]))
    return [Problem(p, rule="baseline", rank=r) for p in out]


def _brief(tensors: dict) -> str:
    return "{" + ", ".join(f"{n}: {t['dtype']}{t['shape']} {t['bytes']} B" for n, t in tensors.items()) + "}"


# ---- what the spec predicts upstream's variants make this check find -----------------------------


def predict_upstream_unsplit(run) -> Prediction:
    """Upstream has no enable flag: with it off and s > 1 upstream still splits, so its plan is active
    (``baseline-plan``) and every rank departs from the uniform baseline (``baseline``)."""
    return Prediction(required=(Predicted(rule="baseline-plan"),
                                *(Predicted(rule="baseline", rank=r) for r in range(run.parallel.world_size))),
                      reason=f"upstream has no enable flag: layerwise_split_size {oracle.upstream_split_size(run)} "
                             f"alone splits, so every rank departs from the uniform baseline (FEATURE 2)")


SUITE = Suite(
    TC=TC,
    LEVEL="L2",
    TITLE="Fallback when disabled",
    cases=cases,
    body=standard_body,
    check=check,
    missing_baseline=missing_baseline,
    predict_upstream_unsplit=predict_upstream_unsplit,
)
