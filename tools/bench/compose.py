"""Composition cost: a test process composing the cases of the CI matrix, before and after a change.

    python -m tools.bench.compose [--against REV] [--repeat N] [--cases N] [--docs]

The cases are every distinct configuration the TCs of the ``ci`` matrix run (their override sets,
``Case.overrides``), the first ``--cases`` of them (default all). Each side composes them all in a
fresh Python process, as a pytest worker does (``harness.suites.case.resolve``: the config, the
``RunSpec``, the implementation's config); the time is that loop's, imports and start-up left out.
Before is a copy of commit REV (default ``main``: a shared ``git clone`` in a temporary folder),
now is this checkout; run alternately, ``--repeat`` times each (default 3), medians compared.
Both sides must compose the same cases to the same results (a digest of each side's ``RunSpec``,
implementation config and whole config): a bench that compares different work fails instead.

For scale, the first few cases are also composed by Hydra whole, one ``compose`` each (what
every case would cost without composing each group option once); that line is this checkout's.
``--docs`` records the figures into docs/benchmarks.md (``tools.docs_blocks``).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from harness.paths import REPO_ROOT
from harness.usage import Parser, command, fail
from tools.bench.suite_cost import export_commit, resolve_commit

HYDRA_CASES = 10
"""Cases composed by Hydra whole, for scale."""

CHILD = r"""
import hashlib, json, sys, time
import harness
from harness.suites.case import resolve

cases = [tuple(c) for c in json.load(sys.stdin)]
start, cpu = time.perf_counter(), time.process_time()
done = [resolve(c) for c in cases]
wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
digest = hashlib.sha256()
for r in done:
    for part in (repr(r.run), r.impl_cfg, r.config, r.backend, r.timeout_s):
        digest.update(json.dumps(part, sort_keys=True, default=str).encode())
print(json.dumps({"wall_s": wall_s, "cpu_s": cpu_s, "digest": digest.hexdigest(), "module": harness.__file__}))
"""

HYDRA_CHILD = r"""
import json, sys, time
from hydra import compose, initialize_config_dir
from harness.config.store import register
from harness.paths import CONF_DIR

cases = [list(c) for c in json.load(sys.stdin)]
register()
start = time.perf_counter()
with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
    for c in cases:
        compose(config_name="config", overrides=c)
print(json.dumps({"wall_s": time.perf_counter() - start}))
"""


def ci_cases(limit: Optional[int] = None) -> list[list[str]]:
    """The distinct override sets of the ``ci`` matrix's cases, in a fixed order (the first ``limit``)."""
    from harness.suites import TC_MODULES, load_suite
    from harness.suites.matrix import load_matrix

    matrix = load_matrix("ci")
    seen: dict[tuple[str, ...], None] = {}
    for tc in TC_MODULES:
        for case in load_suite(tc).cases(matrix):
            seen.setdefault(tuple(case.overrides()), None)
    cases = [list(c) for c in seen]
    return cases[:limit] if limit else cases


def run_side(tree: Path, script: str, cases: list[list[str]]) -> dict:
    """One fresh process in ``tree`` (its ``harness`` first on the path) running ``script`` on ``cases``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    done = subprocess.run([sys.executable, "-c", script], input=json.dumps(cases), capture_output=True, text=True,
                          cwd=tree, env=env, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"composing in {tree} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    module = out.get("module")
    if module is not None and not Path(module).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"the side in {tree} imported harness from {module}")
    return out


def compare(commit: str, cases: list[list[str]], repeat: int) -> dict:
    """Before (``commit``) and now, alternated ``repeat`` times; medians, their ratio, Hydra whole for scale."""
    runs: dict[str, list[dict]] = {"before": [], "now": []}
    with tempfile.TemporaryDirectory(prefix="lwsplit-compose-") as tmp:
        tree = export_commit(commit, Path(tmp))
        for i in range(repeat):
            for side, cwd in (("before", tree), ("now", REPO_ROOT)):
                run = run_side(cwd, CHILD, cases)
                runs[side].append(run)
                print(f"[{i + 1}/{repeat}] {side:<6} {len(cases)} cases: wall {run['wall_s']:.2f} s, "
                      f"CPU {run['cpu_s']:.2f} s", flush=True)
    digests = {r["digest"] for side in runs.values() for r in side}
    if len(digests) != 1:
        raise RuntimeError(f"before and now composed the cases to different results ({len(digests)} digests)")
    hydra = run_side(REPO_ROOT, HYDRA_CHILD, cases[:HYDRA_CASES])
    out: dict = {"commit": commit, "repeat": repeat, "cases": len(cases), "runs": runs,
                 "hydra_per_case_s": hydra["wall_s"] / min(len(cases), HYDRA_CASES)}
    for key in ("wall_s", "cpu_s"):
        before = statistics.median(r[key] for r in runs["before"])
        now = statistics.median(r[key] for r in runs["now"])
        out[key] = {"before": before, "now": now, "ratio": now / before}
    return out


def render(result: dict) -> str:
    short, n = result["commit"][:12], result["cases"]
    lines = [f"composing {n} cases of the ci matrix in a fresh process: medians of {result['repeat']} run(s) "
             f"each, alternated; both sides composed them to the same results"]
    for key, label in (("wall_s", "wall"), ("cpu_s", "CPU")):
        m = result[key]
        lines.append(f"  {label:<5} before ({short}) {m['before']:.2f} s, now {m['now']:.2f} s: "
                     f"now/before = {m['ratio']:.2f}")
    lines.append(f"  Hydra whole, for scale: {result['hydra_per_case_s'] * 1e3:.0f} ms a case "
                 f"(x {n} cases = {result['hydra_per_case_s'] * n:.1f} s)")
    return "\n".join(lines)


def _record(result: dict):
    from tools import docs_blocks

    short, n = result["commit"][:12], result["cases"]
    rows = []
    for side, label in (("before", f"commit {short}"), ("now", "this commit")):
        walls = ", ".join(f"{r['wall_s']:.2f}" for r in result["runs"][side])
        cpus = ", ".join(f"{r['cpu_s']:.2f}" for r in result["runs"][side])
        rows.append((f"composing the {n} cases of the ci matrix, {label}", f"wall {walls} s; CPU {cpus} s"))
    rows.append((f"side by side, medians of {result['repeat']} alternated run(s) each",
                 f"wall now/before {result['wall_s']['ratio']:.2f}; CPU now/before {result['cpu_s']['ratio']:.2f}"))
    rows.append((f"for scale: Hydra composing a case whole (first {HYDRA_CASES} cases, this commit)",
                 f"{result['hydra_per_case_s'] * 1e3:.0f} ms a case"))
    return docs_blocks.measured(
        "bench_compose", command=f"python -m tools.bench.compose --against {short} --repeat {result['repeat']} --docs",
        columns=("what", "result"), align="ll", rows=rows,
        provenance="each side in a fresh process, imports left out; both composed every case to the same results")


@command
def main(argv: Optional[list[str]] = None) -> int:
    parser = Parser(prog="python -m tools.bench.compose", description=__doc__.split("\n")[0])
    parser.add_argument("--against", metavar="REV", default="main", help="the commit to compare with (default main)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each side, alternated (1 to 10; default 3)")
    parser.add_argument("--cases", type=int, default=None, metavar="N", help="compose only the first N cases")
    parser.add_argument("--docs", action="store_true", help="also record the figures into docs/benchmarks.md")
    args = parser.parse_args(argv)
    if not 1 <= args.repeat <= 10:
        fail(f"--repeat={args.repeat}: a whole number from 1 to 10")
    if args.cases is not None and args.cases < 1:
        fail(f"--cases={args.cases}: a whole number >= 1")
    commit = resolve_commit(args.against)
    result = compare(commit, ci_cases(args.cases), args.repeat)
    print(render(result))
    if args.docs:
        from tools import docs_blocks

        print(f"wrote {docs_blocks.publish(_record(result))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
