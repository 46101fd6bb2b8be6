"""What every mutant shares: the reference with one rule broken, and a label saying which.

A mutant's class docstring is its ``rule``: one line naming what is broken and
the FEATURE.md section it violates. ``component`` is the part of the feature the
rule belongs to; ``expected_catchers`` the TCs expected to kill it (documentation
for the kill matrix; the meta-suite measures the real answer).
"""

from __future__ import annotations

import inspect
from typing import ClassVar

from implementations.reference.impl import ReferenceImplementation

COMPONENTS = ("flags", "validation", "layout", "topology", "estimation", "allocation", "engine", "worker")


class Mutant(ReferenceImplementation):
    """Base of the deliberately broken implementations (not itself a mutant)."""

    name = "mutant"
    component: ClassVar[str] = ""
    rule: ClassVar[str] = ""
    expected_catchers: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls.rule = inspect.cleandoc(cls.__doc__ or "")
        # Programming errors in a mutant's own definition, caught at import.
        if not cls.name.startswith("mutant_"):
            raise TypeError(f"{cls.__name__}.name must start with 'mutant_', got {cls.name!r}")
        if cls.component not in COMPONENTS:
            raise TypeError(f"{cls.__name__}.component must be one of {COMPONENTS}, got {cls.component!r}")
        if not cls.rule or "\n" in cls.rule:
            raise TypeError(f"{cls.__name__} needs a one-line docstring (its rule)")
        if not cls.expected_catchers:  # which TCs exist is the harness's to say (test_mutants checks the names)
            raise TypeError(f"{cls.__name__}.expected_catchers must name at least one TC")
