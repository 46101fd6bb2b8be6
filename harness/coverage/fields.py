"""Field coverage: for each reported fact, the first TC case of the default matrix that catches its corruption.

A field mutant (``implementations.mutants.fields.FieldMutant``) is the reference with one field or
tensor property corrupted; it runs on a TC case through the case's own overrides (its implementation
node replaced), so the case, its body and its check are exactly the TC's. "Caught" is what fails the
pytest test (``harness.mutation.killmatrix.run_one``). A field no case catches is a fact no check
compares with the spec.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Callable, Iterable, Optional

from harness.mutation import killmatrix
from harness.suites.matrix import Matrix, load_matrix

MATRIX = "ci"
RECORD = Path(__file__).with_name("field_catches.json")
"""field -> {"tc": ..., "case": case key} of the first catching case (``python -m harness.coverage fields --record``)."""
PLAN_TC_ORDER = ("TC-02", "TC-01", "TC-04", "TC-07", "TC-03", "TC-05", "TC-06")
TC_ORDER = ("TC-01", "TC-02", "TC-04", "TC-07", "TC-03", "TC-05", "TC-06")
DRAFT_TC_ORDER = ("TC-07", "TC-02", "TC-04", "TC-01", "TC-03", "TC-05", "TC-06")
"""Where the scan looks first (cheap TCs, and the TCs that start a draft engine for draft facts); the
recorded case is the first catch in this order, not necessarily the only TC that catches."""


def field_overrides(field: str) -> tuple[str, ...]:
    return ("implementation._target_=implementations.mutants.fields.FieldMutant", f"+implementation.field='{field}'")


def tc_order(field: str) -> tuple[str, ...]:
    if field.startswith("DraftPlan") or "[draft]" in field:
        return DRAFT_TC_ORDER
    return PLAN_TC_ORDER if field.startswith(("KVPlan", "RankPlan")) else TC_ORDER


def load(overrides: Iterable[str] = ()) -> Matrix:
    return load_matrix(MATRIX, list(overrides))


def field_cases(tc: str, field: str, matrix: Matrix) -> list:
    """The TC's cases on ``matrix`` at the reference, with the field mutant as the implementation."""
    return [dataclasses.replace(c, extra=(*c.extra, *field_overrides(field)))
            for c in killmatrix.cases_for(tc, killmatrix.REFERENCE, matrix)]


DP = "@dp>1"
"""Suffix of a record key measured on cases at dp > 1 only (``dp_fields``)."""


def dp_fields() -> tuple[str, ...]:
    """Per-rank facts, measured again on dp > 1 cases (the corrupted rank is then in the last dp group)."""
    # implementations.mutants imports torch (3.1 s, python -X importtime): the coverage tables read without it
    from implementations.mutants import field_ids

    return tuple(f for f in field_ids() if f.startswith(("RankPlan", "WorkerKVCache", "tensor")))


def record_keys() -> tuple[str, ...]:
    # implementations.mutants imports torch (3.1 s, python -X importtime): the coverage tables read without it
    from implementations.mutants import field_ids

    return field_ids() + tuple(f + DP for f in dp_fields())


def at_dp(case) -> bool:
    return case.shape()["dp_size"] > 1


def first_catch(key: str, matrix: Optional[Matrix] = None, *, tcs: Optional[Iterable[str]] = None,
                known: Optional[dict] = None,
                progress: Callable[[str], None] = lambda _: None) -> Optional[dict]:
    """{"tc", "case", "detail"} of the first case catching the field mutant of ``key`` (a field, or a field
    with ``DP``: cases at dp > 1 only), or None. ``known`` (a recorded entry) is tried first."""
    field, dp_only = key.removesuffix(DP), key.endswith(DP)
    matrix = matrix or load()
    order = list(tcs or tc_order(field))
    if known:
        order = [known["tc"]] + [tc for tc in order if tc != known["tc"]]
    for tc in order:
        suite = killmatrix.suite_module(tc)
        cases = [c for c in field_cases(tc, field, matrix) if at_dp(c) or not dp_only]
        if known and tc == known["tc"]:
            cases = killmatrix.tried_first(cases, known["case"])
        for case in cases:
            _ = case.resolved  # composes (a ConfigError here is the harness's, not a catch)
            outcome = killmatrix.run_one(suite, case)
            if outcome.catches:
                progress(f"{key}: {tc} [{killmatrix.case_key(case)}] {outcome.detail[:120]}")
                return {"tc": tc, "case": killmatrix.case_key(case), "detail": outcome.detail}
    progress(f"{key}: not caught")
    return None


def recorded() -> dict:
    return json.loads(RECORD.read_text()) if RECORD.is_file() else {}


def case_of(key: str, entry: dict, matrix: Optional[Matrix] = None):
    """The recorded catching case of a record key on the matrix, or None if the matrix no longer has it."""
    matrix = matrix or load()
    return next((c for c in field_cases(entry["tc"], key.removesuffix(DP), matrix)
                 if killmatrix.case_key(c) == entry["case"]), None)


def check_recorded(key: str, entry: dict, matrix: Optional[Matrix] = None) -> str:
    """"" when the recorded case still catches the field mutant of ``key``; else why not."""
    case = case_of(key, entry, matrix)
    if case is None:
        return f"recorded case {entry['tc']} [{entry['case']}] is no longer a case of the {MATRIX} matrix"
    if key.endswith(DP) and not at_dp(case):
        return f"recorded case {entry['case']} is not at dp > 1"
    outcome = killmatrix.run_one(killmatrix.suite_module(entry["tc"]), case)
    return "" if outcome.catches else f"{entry['tc']} [{entry['case']}] no longer catches it ({outcome.verdict})"


def sample_keys(entries: dict) -> tuple[str, ...]:
    """One recorded key per kind (``KVPlan``, ``RankPlan`` at dp 1 and dp > 1, ...), preferring a catch by a
    check over a crash: what the default pytest run re-checks (``--check`` runs them all)."""
    by_kind: dict[str, str] = {}
    for key in sorted(entries, key=lambda k: (entries[k] or {}).get("detail", "").startswith("RankFailure")):
        if entries[key]:
            by_kind.setdefault(key.split(".", 1)[0] + (DP if key.endswith(DP) else ""), key)
    return tuple(sorted(by_kind.values()))
