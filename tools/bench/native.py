"""What judging a C++ tree costs: cold build, warm start, and the TC matrix against the reference.

    python -m tools.bench.native [--docs]
    python -m tools.bench.native --tree ../shared/ports/p6_v3_latest --models qwen3_5_moe --jobs 2

Three figures, each measured in this run and printed as a ratio to its goal:

- **cold build** of each tree (default: the newest port snapshot and upstream 494f293b5 under
  ``../shared``, each by the shipped manifest that fits it): a fresh process builds the tree's
  library into a private, empty cache folder of its own and makes its first call through the host
  (``XllmNativeImplementation(tree)`` then ``validate``). Goal: <= 60 s on 2 cores.
- **warm start** of the same tree: another fresh process does the same on the filled cache (the
  cache lookup: hashing the tree's files and headers, checking the entry; then starting the host,
  opening the library, one call). Goal: <= 1 s. Both times exclude the interpreter's start and
  its imports (each child measures from after its imports).
- **tensor library**, for a manifest whose allocation is compiled against torch (upstream's): its cold
  build and opening in the process (after the start above), and its warm lookup and opening; the same
  goals.
- **TC matrix**: ``pytest -n JOBS testcases/tc`` on ``--models`` (default ``qwen3_5_moe,deepseek_v32``)
  twice, one after the other: ``implementation=xllm_native`` on the matrix tree (default upstream's,
  its library already in the cache the cold build filled, so the matrix pays no build) and
  ``implementation=reference``; the ratio of their wall times. Goal: <= 1.5x.

Single runs move with the machine's load (printed with the figures); the ratios of one run are
the comparable part. Nothing is asserted: figures only. ``--docs`` records them into
docs/benchmarks.md (``tools.docs_blocks``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from harness.paths import REPO_ROOT
from harness.usage import Parser, command, fail

COLD_GOAL_S = 60.0
"""Goal for a cold build plus the first call, on 2 cores."""
WARM_GOAL_S = 1.0
"""Goal for a warm start: the cache lookup, the host's start and the first call."""
MATRIX_GOAL = 1.5
"""Goal for the TC matrix's wall time on a native tree over the reference's."""

SHARED = Path(os.environ.get("LWSPLIT_SHARED") or REPO_ROOT.parent / "shared")
"""Where the real trees are: ``../shared`` next to the checkout (``LWSPLIT_SHARED`` overrides)."""
DEFAULT_TREES = (SHARED / "ports" / "p6_v3_latest", SHARED / "upstream_494f293b5")
DEFAULT_MODELS = ("qwen3_5_moe", "deepseek_v32")
START_OVERRIDES = ("model=deepseek_v32", "layerwise=s2", "implementation=xllm_native")
"""The configuration whose validation is the first call of a start (a refusal is an answer too)."""

_CHILD = """
import json, os, sys, time
from harness.config.build import build_run_spec
from harness.config.compose import compose_config
from contract.errors import UserError
from implementations.xllm_native.impl import XllmNativeImplementation
tree, overrides = sys.argv[1], json.loads(sys.argv[2])
run = build_run_spec(compose_config(overrides))
started = time.perf_counter()
impl = XllmNativeImplementation(tree)
built = time.perf_counter()
try:
    impl.validate(run)
    answer = "accepted"
except UserError:
    answer = "refused"
done = time.perf_counter()
tensors_s = tensors_compile_s = None
if impl.manifest.tensors is not None:  # the allocation's torch library: built (cold) or found, then opened
    impl.native.tensor_library()
    tensors_s = time.perf_counter() - done
    from implementations.xllm_native.build import library
    tensors_compile_s = library.build(impl.native.tree, root=impl.native.cache, tensors=True).manifest.get("seconds")
print(json.dumps({"answer": answer, "manifest": impl.manifest.name, "why": impl.native.why, "lookup_s": built - started,
                  "first_call_s": done - built, "total_s": done - started,
                  "compile_s": impl.native.built.manifest.get("seconds"), "tensors_s": tensors_s,
                  "tensors_compile_s": tensors_compile_s}))
"""


@dataclass(frozen=True)
class Figure:
    """One measured figure against its goal (lower is better)."""

    what: str
    value: float
    goal: float
    unit: str = "s"

    @property
    def ratio(self) -> float:
        """The figure over its goal: <= 1 meets it."""
        return self.value / self.goal

    @property
    def met(self) -> bool:
        return self.value <= self.goal

    def result(self) -> str:
        value = f"{self.value:.2f}x" if self.unit == "x" else f"{self.value:.2f} s"
        goal = f"{self.goal:g}x" if self.unit == "x" else f"{self.goal:g} s"
        return f"{value} (goal <= {goal}: {self.ratio:.2f} of it, {'met' if self.met else 'MISSED'})"


def matrix_ratio(native_s: float, reference_s: float) -> float:
    """The native tree's matrix wall time over the reference's; ``ValueError`` for a time that is not positive."""
    if not (native_s > 0 and reference_s > 0):
        raise ValueError(f"wall times must be positive: native {native_s}, reference {reference_s}")
    return native_s / reference_s


def check_models(text: str) -> tuple[str, ...]:
    """``--models``: comma-separated names of ``conf/model``; ``ValueError`` naming the allowed ones."""
    from harness.paths import CONF_DIR

    allowed = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in allowed]
    if not names or unknown:
        raise ValueError(f"--models={text!r}: comma-separated model names, allowed: {', '.join(allowed)}")
    return names


def _env(cache: Path, tree: Optional[Path] = None) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "LWSPLIT_NATIVE_CACHE": str(cache)}
    env.pop("LW_ALLUREDIR", None)
    if tree is not None:
        env["LWSPLIT_XLLM_SRC"] = str(tree)
    return env


def start(tree: Path, cache: Path, timeout: float) -> dict:
    """One start of ``tree`` in a fresh process on ``cache``: its manifest and times (``RuntimeError`` when it fails)."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tree), json.dumps(list(START_OVERRIDES))],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=_env(cache), timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{tree}: the start exited {proc.returncode}: "
                           f"{(proc.stderr.strip().splitlines() or [''])[-1]}")
    return json.loads(lines[-1])


def run_matrix(implementation: str, models: Sequence[str], jobs: int, cache: Path, tree: Path,
               timeout: float) -> tuple[float, int, str]:
    """``pytest -n jobs testcases/tc`` for ``implementation`` on ``models``: wall seconds, exit code, summary line."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:randomly", "-q", "-n", str(jobs), "testcases/tc",
           "--lw-override", f"implementation={implementation}", "--lw-override", f"model={','.join(models)}"]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO_ROOT, env=_env(cache, tree), timeout=timeout)
    wall = time.perf_counter() - started
    summary = next((line.strip("= ") for line in reversed(proc.stdout.splitlines()) if line.strip()), "")
    return wall, proc.returncode, summary


@command
def main(argv: Optional[list[str]] = None) -> int:
    parser = Parser(prog="python -m tools.bench.native", description=__doc__.split("\n")[0])
    parser.add_argument("--tree", action="append", type=Path, default=None,
                        help="a C++ tree to build cold and start warm (repeatable; default: "
                             "../shared/ports/p6_v3_latest and ../shared/upstream_494f293b5)")
    parser.add_argument("--matrix-tree", type=Path, default=None,
                        help="the tree the TC matrix runs on (default: upstream's under ../shared)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help=f"models of the TC matrix, comma-separated (default {','.join(DEFAULT_MODELS)})")
    parser.add_argument("--jobs", type=int, default=2, help="pytest -n of the TC matrix (default 2)")
    parser.add_argument("--no-matrix", action="store_true", help="measure the builds and starts only")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per step (default 900)")
    parser.add_argument("--docs", action="store_true", help="also record the figures into docs/benchmarks.md")
    args = parser.parse_args(argv)
    trees = args.tree or list(DEFAULT_TREES)
    matrix_tree = args.matrix_tree or DEFAULT_TREES[1]
    for name, path in [("--tree", t) for t in trees] + ([] if args.no_matrix else [("--matrix-tree", matrix_tree)]):
        if not path.is_dir():
            fail(f"{name}={str(path)!r}: an existing folder holding a C++ tree (../shared holds upstream and the ports)")
    try:
        models = check_models(args.models)
    except ValueError as exc:
        fail(str(exc))
    if args.jobs < 1:
        fail(f"--jobs={args.jobs}: a whole number >= 1")
    if not args.timeout > 0:
        fail(f"--timeout={args.timeout}: a number of seconds > 0")
    report(trees, None if args.no_matrix else matrix_tree, models, args.jobs, args.timeout, docs=args.docs)
    return 0


def report(trees: Sequence[Path], matrix_tree: Optional[Path], models: Sequence[str], jobs: int, timeout: float,
           *, docs: bool = False) -> None:
    """Measure, print each figure with its ratio to the goal, and record them (``docs``)."""
    load_before = os.getloadavg()[0]
    rows, notes = [], []
    with tempfile.TemporaryDirectory(prefix="lwsplit-bench-native-") as scratch:
        matrix_cache = None
        for tree in trees:
            cache = Path(scratch) / f"cache-{len(rows)}"  # private (0700 under mkdtemp's folder) and empty
            cold = start(tree, cache, timeout)
            warm = start(tree, cache, timeout)
            if matrix_tree is not None and tree.resolve() == matrix_tree.resolve():
                matrix_cache = cache
            label = f"{tree.name} (manifest {cold['manifest']})"
            for kind, got, goal, detail in (
                    ("cold build + first call", cold, COLD_GOAL_S,
                     f"compile {cold['compile_s']} s, first call {cold['first_call_s'] * 1e3:.0f} ms ({cold['answer']})"),
                    ("warm start + first call", warm, WARM_GOAL_S,
                     f"cache lookup {warm['lookup_s'] * 1e3:.0f} ms, host start + first call "
                     f"{warm['first_call_s'] * 1e3:.0f} ms")):
                fig = Figure(f"{kind}: {label}", got["total_s"], goal)
                print(f"{fig.what}: {fig.result()}; {detail}")
                rows.append((fig.what, f"{fig.result()}; {detail}"))
            if cold.get("tensors_s") is not None:
                for kind, got, goal, detail in (
                        ("tensor library cold build + open", cold["tensors_s"], COLD_GOAL_S,
                         f"compile {cold['tensors_compile_s']} s (the allocation against torch)"),
                        ("tensor library warm lookup + open", warm["tensors_s"], WARM_GOAL_S, "")):
                    fig = Figure(f"{kind}: {label}", got, goal)
                    print(f"{fig.what}: {fig.result()}" + (f"; {detail}" if detail else ""))
                    rows.append((fig.what, fig.result() + (f"; {detail}" if detail else "")))
            notes.append(f"{tree.name}: manifest {cold['manifest']} ({cold['why']})")
        if matrix_tree is not None:
            if matrix_cache is None:  # the matrix tree was not built above: fill a cache for it, untimed
                matrix_cache = Path(scratch) / "cache-matrix"
                start(matrix_tree, matrix_cache, timeout)
            native_s, native_rc, native_sum = run_matrix("xllm_native", models, jobs, matrix_cache, matrix_tree, timeout)
            ref_s, ref_rc, ref_sum = run_matrix("reference", models, jobs, matrix_cache, matrix_tree, timeout)
            fig = Figure(f"TC matrix, pytest -n {jobs} testcases/tc, models {','.join(models)}: "
                         f"xllm_native on {matrix_tree.name} / reference", matrix_ratio(native_s, ref_s), MATRIX_GOAL,
                         unit="x")
            detail = (f"xllm_native {native_s:.1f} s (exit {native_rc}: {native_sum}); "
                      f"reference {ref_s:.1f} s (exit {ref_rc}: {ref_sum})")
            print(f"{fig.what}: {fig.result()}; {detail}")
            rows.append((fig.what, f"{fig.result()}; {detail}"))
    load = f"load average {load_before:.2f} before, {os.getloadavg()[0]:.2f} after (other work on the machine counts)"
    print(load)
    notes.append(load)
    if docs:
        from tools import docs_blocks

        page = docs_blocks.publish(docs_blocks.measured(
            "bench_native", command="python -m tools.bench.native --docs", columns=("what", "result"),
            align="ll", rows=rows, notes=tuple(f"- {note}" for note in notes),
            provenance="each start in a fresh process, on a private cache folder of its own (cold: empty)"))
        print(f"wrote {page}")


if __name__ == "__main__":
    sys.exit(main())
