"""Which torch this interpreter imports, and whether it meets the harness's floor.

    python scripts/check_torch.py [--floor 2.1.0]

Prints ``using torch <version> from <dir>`` and exits 0, or prints one ``error:`` line and
exits 1 when torch does not import or is older than the floor. Local version tags
(``+corex.3.2.3``, ``+cpu``) and pre-release suffixes are ignored, so CoreX 3.2.3's bare
``2.1.0`` and ``2.1.0+corex.3.2.3`` both meet a floor of 2.1.0. setup.sh runs it for the
vendor torch (``LWSPLIT_SYSTEM_TORCH=1``).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Optional

TORCH_FLOOR = "2.1.0"


def release(version: str) -> tuple[int, ...]:
    """``2.1.0+corex.3.2.3`` -> (2, 1, 0); ``2.2.0a0`` -> (2, 2, 0)."""
    public = version.split("+", 1)[0]
    match = re.match(r"\d+(\.\d+)*", public)
    if not match:
        raise ValueError(f"unreadable torch version {version!r}")
    return tuple(int(n) for n in match.group(0).split("."))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/check_torch.py", description=__doc__.split("\n")[0])
    parser.add_argument("--floor", default=TORCH_FLOOR)
    opts = parser.parse_args(argv)
    try:
        import torch
    except Exception as exc:  # noqa: BLE001 - any import failure is the same one-line error
        print(f"error: torch does not import in {sys.executable} ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    where = os.path.dirname(torch.__file__ or "?")
    try:
        too_old = release(torch.__version__) < release(opts.floor)
    except ValueError as exc:
        print(f"error: {exc} at {where}", file=sys.stderr)
        return 1
    if too_old:
        print(f"error: torch {torch.__version__} at {where} is older than the supported floor {opts.floor}; "
              f"allowed: torch >= {opts.floor} (CoreX 3.2.3 ships 2.1.0)", file=sys.stderr)
        return 1
    print(f"using torch {torch.__version__} from {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
