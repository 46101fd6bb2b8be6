"""One job of ``python -m harness``: one configuration, its TCs or its plan, and ``result.json``.

``mode=suite`` runs the selected TCs through the same pytest suites CI runs
(``pytest.main`` in this process on ``testcases/tc``, or on an installed wheel's copy of it:
``harness.paths.TC_DIR``). The job's case matrix (its option on each matrix axis, its TCs
and key overrides: ``suite_matrix``) is handed to pytest as data, and
each case's result line comes back as data (``harness.pytest_plugin.options.GivenCases``).
Rank pools outlive the session (``--lw-keep-pools``), so the jobs of a local sweep
share them; they close at interpreter exit. ``mode=plan`` only plans.

``result.json`` (written atomically into the job directory) holds the job's
overrides and choices, its status (``harness.app.status``), the plan numbers
(``harness.app.figures``), and for a suite run the per-TC outcome counts, each
case's result line (``harness.suites.case_result``: per-rank estimated and measured
bytes, n_blocks, savings, capacity gain) and the measured per-rank bytes of the
job's own configuration.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Mapping, Optional, Sequence

from contract.errors import ImplementationFailure, UserError
from contract.specs import LayerwiseFlags
from harness import oracle, signals
from harness.app import own_tests, tree_departures
from harness.app import status as st
from harness.app.figures import plan_numbers
from harness.app.progress import say
from harness.app.validate import check_app_config
from harness.config.build import build_implementation, build_run_spec, spec_from_node
from harness.config.compose import compose_config, parse_override
from harness.files import write_atomic, write_json_atomic
from harness.paths import IN_CHECKOUT, REPO_ROOT, TC_DIR
from harness.suites.matrix import job_matrix

RESULT_FILE = "result.json"
MATRIX_GROUPS = ("model", "layerwise", "parallel", "implementation", "hardware")
"""Config groups that are matrix axes: the job narrows each to its own choice."""
APP_KEYS = ("suite",)
"""Keys for this app only (``suite.*``; ``mode`` is a group): the TC suites never see them."""
SUMMARY_TCS = ("TC-02", "TC-01")
"""TCs whose result lines carry measured per-rank bytes (first found wins)."""

_TC_RE = re.compile(r"test_tc0*(\d+)")


def run_job(
    task_overrides: Sequence[str],
    choices: Mapping[str, Optional[str]],
    job_dir: Path,
    job_num: int = 0,
    *,
    quiet: bool = False,
) -> dict:
    """Run one configuration; always returns (and writes) a result, whatever happened.

    The configuration is ``task_overrides`` composed by the harness's one composer
    (``compose.compose_config``), as the command line's check and the job's cases compose theirs:
    the config Hydra's launcher composed for the job serves Hydra's own node only.
    """
    start = time.monotonic()
    job_dir = Path(job_dir)
    result: dict = {
        "job": {"num": job_num, "overrides": list(task_overrides), "dir": str(job_dir),
                "choices": {k: v for k, v in choices.items() if not k.startswith("hydra/")}},
        "mode": None,
        "status": st.ERROR,
        "message": "",
    }
    try:
        cfg = compose_config(list(task_overrides))
        check_app_config(cfg)
        result["mode"] = mode = str(cfg.suite.mode)
        result["config"] = config_facts(cfg, choices)
        run, impl = build_run_spec(cfg), build_implementation(cfg)
        refusal = spec_refusal(run)
        if refusal:
            result["spec_refuses"] = refusal
            say(f"note: the spec refuses this configuration at startup (FEATURE section 3): {refusal}; "
                 + ("the plan shows the implementation's answer" if mode == "plan"
                    else "the TCs check that the implementation under test refuses it"))
        result.update(_plan(impl, run, strict=mode == "plan"))
        if mode == "plan":
            result["status"] = st.PLANNED if result["plan"] else st.REJECTED
            result["message"] = result.get("plan_error", "")
        else:
            axes = {group: choices.get(group) for group in MATRIX_GROUPS}
            result.update(run_suite(cfg, axes, key_overrides(task_overrides, choices), job_dir, quiet=quiet))
            own = own_tests.own_tests_of(impl)  # a C++ tree's own tests, beside the TCs' verdicts
            if own is not None:
                result["own_tests"] = own
                own_tests.write_allure(own, job_dir / "allure-results", tree=impl.facts().root.name)
            found = tree_departures.departures_of(impl, run)  # each role of a C++ tree judged on its own
            if found is not None:
                result["departures"] = found
                result["departures_against"] = str(cfg.suite.departures_against or "")
                tree_departures.write_allure(found, job_dir / "allure-results")
    except (UserError, ImplementationFailure) as exc:  # the input, or the code under test failing: one line
        result.update(status=st.ERROR, message=str(exc))
    except Exception as exc:  # a bug: one line here, the traceback beside the result
        _write_quietly(job_dir / "error.txt", traceback.format_exc())
        result.update(status=st.ERROR, message=f"{type(exc).__name__}: {exc} (traceback: error.txt)")
    result["duration_s"] = round(time.monotonic() - start, 3)
    try:
        write_json_atomic(job_dir / RESULT_FILE, result)
    except OSError as exc:
        result.update(status=st.ERROR, message=f"cannot write {job_dir / RESULT_FILE}: {exc.strerror or exc}")
    return result


def spec_refusal(run) -> Optional[str]:
    """``field: reason`` of the first FEATURE section 3 startup rule ``run`` breaks, from the oracle; else None."""
    rejection = oracle.expected_rejection(run)
    return f"{rejection.field}: {rejection.reason}" if rejection is not None else None


def _plan(impl, run, *, strict: bool) -> dict:
    """Plan numbers, or why there are none. In suite mode the TCs judge, so any failure is data."""
    try:
        return {"plan": plan_numbers(impl, run)}
    except UserError as exc:
        return {"plan": None, "plan_error": str(exc)}
    except Exception as exc:
        if strict:
            raise
        return {"plan": None, "plan_error": f"{type(exc).__name__}: {exc}"}


def config_facts(cfg, choices: Mapping[str, Optional[str]]) -> dict:
    """The job's configuration in the words of a results table."""
    lw, par, hw = cfg.layerwise, cfg.parallel, cfg.hardware
    effective = spec_from_node(LayerwiseFlags, lw).effective_split_size
    return {
        "model": str(cfg.model.name),
        "implementation": choices.get("implementation"),
        "hardware": str(hw.name),
        "parallel": choices.get("parallel"),
        "layerwise": choices.get("layerwise"),
        "draft": choices.get("draft"),
        "suite": choices.get("suite"),
        "enable": bool(lw.enable),
        "split_size": effective,
        "split_size_flag": int(lw.split_size),
        "world_size": int(par.world_size),
        "dp_size": int(par.dp_size),
        "block_size": int(cfg.cache.block_size),
        "kv_cache_dtype": str(cfg.cache.kv_cache_dtype),
        "hbm_mib_per_card": int(hw.hbm_mib_per_card),
        "reserved_mib_per_card": int(hw.reserved_mib_per_card),
        "num_cards": int(hw.num_cards),
    }


def key_overrides(task_overrides: Sequence[str], choices: Mapping[str, Optional[str]]) -> list[str]:
    """The job's overrides other than group choices and this app's own keys (``suite.*``).

    The suites get them as they are: a ``layerwise.*`` or ``parallel.*`` key changes that
    matrix axis's options and the TCs choose cases by the resulting value
    (``harness.suites.matrix``), so ``layerwise.enable=true layerwise.split_size=2`` runs the
    cases ``layerwise=s2`` runs; any other key applies to every case.
    """
    groups = {k for k in choices if not k.startswith("hydra/")}
    out = []
    for text in task_overrides:
        key = parse_override(text).key_or_group
        if key in groups or key.split(".", 1)[0] in APP_KEYS:
            continue
        out.append(text)
    return out


def tc_files(tcs: Sequence[str]) -> tuple[list[Path], list[str]]:
    """(test modules of ``tcs`` under ``TC_DIR``, TCs without one)."""
    files, missing = [], []
    for tc in tcs:
        found = sorted(TC_DIR.glob(f"test_tc{tc.split('-')[-1]}_*.py"))
        files += found
        if not found:
            missing.append(tc)
    return files, missing


def pytest_args(files: Sequence[Path], alluredir: Path) -> list[str]:
    """pytest's command line for a job's TCs: the modules and the run's options; the cases are given as data."""
    return [str(f) for f in files] + [
        "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "--rootdir", str(REPO_ROOT),
        "-p", "no:hypothesispytest",  # the TCs use no Hypothesis; its plugin imports it at every summary
        # hydra-core ships a pytest plugin, and this process imported hydra before pytest started
        "-W", "ignore:Module already imported so cannot be rewritten:pytest.PytestAssertRewriteWarning",
        "--lw-keep-pools", "--alluredir", str(alluredir)]


def suite_matrix(cfg, choices: Mapping[str, Optional[str]], extra: Sequence[str]):
    """The job's case matrix: ``cfg.suite.matrix`` narrowed to the job's option on each matrix axis, its
    TCs (``cfg.suite.tcs``) and its key overrides ``extra`` (``key_overrides``)."""
    return job_matrix(str(cfg.suite.matrix), {group: choices[group] for group in MATRIX_GROUPS},
                      [str(tc) for tc in cfg.suite.tcs], extra)


class Outcomes:
    """pytest plugin: outcome counts per TC, setup/teardown errors included."""

    def __init__(self) -> None:
        self.by_tc: dict[str, Counter] = defaultdict(Counter)

    def pytest_runtest_logreport(self, report) -> None:
        outcome = outcome_of(report)
        if outcome:
            self.by_tc[tc_of(report.nodeid)][outcome] += 1

    def pytest_collectreport(self, report) -> None:
        if report.failed:
            self.by_tc[tc_of(report.nodeid)]["error"] += 1


def outcome_of(report) -> Optional[str]:
    """The word pytest's summary uses for this report, or None when it adds nothing."""
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if xfail:
            return "xfailed" if report.skipped else "xpassed"
        return report.outcome
    if report.failed:
        return "error"
    if report.when == "setup" and report.skipped:
        return "xfailed" if xfail else "skipped"
    return None


def tc_of(nodeid: str) -> str:
    match = _TC_RE.search(nodeid)
    return f"TC-{int(match.group(1)):02d}" if match else "other"


def run_suite(cfg, choices, extra: Sequence[str], job_dir: Path, *, quiet: bool) -> dict:
    """The TCs of ``cfg.suite`` for this configuration; ``quiet`` sends pytest's output to pytest.log."""
    # pytest and the plugin's options (90 ms, python -X importtime): mode=plan runs no test
    import pytest

    files, missing = tc_files(list(cfg.suite.tcs))
    if missing:
        return {"status": st.ERROR, "message": f"suite.tcs: no test module for {', '.join(missing)} in {TC_DIR}"}
    # pytest and the plugin's options (90 ms, python -X importtime): mode=plan runs no test
    from harness.pytest_plugin.options import GivenCases

    given = GivenCases(suite_matrix(cfg, choices, extra))
    alluredir = job_dir / "allure-results"
    outcomes = Outcomes()
    log_path = job_dir / "pytest.log"
    with contextlib.ExitStack() as stack:
        if quiet:
            log = stack.enter_context(open(log_path, "w", encoding="utf-8"))
            stack.enter_context(contextlib.redirect_stdout(log))
            stack.enter_context(contextlib.redirect_stderr(log))
        if not IN_CHECKOUT:  # pytest's rewritten TC modules are cached beside them: not in the install folder
            stack.callback(setattr, sys, "dont_write_bytecode", sys.dont_write_bytecode)
            sys.dont_write_bytecode = True
        exit_code = int(pytest.main(pytest_args(files, alluredir), plugins=[outcomes, given]))
    stopped = signals.stop_requested()
    if stopped:  # pytest turned the signal into exit code 2; the sweep must stop, not go on
        raise signals.StopRequested(stopped)
    lines = given.results
    out = suite_summary(cfg.suite.tcs, outcomes.by_tc, lines, exit_code)
    out["allure_results"] = str(alluredir)
    if quiet:
        out["log"] = str(log_path)
    out["measured"] = measured_of(lines, given.matrix.first_case().id)
    return out


def suite_summary(tcs: Sequence[str], by_tc: Mapping[str, Counter], lines: list[dict], exit_code: int) -> dict:
    total: Counter = Counter()
    per_tc = {}
    for tc in list(tcs) + sorted(set(by_tc) - set(tcs)):
        counts = dict(by_tc.get(tc, {}))
        total.update(counts)
        per_tc[tc] = {"counts": counts, "cases": [line for line in lines if line.get("tc") == tc]}
    if exit_code == 0:
        status, message = st.PASSED, ""
    elif exit_code == 1:
        status, message = st.FAILED, ""
    else:
        reasons = {2: "interrupted", 3: "internal error", 4: "usage error", 5: "no tests collected"}
        status, message = st.ERROR, f"pytest exit code {exit_code} ({reasons.get(exit_code, 'unknown')})"
    return {"status": status, "message": message, "exit_code": exit_code, "counts": dict(total), "tcs": per_tc}


def measured_of(lines: list[dict], case_id: str) -> Optional[dict]:
    """Per-rank estimated and measured bytes of the job's own case, from TC-02 (else TC-01)."""
    for tc in SUMMARY_TCS:
        for line in lines:
            if line.get("tc") == tc and line.get("case") == case_id and line.get("ranks"):
                return {"tc": tc, "case": case_id, "n_blocks": line.get("n_blocks"), "ranks": line["ranks"]}
    return None


def _write_quietly(path: Path, text: str) -> None:
    try:
        write_atomic(path, text)
    except OSError:
        print(text, file=sys.stderr)
