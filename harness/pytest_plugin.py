"""pytest plugin ``lwsplit`` (pytest11 entry point): options, case parameterization, rank pools.

A TC test module names its suite module (``SUITE = harness.suites.tcNN``) and takes the
``lw_case`` and ``lw_run`` fixtures; this plugin expands the matrix into cases, marks
them (L1/L2, tcNN),
runs bodies on the per-worker rank pools, and records results for reports. Failures the
spec predicts for a known variant are judged by the tests (``harness.suites.expectations``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

_MATRIX_KEY = pytest.StashKey["object"]()
_FACTS_KEY = pytest.StashKey["dict"]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("lwsplit", "layerwise split KV cache harness")
    group.addoption("--lw-matrix", default="ci", help="case matrix: conf/matrix/<name>.yaml (default: ci)")
    group.addoption(
        "--lw-override", action="append", default=[], metavar="KEY=VALUE",
        help="Hydra override; on an axis (model, layerwise, parallel, implementation, hardware, topology, tc) "
        "it narrows the matrix (comma lists allowed), otherwise it applies to every case",
    )
    group.addoption("--lw-backend", default=None, choices=["auto", "gloo", "nccl"], help="runner.backend for every case")
    group.addoption("--lw-timeout", default=None, type=float, help="seconds before a hung rank fails its test (runner.timeout_s)")
    group.addoption("--lw-results", default=None, help="append one JSON line per case result to this file")
    group.addoption("--lw-max-live-ranks", default=12, type=int, help="rank processes kept alive per pytest worker")
    group.addoption(
        "--lw-keep-pools", action="store_true", default=False,
        help="leave rank pools alive at session end (python -m harness reuses them across a sweep's jobs); "
        "they still close at interpreter exit",
    )


@pytest.hookimpl(tryfirst=True)  # before allure's, which creates --alluredir (a traceback when it cannot)
def pytest_configure(config) -> None:
    for name, text in (("L1", "level 1 of the seed test plan"), ("L2", "level 2 of the seed test plan")):
        config.addinivalue_line("markers", f"{name}: {text}")
    for n in range(1, 8):
        config.addinivalue_line("markers", f"tc0{n}: TC-0{n} of the seed test plan")
    from implementations.errors import UserError

    from harness.suites.matrix import load_matrix

    overrides = list(config.getoption("lw_override"))
    if config.getoption("lw_backend"):
        overrides.append(f"runner.backend={config.getoption('lw_backend')}")
    if config.getoption("lw_timeout") is not None:
        overrides.append(f"runner.timeout_s={config.getoption('lw_timeout')}")
    try:
        config.stash[_MATRIX_KEY] = load_matrix(config.getoption("lw_matrix"), overrides)
        if not hasattr(config, "workerinput"):  # the controller checks once for every xdist worker
            _check_options(config)
            _check_extra_overrides(config.stash[_MATRIX_KEY])
    except UserError as exc:
        raise pytest.UsageError(f"error: {exc}") from None
    from harness.rankpool import registry

    registry.configure(max_live_ranks=config.getoption("lw_max_live_ranks"))
    alluredir = getattr(config.option, "allure_report_dir", None)
    if alluredir and not hasattr(config, "workerinput"):  # the controller writes it once
        _write_allure_meta(alluredir, config.stash[_MATRIX_KEY])


def _write_allure_meta(alluredir: str, matrix) -> None:
    import torch

    from harness.reporting.allure_meta import write_allure_meta
    from harness.suites.case import resolve

    devices = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    overrides = [f"hardware={matrix.hardware[0]}"] + list(matrix.extra)
    resolved = resolve(tuple(overrides))
    os.makedirs(alluredir, exist_ok=True)
    write_allure_meta(
        alluredir,
        torch_version=torch.__version__,
        backend=_backend_label(resolved.backend, resolved.world_size),
        device_names=devices or ["cpu (simulated cards)"],
        hardware_profile=",".join(matrix.hardware),
        topology=resolved.run.hardware.topology.name,
    )


def _check_options(config) -> None:
    """Output paths must be writable and the timeout positive: a usage error now, not a traceback later."""
    from harness.app.validate import check_writable
    from harness.rankpool.backend import check_seconds

    if config.getoption("lw_timeout") is not None:
        check_seconds("--lw-timeout", config.getoption("lw_timeout"))
    alluredir = getattr(config.option, "allure_report_dir", None)
    if alluredir:
        check_writable(Path(alluredir), "--alluredir")
    results = config.getoption("lw_results")
    if results:
        check_writable(Path(results).absolute().parent, "--lw-results", results)


RUNNER_KEYS = ("runner.", "report.")
"""Key overrides that change how cases run, not what they plan."""


def _backend_label(requested: str, world_size: int) -> str:
    """``auto (gloo on cpu)``: what a pool of this world size resolves to on this machine."""
    from harness.rankpool import PoolUnavailable
    from harness.rankpool.backend import resolve_backend

    try:
        choice = resolve_backend(requested, world_size)
    except PoolUnavailable as exc:
        return f"{requested} (unavailable: {exc.reason})"
    return requested if requested == choice.backend else f"{requested} ({choice.backend} on {choice.device_type})"


def _check_extra_overrides(matrix) -> None:
    """Compose the key overrides with every combination of the matrix axes and plan it with the reference.

    A mistake (misspelled key, wrong type, a split size that does not divide the
    attention TP size, a budget below one block) is then one usage error at start-up
    naming the combination, not a failure in every case. A rejection the spec expects
    (FEATURE section 3: split with cp, host cache, an unsupported model, ...) is left
    to the TCs, which check that the implementation under test refuses it.
    """
    if not matrix.extra:
        return
    from itertools import product

    from implementations.errors import ConfigError, UserError
    from implementations.reference import ReferenceImplementation

    from harness.rankpool.backend import BACKENDS, check_seconds
    from harness.suites.case import Case

    planned = [o for o in matrix.extra if not o.lstrip("+~").startswith(RUNNER_KEYS)]
    combos = product(matrix.hardware, matrix.models, matrix.layerwise, matrix.parallel) if planned else [
        (matrix.hardware[0], matrix.models[0], matrix.layerwise[0], matrix.parallel[0])]
    reference = ReferenceImplementation()
    for hardware, model, layerwise, parallel in combos:
        case = Case(tc="", model=model, layerwise=layerwise, parallel=parallel, hardware=hardware,
                    implementation=matrix.implementations[0], extra=tuple(matrix.extra))
        resolved = case.resolved  # composes: unknown keys, wrong types, malformed overrides
        if resolved.backend not in BACKENDS:
            raise ConfigError("runner.backend", resolved.backend, f"one of {', '.join(BACKENDS)}")
        check_seconds("runner.timeout_s", resolved.timeout_s)
        if not planned:
            return
        try:
            reference.plan(resolved.run)
        except UserError as exc:
            from harness.suites.expectations import expected_rejection

            if expected_rejection(resolved.run) is None:
                exc.args = (f"{exc} (with model={model} layerwise={layerwise} parallel={parallel} "
                            f"hardware={hardware} and {' '.join(planned)})",)
                raise


def pytest_generate_tests(metafunc) -> None:
    if "lw_case" not in metafunc.fixturenames:
        return
    suite = metafunc.module.SUITE
    matrix = metafunc.config.stash[_MATRIX_KEY]
    cases = suite.cases(matrix) if suite.TC in matrix.tcs else []
    metafunc.parametrize("lw_case", cases, ids=[c.id for c in cases], indirect=True)


def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        case = _case_of(item)
        if case is None:
            continue
        suite = item.module.SUITE
        item.add_marker(getattr(pytest.mark, suite.LEVEL))
        item.add_marker(getattr(pytest.mark, suite.TC.replace("-", "").lower()))
    # Same world sizes together: each xdist worker then rarely switches pools.
    items.sort(key=_pool_size)


def _pool_size(item) -> int:
    """Rank processes the case needs: the suite's ``world_size(case)`` hook, else the plan's world size."""
    case = _case_of(item)
    if case is None:
        return 0
    hook = getattr(item.module.SUITE, "world_size", None)
    return hook(case) if hook else case.world_size


def _case_of(item):
    from harness.suites.case import Case

    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("lw_case") if callspec else None
    return case if isinstance(case, Case) else None  # an empty parameter set holds NOTSET


@pytest.fixture
def lw_case(request):
    """The case, with its Allure labels (predicted failures are judged by the test: expectations.judge)."""
    from harness.reporting import allure_labels

    case = request.param
    suite = request.module.SUITE
    resolved = case.resolved
    allure_labels.apply(case, suite, resolved)
    return case


@pytest.fixture
def lw_run(request, lw_case):
    """``lw_run(body, *args, world_size=None)``: run ``body(ctx, run, impl_cfg, *args)`` on every rank.

    Returns the per-rank results. A skip raised on the ranks, or a machine that cannot
    host the pool (e.g. NCCL without enough cards), skips the test with the reason.
    """
    from harness.rankpool import PoolUnavailable, RankSkip
    from harness.suites.execute import pool_runner

    run_body = pool_runner(lw_case)

    def run(body, *args, world_size=None):
        try:
            facts = run_body(body, *args, world_size=world_size)
        except (RankSkip, PoolUnavailable) as exc:
            pytest.skip(exc.reason)
        request.node.stash[_FACTS_KEY] = {"facts": facts}
        return facts

    return run


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem):
    case = _case_of(pyfuncitem)
    if case is not None and getattr(pyfuncitem.config.option, "allure_report_dir", None):
        from harness.reporting import allure_labels

        allure_labels.apply_title(case, pyfuncitem.module.SUITE)
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    case = _case_of(item)
    if case is not None and call.when == "call":
        from harness.reporting import allure_labels

        stash = item.stash.get(_FACTS_KEY, {})
        if getattr(item.config.option, "allure_report_dir", None):  # charts cost time; only when reported
            allure_labels.attach_results(item, case, stash.get("facts"), report, call.excinfo)
        path = item.config.getoption("lw_results")
        if path:
            _append_result(path, item, case, report, stash.get("facts"))
    return report


def _append_result(path: str, item, case, report, facts) -> None:
    from harness.suites.results import case_result

    line = json.dumps(case_result(item.module.SUITE, case, report, facts), default=str)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


def pytest_sessionfinish(session) -> None:
    if session.config.getoption("lw_keep_pools"):
        return
    from harness.rankpool import close_all

    close_all()
