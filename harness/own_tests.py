"""The command that builds and runs a C++ tree's own GoogleTest file (``implementations.xllm_native.own_tests``).

    python -m harness.own_tests --source ../shared/ports/p6_v3_latest

Prints the summary; exit 0 when every test passed and the binary ended well, 1 when not, 2 when the tests
could not be built or run (one ``error:`` line saying why), 130 on Ctrl-C.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence

from harness.usage import Parser, command
from implementations.xllm_native import own_tests

COMMAND = "python -m harness.own_tests"


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = Parser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="a C++ tree whose manifest names its own tests")
    parser.add_argument("--manifest", default=None, help="the manifest (default: the shipped one that fits)")
    args = parser.parse_args(argv)
    result = own_tests.run(args.source, args.manifest)
    print(result.summary() if result is not None else "the tree's manifest names no test file")
    return 0 if result is None or result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
