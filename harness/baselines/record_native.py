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
tree is upstream's: the files its planning build compiles (each role's file, by the shipped manifest that fits)
are exactly the ones the checked-in recording's provenance lists (``upstream_files``) with the same sha256 each.
Any other tree (a port, a fork, a copy with one line changed) is refused naming the first file that differs: the
recording is what upstream's own code answers, and says so.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from contract.errors import ConfigError
from harness.baselines import native_grid
from harness.paths import BASELINE_DIR
from harness.usage import Parser, command, fail

NATIVE_BASELINE_PATH = BASELINE_DIR / "native_planning.json"
COMMAND = "python -m harness.baselines.record_native"
"""How every recording's provenance names this command (``provenance.command`` starts with it)."""
MAX_RECORDING_BYTES = 64 * 1024 * 1024
"""The largest existing ``--out`` read to tell whether this command wrote it (the recording is ~0.4 MB)."""
MAX_SOURCE_BYTES = 16 * 1024 * 1024
"""The largest role file hashed (upstream's largest, master.cpp, is about 60 kB)."""
UPSTREAM_FILES = "upstream_files"
"""The provenance key: each file upstream's planning build compiles (relative to the tree) -> its sha256."""


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
    from contract.bounded_inputs import read_input_file

    try:
        text = read_input_file(marker, "--source version.txt", max_bytes=4096)
    except ConfigError as exc:
        raise ConfigError(exc.field, exc.value, f"{exc.allowed}, or the commit given as --commit <sha>",
                          exc.detail) from None
    return f"unknown (no git; version.txt {' '.join(text.split())})"


def is_recording(path: Path) -> bool:
    """Whether ``path`` holds a recording this command wrote (its provenance names ``COMMAND``)."""
    from contract.bounded_inputs import loads_json, read_input_file

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
    from harness.files import check_output_file

    check_output_file(out, "--out")
    if os.path.lexists(out) and not force and not is_recording(out):
        raise ConfigError("--out", str(out), "a new file, or a recording this command wrote (or give --force)",
                          "it holds something else; it is left as it is")


def recorded_upstream_files(recording: Path = NATIVE_BASELINE_PATH) -> dict:
    """The role files of upstream 494f293b5 and their sha256, from the checked-in recording's provenance."""
    from contract.bounded_inputs import loads_json, read_input_file

    doc = loads_json(read_input_file(recording, "the native recording", max_bytes=MAX_RECORDING_BYTES),
                     "the native recording", source=str(recording))
    files = doc.get("provenance", {}).get(UPSTREAM_FILES) if isinstance(doc, dict) else None
    if not isinstance(files, dict) or not files:
        raise ConfigError("the native recording", str(recording), f"a recording whose provenance lists "
                          f"{UPSTREAM_FILES} (upstream's role files and their sha256)", "it lists none")
    return files


def role_files(source: str) -> list:
    """The files the planning build of ``source`` compiles (each role's, by the manifest that fits), relative to
    the tree; ``ConfigError`` naming ``--source`` when it is built as a port."""
    from implementations.xllm_native.native import resolve

    tree, m, _ = resolve(source)
    if tree.port:
        raise ConfigError("--source", source, "upstream 494f293b5's tree",
                          f"it is built as a port by the manifest {m.name}: its planning code is not upstream's")
    return sorted({p.strip() for role, value in tree.files.items() if role != "include_dirs"
                   for p in str(value).split(",") if p.strip()})


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            if f.tell() > MAX_SOURCE_BYTES:
                return f"(larger than {MAX_SOURCE_BYTES} B)"
    return h.hexdigest()


def check_upstream(source: str, upstream: dict) -> dict:
    """``upstream`` (file -> sha256) when ``source``'s planning build compiles exactly those files with that
    content; else ``ConfigError`` naming ``--source`` and the first file that differs."""
    allowed = "upstream 494f293b5's tree (its planning files, by sha256, as the recording's provenance lists them)"
    files = role_files(source)
    if files != sorted(upstream):
        extra = sorted(set(files) - set(upstream)) or sorted(set(upstream) - set(files))
        raise ConfigError("--source", source, allowed, f"its build compiles other files ({extra[0]})")
    for rel in files:
        try:
            got = _sha256(Path(source) / rel)
        except OSError as exc:
            raise ConfigError("--source", source, allowed, f"{rel}: {exc.strerror or exc}") from None
        if got != upstream[rel]:
            raise ConfigError("--source", source, allowed,
                              f"{rel} differs from upstream's (sha256 {got[:16]}, upstream's {upstream[rel][:16]})")
    return dict(upstream)


def record(source: str, out: Path, commit: Optional[str] = None, upstream: Optional[dict] = None) -> dict:
    from implementations.xllm_native import XllmNativeImplementation

    commit = commit or _commit(Path(source))  # before the run: a version.txt it cannot read is said now
    upstream = upstream or check_upstream(source, recorded_upstream_files())
    impl = XllmNativeImplementation(source_dir=source)
    models = native_grid.load_models()
    cfgs = native_grid.grid()
    started = time.monotonic()
    results = [native_grid.observe_run(impl, native_grid.run_for(cfg, models)) for cfg in cfgs]
    manifest = impl.native.built.manifest
    doc = {
        "provenance": {
            "what": "xLLM's layerwise split planning code compiled unchanged by implementation=xllm_native "
                    "(estimate_kv_cache_capacity, LayerwiseSplitLayout, SpeculativeEngine::calculate_kv_cache, "
                    "validate_layerwise_split_size_startup_config), driven with the adapter's engine options",
            "source_commit": commit,
            "compiler": manifest["compiler"], "flags": manifest["flags"],
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"{platform.machine()} {platform.system()} (CPU build; no accelerator involved)",
            "python": platform.python_version(),
            "command": f"{COMMAND} --source /path/to/xllm [--commit <sha> when the tree is not a git checkout]",
            "seconds": round(time.monotonic() - started, 1),
            UPSTREAM_FILES: upstream,
        },
        "models": {name: native_grid.model_to_json(m) for name, m in sorted(models.items())},
        "configs": cfgs,
        "results": results,
    }
    from harness.files import write_atomic

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
    from implementations.xllm_native import XllmNativeImplementation

    check_out(out, args.force)
    XllmNativeImplementation.check_inputs(source_dir=args.source)
    commit = args.commit or _commit(Path(args.source))
    upstream = check_upstream(args.source, recorded_upstream_files())
    doc = record(args.source, out, commit, upstream)
    refused = sum(1 for r in doc["results"] if "refused" in r)
    print(f"{len(doc['configs'])} configurations ({refused} refused) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
