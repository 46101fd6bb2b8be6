"""A tree's own GoogleTest file (the manifest's ``tests``), built with the manifest's sources and run.

Shown beside the harness's verdicts (``harness.native_verdicts``; the command ``python -m harness.own_tests``):
the tree's tests check what its authors chose; the TCs check the spec. Needs GoogleTest (Debian:
``libgtest-dev``). Each compile has the native build's time limit; the binary runs with its own limit, in a
private 0700 folder (removed after), in a session of its own under a subreaper (``reaper``), so whatever it
starts is killed when it ends. What passed is read from GoogleTest's XML report (``--gtest_output=xml``) and
the binary's exit status, never from the summary it prints: a binary that ends without writing the report
was not run; one that ends by a signal, or with a status its report does not explain, has failed.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from contract.errors import ImplementationFailure, UserError
from implementations.xllm_native.build import cachefs, commands
from implementations.xllm_native.build.diagnose import first_error
from implementations.xllm_native.build.generate import generate
from implementations.xllm_native.runtime import reaper
from implementations.xllm_native.tree.files import TreeMap, tree_map
from implementations.xllm_native.tree.resolve import resolve

TIMEOUT_S = 300.0
"""How long the test binary may run (a port's own tests take well under a second)."""
MAX_REPORT_BYTES = 16 << 20
"""The largest XML report read (a port's twelve tests write about 2 kB)."""
FOLDER_PREFIX = "lwsplit-own-tests-"
ESTIMATION_TEST = "tests/core/framework/kv_cache/kv_cache_estimation_test.cpp"
"""Upstream's own test of the planning math, relative to the tree (``estimation_test_binary``)."""


@dataclass(frozen=True, kw_only=True)
class OwnTests:
    """What the tree's own test binary reported (its XML report) and how it ended."""

    file: str
    total: int
    passed: int
    failed: tuple[str, ...]
    ended: str = "exit 0"
    """How the binary ended: ``exit N`` or ``signal NAME``."""

    @property
    def exit_problem(self) -> str:
        """Why the exit status contradicts the report ('' when it does not): GoogleTest exits 0 when every
        test passed and 1 when one failed; anything else (a signal, an abort at exit) is a failure."""
        if self.ended == ("exit 1" if self.failed else "exit 0"):
            return ""
        return f"the binary ended with {self.ended} (its report lists {len(self.failed)} failed)"

    @property
    def ok(self) -> bool:
        return not self.failed and self.passed == self.total and not self.exit_problem

    def summary(self) -> str:
        text = f"its own tests ({self.file}): {self.passed} of {self.total} pass"
        text += f"; failed: {', '.join(self.failed)}" if self.failed else ""
        return text + (f"; {self.exit_problem}" if self.exit_problem else "")


def parse_report(xml: bytes, file: str, ended: str = "exit 0") -> OwnTests:
    """The counts of a GoogleTest XML report (``<testsuites>``): every test that ran, the failed ones by
    ``Suite.Name``; a skipped test is neither passed nor failed. ``ValueError`` for anything else."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise ValueError(f"not XML: {exc}") from None
    if root.tag != "testsuites":
        raise ValueError(f"its root is <{root.tag}>, not GoogleTest's <testsuites>")
    total, skipped, failed = 0, 0, []
    for case in root.iter("testcase"):
        if case.get("status", "run") != "run":  # a disabled test: not run
            continue
        total += 1
        if case.find("failure") is not None:
            failed.append(f"{case.get('classname', '?')}.{case.get('name', '?')}")
        elif case.get("result") == "skipped" or case.find("skipped") is not None:
            skipped += 1
    return OwnTests(file=file, total=total, passed=total - len(failed) - skipped, failed=tuple(dict.fromkeys(failed)),
                    ended=ended)


def run(source_dir: str, manifest: Optional[str] = None, *, timeout: float = TIMEOUT_S) -> Optional[OwnTests]:
    """Build and run the tree's own tests; None when its manifest names none. ``UserError`` naming the
    manifest's ``tests`` when they cannot be built or run (the reason said)."""
    tree, m, _ = resolve(source_dir, None, manifest)
    if not m.tests or not tree.port:
        return None
    field = f"implementation.manifest={m.path}: tests"
    test = tree.root / m.tests
    if not test.is_file():
        raise UserError(field, m.tests, f"a file of {tree.root}", f"{test} is missing")
    scratch = reaper.private_folder(FOLDER_PREFIX)
    try:
        binary = _compile(tree, test, scratch, field, m.tests)
        return run_binary([str(binary)], file=m.tests, field=field, scratch=scratch, timeout=timeout)
    finally:
        left = reaper.remove_folder(scratch)
        if left is not None:
            print(f"warning: the own tests' folder {scratch} could not be removed: {left}", file=sys.stderr)


def _compile(tree, test: Path, scratch: Path, field: str, file: str) -> Path:
    """The test binary: the tree's sources as the manifest compiles them, the test file, GoogleTest; each
    compile bounded by the native build's limit."""
    gen = scratch / "gen"
    gen.mkdir(mode=0o700)
    binary = gen / "own_tests"
    steps = commands.port_commands(tree, gen, binary)[:-2]  # the tree's sources: no glue, no library link
    objs = [cmd[cmd.index("-o") + 1] for cmd in steps]
    flags = steps[0][1:steps[0].index("-MD")]
    test_obj = str(gen / "obj" / "own_tests.o")
    steps.append([commands.compiler(), *flags, "-c", str(test), "-o", test_obj])
    steps.append([commands.compiler(), *objs, test_obj, "-o", str(binary), "-lgtest", "-lgtest_main", "-lglog",
                  "-lgflags", "-pthread"])
    limit = commands.build_timeout()
    for cmd in steps:
        try:
            rc, log = cachefs.run_bounded(cmd, timeout=limit, cwd=str(gen))
        except cachefs.Timeout:
            raise UserError(field, file, f"a test file that compiles in {limit:g} s "
                                         f"(${commands.ENV_BUILD_TIMEOUT})", "the compiler was stopped") from None
        if rc != 0:
            raise UserError(field, file, "a test file that builds with the manifest's sources (and libgtest-dev)",
                            first_error(log))
    return binary


def run_binary(cmd: Sequence[str], *, file: str, field: str, scratch: Path, timeout: float = TIMEOUT_S) -> OwnTests:
    """Run a GoogleTest binary (``cmd``) with ``--gtest_output=xml:<a file of scratch>``, in a private working
    folder under ``scratch``, every process it starts killed when it ends; its report and exit status read."""
    work = scratch / "cwd"
    work.mkdir(mode=0o700)
    report = scratch / "report.xml"
    try:
        ended, output = reaper.run_reaped([*cmd, f"--gtest_output=xml:{report}"], timeout=timeout, cwd=str(work),
                                          scratch=scratch)
    except reaper.Timeout:
        raise UserError(field, file, f"tests that finish in {timeout:g} s",
                        "the test binary and everything it started were stopped") from None
    last = (output.strip().splitlines() or ["(no output)"])[-1][-200:]
    wanted = "a GoogleTest binary that runs to its XML report (--gtest_output=xml)"
    try:
        fd = os.open(report, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise UserError(field, file, wanted, f"it wrote no report and ended with {ended}; "
                                             f"its last output line: {last}") from None
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_REPORT_BYTES:
            raise UserError(field, file, wanted, f"its report is {size} B, above {MAX_REPORT_BYTES} B")
        data = f.read(MAX_REPORT_BYTES)
    try:
        return parse_report(data, file, ended)
    except ValueError as exc:
        raise UserError(field, file, wanted, f"its report is unreadable ({exc}); it ended with {ended}; "
                                             f"its last output line: {last}") from None


def estimation_test_binary(tree: TreeMap, test: Path, tmp: Path) -> Path:
    """Upstream's own estimation test (``test``, e.g. ``ESTIMATION_TEST``) built in ``tmp`` against the
    adapter's translation unit (``generate``: the tree's planning code, the cut-out functions, the project's
    shims and binding) and GoogleTest; ``UserError`` naming ``--test`` when it does not compile."""
    gen = tmp / "gen"
    gen.mkdir()
    unity = generate(tree, gen)
    source = gen / "upstream_test.cpp"
    source.write_text(unity.read_text() + f'#include "{test}"\n')
    binary = tmp / "upstream_test"
    cmd = [c for c in commands.compile_command(tree, gen, source, binary) if c != "-shared"]
    cmd.insert(-1, f"-I{tree.path('estimation').parent}")  # the test includes its header by bare name
    cmd += ["-lgtest", "-lgtest_main", "-pthread"]
    limit = commands.build_timeout()
    try:  # bounded, in its own process group; its output (a GBK comment quoted on an error line) read with replacement
        rc, log = cachefs.run_bounded(cmd, timeout=limit, cwd=str(gen))
    except cachefs.Timeout:
        raise UserError("--test", str(test), f"a test file that compiles within {limit:g} s "
                        f"({commands.ENV_BUILD_TIMEOUT})", "the compiler was stopped") from None
    if rc != 0:
        raise UserError("--test", str(test), "a test file that compiles against the adapter's sources",
                        first_error(log))
    return binary


def run_estimation_test(source_dir: str, test: str = ESTIMATION_TEST, *, timeout: float = TIMEOUT_S) -> tuple[int, str]:
    """(exit status, output) of upstream's own estimation test (``test``, relative to the tree) built against the
    adapter's sources of ``source_dir`` (upstream's map of roles, ``tree_map``) and run for at most ``timeout``
    seconds, its process group killed after; nothing is cached and the build folder is removed."""
    tree = tree_map(source_dir)
    path = tree.root / test
    if not path.is_file():
        raise UserError("--test", test, f"a file of {tree.root}")
    tmp = Path(tempfile.mkdtemp(prefix="lwsplit-upstream-test-"))
    try:
        binary = estimation_test_binary(tree, path, tmp)
        try:
            return cachefs.run_bounded([str(binary)], timeout=timeout)
        except cachefs.Timeout:
            raise ImplementationFailure(test, f"its test binary {binary} still ran after {timeout:g} s and "
                                              f"was stopped (--timeout-s={timeout:g})") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
