"""A tree's departures from the spec, role by role: the findings of ``harness.departures.judge`` grouped so that
one root cause reads once, rendered as a list (markdown, JSON), and compared between two snapshots.

A **finding** is one case's answer of one role against the spec's figure; a **departure** is every finding of
the same role, rule and figures (the cases and TCs it affects gathered), so a CHECK that refuses four valid
configurations, or an estimate dropping the same slot at s 2 and s 4, is one line."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterable, Sequence

ALL_TCS = ("TC-01", "TC-02", "TC-03", "TC-04", "TC-05", "TC-06", "TC-07")
ROLE_ORDER = ("validation", "worker_checks", "allocation_checks", "engine_options", "estimation", "ownership", "layout",
              "engine", "worker", "groups", "speculative", "allocation")
"""The roles judged one by one (a manifest's roles and the tree's own allocation), in the order a list reads:
start-up (the master's, then the worker's checks), the option values the engine hands the estimation, the master's
figures, the engines, the workers and the groups they form."""
DEPARTURES_FILE = "departures.json"


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One case's departure of one role: the tree's figure against the spec's."""

    role: str
    rule: str
    """The spec's rule, in words, with its FEATURE section."""
    tree: str
    """What the tree answers (a figure, a refusal, a crash, ``absent``)."""
    spec: str
    """What the spec answers for the same inputs."""
    case: str
    tcs: tuple[str, ...] = ()
    function: str = ""
    file: str = ""
    detail: str = ""
    """This case's own figures where they differ from case to case (a block count): shown beside the case,
    not part of what makes two findings one departure."""


@dataclass(frozen=True, kw_only=True)
class Departure:
    """Every finding of one role, rule and pair of figures: one line of a tree's list."""

    role: str
    rule: str
    tree: str
    spec: str
    function: str = ""
    file: str = ""
    cases: tuple[str, ...] = ()
    tcs: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str, str, str]:
        """What makes two departures the same across snapshots (cases and TCs may grow or shrink)."""
        return (self.role, self.rule, self.tree, self.spec)

    def line(self) -> str:
        where = f" — {self.function} ({self.file})" if self.function else ""
        cases = ", ".join(self.cases)
        return (f"**{self.role}**: {self.rule}: tree {self.tree}; spec {self.spec}{where}. "
                f"Cases: {cases}; TCs: {', '.join(self.tcs) or 'none'}")


@dataclass(frozen=True, kw_only=True)
class TreeDepartures:
    """One tree's list, and which role states it was judged with."""

    tree: str
    manifest: str
    departures: tuple[Departure, ...] = ()
    roles: dict = field(default_factory=dict)
    """role -> ``played`` / ``absent`` / ``none`` / ``torch`` (as the manifest says)."""
    cases: tuple[str, ...] = ()


def group(findings: Iterable[Finding]) -> tuple[Departure, ...]:
    """Findings of the same role, rule and figures as one departure, in the order first found; the cases
    and TCs each sorted once."""
    order: dict[tuple, list[Finding]] = {}
    for f in findings:
        order.setdefault((f.role, f.rule, f.tree, f.spec), []).append(f)
    out = []
    for (role, rule, tree, spec), found in order.items():
        cases = tuple(dict.fromkeys(f"{f.case} ({f.detail})" if f.detail else f.case for f in found))
        tcs = tuple(sorted({tc for f in found for tc in f.tcs}))
        out.append(Departure(role=role, rule=rule, tree=tree, spec=spec, function=found[0].function,
                             file=found[0].file, cases=cases, tcs=tcs))
    return tuple(out)


def markdown(trees: Sequence[TreeDepartures]) -> str:
    """Each tree's list of departures, one line each."""
    lines = []
    for t in trees:
        lines.append(f"### Departures of {t.tree} (manifest {t.manifest}): {len(t.departures)}")
        lines.append("")
        lines += [f"- {d.line()}" for d in t.departures] or ["- none found on these cases"]
        lines.append("")
    return "\n".join(lines)


def to_json(trees: Sequence[TreeDepartures]) -> dict:
    return {"trees": [{"tree": t.tree, "manifest": t.manifest, "roles": dict(t.roles), "cases": list(t.cases),
                       "departures": [asdict(d) for d in t.departures]} for t in trees]}


def merge(trees: Sequence[TreeDepartures]) -> list[TreeDepartures]:
    """Lists of the same tree and manifest (a sweep's jobs, each judged on its own case) as one list per tree:
    departures of the same role, rule and figures read once, their cases and TCs gathered."""
    by_tree: dict[tuple[str, str], list[TreeDepartures]] = {}
    for t in trees:
        by_tree.setdefault((t.tree, t.manifest), []).append(t)
    out = []
    for (tree, manifest), parts in by_tree.items():
        merged: dict[tuple, Departure] = {}
        for d in (d for t in parts for d in t.departures):
            old = merged.get(d.key)
            merged[d.key] = d if old is None else replace(
                old, cases=tuple(dict.fromkeys(old.cases + d.cases)), tcs=tuple(sorted(set(old.tcs) | set(d.tcs))))
        ordered = sorted(merged.values(), key=lambda d: ROLE_ORDER.index(d.role) if d.role in ROLE_ORDER else 99)
        out.append(TreeDepartures(tree=tree, manifest=manifest, departures=tuple(ordered),
                                  roles=dict(parts[0].roles),
                                  cases=tuple(dict.fromkeys(c for t in parts for c in t.cases))))
    return out


def from_json(data: dict) -> list[TreeDepartures]:
    out = []
    for t in data["trees"]:
        deps = tuple(Departure(**{**d, "cases": tuple(d["cases"]), "tcs": tuple(d["tcs"])}) for d in t["departures"])
        out.append(TreeDepartures(tree=t["tree"], manifest=t["manifest"], departures=deps, roles=dict(t["roles"]),
                                  cases=tuple(t.get("cases", ()))))
    return out


def load(path: Path) -> list[TreeDepartures]:
    """A recorded list (``departures.json``, or a folder holding one); ``ValueError`` naming what is wrong."""
    p = Path(path)
    if p.is_dir():
        p = p / DEPARTURES_FILE
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
        if "departures" in data and "trees" not in data:  # a sweep job's result.json
            data = {"trees": [data["departures"]]}
        return from_json(data)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{p}: not a departures file written by harness.native_verdicts ({exc})") from None


@dataclass(frozen=True, kw_only=True)
class Diff:
    """What changed between a previous list and this one."""

    new: tuple[Departure, ...]
    gone: tuple[Departure, ...]
    remaining: tuple[Departure, ...]


def diff(before: Sequence[Departure], after: Sequence[Departure]) -> Diff:
    """Departures only ``after`` has (new), only ``before`` has (gone), and both (remaining, as ``after`` has
    them): compared by role, rule and figures."""
    old = {d.key for d in before}
    now = {d.key for d in after}
    return Diff(new=tuple(d for d in after if d.key not in old), gone=tuple(d for d in before if d.key not in now),
                remaining=tuple(d for d in after if d.key in old))


def diff_markdown(before_name: str, after_name: str, d: Diff) -> str:
    lines = [f"### Since {before_name}: {after_name} has {len(d.new)} new, {len(d.gone)} gone, "
             f"{len(d.remaining)} remaining departures", ""]
    for label, deps in (("new", d.new), ("gone", d.gone), ("remaining", d.remaining)):
        lines += [f"- {label}: {x.line()}" for x in deps]
    return "\n".join(lines) + "\n"
