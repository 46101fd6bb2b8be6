"""Byte units: the one owner of MiB and GiB in code that may import ``implementations``.

(``harness/oracle/`` keeps its own: it imports nothing from ``implementations``.)
"""

from __future__ import annotations

MIB = 1 << 20
"""Bytes in a MiB."""
GIB = 1 << 30
"""Bytes in a GiB."""
