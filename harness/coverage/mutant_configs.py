"""The mutant registry is ``implementations.mutants.MUTANTS``; ``conf/implementation/mutant_<name>.yaml``
(what ``implementation=mutant_<name>`` selects) is generated from it, never written by hand.

``python -m harness.coverage mutant-configs`` writes the files (and removes those of mutants no longer
registered); ``testcases/unit/test_mutants.py`` fails when a file differs from what this renders.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

from harness.paths import CONF_DIR

FOLDER = CONF_DIR / "implementation"
PREFIX = "mutant_"


def render(cls) -> str:
    head = textwrap.wrap(f"Mutant ({cls.component}): {cls.rule}", width=100 - 2)
    return "".join(f"# {line}\n" for line in head) + f"_target_: {cls.__module__}.{cls.__qualname__}\n"


def expected() -> dict[Path, str]:
    """File -> the text the registry gives it."""
    from implementations.mutants import MUTANTS

    return {FOLDER / f"{cls.name}.yaml": render(cls) for cls in MUTANTS.values()}


def stale() -> list[Path]:
    """Mutant config files the registry no longer has."""
    return sorted(set(FOLDER.glob(f"{PREFIX}*.yaml")) - set(expected()))


def write() -> list[Path]:
    """Write every file that differs, remove the stale ones; the paths changed."""
    from harness.app.atomic import write_atomic

    changed = []
    for path, text in expected().items():
        if not path.is_file() or path.read_text() != text:
            write_atomic(path, text)
            changed.append(path)
    for path in stale():
        path.unlink()
        changed.append(path)
    return changed
