"""pytest plugin of ``python -m harness.bench.test_groups``: the CPU each test costs its own process.

Loaded with ``-p harness.bench.cpu_probe`` when ``LWSPLIT_CPU_PROBE_DIR`` names a folder. Each
test's setup, call and teardown are measured with ``getrusage``: the CPU of this process
(an xdist worker) plus that of the child processes it waited for meanwhile (a pytest, a sweep
or torchrun agents a test starts, with whatever they waited for in turn). Rank processes of
the worker's own pools are not waited for until the pool closes, so their CPU is not in it.
One JSON line per test goes to ``<folder>/<pid>.jsonl``.
"""

from __future__ import annotations

import json
import os
import resource
from pathlib import Path

import pytest

DIR_ENV = "LWSPLIT_CPU_PROBE_DIR"


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    folder = os.environ.get(DIR_ENV)
    own, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    yield
    if not folder:
        return
    line = {"nodeid": item.nodeid, "self_s": round(_cpu(resource.RUSAGE_SELF) - own, 3),
            "children_s": round(_cpu(resource.RUSAGE_CHILDREN) - children, 3)}
    with open(Path(folder) / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")


def read(folder: Path) -> dict[tuple[str, str], float]:
    """(file as the JUnit report names it, test name) -> CPU seconds, from every process's lines."""
    out: dict[tuple[str, str], float] = {}
    for path in sorted(Path(folder).glob("*.jsonl")):
        for text in path.read_text(encoding="utf-8").splitlines():
            if not text.strip():
                continue
            entry = json.loads(text)
            file, _, name = entry["nodeid"].partition("::")
            key = (file.removeprefix("testcases/"), name.rsplit("::", 1)[-1])
            out[key] = out.get(key, 0.0) + entry["self_s"] + entry["children_s"]
    return out
