"""A tree's own GoogleTest file (the manifest's ``tests``), built with the manifest's sources and run.

    python -m implementations.xllm_native.own_tests --source ../shared/ports/p6_v3_latest

Shown beside the harness's verdicts (``harness.native_verdicts``): the tree's tests check what its
authors chose; the TCs check the spec. Needs GoogleTest (Debian: ``libgtest-dev``). The binary runs
in a child process with a time limit.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from contract.errors import UserError
from implementations.xllm_native import build
from implementations.xllm_native.native import resolve


@dataclass(frozen=True, kw_only=True)
class OwnTests:
    """What the tree's own test binary reported."""

    file: str
    total: int
    passed: int
    failed: tuple[str, ...]

    def summary(self) -> str:
        text = f"its own tests ({self.file}): {self.passed} of {self.total} pass"
        return text + (f"; failed: {', '.join(self.failed)}" if self.failed else "")


def parse(output: str, file: str) -> OwnTests:
    """The counts of a GoogleTest run's output."""
    total = re.search(r"\[=+\] (\d+) tests? from \d+ test suites? ran", output)
    passed = re.search(r"\[  PASSED  \] (\d+) tests?", output)
    failed = re.findall(r"^\[  FAILED  \] (\S+\.\S+?)(?:,| \(|$)", output, re.M)
    if total is None:
        raise UserError("implementation.manifest", file, "a GoogleTest file whose binary runs to its summary",
                        (output.strip().splitlines() or ["(no output)"])[-1])
    return OwnTests(file=file, total=int(total.group(1)), passed=int(passed.group(1)) if passed else 0,
                    failed=tuple(dict.fromkeys(failed)))


def run(source_dir: str, manifest: Optional[str] = None, *, timeout: int = 300) -> Optional[OwnTests]:
    """Build and run the tree's own tests; None when its manifest names none."""
    tree, m, _ = resolve(source_dir, None, manifest)
    if not m.tests or not tree.port:
        return None
    test = tree.root / m.tests
    if not test.is_file():
        raise UserError(f"implementation.manifest={m.path}: tests", m.tests, f"a file of {tree.root}",
                        f"{test} is missing")
    with tempfile.TemporaryDirectory(prefix="lwsplit-own-tests-") as tmp:
        gen = Path(tmp)
        binary = gen / "own_tests"
        steps = build.port_commands(tree, gen, binary)[:-2]  # the tree's sources: no glue, no library link
        objs = [cmd[cmd.index("-o") + 1] for cmd in steps]
        flags = steps[0][1:steps[0].index("-MD")]
        test_obj = str(gen / "obj" / "own_tests.o")
        steps.append([build.compiler(), *flags, "-c", str(test), "-o", test_obj])
        steps.append([build.compiler(), *objs, test_obj, "-o", str(binary), "-lgtest", "-lgtest_main", "-lglog",
                      "-lgflags", "-pthread"])
        for cmd in steps:
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                raise UserError(f"implementation.manifest={m.path}: tests", m.tests,
                                "a test file that builds with the manifest's sources (and libgtest-dev)",
                                build.first_error(proc.stdout + proc.stderr))
        try:
            proc = subprocess.run([str(binary)], capture_output=True, text=True, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            raise UserError(f"implementation.manifest={m.path}: tests", m.tests, f"tests that finish in {timeout} s",
                            "the test binary was stopped") from None
    return parse(proc.stdout + proc.stderr, m.tests)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m implementations.xllm_native.own_tests",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True)
    parser.add_argument("--manifest", default=None)
    args = parser.parse_args(argv)
    try:
        result = run(args.source, args.manifest)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(result.summary() if result is not None else "the tree's manifest names no test file")
    return 0 if result is None or not result.failed else 1


if __name__ == "__main__":
    sys.exit(main())
