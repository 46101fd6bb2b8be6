"""The TC suites' verdicts on C++ trees built by their manifests: per tree, model, split size and TC,
pass or fail and the first reason, measured by running the suites (one pytest per tree and model).

    python -m harness.native_verdicts --tree ../shared/ports/p6_v3_latest --tree ../shared/ports/p6_v2_1ac802
    python -m harness.native_verdicts ... --docs      # also write docs/data/native_verdicts.json and its block

Each tree runs in its own pytest process (``LWSPLIT_XLLM_SRC=<tree>``, its shipped manifest, or
``--manifest``), on each TC's standard case of the model and split size (``<model>-<s>-w4-xllm_native``;
TC-03 on the BI-V100 topology, TC-07 with the model's draft).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Optional

from harness.paths import REPO_ROOT

TC_FILES = ("test_tc01_allocation.py", "test_tc02_estimation.py", "test_tc03_topology.py",
            "test_tc04_propagation.py", "test_tc05_shard_application.py", "test_tc06_fallback.py",
            "test_tc07_speculative.py")
MODELS = ("qwen3_5_moe", "deepseek_v32", "glm_moe_dsa")
LAYERWISE = ("off", "s2", "s4")
COLUMNS = ("tree", "manifest", "model", "s", "TC", "verdict", "first reason")


def _env(tree: Path, manifest: Optional[str]) -> dict:
    env = {**os.environ, "LWSPLIT_XLLM_SRC": str(tree), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("LW_ALLUREDIR", None)
    return env


def _pytest(args: list, env: dict, timeout: int) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:randomly", "-n", "0", "-q", *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env, timeout=timeout)


def _overrides(model: str, manifest: Optional[str]) -> list:
    out = ["--lw-override", "implementation=xllm_native", "--lw-override", f"model={model}"]
    if manifest:
        out += ["--lw-override", f"implementation.manifest={manifest}"]
    return out


def standard_ids(tree: Path, model: str, layerwise, manifest: Optional[str], timeout: int) -> list:
    """The node ids of each TC's standard case of ``model`` at each split size."""
    files = [f"testcases/tc/{f}" for f in TC_FILES]
    proc = _pytest(["--collect-only", *files, *_overrides(model, manifest)], _env(tree, manifest), timeout)
    out = []
    for line in proc.stdout.splitlines():
        inside = line.strip().partition("[")[2].rstrip("]")
        for lw in layerwise:
            base = f"{model}-{lw}-w4-xllm_native"
            # the standard case; TC-03's on the BI-V100 topology; TC-07's with the model's draft
            if "::" in line and (inside in (base, f"{base}-bi_v100") or
                                 (inside.startswith(base + "-") and inside.endswith("_mtp"))):
                out.append(line.strip())
    return out


def first_reason(text: str) -> str:
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line.removeprefix("AssertionError: ")[:300]
    return ""


def verdicts(junit_xml: str, tree: str, manifest: str, model: str) -> list:
    """Rows of ``COLUMNS`` from a pytest JUnit report: pass, fail (with the failure's first line), xfail, skip."""
    rows = []
    for case in ET.fromstring(junit_xml).iter("testcase"):
        name = case.get("name", "")
        inside = name[name.index("[") + 1:-1] if "[" in name else name
        lw = inside.split("-")[1] if inside.count("-") >= 2 else "?"
        failure = case.find("failure")
        if failure is None:
            failure = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            verdict, reason = "fail", first_reason(failure.get("message", "") or failure.text or "")
        elif skipped is not None:
            xfail = "xfail" in (skipped.get("type", "") + skipped.get("message", ""))
            verdict, reason = ("xfail" if xfail else "skip"), first_reason(skipped.get("message", ""))
        else:
            verdict, reason = "pass", ""
        rows.append((tree, manifest, model, lw, "TC-" + name.split("[")[0].removeprefix("test_tc"), verdict, reason))
    return rows


def run_tree(tree: Path, models, layerwise, manifest: Optional[str] = None, timeout: int = 1800) -> list:
    """Rows of ``COLUMNS`` for one tree."""
    from implementations.xllm_native.native import resolve

    _, m, _ = resolve(str(tree), None, manifest)
    rows = []
    for model in models:
        ids = standard_ids(tree, model, layerwise, manifest, timeout)
        if not ids:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp) / "junit.xml"
            _pytest([*ids, *_overrides(model, manifest), f"--junitxml={junit}"], _env(tree, manifest), timeout)
            if junit.is_file():
                rows += verdicts(junit.read_text(encoding="utf-8"), tree.name, m.name, model)
    return sorted(rows, key=lambda r: (r[2], r[3], r[4]))


def own_tests_note(tree: Path, manifest: Optional[str]) -> str:
    """The tree's own GoogleTest file's result, beside the spec's verdicts (its manifest's ``tests``)."""
    from contract.errors import UserError
    from implementations.xllm_native import own_tests

    try:
        result = own_tests.run(str(tree), manifest)
    except UserError as exc:
        return f"{tree.name}: its own tests could not be run: {exc}"
    return f"{tree.name}: " + (result.summary() if result is not None else "its manifest names no test file")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.native_verdicts", description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="a C++ tree (repeatable)")
    parser.add_argument("--manifest", default=None, help="a manifest for every tree (default: the shipped one that fits)")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--layerwise", default=",".join(LAYERWISE))
    parser.add_argument("--docs", action="store_true", help="write docs/data/native_verdicts.json and its block")
    args = parser.parse_args(argv)
    from contract.errors import UserError

    trees = [Path(t).expanduser().resolve() for t in args.tree]
    for t in trees:
        if not t.is_dir():
            print(f"error: --tree={t}: an existing folder holding a C++ tree", file=sys.stderr)
            return 2
    rows, notes = [], []
    try:
        for t in trees:
            rows += run_tree(t, args.models.split(","), args.layerwise.split(","), args.manifest)
            notes.append(own_tests_note(t, args.manifest))
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for row in rows:
        print(" | ".join(row))
    for note in notes:
        print(note)
    if args.docs:
        from harness.usage import docs_writer
        docs_blocks = docs_writer()
        command = "python -m harness.native_verdicts " + " ".join(f"--tree {t}" for t in args.tree) + " --docs"
        record = docs_blocks.measured("native_verdicts", command=command, columns=COLUMNS, rows=rows,
                                      notes=[f"- {n}" for n in notes],
                                      provenance="each TC's standard case (world 4; TC-03 on the BI-V100 topology, TC-07 with "
                                                 "the model's draft) of each model and split size, "
                                                 "judged by the spec; trees: " + ", ".join(map(str, trees)))
        print(f"wrote {docs_blocks.publish(record)} and {docs_blocks.record_path('native_verdicts')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
