"""``python -m harness.conformance LOG [LOG ...] [overrides]`` (see ``harness/conformance/__init__.py``).

    python -m harness.conformance xllm.INFO model=deepseek_v32 hardware=bi_v100 parallel=tp4 layerwise=s2
    python -m harness.conformance xllm.INFO model_path=/ckpt/config.json layerwise=s2 cache.kv_budget_bytes=17179869184
    python -m harness.conformance xllm.INFO --gflags "--enable_layerwise_split=true --layerwise_split_size=2" model=glm_moe_dsa
    python -m harness.conformance --semantics upstream xllm.INFO --gflags "--layerwise_split_size=2" model=glm_moe_dsa
    python -m harness.conformance node0.INFO node1.INFO --json model=deepseek_v32 parallel=dp2_tp4 layerwise=s2

An argument ``key=value`` whose key is a config key (``model=``, ``cache.block_size=``, ``+x.y=``) is an
override, even where a file of that name exists (the output says so: ``./model=x`` reads that file);
another argument with ``=`` is a log when such a file exists (``run=1/xllm.INFO``), else an override; any
other is a log (several: one per node or process; a process's rotated glog files are joined). The
layerwise flags an echoed command line in the log prints (``--layerwise_split_size=N``,
``--enable_layerwise_split``) are read as a third route beside ``--gflags`` / ``--parallel-config``.
``--gflags`` / ``--parallel-config`` take the engine's own flags (``--flagfile=PATH`` is read)
and apply them after the overrides: the layerwise flags and every other flag that changes the
KV plan (``contract.server_flags.GFLAG_CONFIG_KEYS``: ``--block_size``, ``--kv_cache_dtype``,
``--nnodes``, ...); ``--max_memory_utilization`` / ``--max_cache_size`` are judged against the
worker lines; the output names the flags read and those that do not change the plan (not
read). ``--semantics`` picks FEATURE section 2's rule
(``adaptation``, the default, or ``upstream``: a binary built from upstream 494f293b5).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import sys
from typing import Optional, Sequence

from contract.errors import ConfigError
from contract.server_flags import DEFAULT_SEMANTICS, SEMANTICS
from contract.specs import INDEXER_CACHE_DTYPES, KV_CACHE_DTYPES
from harness.config.build import apply_semantics, build_run_spec, engine_flags
from harness.config.compose import compose_config
from harness.config.schema import Config
from harness.conformance.check import check, flag_notes, log_flag_notes, render, render_json
from harness.conformance.log import LogError, read_logs
from harness.paths import CONF_DIR
from harness.usage import Parser, command, fail, join_flag_values

DISAGREE_EXIT_CODE = 1
OVERRIDE_KEY = re.compile(r"^(?:\+\+|\+|~)?([A-Za-z_][\w-]*)(?:[./][\w-]+)*(?:@[\w.-]+)?=")
"""An override's ``key=`` (Hydra's grammar: ``+`` / ``++`` / ``~``, a dotted key, an ``@package``): group 1 is
its first part."""


def split_arguments(arguments: Sequence[str]) -> tuple:
    """(logs, overrides, notes): ``key=value`` with a config key (a field of the schema's ``Config`` or a
    folder of ``conf/``) is an override even where a file of that name exists (a note says so); another
    ``key=value`` is a log when it names an existing file, else an override; any other argument is a log."""
    keys = {f.name for f in dataclasses.fields(Config)} | {p.name for p in CONF_DIR.iterdir() if p.is_dir()}
    logs, overrides, notes = [], [], []
    for arg in arguments:
        m = OVERRIDE_KEY.match(arg)
        if m is None:
            logs.append(arg)
        elif m.group(1) in keys:
            overrides.append(arg)
            if os.path.isfile(arg):
                notes.append(f"{arg} is read as an override (a file of that name exists here: ./{arg} reads it as a "
                             "log)")
        elif os.path.isfile(arg):
            logs.append(arg)
        else:
            overrides.append(arg)
    return logs, overrides, notes


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m harness.conformance",
        description="Judge xLLM engine logs (startup refusal or KV cache figures) against the spec (FEATURE.md). "
                    "Exit 0: agree, 1: disagree, 2: unusable input.",
    )
    p.add_argument("args", nargs="+", metavar="LOG|OVERRIDE",
                   help="the engine's logs (glog INFO files or captured stderr; several: one per node or process) "
                        "and the run's config overrides, e.g. model=deepseek_v32 layerwise=s2 hardware=bi_v100")
    p.add_argument("--semantics", choices=SEMANTICS, default=DEFAULT_SEMANTICS,
                   help="flag semantics: adaptation (enable flag and s > 1, default) or upstream (s > 1 alone; "
                        "a binary built from upstream 494f293b5)")
    p.add_argument("--gflags", metavar="FLAGS",
                   help='xllm_server flags, e.g. "--enable_layerwise_split=true --layerwise_split_size=2" '
                        '(adaptation) or "--layerwise_split_size=2" (upstream); --flagfile=PATH is read')
    p.add_argument("--parallel-config", metavar="FILE",
                   help="a ParallelConfig JSON (layerwise_split_size, world_size, dp_size, cp_size, tp_size, kv_split_size)")
    p.add_argument("--json", action="store_true", help="print every check and its verdict as JSON")
    return p


def _emit(text: str) -> None:
    """Print the result; a stdout that cannot take it (``> /dev/full``) is one error line, not a traceback."""
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise  # @command ends a closed pipe quietly
    except OSError as exc:
        try:  # the exit flush would fail again on the bytes still buffered
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):  # a stdout with no descriptor (captured): nothing to redirect
            pass
        fail(f"stdout: cannot write the result ({exc.strerror or exc})")


def check_schema(run) -> None:
    """What ``harness.plan`` refuses as values its schema cannot hold (``block_size`` 0, a negative budget,
    ``max_seqs_per_batch`` -1, ``dp_size`` 0, ...), with the same error line; the spec's rules (world
    divisible by dp * cp, split size >= 1, ...) are judged against the log instead. Checked here, with the
    contract's dtype names (``contract.specs``), not by the reference implementation."""
    c = run.cache  # the schema's bounds, checked here: the harness never asks the code under test
    for name, value, allowed in (("block_size", c.block_size, None), ("kv_cache_dtype", c.kv_cache_dtype, KV_CACHE_DTYPES),
                                 ("indexer_cache_dtype", c.indexer_cache_dtype, INDEXER_CACHE_DTYPES)):
        if allowed is None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(f"cache.{name}", value, "a whole number >= 1")
        if allowed is not None and value not in allowed:
            raise ConfigError(f"cache.{name}", value, f"one of {', '.join(allowed)}")
    for name, value, detail in (("max_seqs_per_batch", c.max_seqs_per_batch, "0 = unlimited (2 padding slots)"),
                                ("max_linear_state_cache_slots", c.max_linear_state_cache_slots, "0 = auto-size"),
                                ("num_speculative_tokens", c.num_speculative_tokens, ""),
                                ("kv_budget_bytes", c.kv_budget_bytes, "0 = the hardware profile's budget")):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigError(f"cache.{name}", value, "a whole number >= 0", detail)
    if c.host_blocks_factor < 0:
        raise ConfigError("cache.host_blocks_factor", c.host_blocks_factor, "a number >= 0")
    p = run.parallel
    for name, value, least, detail in (("world_size", p.world_size, 1, ""), ("dp_size", p.dp_size, 1, ""),
                                       ("cp_size", p.cp_size, 1, ""),
                                       ("kv_split_size", p.kv_split_size, 0, " (0 follows cp_size (upstream))")):
        if value < least:
            raise ConfigError(f"parallel.{name}", value, f"a whole number >= {least}{detail}")


@command
def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parser().parse_intermixed_args(join_flag_values(sys.argv[1:] if argv is None else list(argv)))
    logs, overrides, arg_notes = split_arguments(args.args)
    if not logs:
        fail("no log given: LOG is a file path (an argument key=value with a config key is an override) "
             "(see python -m harness.conformance --help)")
    try:
        log = read_logs(logs)
    except LogError as exc:
        fail(exc)
    enable = next((where for name, _, where in log.flags if name == "enable_layerwise_split"), None)
    if enable is not None and args.semantics == "upstream":
        fail(f"--enable_layerwise_split: the log's command line has it ({enable}), and an upstream 494f293b5 "
             "binary has no such flag (it stops on an unknown flag): the log is of an adaptation build "
             "(--semantics adaptation)")
    flags = engine_flags(args.gflags, args.parallel_config, args.semantics, overrides, log_flags=log.flag_text)
    overrides += flags.overrides
    cfg = compose_config(overrides)
    why = apply_semantics(cfg, args.semantics)
    run = build_run_spec(cfg)
    check_schema(run)
    try:
        figures = check(run, log, args.semantics, flags.memory)
    except LogError as exc:
        fail(exc)
    extra = [*arg_notes, *log_flag_notes(log), *flag_notes(flags)]
    if args.json:
        _emit(render_json(figures, log, overrides, args.semantics, why, extra))
    else:
        _emit(render(figures, log, overrides, why, extra))
    return DISAGREE_EXIT_CODE if any(f.agree is False for f in figures) else 0


if __name__ == "__main__":
    sys.exit(main())
