"""What the spec predicts before a case runs: rejections, and the failures of known variants.

Decided by the spec (the oracle), never by the code under test.

- ``expected_rejection(run)``: the first startup rule of FEATURE section 3 the config
  breaks, as ``Rejection(field, reason)``; a case passes its rejection only when the
  implementation raises ``implementations.errors.UserError`` naming that field.
- ``PREDICTIONS``: per implementation name, the problems the spec predicts a check finds
  (FEATURE section 4: upstream's literal owner rule ``layer_id % s`` puts every
  full-attention layer of a hybrid model on one split rank, so that rank exceeds the
  uniform peak). ``judge`` compares the problems a check found with the prediction: the
  predicted problems must all be found (rank and bytes exact), anything else found, and
  any exception, fails the test. Data keyed by implementation name: add an entry to
  predict another variant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from harness import oracle

# ---- rejections ---------------------------------------------------------------------------
from harness.oracle import Rejection, expected_rejection  # noqa: F401  (re-exported: the suites' one import)


def rejection_problems(error, run) -> Optional[list[str]]:
    """None when the spec expects no rejection; else the problems of the master's answer (empty: the
    implementation refused with a UserError naming the expected field)."""
    want = expected_rejection(run)
    if want is None:
        return None
    if error is None:
        return [Problem(f"master accepted a config the spec refuses: {want.reason} (expected a UserError "
                        f"naming {want.field})", rule="rejection")]
    if not error.user_error:
        return [Problem(f"master refused with {error} (not a UserError); expected a UserError naming "
                        f"{want.field} ({want.reason})", rule="rejection")]
    if error.field != want.field:
        return [Problem(f"master refused naming {error.field!r} ({error}); the spec's rule is {want.field} "
                        f"({want.reason})", rule="rejection")]
    return []


# ---- problems -----------------------------------------------------------------------------


class Problem(str):
    """A problem a check found: its text, plus what a prediction matches on.

    ``rule`` names the spec rule broken (``owner``, ``peak``, ...); ``rank`` and ``amount``
    (bytes) locate it. Plain strings are problems of rule ``""``, which no prediction covers.
    """

    rule: str
    rank: Optional[int]
    amount: Optional[int]

    def __new__(cls, text: str, *, rule: str = "", rank: Optional[int] = None, amount: Optional[int] = None):
        self = super().__new__(cls, text)
        self.rule, self.rank, self.amount = rule, rank, amount
        return self

    def __reduce__(self):
        return (_problem, (str(self), self.rule, self.rank, self.amount))


def _problem(text, rule, rank, amount) -> Problem:
    return Problem(text, rule=rule, rank=rank, amount=amount)


@dataclass(frozen=True, kw_only=True)
class Predicted:
    """A problem the spec predicts: its rule, and the rank and amount when they are fixed."""

    rule: str
    rank: Optional[int] = None
    amount: Optional[int] = None
    why: str = ""

    def matches(self, p) -> bool:
        return (getattr(p, "rule", "") == self.rule
                and (self.rank is None or getattr(p, "rank", None) == self.rank)
                and (self.amount is None or getattr(p, "amount", None) == self.amount))


@dataclass(frozen=True, kw_only=True)
class Prediction:
    """``required``: each must match a found problem. ``consequences``: rules that may also appear
    because of them (e.g. a different block count changes every byte figure)."""

    required: tuple[Predicted, ...]
    consequences: tuple[str, ...] = ()
    reason: str = ""


UPSTREAM_OWNER_RULE = "layer_id_mod_s"
"""The oracle's name for upstream's owner rule (``oracle.OWNER_RULES``)."""


def owner_rule_prediction(tc: str, run) -> Optional[Prediction]:
    """Upstream's owner rule ``layer_id % s`` (FEATURE 4) where it differs from the round-robin: the
    ranks whose full layers differ (TC-01, TC-07), and the ranks that then exceed the uniform peak at
    the same block count, and by how many bytes (TC-02). Every number comes from the oracle."""
    s = oracle.split_size(run)
    if s == 1 or expected_rejection(run) is not None:
        return None
    full = tuple(oracle.expected_full_layers(run.model))
    if oracle.expected_owner(full, s) == oracle.expected_upstream_owner(full, s):
        return None
    try:
        spec = [oracle.expected_rank_owned_layers(run, r) for r in range(run.parallel.world_size)]
        upstream = [oracle.expected_rank_owned_layers(run, r, owner_rule=UPSTREAM_OWNER_RULE)
                    for r in range(run.parallel.world_size)]
    except ValueError:  # no grouping the spec accepts: nothing to predict, the checks report it
        return None
    counts = {r: sum(1 for o in oracle.expected_upstream_owner(full, s).values() if o == r) for r in range(s)}
    reason = (f"upstream owner rule (layer_id % s) on {run.model.name} at s={s}: split ranks own {counts} "
              f"full layers (FEATURE 4)")
    if tc in ("TC-01", "TC-07"):
        differ = [r for r, (a, b) in enumerate(zip(spec, upstream)) if tuple(a) != tuple(b)]
        return Prediction(required=tuple(Predicted(rule="owner", rank=r) for r in differ),
                          consequences=("bytes", "n_blocks"), reason=reason)
    if tc == "TC-02":
        over = oracle.expected_ranks_over_uniform_peak(run, owner_rule=UPSTREAM_OWNER_RULE)
        return Prediction(required=tuple(Predicted(rule="peak", rank=r, amount=amount,
                                                   why=f"rank {r} exceeds the uniform peak by {amount} B")
                                         for r, amount in over),
                          consequences=("n_blocks", "estimate", "figure"), reason=reason)
    return None


PREDICTIONS: dict[str, Callable[[str, object], Optional[Prediction]]] = {
    "upstream_owner_rule": owner_rule_prediction,
}
"""Implementation name -> predict(tc, run). ``upstream_owner_rule`` is the reference with only
upstream's owner rule; the faithful ``xllm_upstream`` differs in more rules (FEATURE 2-4: no
enable flag, upstream's model list, ``rank % s``), see ``testcases/upstream`` for where it is run."""


def prediction(tc: str, implementation: str, run) -> Optional[Prediction]:
    predict = PREDICTIONS.get(implementation)
    return predict(tc, run) if predict is not None else None


def judge(tc: str, implementation: str, run, problems: list) -> list[str]:
    """The test's failures: ``problems`` when nothing is predicted; else what the prediction does not
    explain, plus every predicted problem not found (an expected failure is strict)."""
    pred = prediction(tc, implementation, run)
    if pred is None:
        return list(problems)
    failures = [f"{implementation}: predicted problem not found: {p.rule} on rank {p.rank}"
                + (f" by {p.amount} B" if p.amount is not None else "") + (f" ({p.why})" if p.why else "")
                for p in pred.required if not any(p.matches(x) for x in problems)]
    unexplained = [f"unpredicted: {x}" for x in problems
                   if not any(p.matches(x) for p in pred.required) and getattr(x, "rule", "") not in pred.consequences]
    if not pred.required:
        failures.append(f"{implementation}: the prediction names no problem ({pred.reason})")
    return failures + unexplained


def predicted_failure(tc: str, implementation: str, run) -> Optional[str]:
    """The expected-failure reason of a case whose check has just found exactly the predicted problems
    (``judge`` returned nothing): the prediction's reason and the problems it names; None when the
    spec predicts nothing for this case."""
    pred = prediction(tc, implementation, run)
    if pred is None:
        return None
    named = "; ".join(f"{p.rule} on rank {p.rank}" + (f" by {p.amount} B" if p.amount is not None else "")
                      for p in pred.required)
    return f"{pred.reason}; found exactly the predicted problems: {named}"


def assert_verdict(tc: str, case, problems: list) -> None:
    """A TC test's verdict: fail on anything ``judge`` reports; a confirmed prediction is a strict expected
    failure (``pytest.xfail`` naming the predicted problems), so the finding stays visible in reports."""
    import pytest

    run = case.resolved.run
    failures = judge(tc, case.implementation, run, problems)
    assert not failures, "\n".join(failures)
    reason = predicted_failure(tc, case.implementation, run)
    if reason is not None:
        pytest.xfail(reason)
