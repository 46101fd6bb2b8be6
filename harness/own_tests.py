"""The command that builds and runs a C++ tree's own GoogleTest file (``implementations.xllm_native.runtime.own_tests``).

    python -m harness.own_tests --source ../shared/ports/p6_v3_latest
    python -m harness.own_tests --source /path/to/xllm --estimation-test

The first builds the test file a port's manifest names (its ``tests``) with the manifest's sources. The second
builds upstream's own estimation test (``tests/core/framework/kv_cache/kv_cache_estimation_test.cpp``, or
``--test``) into the translation unit ``xllm_native`` compiles (the tree's planning code, the cut-out functions,
the project's shims and binding): evidence that the shims leave the planning math as the tree's own test expects
it. Both need GoogleTest (Debian: ``libgtest-dev``); nothing is cached and the build folder is removed. Each
compile runs in its own process group within ``LWSPLIT_NATIVE_BUILD_TIMEOUT_S``, the binary killed whole after
``--timeout-s``; output is read as UTF-8 with undecodable bytes (a GBK message or comment) replaced.

Prints the summary; exit 0 when every test passed and the binary ended well, 1 when not, 2 when the tests
could not be built or run (one ``error:`` line saying why), 130 on Ctrl-C.
"""

from __future__ import annotations

import math
import sys
from typing import Optional, Sequence

from contract.errors import UserError
from harness.usage import Parser, command
from implementations.xllm_native.runtime.own_tests import ESTIMATION_TEST, TIMEOUT_S, run, run_estimation_test

COMMAND = "python -m harness.own_tests"
SUMMARY_PREFIXES = ("[  PASSED", "[  FAILED", "[==========]")
"""GoogleTest's summary lines, printed for the estimation test."""


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = Parser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="a C++ tree whose manifest names its own tests, or upstream's "
                                                        "tree with --estimation-test")
    parser.add_argument("--manifest", default=None, help="the manifest (default: the shipped one that fits)")
    parser.add_argument("--estimation-test", action="store_true",
                        help="run upstream's own estimation test against the sources xllm_native compiles")
    parser.add_argument("--test", default=ESTIMATION_TEST,
                        help="with --estimation-test: the test file, relative to the tree (default: %(default)s)")
    parser.add_argument("--timeout-s", default=str(TIMEOUT_S),
                        help="how long the test binary may run, in seconds (default: %(default)s)")
    args = parser.parse_args(argv)
    timeout_s = seconds("--timeout-s", args.timeout_s)
    if args.estimation_test:
        returncode, output = run_estimation_test(args.source, args.test, timeout=timeout_s)
        lines = output.splitlines()
        print("\n".join(line for line in lines if line.startswith(SUMMARY_PREFIXES)) or output[-2000:])
        return 0 if returncode == 0 else 1
    result = run(args.source, args.manifest, timeout=timeout_s)
    print(result.summary() if result is not None else "the tree's manifest names no test file")
    return 0 if result is None or result.ok else 1


def seconds(field: str, text: str) -> float:
    """``text`` as a finite number of seconds above 0, else ``UserError`` naming ``field``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UserError(field, text, "a number of seconds above 0 (finite)")
    return value


if __name__ == "__main__":
    sys.exit(main())
