"""Upstream xLLM 494f293b5's own sources, by content: the sha256 of each file its build compiles.

    python -m harness.baselines.upstream_sources --source /path/to/upstream_494f293b5 [--commit <sha>]

Upstream's predicted failures (``harness.suites.expectations``) belong to upstream's code. A tree built by an
upstream-cut manifest gets them only when every file that build compiles is upstream's byte for byte
(``difference``): the planning files (each role's file, the support files and headers the cut names, the
estimation header) and, where the manifest compiles an allocation, its sources. ``record_native`` records the
native baseline from such a tree only. The recording (``upstream_sources.json``) holds the files' names and
digests with their provenance, never the files.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from contract.bounded_inputs import loads_json, read_input_file
from contract.errors import ConfigError
from harness.files import check_output_file, write_atomic
from harness.paths import BASELINE_DIR
from harness.usage import Parser, command
from implementations.xllm_native.tree.facts import TreeFacts, tree_facts

RECORD_PATH = BASELINE_DIR / "upstream_sources.json"
COMMAND = "python -m harness.baselines.upstream_sources"
MAX_SOURCE_BYTES = 16 << 20
"""The largest file hashed (upstream's largest compiled file is about 60 kB); a larger one is not upstream's."""


def compiled_files(facts: TreeFacts) -> dict:
    """{"planning": [...], "allocation": [...]}: the files, relative to the tree, that the upstream-cut build
    of the tree ``facts`` describes compiles."""
    return {"planning": list(facts.planning_files), "allocation": list(facts.allocation_files)}


def sha256(path: Path) -> str:
    """The file's sha256, read in chunks; a marker that matches no digest when it is missing or too large."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                if f.tell() > MAX_SOURCE_BYTES:
                    return f"(larger than {MAX_SOURCE_BYTES} B)"
    except OSError as exc:
        return f"({exc.strerror})"
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def recorded(path: Path = RECORD_PATH) -> dict:
    """The recording's ``files``: {"planning": {file: sha256}, "allocation": {file: sha256}}."""
    doc = loads_json(read_input_file(path, "the upstream sources recording"), "the upstream sources recording",
                     source=str(path))
    files = doc.get("files") if isinstance(doc, dict) else None
    if not isinstance(files, dict) or not all(isinstance(files.get(g), dict) for g in ("planning", "allocation")):
        raise ConfigError("the upstream sources recording", str(path), "a recording of this command (files.planning, "
                          "files.allocation)", f"re-record it: {COMMAND} --source <upstream tree>")
    return files


def difference(facts: TreeFacts) -> Optional[str]:
    """None when every file the upstream-cut build of ``tree`` compiles is upstream 494f293b5's (same names, same
    sha256); else the first difference, said."""
    want = recorded()
    for group, files in compiled_files(facts).items():
        if not files:  # no allocation compiled: its planning alone decides
            continue
        if files != sorted(want[group]):
            extra = sorted(set(files) - set(want[group])) or sorted(set(want[group]) - set(files))
            return f"its {group} build compiles other files than upstream's ({extra[0]})"
        for rel in files:
            if sha256(facts.root / rel) != want[group][rel]:
                return f"{rel} is not upstream 494f293b5's (sha256 differs)"
    return None


def check_out(out: Path) -> None:
    """``--out``: a file in a folder it can write, new or a recording this command wrote; ``ConfigError`` else
    (a file it did not write is never overwritten)."""
    check_output_file(out, "--out")
    if not os.path.lexists(out):
        return
    try:
        doc = loads_json(read_input_file(out, "--out"), "--out", source=str(out))
        ours = str(doc.get("provenance", {}).get("command", "")).startswith(COMMAND)
    except (ConfigError, AttributeError):
        ours = False
    if not ours:
        raise ConfigError("--out", str(out), "a new file, or a recording this command wrote",
                          "it holds something else; it is left as it is")


def upstream_tree(source: str) -> TreeFacts:
    """The facts of ``source`` when upstream's shipped manifest builds it; ``ConfigError`` naming ``--source``
    else (a port, or a tree carrying a manifest of its own, is not upstream's)."""
    facts = tree_facts(source)
    if not facts.upstream_manifest:
        raise ConfigError("--source", source, "upstream xLLM's tree at 494f293b5 (built by the shipped manifest "
                          "upstream_494f293b5)", f"manifest {facts.manifest_name} builds it ({facts.why})")
    return facts


def record(facts: TreeFacts, commit: str, out: Path = RECORD_PATH) -> dict:
    files = {group: {rel: sha256(facts.root / rel) for rel in rels} for group, rels in compiled_files(facts).items()}
    doc = {
        "provenance": {
            "what": "sha256 of each file upstream xLLM's build compiles for xllm_native (its upstream-cut manifest "
                    f"{facts.manifest_name}): the planning roles' files and the allocation's sources; names and digests only",
            "source_commit": commit, "manifest": facts.manifest_name,
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": platform.machine(),
            "command": f"{COMMAND} --source /path/to/upstream_494f293b5 --commit <sha>",
        },
        "files": files,
    }
    write_atomic(out, json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return doc


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = Parser(prog=COMMAND, description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="upstream xLLM's tree at 494f293b5")
    parser.add_argument("--commit", default="494f293b5", help="the tree's commit (default: %(default)s)")
    parser.add_argument("--out", default=str(RECORD_PATH), help="where to write (default: %(default)s)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    check_out(out)
    facts = upstream_tree(args.source)
    doc = record(facts, args.commit, out)
    print(f"{sum(len(v) for v in doc['files'].values())} files -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
