"""What a compiled tree's library answered: one JSON object, read once for the host's and the rank's calls."""

from __future__ import annotations

import json
import sys

from contract.errors import ImplementationFailure, clip


def reply_object(raw: bytes, who: str, op: str) -> dict:
    """The JSON object a compiled ``op`` answered; ``ImplementationFailure`` for anything else, a reply nested
    deeper than Python's parser goes (``RecursionError``) included."""
    text = raw.decode("utf-8", errors="replace")  # a tree's message may be GBK or any bytes
    try:
        reply = json.loads(text)
    except ValueError:
        reply = None
    except RecursionError:
        raise ImplementationFailure(who, f"the compiled {op} answered JSON nested deeper than the reader goes "
                                         f"(Python's recursion limit, {sys.getrecursionlimit()})") from None
    if not isinstance(reply, dict):
        raise ImplementationFailure(who, f"the compiled {op} answered something that is not a JSON object: "
                                         f"{clip(text, 120)!r}")
    return reply
