"""Record what xLLM's own compiled planning code answers on the native grid (``native_planning.json``).

    python -m harness.baselines.record_native --source /path/to/xllm

Builds the tree's planning code (``implementation=xllm_native``), plans every configuration of
``native_grid.grid()`` and writes the figures or the refusal's field of each, with the provenance
(the tree's commit, compiler and flags, date, machine, this command). The file is written to a
temporary name and renamed into place, so an interrupted run leaves the old one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional, Sequence

from harness.baselines import native_grid
from harness.cli import command, fail
from harness.paths import BASELINE_DIR

NATIVE_BASELINE_PATH = BASELINE_DIR / "native_planning.json"


def _commit(source: Path) -> str:
    try:
        out = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=30, check=False)
        if out.returncode == 0:
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    marker = source / "version.txt"
    return f"unknown (no git; version.txt {marker.read_text().strip()})" if marker.is_file() else "unknown"


def record(source: str, out: Path, commit: Optional[str] = None) -> dict:
    from implementations.xllm_native import XllmNativeImplementation

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
            "source_commit": commit or _commit(Path(source)),
            "compiler": manifest["compiler"], "flags": manifest["flags"],
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "machine": f"{platform.machine()} {platform.system()} (CPU build; no accelerator involved)",
            "python": platform.python_version(),
            "command": "python -m harness.baselines.record_native --source /path/to/xllm"
                       " [--commit <sha> when the tree is not a git checkout]",
            "seconds": round(time.monotonic() - started, 1),
        },
        "models": {name: native_grid.model_to_json(m) for name, m in sorted(models.items())},
        "configs": cfgs,
        "results": results,
    }
    tmp = out.with_name(out.name + f".tmp-{os.getpid()}")
    try:
        tmp.write_text(json.dumps(doc, separators=(",", ":"), sort_keys=True) + "\n")
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            tmp.unlink()
    return doc


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.baselines.record_native", description=__doc__.splitlines()[0])
    parser.add_argument("--source", required=True, help="an xLLM source tree (upstream 494f293b5)")
    parser.add_argument("--out", default=str(NATIVE_BASELINE_PATH), help="where to write (default: %(default)s)")
    parser.add_argument("--commit", default=None, help="the tree's commit, when it is not a git checkout")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if not out.parent.is_dir():
        fail(f"--out={args.out}: a file in an existing folder")
    doc = record(args.source, out, args.commit)
    refused = sum(1 for r in doc["results"] if "refused" in r)
    print(f"{len(doc['configs'])} configurations ({refused} refused) -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
