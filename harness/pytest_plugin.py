"""pytest plugin ``lwsplit`` (pytest11 entry point): options, case parameterization, rank pools.

A TC test module names its suite module (``SUITE = harness.suites.tcNN``) and takes the
``lw_case`` and ``lw_run`` fixtures; this plugin expands the matrix into cases, marks
them (L1/L2, tcNN),
runs bodies on the per-worker rank pools, and records results for reports. Failures the
spec predicts for a known variant are judged by the tests (``harness.suites.expectations``).
"""

from __future__ import annotations

import gc
import json
import os
from pathlib import Path

import pytest

_MATRIX_KEY = pytest.StashKey["object"]()
_FACTS_KEY = pytest.StashKey["dict"]()
_REPRESENTATIVE_KEY = pytest.StashKey["set"]()


# pytest rewrites the asserts of every module in every installed distribution that ships a
# pytest plugin: Hydra's, Hypothesis's and this harness's, ~240 modules that no test asserts
# in (the harness has one assert, with its own message). With bytecode writing off nothing
# is cached, so each pytest process (every xdist worker) paid ~3.5 s of CPU for it.
NOT_REWRITTEN = ("hydra", "hypothesis", "_hypothesis_globals", "harness", "implementations")


def _skip_rewriting_libraries(pluginmanager) -> None:
    """Unmark ``NOT_REWRITTEN`` for assert rewriting (test modules and conftests still are): pytest's
    private ``rewrite_hook._must_rewrite`` (``harness.private_apis.unmark_for_assert_rewriting``)."""
    from harness.private_apis import unmark_for_assert_rewriting

    unmark_for_assert_rewriting(pluginmanager, NOT_REWRITTEN)


def pytest_addoption(parser, pluginmanager) -> None:
    _skip_rewriting_libraries(pluginmanager)
    group = parser.getgroup("lwsplit", "layerwise split KV cache harness")
    group.addoption("--lw-matrix", default="ci", help="case matrix: conf/matrix/<name>.yaml (default: ci)")
    group.addoption(
        "--lw-override", action="append", default=[], metavar="KEY=VALUE",
        help="Hydra override; on an axis (model, layerwise, parallel, implementation, hardware, topology, tc) "
        "it narrows the matrix (comma lists allowed), otherwise it applies to every case",
    )
    from harness.rankpool.backend import BACKENDS

    group.addoption("--lw-backend", default=None, choices=list(BACKENDS), help="runner.backend for every case")
    group.addoption("--lw-timeout", default=None, type=float, help="seconds before a hung rank fails its test (runner.timeout_s)")
    group.addoption("--lw-results", default=None, help="append one JSON line per case result to this file")
    group.addoption("--lw-max-live-ranks", default=12, type=int, help="rank processes kept alive per pytest worker")
    group.addoption(
        "--lw-explore", default=None, type=int, metavar="N",
        help="configurations the explorer (testcases/explore) draws per implementation and level "
        "(default: its fixed CI budget)",
    )
    group.addoption(
        "--lw-keep-pools", action="store_true", default=False,
        help="leave rank pools alive at session end (python -m harness reuses them across a sweep's jobs); "
        "they still close at interpreter exit",
    )


SCHEDULE_CHUNK = 2
"""Tests an xdist worker is handed at a time (``--maxschedchunk``) unless the command line says.

xdist's ``load`` default hands each worker a quarter of its share up front, in collection
order: whichever worker drew the subprocess-heavy self-tests ran them one after another
while the other three went idle (measured: 213 s with one worker busy 80 s after the rest,
185 s handing out 2 at a time with slow tests first, on 2 cores)."""


@pytest.hookimpl(tryfirst=True)  # before allure's, which creates --alluredir (a traceback when it cannot)
def pytest_configure(config) -> None:
    from harness.config.schema import TC_IDS
    from harness.reporting import alluredir as allure_env

    if getattr(config.option, "maxschedchunk", 0) is None:  # xdist is loaded and no --maxschedchunk was given
        config.option.maxschedchunk = SCHEDULE_CHUNK

    allure_env.take(config)  # $LW_ALLUREDIR (CI) when --alluredir is not given
    for name, text in (("L1", "level 1 of the seed test plan"), ("L2", "level 2 of the seed test plan")):
        config.addinivalue_line("markers", f"{name}: {text}")
    for tc in TC_IDS:
        config.addinivalue_line("markers", f"{tc.lower().replace('-', '')}: {tc} of the seed test plan")
    from harness.suites.matrix import load_matrix
    from implementations.errors import UserError

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
            _check_implementation_inputs(config.stash[_MATRIX_KEY])
        from harness.rankpool import registry

        registry.configure(max_live_ranks=config.getoption("lw_max_live_ranks"))
    except UserError as exc:
        from harness.cli import one_line

        raise pytest.UsageError(f"error: {one_line(exc)}") from None
    from harness.reporting import write_guard

    write_guard.guard_allure_writes()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    from harness.reporting import alluredir as allure_env

    allure_env.hand_to_worker(node)


_ALLURE_ENV_KEY = "lw_allure_environment"
"""xdist ``workeroutput`` key: the run's environment as a worker saw it (``_allure_environment``)."""
_ALLURE_ENV_STASH = pytest.StashKey["dict"]()


def _allure_environment(matrix) -> dict:
    """``write_allure_meta``'s keyword arguments: torch, its devices, the backend and topology the matrix
    resolves to. Asked at the end of a session, where the tests have already imported torch (an xdist
    worker, or a run without xdist): the controller, which runs no test, does not import torch for it."""
    import torch

    from harness.suites.case import resolve

    devices = [str(torch.cuda.get_device_name(i)) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    # with the matrix's implementation: a key of its own (implementation.source_dir) is unknown to the default one
    overrides = [f"hardware={matrix.hardware[0]}", *[f"implementation={i}" for i in matrix.implementations[:1]],
                 *matrix.extra]
    resolved = resolve(tuple(overrides))
    return {
        "torch_version": str(torch.__version__),  # a TorchVersion, which execnet cannot carry
        "backend": _backend_label(resolved.backend, resolved.world_size),
        "device_names": devices or ["cpu (simulated cards)"],
        "hardware_profile": ",".join(matrix.hardware),
        "topology": resolved.run.hardware.topology.name,
    }


def _write_allure_meta(config, alluredir: str) -> None:
    """The controller (or a run without xdist) writes environment.properties and categories.json once, at
    the end: with the first worker's view of the environment, or its own when no worker reported one.
    A failed write is one more failed result write (``write_guard``: an ``error:`` line, exit status 1)."""
    from harness.reporting import write_guard
    from harness.reporting.allure_meta import write_allure_meta

    environment = config.stash.get(_ALLURE_ENV_STASH, None) or _allure_environment(config.stash[_MATRIX_KEY])
    try:
        os.makedirs(alluredir, exist_ok=True)
        write_allure_meta(alluredir, **environment)
    except OSError as exc:
        write_guard.record(f"Allure metadata in {alluredir}", exc)


def _check_options(config) -> None:
    """Output paths must be writable and the timeout positive: a usage error now, not a traceback later."""
    from harness.files import check_writable
    from harness.rankpool.backend import check_seconds

    if config.getoption("lw_timeout") is not None:
        check_seconds("--lw-timeout", config.getoption("lw_timeout"))
    explore = config.getoption("lw_explore")
    if explore is not None and explore < 1:
        from implementations.errors import UserError

        raise UserError("--lw-explore", explore, "a whole number of configurations >= 1")
    alluredir = getattr(config.option, "allure_report_dir", None)
    if alluredir:
        check_writable(Path(alluredir), "--alluredir")
    results = config.getoption("lw_results")
    if results:
        if Path(results).is_dir():
            from implementations.errors import UserError

            raise UserError("--lw-results", results, "a file to append JSON lines to", "it is a directory")
        check_writable(Path(results).absolute().parent, "--lw-results", results)


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
    """Compose the key overrides once, with the first value of every matrix axis.

    What the schema cannot hold (a misspelled key, a wrong type, a malformed
    override, an unknown runner backend) is then one usage error at start-up, not a
    failure in every case. Nothing is planned: a configuration the spec refuses
    (FEATURE section 3) is left to the TCs, which check that the implementation
    under test refuses it.
    """
    if not (matrix.extra or matrix.group_keys):
        return
    from harness.rankpool.backend import BACKENDS, check_seconds
    from harness.suites.case import Case
    from implementations.errors import ConfigError

    lw, par = matrix.layerwise[0], matrix.parallel[0]
    case = Case(tc="", model=matrix.models[0], layerwise=lw, parallel=par, hardware=matrix.hardware[0],
                implementation=matrix.implementations[0], extra=matrix.extra_for(lw, par))
    resolved = case.resolved  # composes: unknown keys, wrong types, malformed overrides
    if resolved.backend not in BACKENDS:
        raise ConfigError("runner.backend", resolved.backend, f"one of {', '.join(BACKENDS)}")
    check_seconds("runner.timeout_s", resolved.timeout_s)


def removed_case_lines(matrix) -> list[str]:
    """The session header's line naming the cases the matrix's configuration keys leave out (none: no line).
    Keys that only choose or locate the implementation remove no case (``Matrix.config_keys``)."""
    from harness.suites import removed_by_keys

    removed = removed_by_keys(matrix)
    if not removed:
        return []
    return [f"lw-matrix: the key overrides {' '.join(matrix.config_keys())} already break a startup rule of "
            f"FEATURE 3, so {len(removed)} refusal cases are left out: "
            + ", ".join(f"{tc}[{case_id}]" for tc, case_id in removed)]


def pytest_report_header(config) -> list[str]:
    if _MATRIX_KEY not in config.stash:
        return []
    return removed_case_lines(config.stash[_MATRIX_KEY])


def _check_implementation_inputs(matrix) -> None:
    """An implementation that needs inputs of its own (``xllm_native``: a source tree, given as
    ``implementation.source_dir=`` or ``$LWSPLIT_XLLM_SRC``) is asked once whether it has them
    (``harness.config.build.check_implementation_inputs``): a tree not given, or not there, is one
    usage line at start-up, not a failure in every case and a "failing example" in the explorer.
    Composed only for such an implementation; nothing is built."""
    from harness.config.build import check_implementation_inputs, implementation_needs_inputs
    from harness.config.compose import option_node
    from harness.suites.case import Case

    lw, par = matrix.layerwise[0], matrix.parallel[0]
    for impl in matrix.implementations:
        if not implementation_needs_inputs(str(option_node("implementation", impl).get("_target_"))):
            continue
        case = Case(tc="", model=matrix.models[0], layerwise=lw, parallel=par, hardware=matrix.hardware[0],
                    implementation=impl, extra=matrix.extra_for(lw, par))
        check_implementation_inputs(case.resolved.impl_cfg)


def session_matrix(config):
    """The case matrix of this session: ``--lw-matrix`` narrowed by ``--lw-override``."""
    return config.stash[_MATRIX_KEY]


def pytest_generate_tests(metafunc) -> None:
    if "lw_case" not in metafunc.fixturenames:
        return
    suite = metafunc.module.SUITE
    matrix = metafunc.config.stash[_MATRIX_KEY]
    cases = suite.cases(matrix) if suite.TC in matrix.tcs else []
    metafunc.parametrize("lw_case", cases, ids=[c.id for c in cases], indirect=True)


def pytest_collection_modifyitems(config, items) -> None:
    from harness.reporting import allure_labels

    # A TC the matrix does not apply to has no cases: not generated (deselected), rather than
    # pytest's "got empty parameter set" skip.
    empty = [item for item in items if _has_empty_case(item)]
    if empty:
        items[:] = [item for item in items if not _has_empty_case(item)]
        config.hook.pytest_deselected(items=empty)
    config.stash[_REPRESENTATIVE_KEY] = allure_labels.representatives(
        [case for case in map(_case_of, items) if case is not None])
    for item in items:
        case = _case_of(item)
        if case is None:
            for mark in allure_labels.self_test_markers(item):
                item.add_marker(mark)
            continue
        suite = item.module.SUITE
        item.add_marker(getattr(pytest.mark, suite.LEVEL))
        item.add_marker(getattr(pytest.mark, suite.TC.replace("-", "").lower()))
    # Slow tests first, so that no xdist worker is left with one at the end while the others
    # idle (each worker takes SCHEDULE_CHUNK tests at a time, see pytest_configure); then
    # same world sizes together: each worker then rarely switches pools.
    items.sort(key=lambda item: (item.get_closest_marker("slow") is None, _pool_size(item)))


@pytest.hookimpl(wrapper=True)
def pytest_collection(session):
    """Collect with the garbage collector paused, then freeze what start-up and collection built.

    Importing torch and Hydra and building the case matrix makes about 250,000 objects that live
    until the end; Python's full collections walk every tracked object and recur as the heap
    grows: ten of them during a worker's collection and one every few dozen tests afterwards
    (about 0.2 s each, 4 to 6 s a worker). One collection, then ``gc.freeze`` (Python's public
    API for this), keeps them out of every later walk; what the tests make is collected as usual.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return (yield)
    finally:
        gc.collect()
        gc.freeze()
        if was_enabled:
            gc.enable()


def _pool_size(item) -> int:
    """Rank processes the case needs: the suite's ``world_size(case)`` hook, else the plan's world size."""
    case = _case_of(item)
    if case is None:
        return 0
    hook = getattr(item.module.SUITE, "world_size", None)
    return hook(case) if hook else case.world_size


def _has_empty_case(item) -> bool:
    callspec = getattr(item, "callspec", None)
    return callspec is not None and "lw_case" in callspec.params and _case_of(item) is None


def _case_of(item):
    from harness.suites.case import Case

    callspec = getattr(item, "callspec", None)
    case = callspec.params.get("lw_case") if callspec else None
    return case if isinstance(case, Case) else None  # an empty parameter set holds NOTSET


def pytest_runtest_setup(item) -> None:
    from harness.rankpool import registry

    registry.close_idle()  # a worker busy with other tests does not keep idle ranks polling


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
    if report.failed and call.excinfo is not None and getattr(item.config.option, "allure_report_dir", None):
        from harness.reporting import allure_labels

        allure_labels.mark_origin(call.excinfo.value)  # the report's category comes from the exception
    case = _case_of(item)
    if case is not None and call.when == "call":
        from harness.reporting import allure_labels

        # Taken, not read: an item lives for the whole session, and a stash that kept every case's
        # facts (about 600 objects a case) made each of the worker's full garbage collections walk them all.
        stash = item.stash.get(_FACTS_KEY, {})
        if _FACTS_KEY in item.stash:
            del item.stash[_FACTS_KEY]
        if getattr(item.config.option, "allure_report_dir", None):  # charts cost time; only when reported
            representative = (case.tc, case.id) in item.config.stash.get(_REPRESENTATIVE_KEY, set())
            allure_labels.attach_results(item, case, stash.get("facts"), report, call.excinfo,
                                         representative=representative)
            if report.failed and call.excinfo is None and "XPASS(strict)" in str(report.longrepr):
                allure_labels.mark_xpass(str(report.longrepr).replace("[XPASS(strict)]", "").strip())
        path = item.config.getoption("lw_results")
        if path:
            try:
                _append_result(path, item, case, report, stash.get("facts"))
            except OSError as exc:  # this case's line is lost: fail this case, not the session
                report.outcome = "failed"
                report.longrepr = f"could not append this case's result to --lw-results {path}: {exc.strerror or exc}"
    return report


def _append_result(path: str, item, case, report, facts) -> None:
    from harness.suites.results import case_result

    line = json.dumps(case_result(item.module.SUITE, case, report, facts), default=str)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: collect the write failures a worker recorded, and the first environment one reported."""
    from harness.reporting import write_guard

    output = getattr(node, "workeroutput", {})
    write_guard.extend(list(output.get(write_guard.WORKEROUTPUT_KEY, [])))
    if output.get(_ALLURE_ENV_KEY) and _ALLURE_ENV_STASH not in node.config.stash:
        node.config.stash[_ALLURE_ENV_STASH] = dict(output[_ALLURE_ENV_KEY])


def pytest_sessionfinish(session) -> None:
    from harness.reporting import write_guard

    config = session.config
    alluredir = getattr(config.option, "allure_report_dir", None)
    if hasattr(config, "workeroutput"):
        config.workeroutput[write_guard.WORKEROUTPUT_KEY] = write_guard.failures()
        if alluredir:
            config.workeroutput[_ALLURE_ENV_KEY] = _allure_environment(config.stash[_MATRIX_KEY])
    else:
        if alluredir:
            _write_allure_meta(config, alluredir)
        if write_guard.failures() and session.exitstatus == 0:
            session.exitstatus = 1
    if not hasattr(config, "workerinput"):
        from harness.rankpool.rendezvous import remove_stale_dirs

        remove_stale_dirs()  # temp folders of workers killed outright (SIGKILL)
    if config.getoption("lw_keep_pools"):
        return
    from harness.rankpool import close_all

    close_all()


def pytest_terminal_summary(terminalreporter) -> None:
    from harness.reporting import write_guard

    if write_guard.failures() and not hasattr(terminalreporter.config, "workerinput"):
        terminalreporter.write_line(write_guard.summary(), red=True)
