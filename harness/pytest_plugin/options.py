"""The ``--lw-*`` options, checked once (on the xdist controller), and the session's case matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

from contract.errors import ConfigError, UserError
from harness.files import check_writable
from harness.pytest_plugin import keys
from harness.rankpool import registry
from harness.rankpool.backend import BACKENDS, check_seconds
from harness.reporting import alluredir as allure_env
from harness.reporting import write_guard


def pytest_addoption(parser) -> None:
    group = parser.getgroup("lwsplit", "layerwise split KV cache harness")
    group.addoption("--lw-matrix", default="ci", help="case matrix: conf/matrix/<name>.yaml (default: ci)")
    group.addoption(
        "--lw-override", action="append", default=[], metavar="KEY=VALUE",
        help="Hydra override; on an axis (model, layerwise, parallel, implementation, hardware, topology, tc) "
        "it narrows the matrix (comma lists allowed), otherwise it applies to every case",
    )

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


@pytest.hookimpl(tryfirst=True)  # before allure's, which creates --alluredir (a traceback when it cannot)
def pytest_configure(config) -> None:
    """Take ``$LW_ALLUREDIR``, load the matrix, check the options once, size the rank pools, guard Allure's
    writes; a mistake is one ``error:`` usage line."""
    allure_env.take(config)  # $LW_ALLUREDIR (CI) when --alluredir is not given: checked below with the rest
    # the composition and the matrix (60 ms, python -X importtime): a bad --lw-* option is one line without them
    from harness.suites.matrix import load_matrix

    given = given_cases(config)
    config.stash[keys.GIVEN] = given
    overrides = list(config.getoption("lw_override"))
    if config.getoption("lw_backend"):
        overrides.append(f"runner.backend={config.getoption('lw_backend')}")
    if config.getoption("lw_timeout") is not None:
        overrides.append(f"runner.timeout_s={config.getoption('lw_timeout')}")
    try:
        config.stash[keys.MATRIX] = given.matrix if given is not None else load_matrix(
            config.getoption("lw_matrix"), overrides)
        if not hasattr(config, "workerinput"):  # the controller checks once for every xdist worker
            _check_options(config)
            _check_extra_overrides(config.stash[keys.MATRIX])
            _check_implementation_inputs(config.stash[keys.MATRIX])
        registry.configure(max_live_ranks=config.getoption("lw_max_live_ranks"))
    except UserError as exc:
        # harness.usage (1.5 ms, python -X importtime): only a mistake prints its line
        from harness.usage import one_line

        raise pytest.UsageError(f"error: {one_line(exc)}") from None

    write_guard.guard_allure_writes()


class GivenCases:
    """A session's cases handed to pytest as data, and their results handed back as data: for a caller
    that runs pytest in its own process (``pytest.main(args, plugins=[GivenCases(matrix)])``, as
    ``python -m harness`` runs a job's TCs), instead of ``--lw-matrix``/``--lw-override`` on the command
    line and a ``--lw-results`` file to read back. Given, it is the session's matrix: ``--lw-matrix``,
    ``--lw-override``, ``--lw-backend`` and ``--lw-timeout`` are not read.

    ``matrix`` (``harness.suites.matrix.Matrix``) is the session's case matrix, checked as one loaded from
    the command line is; ``results`` receives each case's result line (``harness.suites.case_result``) as
    the case finishes, in the order they ran. Not for xdist: its workers are other processes."""

    def __init__(self, matrix) -> None:
        self.matrix = matrix
        self.results: list[dict] = []


def given_cases(config) -> Optional[GivenCases]:
    """The ``GivenCases`` registered with this session, or None (the cases come from the command line)."""
    if keys.GIVEN in config.stash:
        return config.stash[keys.GIVEN]
    found = [p for p in config.pluginmanager.get_plugins() if isinstance(p, GivenCases)]
    return found[0] if found else None


def session_matrix(config):
    """The case matrix of this session: ``--lw-matrix`` narrowed by ``--lw-override``."""
    return config.stash[keys.MATRIX]


def _check_options(config) -> None:
    """Output paths must be writable and the timeout positive: a usage error now, not a traceback later."""
    if config.getoption("lw_timeout") is not None:
        check_seconds("--lw-timeout", config.getoption("lw_timeout"))
    explore = config.getoption("lw_explore")
    if explore is not None and explore < 1:
        raise UserError("--lw-explore", explore, "a whole number of configurations >= 1")
    alluredir = getattr(config.option, "allure_report_dir", None)
    if alluredir:
        check_writable(Path(alluredir), "--alluredir")
    results = config.getoption("lw_results")
    if results:
        if Path(results).is_dir():
            raise UserError("--lw-results", results, "a file to append JSON lines to", "it is a directory")
        check_writable(Path(results).absolute().parent, "--lw-results", results)


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

    resolved = matrix.first_case().resolved  # composes: unknown keys, wrong types, malformed overrides
    if resolved.backend not in BACKENDS:
        raise ConfigError("runner.backend", resolved.backend, f"one of {', '.join(BACKENDS)}")
    check_seconds("runner.timeout_s", resolved.timeout_s)


def _check_implementation_inputs(matrix) -> None:
    """An implementation that needs inputs of its own (``xllm_native``: a source tree, given as
    ``implementation.source_dir=`` or ``$LWSPLIT_XLLM_SRC``) is asked once whether it has them
    (``harness.config.build.check_implementation_inputs``): a tree not given, or not there, is one
    usage line at start-up, not a failure in every case and a "failing example" in the explorer.
    Composed only for such an implementation; then its libraries are built here, once, before any case
    and its time limit (``prepare_implementation``: the compiler runs, never the tree's code)."""
    # the composition and the matrix (60 ms, python -X importtime): a bad --lw-* option is one line without them
    from harness.config.build import check_implementation_inputs, implementation_needs_inputs, prepare_implementation
    from harness.config.compose import option_node

    for impl in matrix.implementations:
        if not implementation_needs_inputs(str(option_node("implementation", impl).get("_target_"))):
            continue
        impl_cfg = matrix.first_case(impl).resolved.impl_cfg
        check_implementation_inputs(impl_cfg)
        prepare_implementation(impl_cfg)
