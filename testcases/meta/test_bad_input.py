"""Bad input, end to end: one clear error line, a non-zero exit, no traceback, nothing written.

Each row of ``ROWS`` is one user mistake, spelled for each entry point it applies to:
``python -m harness.plan``, ``python -m harness`` and ``pytest`` with ``--lw-override`` /
options, each run in an empty directory that must stay empty. Every row runs
in-process through the entry point's main function (captured output, exit code); for
each way an entry point ends on a mistake, one row also runs as a real subprocess. The
error line must name the field and something that is allowed.

What counts as a mistake per entry point: the harness refuses only what its schema
cannot hold (unknown options and keys, wrong types, unreadable files, a runner
setting it cannot use). Every FEATURE section 3 startup rule (split size, world
size, divisibility, and the rules of an active split) and every other refusal of
the implementation is the implementation's answer: for the plan command that answer
is the user's error line; through pytest and ``python -m harness`` the configuration
is a test input whose refusal the TCs check, see ``test_spec_rejections_are_test_inputs``
and ``test_app_runs_a_config_the_spec_refuses``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import pytest

from harness import plan as plan_cli
from harness.paths import TC_DIR
from testcases.conftest import FullStdout

pytestmark = pytest.mark.meta

TC01 = str(TC_DIR / "test_tc01_allocation.py")
NARROW = ("--lw-override", "model=deepseek_v32", "--lw-override", "layerwise=s2", "--lw-override", "parallel=tp4",
          "--lw-override", "implementation=reference")
UNWRITABLE = "/proc/lwsplit-no-such-dir/results"  # /proc refuses new entries, even to root


@dataclass(frozen=True)
class Bad:
    """One mistake. ``field`` and ``allowed`` must both appear in the error line."""

    id: str
    field: str
    allowed: str
    plan: Optional[tuple[str, ...]] = None
    harness: Optional[tuple[str, ...]] = None
    pytest: Optional[tuple[str, ...]] = None


def _same(*overrides: str, pytest_too: bool = True) -> dict:
    """The same Hydra overrides for the plan command, ``python -m harness`` and (as --lw-override) pytest."""
    lw = tuple(a for o in overrides for a in ("--lw-override", o))
    return {"plan": overrides, "harness": overrides, "pytest": lw if pytest_too else None}


ROWS = (
    # config groups: unknown options
    Bad("unknown-model", "model", "deepseek_v32", **_same("model=gpt5")),
    Bad("unknown-hardware", "hardware", "bi_v100", **_same("hardware=h100")),
    Bad("unknown-parallel", "parallel", "tp4", **_same("parallel=tp3")),
    Bad("unknown-layerwise", "layerwise", "s2", **_same("layerwise=s3")),
    Bad("unknown-implementation", "implementation", "reference", **_same("implementation=nope")),
    Bad("unknown-draft", "draft", "deepseek_mtp", **_same("draft=eagle")),
    # keys and types
    Bad("misspelled-key", "layerwise.spilt_size", "split_size", **_same("layerwise.spilt_size=2")),
    Bad("nonexistent-key", "cache.colour", "block_size", **_same("cache.colour=red")),
    Bad("appended-unknown-key", "cache.colour", "block_size", **_same("+cache.colour=red")),
    Bad("tree-key-without-its-implementation", "implementation.source_dir", "implementation=xllm_native",
        **_same("implementation.source_dir=/src/xllm")),
    Bad("split-size-word", "layerwise.split_size", "int", **_same("layerwise.split_size=two")),
    Bad("block-size-float", "cache.block_size", "int", **_same("cache.block_size=1.5")),
    Bad("enable-not-bool", "layerwise.enable", "bool", **_same("layerwise.enable=maybe")),
    # the implementation's refusals (FEATURE section 3 and its other checks): the plan command's error line
    Bad("split-size-0", "layerwise.split_size", ">= 1", plan=("layerwise.split_size=0",)),
    Bad("split-size-negative", "layerwise.split_size", ">= 1", plan=("layerwise.split_size=-1",)),
    Bad("split-3-tp-4", "layerwise.split_size", "divisor of attention tp 4", plan=("layerwise.split_size=3",)),
    Bad("split-8-tp-4", "layerwise.split_size", "divisor of attention tp 4", plan=("layerwise.split_size=8",)),
    Bad("world-not-dp-cp-multiple", "parallel.world_size", "multiple of parallel.dp_size * parallel.cp_size",
        plan=("parallel.dp_size=3",)),
    Bad("budget-below-one-block", "hardware.reserved", "a budget holding one block",
        plan=("hardware.reserved_mib_per_card=511",)),
    Bad("reserve-above-hbm", "hardware.reserved_mib_per_card", "at most hardware.hbm_mib_per_card",
        **_same("hardware.reserved_mib_per_card=600")),
    Bad("unknown-kv-dtype", "cache.kv_cache_dtype", "fp8_e4m3", plan=("cache.kv_cache_dtype=fp4",)),
    Bad("block-size-0", "cache.block_size", ">= 1", plan=("cache.block_size=0",)),
    # FEATURE section 3 rules for an active split: the same
    Bad("unsupported-model-split", "model", "supports layerwise split", plan=("model=llama3_8b", "layerwise=s2")),
    Bad("cp-with-split", "parallel.cp_size", "context parallel is not supported", plan=("layerwise=s2", "parallel=dp2_tp4", "parallel.dp_size=1",
                                                         "parallel.cp_size=2")),
    Bad("kv-split-with-split", "parallel.kv_split_size", "KV split is not supported", plan=("layerwise=s2", "parallel.kv_split_size=2")),
    Bad("host-cache-with-split", "cache.host_blocks_factor", "<= 1", plan=("layerwise=s2", "cache.host_blocks_factor=2")),
    Bad("sleep-mode-with-split", "cache.enable_sleep_mode", "false", plan=("layerwise=s2", "cache.enable_sleep_mode=true")),
    Bad("xtensor-with-split", "cache.enable_xtensor", "false", plan=("layerwise=s2", "cache.enable_xtensor=true")),
    # override syntax and sweeps
    Bad("malformed-override", "layerwise.split_size=[2", "key=value", plan=("layerwise.split_size=[2",),
        harness=("layerwise.split_size=[2",)),
    Bad("malformed-lw-override", "--lw-override", "key=value", pytest=("--lw-override", "=2")),
    Bad("empty-sweep", "model", "deepseek_v32", harness=("model=",)),
    Bad("empty-axis", "model", "at least one value", pytest=("--lw-override", "model=")),
    Bad("sweep-without-multirun", "model", "-m", plan=("model=deepseek_v3,qwen3_5_moe",),
        harness=("model=deepseek_v3,qwen3_5_moe",)),
    Bad("unknown-tc", "tc", "TC-01", pytest=("--lw-override", "tc=TC-09")),
    Bad("unknown-suite-tc", "suite.tcs", "TC-01", harness=("suite.tcs=[TC-09]",)),
    Bad("departures-against-missing", "suite.departures_against", "a departures.json",
        harness=("suite.departures_against=/nonexistent/departures.json",)),
    Bad("unknown-mode", "mode", "plan", harness=("mode=dry",)),
    # command-line options
    Bad("bad-lw-matrix", "matrix", "ci", pytest=("--lw-matrix", "nightly")),
    Bad("bad-lw-backend", "--lw-backend", "gloo", pytest=("--lw-backend", "mpi")),
    Bad("bad-runner-backend", "runner.backend", "gloo", harness=("runner.backend=mpi",),
        pytest=("--lw-override", "runner.backend=mpi")),
    Bad("bad-lw-timeout", "--lw-timeout", "> 0", pytest=("--lw-timeout", "0")),
    Bad("bad-gflags", "layerwise_split_size", "whole number", plan=("--gflags", "--layerwise_split_size=two")),
    Bad("missing-parallel-config", "--parallel-config", "a readable regular file",
        plan=("--parallel-config", "/nonexistent/parallel_config.json")),
    # model_path (a local config.json)
    Bad("model-path-missing", "model_path", "config.json", **_same("model_path=/nonexistent/config.json")),
    Bad("model-path-invalid-json", "model_path", "JSON", **_same("model_path={inputs}/broken/config.json")),
    Bad("model-path-missing-field", "num_hidden_layers", "int", **_same("model_path={inputs}/no_layers/config.json")),
    # where results go
    Bad("unwritable-results-dir", "report.results_dir", "writable directory",
        harness=(f"report.results_dir={UNWRITABLE}",)),
    Bad("unwritable-alluredir", "--alluredir", "writable directory", pytest=("--alluredir", UNWRITABLE)),
    Bad("unwritable-lw-results", "--lw-results", "writable directory", pytest=("--lw-results", f"{UNWRITABLE}/r.jsonl")),
    Bad("lw-results-is-a-folder", "--lw-results", "a file to append JSON lines to",
        pytest=("--lw-results", "{inputs}")),
    Bad("sweep-subdir-unwritable", "hydra.sweep.subdir", "writable directory",
        harness=("-m", "mode=plan", "model=deepseek_v32", "hydra.sweep.subdir=/proc/lwsplit-no-such-dir/x")),
    # ---- round two: sizes read from outside are bounded (contract.bounded_inputs) ----
    Bad("layers-huge", "model.num_hidden_layers", "at most 10000", **_same("model.num_hidden_layers=1000000000000")),
    Bad("world-huge", "parallel.world_size", "at most 4096", **_same("parallel.world_size=1000000")),
    Bad("model-path-layers-huge", "num_hidden_layers", "at most 10000",
        **_same("model_path={inputs}/layers_huge/config.json")),
    Bad("model-path-deep-json", "model_path", "nested at most 64 deep", **_same("model_path={inputs}/deep/config.json")),
    Bad("model-path-huge-int", "model_path", "at most 18 digits", **_same("model_path={inputs}/huge_int/config.json")),
    Bad("model-path-fifo", "model_path", "regular file", **_same("model_path={inputs}/fifo_model/config.json")),
    Bad("parallel-config-dev-zero", "--parallel-config", "regular file", plan=("--parallel-config", "/dev/zero")),
    Bad("parallel-config-fifo", "--parallel-config", "regular file", plan=("--parallel-config", "{inputs}/pc.fifo")),
    Bad("parallel-config-typo", "parallel_config.layerwise_split_sise", "did you mean layerwise_split_size",
        plan=("--parallel-config", "{inputs}/pc_typo.json")),
    # ParallelConfig JSON, gflags and config.json values that used to plan something else without a word
    Bad("parallel-config-upper-case", "parallel_config.LAYERWISE_SPLIT_SIZE", "did you mean layerwise_split_size",
        plan=("--parallel-config", "{inputs}/pc_upper.json")),
    Bad("parallel-config-wrapped", "parallel_config.parallel_config", "a ParallelConfig key: world_size",
        plan=("--parallel-config", "{inputs}/pc_wrapped.json")),
    Bad("parallel-config-unknown-key", "parallel_config.colour", "a ParallelConfig key: world_size",
        plan=("--parallel-config", "{inputs}/pc_unknown.json")),
    Bad("parallel-config-world-vs-tp", "parallel_config.world_size", "dp_size 2 * cp_size 1 * tp_size 2 = 4",
        plan=("--parallel-config", "{inputs}/pc_world_tp.json")),
    Bad("parallel-config-tp2-split4", "layerwise.split_size", "divisor of attention tp 2",
        plan=("--parallel-config", "{inputs}/pc_tp2_s4.json")),
    Bad("gflags-vs-parallel-config", "layerwise_split_size", "--gflags and --parallel-config must agree",
        plan=("--parallel-config", "{inputs}/pc_s4.json", "--gflags", "--layerwise_split_size=2")),
    Bad("gflags-flagfile-missing", "--flagfile=/nonexistent/xllm.flags", "a readable regular file",
        plan=("--gflags", "--flagfile=/nonexistent/xllm.flags")),
    Bad("gflags-enable-under-upstream", "--enable_layerwise_split", "--layerwise_split_size=N",
        plan=("--semantics", "upstream", "--gflags", "--enable_layerwise_split=true --layerwise_split_size=2")),
    Bad("model-path-kv-heads-above-heads", "num_key_value_heads", "at most num_attention_heads 16",
        **_same("model_path={inputs}/kv_heads_64/config.json", pytest_too=False)),
    Bad("topology-deep-yaml", "hardware.topology", "nested at most 64 deep",
        **_same("hardware.topology={inputs}/deep_topology.yaml")),
    # values that used to pass the check and break later
    Bad("timeout-inf", "runner.timeout_s", "finite", harness=("runner.timeout_s=inf",)),
    Bad("lw-timeout-inf", "--lw-timeout", "finite", pytest=("--lw-timeout", "inf")),
    Bad("lw-max-live-ranks-0", "runner.max_live_ranks", ">= 1", pytest=("--lw-max-live-ranks", "0")),
    Bad("more-ranks-than-a-pool", "parallel.world_size", "an integer in 1..8", harness=("parallel.world_size=64",)),
    Bad("gflags-unbalanced-quote", "--gflags", "quoted as a shell would", plan=("--gflags", '--layerwise_split_size="2')),
    # silent acceptance, now refused
    Bad("host-cache-nan", "cache.host_blocks_factor", "finite", **_same("cache.host_blocks_factor=nan")),
    Bad("gflags-upper-case", "--ENABLE_LAYERWISE_SPLIT", "case-sensitive",
        plan=("--gflags", "--ENABLE_LAYERWISE_SPLIT=true --layerwise_split_size=2")),
    Bad("gflags-full-width-digit", "--layerwise_split_size", "ASCII digits only",
        plan=("--gflags", "--enable_layerwise_split --layerwise_split_size=\uff12")),
    Bad("split-size-underscore", "layerwise.split_size", "plain ASCII digits", **_same("layerwise.split_size=0_2")),
    Bad("warp-size-0", "hardware.warp_size", ">= 1", **_same("hardware.warp_size=0")),
    Bad("device-type-unknown", "hardware.device_type", "cpu, cuda", **_same("hardware.device_type=tpu")),
    Bad("model-option-path", "model", "no path", **_same("model=../config")),
    # code from the command line: _target_ only for Protocol classes and shipped callbacks
    Bad("target-builtin-open", "implementation", "a class implementing the KVShardingImplementation Protocol",
        **_same("implementation._target_=builtins.open")),
    Bad("target-positional-args", "implementation", "keyword arguments only",
        **_same("+implementation._args_=[/tmp/lwsplit-must-not-exist,w]")),
    Bad("implementation-unknown-argument", "implementation.bogus", "keyword arguments of ReferenceImplementation: none",
        **_same("+implementation.bogus=1")),
    Bad("target-callback", "hydra.callbacks.x._target_", "a callback this project ships",
        harness=("+hydra.callbacks.x._target_=os.getcwd",)),
    Bad("target-launcher", "hydra.launcher._target_", "no _target_ here", harness=("hydra.launcher._target_=os.getcwd",)),
    # ---- results folders: nothing lost, nothing overwritten (harness.app.claim) ----
    Bad("run-dir-empty", "hydra.run.dir", "a folder for the results", harness=("mode=plan", "hydra.run.dir=")),
    Bad("run-dir-of-another-run", "hydra.run.dir", "no other run writes to",
        harness=("mode=plan", "hydra.run.dir={inputs}/claimed_run")),
    Bad("sweep-dir-of-another-run", "hydra.sweep.dir", "no other run writes to",
        harness=("-m", "mode=plan", "layerwise=s2,s4", "hydra.sweep.dir={inputs}/claimed_run")),
    Bad("run-dir-of-an-old-run", "hydra.run.dir", "a new or empty folder",
        harness=("mode=plan", "hydra.run.dir={inputs}/old_run")),
    Bad("sweep-subdir-constant", "hydra.sweep.subdir", "differs per job",
        harness=("-m", "mode=plan", "layerwise=s2,s4", "hydra.sweep.dir={inputs}/new_sweep", "hydra.sweep.subdir=one")),
    Bad("run-dir-past-the-path-limit", "hydra.run.dir", "a path of at most",
        harness=("mode=plan", "hydra.run.dir={inputs}/" + ("c" * 200 + "/") * 19 + "d" * 120)),
    Bad("config-name-unknown", "--config-name", "a config Hydra can find", harness=("--config-name", "nope")),
    Bad("config-dir-missing", "--config-dir", "a config Hydra can find",
        harness=("--config-dir", "/nonexistent/conf", "mode=plan")),
    Bad("override-non-ascii-unquoted", "override", "quote a value with non-ASCII characters: model_path='",
        plan=("model_path=/tmp/\u6a21\u578b/config.json",), harness=("model_path=/tmp/r\u00e9sultats/config.json",)),
    Bad("model-sweep-with-model-path", "model", "sweep model= or model_path=, not both",
        harness=("-m", "mode=plan", "model=deepseek_v32,qwen3_5_moe", "model_path={inputs}/kv_heads_64/config.json")),
    Bad("draft-sweep-with-draft-path", "draft", "sweep draft= or draft_path=, not both",
        harness=("-m", "mode=plan", "model=deepseek_v32", "draft=none,deepseek_mtp",
                 "draft_path={inputs}/kv_heads_64/config.json")),
    Bad("sweep-too-large", "sweep", "at most 1000 jobs", harness=("-m", "mode=plan", "layerwise.split_size=range(1,5000)")),
    Bad("group-given-a-list", "model", "one option", plan=("model=[deepseek_v32,qwen3_next]",),
        harness=("model=[deepseek_v32,qwen3_next]",)),
    # ---- values past the system's and Python's limits: one line, the value cut short ----
    Bad("override-of-5000-digits", "cache.block_size", "key=value", **_same("cache.block_size=" + "1" * 5000)),
    Bad("model-of-300-characters", "model", "deepseek_v32", **_same("model=" + "m" * 300)),
    Bad("model-path-name-too-long", "model_path", "config.json", **_same("model_path=" + "m" * 300 + "/config.json")),
    Bad("topology-name-too-long", "hardware.topology", "a file", **_same("hardware.topology=" + "t" * 300)),
    Bad("run-dir-name-too-long", "hydra.run.dir", "at most 255 bytes",
        harness=("mode=plan", "hydra.run.dir={inputs}/" + "r" * 300)),
    Bad("run-dir-with-a-newline", "hydra.run.dir", "without control characters",
        harness=("mode=plan", "hydra.run.dir='{inputs}/a\nb'")),
    Bad("results-dir-with-an-escape", "report.results_dir", "without control characters",
        harness=("mode=plan", "report.results_dir='{inputs}/r\x1b[1m'")),
    Bad("sweep-subdir-with-a-tab", "hydra.sweep.subdir", "without control characters",
        harness=("-m", "mode=plan", "hydra.sweep.subdir='${hydra.job.num}\tx'")),
    Bad("job-name-a-path", "hydra.job.name", "a file name", harness=("mode=plan", "hydra.job.name=a/b")),
    Bad("job-name-too-long", "hydra.job.name", "at most 255 bytes", harness=("mode=plan", "hydra.job.name=" + "j" * 300)),
    # ---- YAML aliases count as what they expand to (contract.bounded_inputs) ----
    Bad("topology-yaml-alias-bomb", "hardware.topology", "at most 100000 nodes",
        plan=("hardware.topology={inputs}/alias_topology.yaml",), harness=("hardware.topology={inputs}/alias_topology.yaml",)),
)
# Every row calls its entry point's main in-process. A real process adds what only a process
# has (``python -m``'s module, its exit status, everything on its stderr, interpreter exit), so
# one row per way an entry point ends on a mistake also runs as a real process.
SUBPROCESS_PLAN_ROWS = ("split-3-tp-4",)
"""Rows also run as a real ``python -m harness.plan`` process: every mistake there ends through the
one ``error:`` handler (exit 2); this row goes furthest before it (compose, build, the implementation's refusal)."""
SUBPROCESS_HARNESS_ROWS = ("unwritable-results-dir",)
"""Rows also run as a real ``python -m harness`` process: every mistake there ends through the same
``error:`` handler (exit 2) before Hydra runs a job."""
SUBPROCESS_PYTEST_ROWS = ("misspelled-key", "bad-lw-backend")
"""Rows also run as a real ``pytest`` process, one per way pytest ends on a mistake (exit 4): the plugin's
usage error while configuring, and pytest's own option parser refusing a value."""


def _rows(entry: str) -> list:
    out = []
    for row in ROWS:
        if getattr(row, entry) is None:
            continue
        out.append(pytest.param(row, id=row.id))
    return out


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> Path:
    """Bad model files: invalid JSON; valid JSON without the layer count."""
    root = tmp_path_factory.mktemp("bad-inputs")
    (root / "broken").mkdir()
    (root / "broken" / "config.json").write_text('{"model_type": "deepseek_v3", "num_hidden_layers": ')
    (root / "no_layers").mkdir()
    (root / "no_layers" / "config.json").write_text(json.dumps({"model_type": "deepseek_v3", "kv_lora_rank": 512}))
    # round two: resource bombs and special files
    good = {"model_type": "deepseek_v32", "num_hidden_layers": 4, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    for name, text in (
        ("layers_huge", json.dumps({**good, "num_hidden_layers": 10**12})),
        ("deep", '{"model_type": "deepseek_v3", "x": ' + "[" * 200_000 + "]" * 200_000 + "}"),
        ("huge_int", '{"model_type": "deepseek_v3", "num_hidden_layers": ' + "9" * 5000 + "}"),
    ):
        (root / name).mkdir()
        (root / name / "config.json").write_text(text)
    (root / "fifo_model").mkdir()
    os.mkfifo(root / "fifo_model" / "config.json")
    os.mkfifo(root / "pc.fifo")
    (root / "pc_typo.json").write_text(json.dumps({"layerwise_split_sise": 2}))
    for name, obj in (("pc_upper", {"LAYERWISE_SPLIT_SIZE": 2}), ("pc_wrapped", {"parallel_config": {"layerwise_split_size": 2}}),
                      ("pc_unknown", {"layerwise_split_size": 2, "colour": "red"}),
                      ("pc_world_tp", {"world_size": 8, "dp_size": 2, "tp_size": 2}),
                      ("pc_tp2_s4", {"tp_size": 2, "layerwise_split_size": 4}), ("pc_s4", {"layerwise_split_size": 4})):
        (root / f"{name}.json").write_text(json.dumps(obj))
    (root / "kv_heads_64").mkdir()
    (root / "kv_heads_64" / "config.json").write_text(json.dumps({
        "model_type": "llama", "num_hidden_layers": 4, "hidden_size": 2048, "num_attention_heads": 16,
        "num_key_value_heads": 64, "head_dim": 128}))
    (root / "deep_topology.yaml").write_text("cards: " + "[" * 5000 + "]" * 5000 + "\n")
    # results folders: one a run has claimed (it is writing there), one a run wrote before claims existed
    (root / "claimed_run").mkdir()
    (root / "claimed_run" / ".lwsplit-run").write_text("{}")
    (root / "old_run").mkdir()
    (root / "old_run" / "result.json").write_text("{}")
    # 300 bytes standing for a million card names (each anchor ten aliases of the one before)
    links = ", ".join([f"&a{i} [" + ", ".join([f"*a{i - 1}" if i else "x"] * 10) + "]" for i in range(6)])
    (root / "alias_topology.yaml").write_text(f"cards: [GPU0]\nlinks: [{links}, x]\n")
    return root


def _args(args: tuple[str, ...], inputs: Path) -> list[str]:
    return [a.replace("{inputs}", str(inputs)) for a in args]


def _error_line(output: str, row: Bad) -> str:
    assert "Traceback" not in output and "INTERNALERROR" not in output, output[-3000:]
    lines = [line for line in output.splitlines() if "error:" in line]
    assert len(lines) == 1, f"want exactly one error line, got {len(lines)}:\n{output[-3000:]}"
    line = lines[0]
    assert row.field in line, f"{row.field!r} not named in: {line}"
    assert row.allowed in line, f"{row.allowed!r} (what is allowed) not in: {line}"
    return line


def _run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LWSPLIT_"))}
    return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=180, env=env)


def test_table_size():
    assert len(ROWS) >= 25
    assert len({row.id for row in ROWS}) == len(ROWS)
    for entry in ("plan", "harness", "pytest"):
        assert len(_rows(entry)) >= 15, entry


@pytest.mark.parametrize("row", _rows("plan"))
def test_plan_command(row, inputs, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        plan_cli.main(_args(row.plan, inputs))
    out, err = capsys.readouterr()
    assert exit_info.value.code == 2
    assert out == ""
    assert len(err.splitlines()) == 1
    assert err.startswith("error: ")
    _error_line(err, row)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("row", [r for r in _rows("plan") if r.values[0].id in SUBPROCESS_PLAN_ROWS])
def test_plan_command_process(row, inputs, tmp_path):
    proc = _run([sys.executable, "-m", "harness.plan", *_args(row.plan, inputs)], tmp_path)
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1
    _error_line(proc.stderr, row)
    assert list(tmp_path.iterdir()) == []


def _harness_in_process(argv: list[str], capsys) -> tuple[int, str]:
    from harness.app.main import main

    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize("row", _rows("harness"))
def test_harness_app(row, inputs, tmp_path, capsys, monkeypatch):
    """``python -m harness``'s main, run where its default results directory (./reports) would land."""
    monkeypatch.chdir(tmp_path)
    code, output = _harness_in_process(_args(row.harness, inputs), capsys)
    assert code == 2, output[-3000:]
    _error_line(output, row)
    assert list(tmp_path.iterdir()) == [], "a rejected command must write nothing"


@pytest.mark.parametrize("row", [r for r in _rows("harness") if r.values[0].id in SUBPROCESS_HARNESS_ROWS])
def test_harness_app_process(row, inputs, tmp_path):
    proc = _run([sys.executable, "-m", "harness", *_args(row.harness, inputs)], tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output[-3000:]
    _error_line(output, row)
    assert list(tmp_path.iterdir()) == [], "a rejected command must write nothing"


def _pytest_argv(row: Bad, inputs: Path) -> list[str]:
    return [TC01, *NARROW, *_args(row.pytest, inputs), "-q", "-p", "no:cacheprovider", "-p", "no:randomly"]


@pytest.mark.parametrize("row", _rows("pytest"))
def test_pytest_entry(row, inputs, pytester):
    """pytest's main with the TC-01 suite narrowed to one configuration, plus the mistake: a usage error (exit 4)."""
    before = sorted(pytester.path.iterdir())
    result = pytester.runpytest_inprocess(*_pytest_argv(row, inputs))
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret == 4, output[-3000:]
    _error_line(output, row)
    assert "passed" not in output and "failed" not in output  # nothing ran
    assert sorted(pytester.path.iterdir()) == before


@pytest.mark.slow
@pytest.mark.parametrize("row", [r for r in _rows("pytest") if r.values[0].id in SUBPROCESS_PYTEST_ROWS])
def test_pytest_entry_process(row, inputs, tmp_path):
    proc = _run([sys.executable, "-m", "pytest", *_pytest_argv(row, inputs)], tmp_path)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 4, output[-3000:]
    _error_line(output, row)
    assert "passed" not in output and "failed" not in output  # nothing ran
    assert list(tmp_path.iterdir()) == []


def test_app_runs_a_config_the_spec_refuses(tmp_path, capsys, monkeypatch):
    """``python -m harness`` does not refuse what the spec refuses: the job runs, says so plainly, and
    the implementation's answer is the result (plan mode: ``rejected``, exit 0)."""
    monkeypatch.chdir(tmp_path)
    run_dir = tmp_path / "run"
    code, output = _harness_in_process(["mode=plan", "layerwise=s2", "cache.enable_xtensor=true",
                                        f"hydra.run.dir={run_dir}"], capsys)
    assert code == 0, output[-3000:]
    assert "error:" not in output
    assert "note: the spec refuses this configuration" in output and "xtensor" in output
    result = json.loads((run_dir / "result.json").read_text())
    assert result["status"] == "rejected" and "cache.enable_xtensor" in result["plan_error"]
    assert "xtensor" in result["spec_refuses"]


def test_spec_rejections_are_test_inputs(pytester, request):
    """Through pytest, a config the spec refuses (xtensor with split; llama3_8b does not support split) is
    what TC-01 checks the implementation refuses: the reference refuses it, so every case passes.

    pytest's main in-process, as in ``test_pytest_entry``; ``--lw-keep-pools`` hands the rank pools it
    uses to this worker's later tests instead of closing the worker's pools when it ends."""
    result = pytester.runpytest_inprocess(
        TC01, "--lw-override", "model=llama3_8b,deepseek_v32", "--lw-override", "layerwise=s2",
        "--lw-override", "parallel=tp4", "--lw-override", "implementation=reference",
        "--lw-override", "cache.enable_xtensor=true", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
        "-k", "not cp2 and not w8", "--lw-keep-pools",
        "--lw-max-live-ranks", str(request.config.getoption("lw_max_live_ranks")))
    output = "\n".join(result.outlines + result.errlines)
    assert result.ret == 0, output[-3000:]
    # llama3_8b: 1 case; deepseek_v32: the plain case, its cache variants (int8, int8kv, bounds, nspec,
    # slots0), the regrouped topology at w4 and the bi_v100 allocation (at w8 it is the same refusal on a
    # pool of 8 ranks); TC-01's own one-rule rejection cases are left out, since the override already
    # breaks a rule in each
    result.assert_outcomes(passed=9)


# ---- the other commands: one error: line and exit 2 for a bad argument, before any work -----------------


@dataclass(frozen=True)
class BadArg:
    """A bad argument to one of the other commands (``module``'s ``main``). ``guard`` names the function that
    starts the command's work: replaced by one that fails the test, so a check that comes too late (after the
    run) is caught at once. ``said`` must appear in the one error line."""

    id: str
    module: str
    argv: tuple[str, ...]
    said: str
    guard: Optional[str] = None


ARG_ROWS = (
    BadArg("report-result-null", "harness.reporting.report", ("--results", "{cli}/result_null"), "a JSON object"),
    BadArg("report-result-list", "harness.reporting.report", ("--results", "{cli}/result_list"), "a JSON object"),
    BadArg("report-labels-null", "harness.reporting.report", ("--results", "{cli}/labels_null"), "labels"),
    BadArg("report-details-string", "harness.reporting.report", ("--results", "{cli}/details_string"),
           "statusDetails"),
    BadArg("report-history-a-file", "harness.reporting.report",
           ("--results", "{cli}/good", "--history", "{cli}/a_file"), "--history", guard="prepare"),
    BadArg("report-bad-option", "harness.reporting.report", ("--bogus",), "--bogus", guard="generate"),
    BadArg("runner-overhead-world-0", "tools.bench.runner_overhead", ("--worlds", "0"), "--worlds",
           guard="machine_facts"),
    BadArg("runner-overhead-repeats-0", "tools.bench.runner_overhead", ("--fresh-repeats", "0"), "--fresh-repeats",
           guard="machine_facts"),
    BadArg("runner-overhead-json-unwritable", "tools.bench.runner_overhead", ("--json", f"{UNWRITABLE}/x.json"),
           "--json", guard="machine_facts"),
    BadArg("collectives-world-0", "tools.bench.collectives", ("--worlds", "0"), "--worlds", guard="measure"),
    BadArg("collectives-repeats-0", "tools.bench.collectives", ("--repeats", "0"), "--repeats", guard="measure"),
    BadArg("collectives-json-unwritable", "tools.bench.collectives", ("--json", f"{UNWRITABLE}/x.json"), "--json",
           guard="measure"),
    BadArg("faults-timeout-nan", "tools.bench.faults", ("--timeout", "nan"), "--timeout", guard="run_case"),
    BadArg("faults-timeout-negative", "tools.bench.faults", ("--timeout", "-1"), "--timeout", guard="run_case"),
    BadArg("faults-json-unwritable", "tools.bench.faults", ("--json", f"{UNWRITABLE}/x.json"), "--json",
           guard="run_case"),
    BadArg("planning-bad-option", "tools.bench.planning", ("--bogus",), "--bogus", guard="hybrid_run"),
    BadArg("planning-repeats-0", "tools.bench.planning", ("--repeats", "0"), "--repeats", guard="hybrid_run"),
    BadArg("test-groups-json-unwritable", "tools.bench.suite_cost", ("--json", f"{UNWRITABLE}/x.json"), "--json",
           guard="timed_run"),
    BadArg("explore-native-examples-0", "tools.bench.explore_native", ("--source", ".", "--examples", "0"),
           "--examples", guard="judge"),
    BadArg("explore-native-no-tree", "tools.bench.explore_native", ("--source", "/nonexistent/tree"), "--source",
           guard="judge"),
    BadArg("browser-timeout-nan", "tools.report_browser", ("--timeout", "nan"), "--timeout",
           guard="check_report"),
    BadArg("mutation-rows-truncated", "harness.mutation.__main__", ("--rows", "{cli}/rows_truncated", "--out", "out"),
           "--rows"),
    BadArg("mutation-rows-wrong-shape", "harness.mutation.__main__", ("--rows", "{cli}/rows_list", "--out", "out"),
           "--rows"),
    BadArg("mutation-bad-option", "harness.mutation.__main__", ("--bogus",), "--bogus"),
    BadArg("record-native-bad-option", "harness.baselines.record_native", ("--source", "{cli}/tree", "--bogus"), "--bogus",
           guard="record"),
    BadArg("record-native-out-a-folder", "harness.baselines.record_native",
           ("--source", "{cli}/tree", "--out", "{cli}"), "--out", guard="record"),
    BadArg("record-native-out-not-a-recording", "harness.baselines.record_native",
           ("--source", "{cli}/tree", "--out", "{cli}/a_file"), "or give --force", guard="record"),
    BadArg("record-native-no-tree", "harness.baselines.record_native",
           ("--source", "{cli}/no-such-tree", "--out", "new.json"), "implementation.source_dir", guard="record"),
    BadArg("record-native-version-not-utf8", "harness.baselines.record_native",
           ("--source", "{cli}/tree_gbk", "--out", "new.json"), "version.txt", guard="record"),
    BadArg("upstream-test-bad-option", "harness.own_tests",
           ("--source", "{cli}/tree", "--estimation-test", "--bogus"), "--bogus", guard="run_estimation_test"),
    BadArg("upstream-sources-bad-option", "harness.baselines.upstream_sources", ("--source", "{cli}/tree", "--bogus"),
           "--bogus", guard="record"),
    BadArg("upstream-sources-out-not-a-recording", "harness.baselines.upstream_sources",
           ("--source", "{cli}/tree", "--out", "{cli}/a_file"), "a recording this command wrote", guard="record"),
    BadArg("upstream-sources-not-upstream", "harness.baselines.upstream_sources",
           ("--source", "{cli}/tree", "--out", "new.json"), "manifest fixture_tree builds it", guard="record"),
    BadArg("record-native-not-upstream", "harness.baselines.record_native",
           ("--source", "{cli}/tree", "--out", "new.json"), "xllm/core/common/constants.h is not upstream 494f293b5's",
           guard="record"),
    BadArg("coverage-bad-option", "harness.coverage.__main__", ("fields", "--bogus"), "--bogus"),
    BadArg("coverage-unknown-what", "harness.coverage.__main__", ("nope",), "mutant-configs"),
)


@pytest.fixture(scope="module")
def cli_inputs(tmp_path_factory) -> Path:
    """Results folders of valid JSON in the wrong shape, a good one, a plain file, broken mutation rows, and a
    stand-in Allure CLI (writes an index.html into its -o folder)."""
    root = tmp_path_factory.mktemp("cli-inputs")
    for name, body in (("result_null", "null"), ("result_list", "[]"),
                       ("labels_null", '{"status": "failed", "labels": null}'),
                       ("details_string", '{"status": "failed", "statusDetails": "boom"}'),
                       ("good", '{"status": "passed", "labels": []}')):
        (root / name).mkdir()
        (root / name / "x-result.json").write_text(body)
    (root / "a_file").write_text("not a folder")
    for name, body in (("rows_truncated", '{"implementation": "reference", "cells": {'), ("rows_list", "[]")):
        (root / name).mkdir()
        (root / name / "reference.json").write_text(body)
    from testcases import ROOT

    for name, version in (("tree", None), ("tree_gbk", "\u7248\u672c 494f293b5\n".encode("gbk"))):
        shutil.copytree(ROOT / "testcases" / "native" / "fixture_tree", root / name)  # not a git checkout
        if version is not None:
            (root / name / "version.txt").write_bytes(version)
    cli = root / "allure"
    cli.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && out="$2"; shift; done\n'
                   'mkdir -p "$out" && echo report > "$out/index.html"\n')
    cli.chmod(0o755)
    return root


def _main_of(module: str):
    import importlib

    return importlib.import_module(module)


@pytest.mark.parametrize("row", [pytest.param(r, id=r.id) for r in ARG_ROWS])
def test_other_commands(row, cli_inputs, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    module = _main_of(row.module)
    if row.module == "harness.reporting.report":
        monkeypatch.setattr(module, "find_cli", lambda: cli_inputs / "allure")
        monkeypatch.setattr(module, "DEFAULT_OUT", tmp_path / "out")
    if row.guard:
        def started(*args, **kwargs):
            raise AssertionError(f"{row.module}.{row.guard} ran: the argument was not checked first")
        monkeypatch.setattr(module, row.guard, started)
    argv = [a.replace("{cli}", str(cli_inputs)) for a in row.argv]
    if row.module == "harness.reporting.report" and "--out" not in argv:
        argv += ["--out", str(tmp_path / "out")]
    if row.module == "harness.reporting.report" and "--history" not in argv:
        argv += ["--no-history"]  # never the checkout's reports/allure-history
    try:
        code = module.main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert "Traceback" not in out + err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and row.said in err, err
    assert out == ""
    assert list(tmp_path.iterdir()) == [], "a refused command must write nothing"


def test_commands_print_to_a_full_disk_as_one_error_line(capsys, monkeypatch, tmp_path):
    """Standard output that cannot be written (``> /dev/full``): one ``error:`` line on stderr, exit 1,
    in-process through ``harness.usage.command`` (a real process in test_signals_and_writes.py)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", FullStdout())
    with pytest.raises(SystemExit) as exit_info:
        plan_cli.main(["--table"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 1
    assert err == "error: cannot write to standard output: No space left on device\n"


def test_a_deleted_working_directory_is_said_plainly(tmp_path, capsys, monkeypatch):
    """The shell's folder was removed under it: the error says so instead of blaming the overrides."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    with pytest.raises(SystemExit) as exit_info:
        plan_cli.main(["model=deepseek_v32"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2
    assert err.startswith("error: the working directory no longer exists") and len(err.splitlines()) == 1, err


def test_a_relative_model_path_means_the_same_with_hydra_job_chdir(tmp_path, capsys, monkeypatch):
    """``hydra.job.chdir=true`` moves the job into its run folder; ``model_path=ck/config.json`` still names the
    file in the folder the command was started from."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.json").write_text(json.dumps({
        "model_type": "deepseek_v3", "num_hidden_layers": 3, "kv_lora_rank": 512, "qk_rope_head_dim": 64}))
    code, output = _harness_in_process(["mode=plan", "model_path=ck/config.json", "hydra.job.chdir=true",
                                        f"hydra.run.dir={tmp_path / 'run'}"], capsys)
    assert code == 0, output[-3000:]
    result = json.loads((tmp_path / "run" / "result.json").read_text())
    assert result["status"] == "planned" and result["config"]["model"] == "ck/config.json", result


def test_a_layer_kind_the_spec_only_guesses_is_warned_about(tmp_path, capsys, monkeypatch):
    """``layer_types`` values other than full attention are linear by the spec's rule; one no model uses that
    way (a typo, ``sliding_attention``) gets one ``warning:`` line, and the plan goes on."""
    monkeypatch.chdir(tmp_path)
    kinds = ["linear_attention", "sliding_attention", "linear_atention", "full_attention"] * 2
    (tmp_path / "config.json").write_text(json.dumps({
        "model_type": "qwen3_next", "num_hidden_layers": 8, "num_key_value_heads": 2, "head_dim": 256,
        "full_attention_interval": 4, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
        "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "layer_types": kinds}))
    assert plan_cli.main([f"model_path={tmp_path / 'config.json'}", "--table"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("warning: model.layer_types: 'linear_atention', 'sliding_attention'"), err
    assert "layer 1, 2, 5, 6" in err[0]


@pytest.mark.parametrize("subdir", ["${hydra.job.num}", "${hydra.job.override_dirname}", "job-${hydra.job.num}"])
def test_a_sweep_subdir_that_differs_per_job_passes_the_preflight(subdir, tmp_path):
    """The per-job check reads the subdir as given (Hydra's string form escapes ``${``)."""
    from harness.app.validate import check_results_dir

    sweep = tmp_path / "sweep"
    assert check_results_dir(["mode=plan"], [f"hydra.sweep.dir={sweep}", f"hydra.sweep.subdir={subdir}"],
                             multirun=True, n_jobs=2) == sweep
    assert not any(sweep.rglob("*"))  # the check leaves no file or job folder behind


def test_a_command_started_with_stdout_closed_says_so(capsys, monkeypatch, tmp_path):
    """``python -m harness.plan >&-`` (Python then sets ``sys.stdout`` to None): one error line, exit 1."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "stdout", None)
    with pytest.raises(SystemExit) as exit_info:
        plan_cli.main(["--table"])
    assert exit_info.value.code == 1
    assert capsys.readouterr().err == "error: cannot write to standard output: it is closed\n"


def test_ctrl_c_in_a_command_without_a_handler_is_one_line(capsys):
    """Ctrl-C in ``harness.mutation`` or a benchmark (no handler of their own): one line and exit 130, not a
    KeyboardInterrupt traceback."""
    from harness.usage import command

    @command
    def main() -> int:
        raise KeyboardInterrupt

    with pytest.raises(SystemExit) as exit_info:
        main()
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == "error: interrupted (SIGINT); what was under way did not finish\n"


def test_ctrl_c_in_coverage_is_one_line_and_writes_nothing(capsys, monkeypatch, tmp_path):
    """Ctrl-C while ``python -m harness.coverage fields`` searches: one line, exit 130, no record written."""
    from harness.coverage import __main__ as coverage_cli
    from harness.coverage import fields

    monkeypatch.chdir(tmp_path)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fields, "load", interrupted)
    monkeypatch.setattr(fields, "RECORD", tmp_path / "field_catches.json")
    with pytest.raises(SystemExit) as exit_info:
        coverage_cli.main(["fields"])
    assert exit_info.value.code == 130
    assert capsys.readouterr().err == "error: interrupted (SIGINT); what was under way did not finish\n"
    assert list(tmp_path.iterdir()) == []


def test_a_signal_waits_for_files_that_belong_together():
    """``signals_deferred``: Ctrl-C during the block is acted on when it ends, never between its writes."""
    import signal

    from harness.signals import signals_deferred

    done = []
    with pytest.raises(KeyboardInterrupt):
        with signals_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            done.append("first")
            done.append("second")
    assert done == ["first", "second"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_record_native_overwrites_only_its_own_recordings(tmp_path):
    """``--out``: a new file, or a recording whose provenance names the command; another file only with --force
    (and left as it is without)."""
    from contract.errors import ConfigError
    from harness.baselines.record_native import COMMAND, check_out

    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"provenance": {"command": f"{COMMAND} --source /x"}, "results": []}))
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    check_out(tmp_path / "new.json", force=False)
    check_out(earlier, force=False)
    check_out(notes, force=True)
    with pytest.raises(ConfigError, match="--force"):
        check_out(notes, force=False)
    assert notes.read_text() == "my notes\n"


@pytest.mark.parametrize("value", ["model=\x1b[31mred", "layerwise.split_size=2\r"], ids=["escape", "carriage-return"])
def test_control_characters_of_an_override_are_shown_escaped(value, capsys, tmp_path, monkeypatch):
    """What a terminal acts on (an escape sequence, a carriage return) is echoed as its escape, in every
    part of the error line (Hydra's own detail quotes the character it stopped at)."""
    from harness.app.main import main as harness_main

    monkeypatch.chdir(tmp_path)
    errors = []
    for main in (plan_cli.main, harness_main):
        with pytest.raises(SystemExit):
            main([value])
        errors.append(capsys.readouterr().err)
    for err in errors:
        assert err.startswith("error: ") and err.count("\n") == 1, err
        assert not any(ch in err[:-1] for ch in "\x1b\r"), repr(err)
        assert "\\x1b" in err or "\\r" in err, repr(err)
    assert list(tmp_path.iterdir()) == []
