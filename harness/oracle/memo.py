"""The oracle's answers about one configuration, computed once while the checks judge it (``per_run``)."""

from __future__ import annotations

from functools import wraps

RUNS_REMEMBERED = 4096
"""Configurations whose answers are kept (the most recent): a verdict asks about one at a time, a few checks
about a variant of it (another budget, another reserve); the explorer's implementations judge the same 1000
drawn configuration objects (``harness.explore.strategies.decode``), each after the other."""
_answers: dict = {}
"""id(run) -> (run, {(function, arguments): answer}); the run is held so that its id is not reused."""


def per_run(compute):
    """``compute(run, ...)`` once per configuration object and arguments: every check of a verdict asks again
    (the report, the block counts, the startup verdict), each for the same ``run``. Only a frozen dataclass
    is remembered (it cannot change under its id); anything else, or arguments that cannot be hashed, is
    computed each time. Answers are shared: callers read them, never change them (tuples, frozen values)."""

    @wraps(compute)
    def once(run, *args, **kwargs):
        entry = _answers.get(id(run))
        if entry is None or entry[0] is not run:
            params = getattr(type(run), "__dataclass_params__", None)
            if params is None or not params.frozen:
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
