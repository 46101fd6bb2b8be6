"""Run a tree's own estimation unit test against the sources ``xllm_native`` compiles.

    python -m implementations.xllm_native.upstream_test --source /path/to/xllm

Compiles the same generated translation unit as the adapter (the tree's planning code, the cut-out
functions, the project's shims and binding) together with the tree's
``tests/core/framework/kv_cache/kv_cache_estimation_test.cpp`` and GoogleTest, runs it and prints
its summary: evidence that the shims leave the planning math as the tree's own test expects it.
Needs GoogleTest (Debian: ``libgtest-dev``). Nothing is cached; the build folder is removed. The
compiler runs in its own process group within ``LWSPLIT_NATIVE_BUILD_TIMEOUT_S``, the binary likewise,
killed whole after ``--timeout-s``; the output of both is read as UTF-8 with undecodable bytes (a GBK
message or comment) replaced.
"""

from __future__ import annotations

import math
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Optional, Sequence

from contract.errors import ImplementationFailure, UserError
from harness.usage import Parser, command, fail
from implementations.xllm_native import build, cachefs

TEST = "tests/core/framework/kv_cache/kv_cache_estimation_test.cpp"
TIMEOUT_S = 300.0
"""How long the test binary may run (``--timeout-s``); the tree's estimation test takes well under a second."""


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = Parser(prog="python -m implementations.xllm_native.upstream_test", description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="an xLLM source tree")
    parser.add_argument("--test", default=TEST, help="the test file, relative to the tree (default: %(default)s)")
    parser.add_argument("--timeout-s", default=str(TIMEOUT_S),
                        help="how long the test binary may run, in seconds (default: %(default)s)")
    args = parser.parse_args(argv)
    timeout_s = seconds("--timeout-s", args.timeout_s)
    tree = build.tree_map(args.source)
    test = tree.root / args.test
    if not test.is_file():
        fail(f"--test={args.test}: a file of {tree.root}")
    tmp = Path(tempfile.mkdtemp(prefix="lwsplit-upstream-test-"))
    try:
        binary = compile_test(tree, test, tmp)
        try:
            returncode, output = cachefs.run_bounded([str(binary)], timeout=timeout_s)
        except cachefs.Timeout:
            raise ImplementationFailure(args.test, f"its test binary {binary} still ran after {timeout_s:g} s and "
                                                   f"was stopped (--timeout-s={timeout_s:g})") from None
        lines = output.splitlines()
        print("\n".join(line for line in lines if line.startswith(("[  PASSED", "[  FAILED", "[==========]")))
              or output[-2000:])
        return 0 if returncode == 0 else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def seconds(field: str, text: str) -> float:
    """``text`` as a finite number of seconds above 0, else ``UserError`` naming ``field``."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise UserError(field, text, "a number of seconds above 0 (finite)")
    return value


def compile_test(tree: build.TreeMap, test: Path, tmp: Path) -> Path:
    """The test binary, built in ``tmp`` from the adapter's translation unit and ``test``."""
    gen = tmp / "gen"
    gen.mkdir()
    unity = build.generate(tree, gen)
    source = gen / "upstream_test.cpp"
    source.write_text(unity.read_text() + f'#include "{test}"\n')
    binary = tmp / "upstream_test"
    cmd = [c for c in build.compile_command(tree, gen, source, binary) if c != "-shared"]
    cmd.insert(-1, f"-I{tree.path('estimation').parent}")  # the test includes its header by bare name
    cmd += ["-lgtest", "-lgtest_main", "-pthread"]
    try:  # bounded, in its own process group; its output (a GBK comment quoted on an error line) read with replacement
        rc, log = cachefs.run_bounded(cmd, timeout=build.build_timeout(), cwd=str(gen))
    except cachefs.Timeout:
        fail(f"{test} still compiled after {build.build_timeout():g} s ({build.ENV_BUILD_TIMEOUT}); the compiler was stopped")
    if rc != 0:
        fail(f"{test} does not compile against the adapter's sources: {build.first_error(log)}")
    return binary

if __name__ == "__main__":
    sys.exit(main())
