"""Allure labels and attachments for one TC case (called by the pytest plugin)."""

from __future__ import annotations

COMPONENTS = {
    "TC-01": "Layerwise allocation",
    "TC-02": "Memory estimation",
    "TC-03": "ILU topology mapping",
    "TC-04": "Engine integration",
    "TC-05": "Worker init",
    "TC-06": "Config flag",
    "TC-07": "Speculative engine",
}
SEVERITY = {"L1": "critical", "L2": "normal"}


def apply(case, suite, resolved) -> None:
    """Labels and parameters, at fixture setup. Title and description go in ``apply_title``:
    allure-pytest rewrites both when setup ends."""
    import allure

    allure.dynamic.parameter("lw_case", case.id, mode=allure.parameter_mode.HIDDEN)
    allure.dynamic.id(suite.TC)
    allure.dynamic.epic("Layerwise split KV cache sharding")
    allure.dynamic.feature(COMPONENTS[suite.TC])
    allure.dynamic.story(f"{suite.TC} {suite.TITLE}")
    allure.dynamic.severity(SEVERITY[suite.LEVEL])
    allure.dynamic.tag(suite.LEVEL)
    run = resolved.run
    for name, value in (
        ("model", case.model),
        ("split size", resolved.split_size if resolved.enable else f"off ({resolved.split_size})"),
        ("world size", resolved.world_size),
        ("dp size", resolved.dp_size),
        ("backend", resolved.backend),
        ("implementation", case.implementation),
        ("hardware", case.hardware),
        ("topology", run.hardware.topology.name),
        ("draft", case.draft),
    ):
        allure.dynamic.parameter(name, str(value))


def apply_title(case, suite) -> None:
    """Called in the call phase, after allure-pytest has named the test from its node id."""
    import allure

    allure.dynamic.title(case.title)
    allure.dynamic.description(suite.__doc__ or "")


def attach_results(item, case, facts, report, excinfo=None) -> None:
    """Layout table, memory chart and config always; each rank's traceback on failure."""
    from harness.reporting import attachments

    attachments.attach_config(case.resolved.config_yaml)
    view = item.module.SUITE.report_view(facts) if facts and hasattr(item.module.SUITE, "report_view") else None
    if view:
        if view.get("layout"):
            attachments.attach_layout(view["layout"])
        if view.get("memory"):
            attachments.attach_memory_chart(**view["memory"])
    rank_errors = getattr(excinfo.value, "rank_errors", None) if excinfo is not None else None
    if report.failed and rank_errors:
        attachments.attach_rank_logs(rank_errors)
