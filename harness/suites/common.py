"""Pieces several TCs share: the standard case axes, the standard body, the layout view."""

from __future__ import annotations

from itertools import product

from harness import oracle

# The report views live in harness.reporting.views (re-exported here until the suites import them there).
from harness.reporting.views import layout_view, memory_view, report_view  # noqa: F401
from harness.suites.bring_up import bring_up
from harness.suites.case import Case
from harness.suites.facts import worker_facts


def standard_cases(tc: str, matrix, *, layerwise=None, parallel=None, models=None) -> list[Case]:
    """models x layerwise x parallel x implementations x hardware from the matrix."""
    out = []
    for hw, model, lw, par, impl in product(
        matrix.hardware,
        models if models is not None else matrix.models,
        layerwise if layerwise is not None else matrix.layerwise,
        parallel if parallel is not None else matrix.parallel,
        matrix.implementations,
    ):
        out.append(Case(tc=tc, model=model, layerwise=lw, parallel=par, implementation=impl,
                        hardware=hw, extra=tuple(matrix.extra)))
    return out


def standard_body(ctx, run, impl_cfg, engines=None) -> dict:
    """Bring up, report what each worker on this rank holds, tear down."""
    session = bring_up(ctx, run, impl_cfg, engines=engines)
    out = {"rank": ctx.rank, "error": session.error, "plan": session.plan if ctx.rank == 0 else None,
           "run": session.run if ctx.rank == 0 else None, "workers": {}}
    for role, worker in session.workers.items():
        out["workers"][role] = worker_facts(worker, ctx.device)
    out["digests"] = session.digests
    session.teardown()
    return out


def plan_of(facts: list[dict]):
    return facts[0]["plan"]


def run_of(facts: list[dict]):
    return facts[0]["run"]


def master_error(facts: list[dict]):
    return facts[0]["error"]


def expected_rejection(run) -> str | None:
    """The spec's reason a config must be refused at startup (FEATURE section 3), if any."""
    if oracle.split_size(run) == 1:
        return None
    par, cache = run.parallel, run.cache
    for refused, reason in (
        (run.model.model_type not in ("deepseek_v32", "glm_moe_dsa", "deepseek_v3", "qwen3_5_moe", "qwen3_next"),
         "model does not support layerwise split"),  # FEATURE 3 (by model_type)
        (par.cp_size > 1, "context parallel (cp_size > 1) with split"),
        (par.kv_split_size > 1, "KV split (kv_split_size > 1) with split"),
        (cache.host_blocks_factor > 1, "host cache (host_blocks_factor > 1) with split"),
        (cache.enable_sleep_mode, "sleep mode with split"),
        (cache.enable_xtensor, "xtensor with split"),
    ):
        if refused:
            return reason
    return None


def summarize(facts: list[dict]) -> dict:
    """Numbers a sweep aggregates: per-rank estimated vs measured bytes, blocks, savings."""
    plan = plan_of(facts)
    if plan is None:
        return {"error": master_error(facts)}
    measured = {f["rank"]: f["workers"]["target"]["measured_bytes"] for f in facts if "target" in f["workers"]}
    return {
        "n_blocks": plan.n_blocks,
        "uniform_n_blocks": plan.uniform_n_blocks,
        "peak_bytes": plan.peak_bytes,
        "uniform_peak_bytes": plan.uniform_peak_bytes,
        "savings_bytes": plan.savings_bytes,
        "capacity_gain": plan.capacity_gain,
        "ranks": [
            {"rank": rp.rank, "estimated_bytes": rp.estimated_bytes, "measured_bytes": measured.get(rp.rank)}
            for rp in plan.ranks
        ],
    }


def preferred(values, axis) -> list[str]:
    """The ``values`` a TC prefers that the matrix axis still offers; the whole axis if none do
    (a run narrowed to other values gets those, rather than no cases)."""
    return [v for v in values if v in axis] or list(axis)
