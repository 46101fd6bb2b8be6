"""The configurations a tree's roles are judged on: each model at each split size (world 4, the TCs' standard
case), the model with its MTP draft (TC-07), TC-01's refusal cases (one per startup rule of FEATURE 3), and
TC-03's topologies where the spec regroups (the split groups alone)."""

from __future__ import annotations

from typing import Sequence

from harness.departures.judge import JudgedCase, case_tcs
from harness.suites import tc01, tc07
from harness.suites.case import Case


def _run(model: str, layerwise: str, *, parallel: str = "tp4", hardware: str = "cpu", draft: str = "none",
         extra: tuple = ()):
    return Case(tc="TC-01", model=model, layerwise=layerwise, parallel=parallel, implementation="reference",
                hardware=hardware, draft=draft, extra=tuple(extra)).resolved.run


def standard_cases(models: Sequence[str], layerwise: Sequence[str]) -> list[JudgedCase]:
    """``<model>-<s>`` at world 4 on the CPU profile, and ``<model>-<s>-<draft>`` where TC-07 pairs a draft."""
    drafts = dict(tc07.PAIRS)
    out = []
    for model in models:
        for lw in layerwise:
            run = _run(model, lw)
            active = run.layerwise.enable and run.layerwise.split_size > 1
            out.append(JudgedCase(id=f"{model}-{lw}", run=run, tcs=case_tcs(active)))
            if model in drafts:
                out.append(JudgedCase(id=f"{model}-{lw}-{drafts[model]}", run=_run(model, lw, draft=drafts[model]),
                                      tcs=("TC-07",), only="speculative"))
    return out


TOPOLOGY_CASES = (
    ("pcie_2switch_8_interleaved-w8", "tp8", ("hardware.topology=pcie_2switch_8_interleaved",)),
    ("pcie_2switch_8_interleaved-w4", "tp4", ("hardware.topology=pcie_2switch_8_interleaved",)),
    ("nvlink_mesh_8", "tp8", ("hardware.topology=nvlink_mesh_8",)),
    ("pcie_4switch_8_mixed-dp2", "dp2_tp4", ("hardware.topology=pcie_4switch_8_mixed",)),
)
"""(id, parallel layout, overrides) of TC-03's topologies on the CPU profile where the spec's groups are not
consecutive runs of s ranks: at s 2, the split groups alone judged on each."""


def topology_cases(model: str = "deepseek_v32") -> list[JudgedCase]:
    """``TOPOLOGY_CASES`` on ``model`` at s 2: the tree's split groups against the grouping key's (TC-03)."""
    return [JudgedCase(id=f"{variant}-s2", run=_run(model, "s2", parallel=par, extra=extra), tcs=("TC-03",),
                       only="groups") for variant, par, extra in TOPOLOGY_CASES]


def refusal_cases() -> list[JudgedCase]:
    """TC-01's refusal cases (``tc01.REJECTIONS``), each breaking one startup rule, by their variant name."""
    return [JudgedCase(id=variant, run=_run(model, lw, parallel=par, hardware=hw, extra=extra), tcs=("TC-01",),
                       refusal=True)
            for variant, model, lw, par, hw, extra in tc01.REJECTIONS]
