"""What the parent and a rank say to each other over the rank's Pipe: frozen dataclasses.

parent -> rank: ``Call`` (run a function on every rank), ``StateQuery``, ``Close``.
rank -> parent: ``Ready`` (group up), ``Done`` (a call's result), ``Failed`` (a call or the
start-up failed; ``kind`` is ``exception``, ``check`` or ``skip``), ``State``, ``Closed``.
Plain data only: they are pickled across the process boundary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Union


@dataclass(frozen=True)
class Call:
    call_id: int
    ref: str
    """``"module:qualname"`` of the function each rank runs as ``fn(ctx, *args, **kwargs)``."""
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StateQuery:
    """Ask a rank for its collective bookkeeping (``RankContext.sync_state``)."""


@dataclass(frozen=True)
class Close:
    """destroy_process_group and exit."""


@dataclass(frozen=True)
class Ready:
    pid: int


@dataclass(frozen=True)
class Done:
    call_id: int
    result: Any


@dataclass(frozen=True)
class Failed:
    call_id: Optional[int]
    """The failed call; 0 at start-up; None when the call's own message could not be read."""
    kind: str
    """``exception`` (raised or could not reply), ``check`` (an agreed check failed) or ``skip``."""
    text: str
    origin: Optional[Any] = None
    """``errors.Origin`` of the exception the rank raised (None where there was none)."""


@dataclass(frozen=True)
class State:
    state: Optional[dict]


@dataclass(frozen=True)
class Closed:
    pass



ToParent = Union[Ready, Done, Failed, State, Closed]
ToRank = Union[Call, StateQuery, Close]
