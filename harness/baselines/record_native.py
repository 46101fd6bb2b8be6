"""Record what xLLM's own compiled planning code answers on the native grid (``native_planning.json``).

    python -m harness.baselines.record_native --source /path/to/xllm

Builds the tree's planning code (``implementation=xllm_native``), plans every configuration of
``native_grid.grid()`` and writes the figures or the refusal's field of each, with the provenance
(the tree's commit, compiler and flags, date, machine, this command). The file is written to a
temporary name and renamed into place, so an interrupted run leaves the old one.

``--out`` is a new file or a recording this command wrote before (a JSON object whose provenance names
this command): any other file is refused unless ``--force``, so a file the command did not write is never
overwritten. Everything that can be checked is checked before the build and the run: ``--out`` (not a
folder, in a folder that can be written), the tree (``--source`` holds the files it compiles) and its
commit (``git``, else ``--commit``, else the tree's ``version.txt``, which must be UTF-8 text), and that the
tree is upstream's: every file its build compiles (by the shipped manifest that fits) has the name and sha256
``harness.baselines.upstream_sources`` recorded for upstream 494f293b5 (``upstream_sources.difference``).
Any other tree (a port, a fork, a copy with one line changed) is refused naming the first file that differs: the
recording is what upstream's own code answers, and says so.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from contract.bounded_inputs import loads_json, read_input_file
from contract.errors import ConfigError
from harness.baselines import native_grid, upstream_sources
from harness.files import check_output_file, write_atomic
from harness.paths import BASELINE_DIR, PACKAGE_DIR
from harness.usage import Parser, command, fail
from implementations.xllm_native import XllmNativeImplementation
from implementations.xllm_native.tree.facts import tree_facts

NATIVE_BASELINE_PATH = BASELINE_DIR / "native_planning.json"
COMMAND = "python -m harness.baselines.record_native"
"""How every recording's provenance names this command (``provenance.command`` starts with it)."""
SOURCE_FILES = (f"upstream 494f293b5's, by sha256: every file the build compiles has the name and digest "
                f"{upstream_sources.RECORD_PATH.relative_to(PACKAGE_DIR.parent).as_posix()} records "
                f"({upstream_sources.COMMAND}), checked before the run")
"""The provenance's ``source_files``: where the tree's files are identified as upstream's (by ``check_upstream``)."""
MAX_RECORDING_BYTES = 64 * 1024 * 1024
"""The largest existing ``--out`` read to tell whether this command wrote it (the recording is ~0.4 MB)."""


def _commit(source: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=30, check=False)
        if out.returncode == 0:
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    marker = source / "version.txt"
    if not marker.is_file():
        return "unknown"

    try:
        text = read_input_file(marker, "--source version.txt", max_bytes=4096)
    except ConfigError as exc:
        raise ConfigError(exc.field, exc.value, f"{exc.allowed}, or the commit given as --commit <sha>",
                          exc.detail) from None
    return f"unknown (no git; version.txt {' '.join(text.split())})"


def is_recording(path: Path) -> bool:
    """Whether ``path`` holds a recording this command wrote (its provenance names ``COMMAND``)."""
    try:
        doc = loads_json(read_input_file(path, "--out", max_bytes=MAX_RECORDING_BYTES), "--out", source=str(path))
    except ConfigError:
        return False
    provenance = doc.get("provenance") if isinstance(doc, dict) else None
    command_line = provenance.get("command") if isinstance(provenance, dict) else None
    return isinstance(command_line, str) and command_line.startswith(COMMAND)


def check_out(out: Path, force: bool) -> None:
    """``--out`` before anything runs: a file (not a folder) in a folder it can write, new or a recording
    this command wrote (else ``--force``). ``ConfigError`` naming ``--out`` otherwise."""
    check_output_file(out, "--out")
    if os.path.lexists(out) and not force and not is_recording(out):
        raise ConfigError("--out", str(out), "a new file, or a recording this command wrote (or give --force)",
                          "it holds something else; it is left as it is")


def check_upstream(source: str) -> None:
    """Nothing when every file the build of ``source`` compiles is upstream 494f293b5's (name and sha256, as
    ``upstream_sources`` recorded them); else ``ConfigError`` naming ``--source`` and the first file that differs,
    or the port's manifest when it is built as a port."""
    facts = tree_facts(source)
    if facts.port:
        raise ConfigError("--source", source, "upstream 494f293b5's tree",
                          f"it is built as a port by the manifest {facts.manifest_name}: its planning code is not "
                          "upstream's")
    why = upstream_sources.difference(facts)
    if why is not None:
        raise ConfigError("--source", source, "upstream 494f293b5's tree (every file its build compiles, by sha256, "
                          f"as {upstream_sources.RECORD_PATH.name} records them)", why)


def record(source: str, out: Path, commit: Optional[str] = None, checked: bool = False) -> dict:
    """Plan the grid with ``source``'s compiled code and write the recording; ``checked``: ``check_upstream``
    already passed for ``source``."""
    commit = commit or _commit(Path(source))  # before the run: a version.txt it cannot read is said now
    if not checked:
        check_upstream(source)
    impl = XllmNativeImplementation(source_dir=source)
    models = native_grid.load_models()
    cfgs = native_grid.grid()
    started = time.monotonic()
    results = [native_grid.observe_run(impl, native_grid.run_for(cfg, models)) for cfg in cfgs]
    built = impl.compiled_with()
    doc = {
        "provenance": {
            "what": "xLLM's layerwise split planning code compiled unchanged by implementation=xllm_native "
                    "(estimate_kv_cache_capacity, LayerwiseSplitLayout, SpeculativeEngine::calculate_kv_cache, "
                    "validate_layerwise_split_size_startup_config), driven with the adapter's engine options",
            "source_commit": commit,
            "compiler": built["compiler"], "flags": built["flags"],
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"{platform.machine()} {platform.system()} (CPU build; no accelerator involved)",
            "python": platform.python_version(),
            "command": f"{COMMAND} --source /path/to/xllm [--commit <sha> when the tree is not a git checkout]",
            "seconds": round(time.monotonic() - started, 1),
            "source_files": SOURCE_FILES,
        },
        "models": {name: native_grid.model_to_json(m) for name, m in sorted(models.items())},
        "configs": cfgs,
        "results": results,
    }

    write_atomic(out, json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n")
    return doc


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = Parser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="upstream xLLM 494f293b5's source tree (checked by content)")
    parser.add_argument("--out", default=str(NATIVE_BASELINE_PATH),
                        help="where to write: a new file or an earlier recording (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="overwrite an --out file this command did not write")
    parser.add_argument("--commit", default=None, help="the tree's commit, when it is not a git checkout")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not out.parent.is_dir():
        fail(f"--out={args.out}: a file in an existing folder")

    check_out(out, args.force)
    XllmNativeImplementation.check_inputs(source_dir=args.source)
    commit = args.commit or _commit(Path(args.source))
    check_upstream(args.source)
    doc = record(args.source, out, commit, checked=True)
    refused = sum(1 for r in doc["results"] if "refused" in r)
    print(f"{len(doc['configs'])} configurations ({refused} refused) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
