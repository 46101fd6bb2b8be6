"""The run's Allure environment (torch, devices, backend, topology) and categories, written once at the end:
by the controller, with the first xdist worker's view of the environment, or by a run without xdist."""

from __future__ import annotations

import os

import pytest

from harness.pytest_plugin import keys
from harness.rankpool import PoolUnavailable
from harness.rankpool.backend import resolve_backend
from harness.reporting import alluredir, write_guard
from harness.reporting.allure_meta import write_allure_meta

WORKEROUTPUT_KEY = "lw_allure_environment"
"""xdist ``workeroutput`` key: the run's environment as a worker saw it (``allure_environment``)."""


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    alluredir.hand_to_worker(node)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: keep the first environment a worker reported."""
    output = getattr(node, "workeroutput", {})
    if output.get(WORKEROUTPUT_KEY) and keys.ALLURE_ENV not in node.config.stash:
        node.config.stash[keys.ALLURE_ENV] = dict(output[WORKEROUTPUT_KEY])


def finish(config) -> None:
    """At the session's end (``results.pytest_sessionfinish``): a worker hands its view of the environment
    to the controller; the controller, or a run without xdist, writes the metadata."""
    alluredir = getattr(config.option, "allure_report_dir", None)
    if not alluredir:
        return
    if hasattr(config, "workeroutput"):
        config.workeroutput[WORKEROUTPUT_KEY] = allure_environment(config.stash[keys.MATRIX])
    else:
        _write_allure_meta(config, alluredir)


def allure_environment(matrix) -> dict:
    """``write_allure_meta``'s keyword arguments: torch, its devices, the backend and topology the matrix
    resolves to. Asked at the end of a session, where the tests have already imported torch (an xdist
    worker, or a run without xdist): the controller, which runs no test, does not import torch for it."""
    # torch (0.8 s, python -X importtime): the controller, which runs no test, never imports it
    import torch

    # harness.suites and the config schema (57 ms, python -X importtime): a bad --lw-* option is one line without them
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
    """environment.properties and categories.json, with the first worker's view of the environment, or
    this process's when no worker reported one. A failed write is one more failed result write
    (``write_guard``: an ``error:`` line, exit status 1)."""
    environment = config.stash.get(keys.ALLURE_ENV, None) or allure_environment(config.stash[keys.MATRIX])
    try:
        os.makedirs(alluredir, exist_ok=True)
        write_allure_meta(alluredir, **environment)
    except OSError as exc:
        write_guard.record(f"Allure metadata in {alluredir}", exc)


def _backend_label(requested: str, world_size: int) -> str:
    """``auto (gloo on cpu)``: what a pool of this world size resolves to on this machine."""
    try:
        choice = resolve_backend(requested, world_size)
    except PoolUnavailable as exc:
        return f"{requested} (unavailable: {exc.reason})"
    return requested if requested == choice.backend else f"{requested} ({choice.backend} on {choice.device_type})"
