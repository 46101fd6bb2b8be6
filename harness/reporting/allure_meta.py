"""``environment.properties`` and ``categories.json`` for an Allure results directory.

Plain values in, files out: nothing here imports pytest, torch or allure, so the
pytest plugin (or anything else) collects the values and calls ``write_allure_meta``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Optional

from harness.paths import REPO_ROOT

UPSTREAM_RULE_MARKER = "found exactly the predicted problems"
"""In the reason of every expected failure the spec predicts (``harness.suites.expectations.predicted_failure``:
``upstream_owner_rule``, ``xllm_upstream``)."""

# Allure 2 matches messageRegex / traceRegex against the whole status message / trace
# (DOTALL) and files a result in every category it matches, so these exclude each other.
# harness.reporting.categories starts each failure's trace with ``category: <name>``
# (decided from where the exception was raised) and gives like cases the same message.
CATEGORIES = (
    {
        "name": "Product defect",
        "description": "The implementation under test is wrong: a check against the spec failed, or an "
        "exception was raised inside implementations/.",
        "matchedStatuses": ["failed", "broken"],
        "traceRegex": "category: product defect.*",
    },
    {
        "name": "Harness error",
        "description": "The test could not reach a verdict: an exception raised in harness or test code "
        "(RankTimeout, a rank that died outside the implementation, PoolUnavailable, ...).",
        "matchedStatuses": ["broken"],
        "traceRegex": "category: harness error.*",
    },
    {
        "name": "Expected failure predicted by the spec",
        "description": "Where upstream's rules differ from the adaptation's (FEATURE sections 2-4: the "
        "layer_id % s owner rule on hybrid models, upstream's model list, rank % s): a strict expected failure "
        "that found exactly the predicted problems.",
        "matchedStatuses": ["skipped"],
        "messageRegex": f".*{UPSTREAM_RULE_MARKER}.*",
    },
    {
        "name": "Unexpected pass of a predicted failure",
        "description": "A strict expected failure passed: the implementation now behaves as the spec says; "
        "drop the prediction.",
        "matchedStatuses": ["failed"],
        "traceRegex": "category: unexpected pass.*",
    },
)


def git_commit(repo_dir: Path | str = REPO_ROOT) -> str:
    """``git rev-parse HEAD`` of ``repo_dir``, or ``unknown`` without git or a repository."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo_dir, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else "unknown"


def git_tracked_changes(repo_dir: Path | str = REPO_ROOT) -> bool:
    """True when a tracked file of ``repo_dir`` differs from its commit (``git status``); False without git."""
    try:
        done = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo_dir,
                              capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def environment_values(
    *,
    torch_version: str,
    backend: str,
    device_names: Sequence[str],
    hardware_profile: str,
    topology: str,
    git_commit_id: Optional[str] = None,
    python_version: Optional[str] = None,
    host_cores: Optional[int] = None,
) -> dict[str, str]:
    """The environment shown on the report's front page; omitted values are detected here."""
    return {
        "torch": torch_version,
        "backend": backend,
        "devices": ", ".join(device_names) if device_names else "none",
        "hardware_profile": hardware_profile,
        "topology": topology,
        "git_commit": git_commit_id if git_commit_id is not None else git_commit(),
        "python": python_version if python_version is not None else platform.python_version(),
        "host_cores": str(host_cores if host_cores is not None else os.cpu_count()),
    }


def _escape_properties(text: str, *, key: bool) -> str:
    """Java .properties escaping (ISO-8859-1 file, so anything else as \\uXXXX)."""
    out = []
    for i, ch in enumerate(text):
        if ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch in "=:#!" and key:
            out.append("\\" + ch)
        elif ch == " " and (key or i == 0):
            out.append("\\ ")
        elif ord(ch) < 0x20 or ord(ch) > 0x7E:
            out.extend(f"\\u{unit:04x}" for unit in _utf16_units(ch))
        else:
            out.append(ch)
    return "".join(out)


def _utf16_units(ch: str) -> list[int]:
    data = ch.encode("utf-16-be")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def environment_properties(values: Mapping[str, str]) -> str:
    """``key=value`` lines in the given order."""
    lines = [f"{_escape_properties(k, key=True)}={_escape_properties(str(v), key=False)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"


def categories_json() -> str:
    return json.dumps(list(CATEGORIES), indent=2) + "\n"


def write_environment(alluredir: Path | str, values: Mapping[str, str]) -> Path:
    path = Path(alluredir) / "environment.properties"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(environment_properties(values), encoding="ascii")
    return path


def write_categories(alluredir: Path | str) -> Path:
    path = Path(alluredir) / "categories.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(categories_json(), encoding="utf-8")
    return path


def write_allure_meta(alluredir: Path | str, **environment) -> tuple[Path, Path]:
    """Write both files; keyword arguments are those of ``environment_values``."""
    return (
        write_environment(alluredir, environment_values(**environment)),
        write_categories(alluredir),
    )
