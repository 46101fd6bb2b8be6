"""The oracle's answers about one configuration, computed once while the checks judge it (``per_run``), and
shared with the same configuration at another reserve per card where they do not depend on it
(``per_run_any_reserve``, ``with_reserved_bytes_per_card``)."""

from __future__ import annotations

from dataclasses import fields, replace
from functools import wraps

from harness.oracle.inputs import run_budget_bytes

RUNS_REMEMBERED = 4096
"""Configurations whose answers are kept (the most recent): a verdict asks about one at a time, a few checks
about a variant of it (another budget, another reserve); the explorer's implementations judge the same 1000
drawn configuration objects (``harness.explore.strategies.decode``), each after the other."""
_answers: dict = {}
"""id(run) -> (run, {(function, arguments): answer}); the run is held so that its id is not reused."""
_kin: dict = {}
"""id(variant) -> (variant, run): ``variant`` is ``run`` at another reserve per card and the same per-rank
budget (``with_reserved_bytes_per_card``); the variant is held so that its id is not reused."""


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
        root = _kin.get(id(run))
        root = root[1] if root is not None and root[0] is run else run
        if len(_kin) >= RUNS_REMEMBERED:
            del _kin[next(iter(_kin))]
        _kin[id(variant)] = (variant, root)
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


def _remembered(compute, *, any_reserve: bool):
    @wraps(compute)
    def once(run, *args, **kwargs):
        if any_reserve and _kin:
            kin = _kin.get(id(run))
            if kin is not None and kin[0] is run:
                run = kin[1]
        entry = _answers.get(id(run))
        if entry is None or entry[0] is not run:
            if not _frozen(run):
                return compute(run, *args, **kwargs)
            if len(_answers) >= RUNS_REMEMBERED:
                del _answers[next(iter(_answers))]
            entry = _answers[id(run)] = (run, {})
        key = (compute, args, tuple(kwargs.items())) if kwargs else (compute, args)
        try:
            return entry[1][key]
        except KeyError:
            answer = entry[1][key] = compute(run, *args, **kwargs)
            return answer
        except TypeError:  # an argument that cannot be hashed
            return compute(run, *args, **kwargs)

    return once
