"""The oracle's answers about one configuration, computed once while the checks judge it (``per_run``), and
shared with the same configuration at another reserve per card where they do not depend on it
(``per_run_any_reserve``, ``with_reserved_bytes_per_card``)."""

from __future__ import annotations

from collections import deque
from dataclasses import fields, replace
from functools import wraps

from harness.oracle.inputs import run_budget_bytes

RUNS_REMEMBERED = 4096
"""Configurations whose answers are kept (the most recent): a verdict asks about one at a time, a few checks
about a variant of it (another budget, another reserve); the explorer's implementations judge the same 1000
drawn configuration objects (``harness.explore.strategies.decode``), each after the other."""
_answers: dict = {}
"""id(run) -> (run, {key: answer} of ``per_run``, {key: answer} of ``per_run_any_reserve``); the run is held so
that its id is not reused. A variant at another reserve (``with_reserved_bytes_per_card``) holds the same
second dictionary as the configuration it was made from: one lookup finds the shared answers."""
_order: deque = deque()
"""The runs of ``_answers``, oldest first: the oldest let go in constant time (``del d[next(iter(d))]`` on a
dictionary whose front was emptied scans the holes each time: about 3 µs an entry at 4096)."""


def per_run(compute):
    """``compute(run, ...)`` once per configuration object and arguments: every check of a verdict asks again
    (the report, the block counts, the startup verdict), each for the same ``run``. Only a frozen dataclass
    is remembered (it cannot change under its id); anything else, or arguments that cannot be hashed, is
    computed each time. Answers are shared: callers read them, never change them (tuples, frozen values)."""
    return _remembered(compute, any_reserve=False)


def per_run_any_reserve(compute):
    """``per_run``, for an answer that depends on a configuration's reserve per card only through its per-rank
    budget (``inputs.run_budget_bytes``): one answer for a configuration and its variants made by
    ``with_reserved_bytes_per_card`` (same budget, another reserve): the start-up rules, what cannot be planned,
    the report, the block counts, the split groups. The card checks read the reserve itself and are ``per_run``."""
    return _remembered(compute, any_reserve=True)


def with_reserved_bytes_per_card(run, reserved_bytes: int):
    """``run`` with ``hardware.reserved_bytes_per_card`` = ``reserved_bytes``, everything else the same objects.
    Where its per-rank budget is unchanged (``cache.kv_budget_bytes`` set), the answers of the
    ``per_run_any_reserve`` functions are those of ``run``, not computed again."""
    variant = replace(run, hardware=replace(run.hardware, reserved_bytes_per_card=reserved_bytes))
    if _same_but_reserve(variant, run) and run_budget_bytes(variant) == run_budget_bytes(run):
        root = _entry(run)
        _keep(variant, (variant, {}, root[2]))  # (were the root let go: the variant holds the shared answers)
    return variant


def _same_but_reserve(variant, run) -> bool:
    """Every field of the two configurations the same object, but the hardware's reserve per card."""
    if type(variant) is not type(run) or not _frozen(run):
        return False
    for f in fields(run):
        if f.name != "hardware" and getattr(variant, f.name) is not getattr(run, f.name):
            return False
    return all(f.name == "reserved_bytes_per_card" or getattr(variant.hardware, f.name) is getattr(run.hardware, f.name)
               for f in fields(run.hardware))


def _frozen(run) -> bool:
    params = getattr(type(run), "__dataclass_params__", None)
    return params is not None and params.frozen


def _entry(run):
    """The answers kept for ``run`` (a new entry, the oldest let go past ``RUNS_REMEMBERED``), or None for a
    configuration that is not a frozen dataclass (it may change under its id: never remembered)."""
    entry = _answers.get(id(run))
    if entry is not None and entry[0] is run:
        return entry
    if not _frozen(run):
        return None
    return _keep(run, (run, {}, {}))


def _keep(run, entry: tuple) -> tuple:
    """``entry`` kept for ``run``, the oldest let go where ``RUNS_REMEMBERED`` are kept already."""
    while len(_answers) >= RUNS_REMEMBERED and _order:
        oldest = _order.popleft()
        if _answers.get(id(oldest), (None,))[0] is oldest:
            del _answers[id(oldest)]
    _answers[id(run)] = entry
    _order.append(run)
    return entry


def _remembered(compute, *, any_reserve: bool):
    shared = 2 if any_reserve else 1  # which of an entry's dictionaries holds this function's answers

    @wraps(compute)
    def once(run, *args, **kwargs):
        entry = _answers.get(id(run))
        if entry is None or entry[0] is not run:
            entry = _entry(run)
            if entry is None:
                return compute(run, *args, **kwargs)
        answers = entry[shared]
        if kwargs:
            key = (compute, args, tuple(kwargs.items()))
        elif args:
            key = (compute, args)
        else:
            key = compute  # (no tuple made and hashed for an answer without arguments)
        try:
            return answers[key]
        except KeyError:
            answer = answers[key] = compute(run, *args, **kwargs)
            return answer
        except TypeError:  # an argument that cannot be hashed
            return compute(run, *args, **kwargs)

    return once
