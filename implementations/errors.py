"""Errors an implementation raises for user mistakes.

The harness turns a ``UserError`` into one line on stderr and a non-zero exit,
never a traceback: these are wrong inputs, not bugs.
"""

from __future__ import annotations


class UserError(ValueError):
    """A mistake in what the user asked for.

    ``field`` names the offending setting (in the harness's override vocabulary,
    e.g. ``layerwise.split_size``), ``value`` is what was given and ``allowed``
    says what would be accepted.
    """

    def __init__(self, field: str, value: object, allowed: str, detail: str = "") -> None:
        self.field = field
        self.value = value
        self.allowed = allowed
        self.detail = detail
        msg = f"{field}={value!r}: {allowed}"
        if detail:
            msg += f" ({detail})"
        super().__init__(msg)


class ConfigError(UserError):
    """The configuration breaks a startup rule (FEATURE section 3)."""


class TopologyError(UserError):
    """A topology file or placement that cannot be used."""


class PlanError(UserError):
    """The configuration is valid but no plan fits (e.g. budget below one block)."""
