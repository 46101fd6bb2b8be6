"""Errors an implementation raises for user mistakes.

The harness turns a ``UserError`` into one line on stderr and a non-zero exit,
never a traceback: these are wrong inputs, not bugs.
"""

from __future__ import annotations

import reprlib

MAX_SHOWN = 200
"""Most characters of a user's value (and of the field and the detail) an error message shows: a value
can be megabytes, or, built from YAML aliases, far more once printed."""


def _short_repr() -> reprlib.Repr:
    shown = reprlib.Repr()  # keyword arguments only from Python 3.12
    shown.maxstring = shown.maxother = MAX_SHOWN
    shown.maxlist = shown.maxtuple = shown.maxdict = shown.maxset = shown.maxfrozenset = 8
    shown.maxlevel = 3
    shown.maxlong = 40
    return shown


_SHORT = _short_repr()


def shown(value: object) -> str:
    """``repr(value)`` cut short (a long string keeps its start and end, a container its first items),
    built without expanding what is cut."""
    try:
        return clip(_SHORT.repr(value))
    except Exception:  # e.g. an int past Python's digit limit for str()
        return f"<{type(value).__name__}>"


def clip(text: str, limit: int = MAX_SHOWN) -> str:
    """``text``, or its start and end around ``...`` when it is longer than ``limit``."""
    return text if len(text) <= limit else f"{text[:limit - limit // 4]}...{text[-(limit // 4 - 3):]}"


class UserError(ValueError):
    """A mistake in what the user asked for.

    ``field`` names the offending setting (in the harness's override vocabulary,
    e.g. ``layerwise.split_size``), ``value`` is what was given and ``allowed``
    says what would be accepted. The message shows each of them cut short (``shown``,
    ``clip``): never a user's value whole.
    """

    def __init__(self, field: str, value: object, allowed: str, detail: str = "") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.detail = detail
        msg = f"{clip(str(field))}={shown(value)}: {clip(str(allowed), 4 * MAX_SHOWN)}"
        if detail:
            msg += f" ({clip(str(detail), 2 * MAX_SHOWN)})"
        super().__init__(msg)


class ConfigError(UserError):
    """The configuration breaks a startup rule (FEATURE section 3)."""


class TopologyError(UserError):
    """A topology file or placement that cannot be used."""


class PlanError(UserError):
    """The configuration is valid but no plan fits (e.g. budget below one block)."""


class ImplementationFailure(RuntimeError):
    """The implementation's own code failed: it exited, crashed, hung, wrote where it must not, or
    answered something malformed. A verdict on the implementation, never a refusal of the user's
    input: it is not a ``UserError``, so no check takes it for one. Commands print it as one
    ``error:`` line (exit 1); the ranks and the explorer report it as a crash of the code under test.

    ``implementation`` names what failed (e.g. ``xllm_native tree /src/xllm``), ``what`` says what
    happened, ``tail`` holds the last lines the code wrote (its log), if any.
    """

    def __init__(self, implementation: str, what: str, tail: str = "") -> None:
        self.implementation = implementation
        self.what = what
        self.tail = tail
        msg = f"{clip(str(implementation))}: {clip(str(what), 2 * MAX_SHOWN)}"
        if tail:
            msg += f"; its last output: {clip(tail, 2 * MAX_SHOWN)}"
        super().__init__(" ".join(msg.split()))

    def __reduce__(self):
        return (type(self), (self.implementation, self.what, self.tail))
