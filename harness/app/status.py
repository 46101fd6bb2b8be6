"""Job statuses, and which of them make ``python -m harness`` exit non-zero.

``passed``/``failed``: the job's TCs (``mode=suite``); ``planned``/``rejected``: the
plan (``mode=plan``; ``rejected`` is the implementation refusing the configuration,
e.g. llama3_8b with s > 1, which is the spec's answer, not a failure); ``error``: the
job could not run (bad config, pytest usage error, a bug); ``missing``: a sweep job
that left no ``result.json`` (killed, or its Slurm job died).
"""

from __future__ import annotations

PASSED, FAILED, PLANNED, REJECTED, ERROR, MISSING = "passed", "failed", "planned", "rejected", "error", "missing"
FAILING = frozenset({FAILED, ERROR, MISSING})

_failed_jobs: set = set()
_finished: dict = {}
_raised: dict = {}


def is_failure(status: str) -> bool:
    return status in FAILING


def record(job: object, status: str) -> None:
    """Remember a finished job (its number, or a name) and its status: the exit status reads the failed ones."""
    _finished[job] = status
    if is_failure(status):
        _failed_jobs.add(job)


def finished_jobs() -> dict:
    """Every job this process finished, with its status, in the order they finished."""
    return dict(_finished)


def failed_jobs() -> list:
    return sorted(_failed_jobs, key=str)


def record_raised(job: object, exc: BaseException) -> None:
    """Remember the exception a job raised (Hydra keeps it in its ``JobReturn``, whose public reader raises it
    again): the sweep's summary writes it as the job's ``error`` row."""
    _raised[job] = exc


def raised(job: object):
    """The exception job ``job`` raised in this process (``record_raised``), or None."""
    return _raised.get(job)


def reset() -> None:
    _failed_jobs.clear()
    _finished.clear()
    _raised.clear()
