"""``python -m harness.plan``: the JSON a user reads before touching hardware, and one-line errors.

Expected numbers are FEATURE.md section 6's worked example (DeepSeek-V3.2, bf16,
block 128, 16 GiB available): one layer 180,224 B/block; 1562 blocks uniform,
2978 at s = 2, 5607 at s = 4. Subprocess tests are few (each starts Python).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from contract.units import GIB
from harness import plan as plan_cli

pytestmark = pytest.mark.unit

PLAN_KEYS = (
    "model", "implementation", "world_size", "attn_tp_size", "split_size", "active", "block_size",
    "available_bytes", "full_layers", "layer_bytes_per_block", "n_blocks", "uniform_n_blocks", "peak_bytes",
    "uniform_peak_bytes", "capacity_gain", "ranks",
)
RANK_KEYS = ("rank", "split_group", "split_rank", "owned_full_layers", "estimated_bytes")
WORKED = ["model=deepseek_v32", "hardware=bi_v100", "parallel=tp4"]


def _run(args, cwd):
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "harness.plan", *args],
        capture_output=True, text=True, cwd=cwd, timeout=120,
    )


def test_worked_example_json_without_torch(tmp_path):
    proc = _run([*WORKED, "layerwise=s2"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout)
    assert set(PLAN_KEYS) <= set(out)
    assert all(set(RANK_KEYS) <= set(r) for r in out["ranks"])
    assert (out["model"], out["implementation"], out["world_size"], out["attn_tp_size"]) == (
        "deepseek_v32", "reference", 4, 4)
    assert (out["split_size"], out["active"], out["block_size"]) == (2, True, 128)
    assert out["available_bytes"] == 16 * GIB
    assert out["layer_bytes_per_block"] == [180_224] * 61
    assert out["full_layers"] == list(range(61))
    assert (out["n_blocks"], out["uniform_n_blocks"]) == (2978, 1562)
    assert out["capacity_gain"] == pytest.approx(2978 / 1562)
    # s = 2 on tp 4: groups {0,1}, {2,3}; round-robin -> split rank 0 owns the 31 even layers
    by_rank = {r["rank"]: r for r in out["ranks"]}
    assert by_rank[0]["owned_full_layers"] == list(range(0, 61, 2))
    assert by_rank[1]["owned_full_layers"] == list(range(1, 61, 2))
    assert out["peak_bytes"] == 2978 * 180_224 * 32  # 31 owned + scratch (FEATURE section 6)
    assert out["uniform_peak_bytes"] == 2978 * 180_224 * 61
    imported = [line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time")]
    assert "hydra" in imported  # the importtime listing is really there
    assert not [m for m in imported if m.split(".")[0] == "torch"]
    assert list(tmp_path.iterdir()) == []  # nothing written (no Hydra outputs/ dir)


BAD_INPUT = [
    (["model=nosuch"], "model='nosuch': unknown option; allowed: deepseek_v3,"),
    (["layerwise.spilt_size=2"], "layerwise.spilt_size: no such key"),
    (["layerwise.split_size=two"], "layerwise.split_size='two': must be an int"),
    ([*WORKED, "layerwise.enable=true", "layerwise.split_size=3"], "layerwise.split_size=3"),
]


def test_bad_input_process_exits_2_with_one_line(tmp_path):
    """One real process (the rest below run main in-process): exit 2, one line, no traceback, nothing written."""
    args, expected = BAD_INPUT[-1]
    proc = _run(args, tmp_path)
    assert proc.returncode == 2
    assert proc.stdout == ""
    errors = [line for line in proc.stderr.splitlines() if not line.startswith("import time")]
    assert errors == [errors[0]] and errors[0].startswith("error: ")
    assert expected in errors[0]
    assert "Traceback" not in proc.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, expected", BAD_INPUT)
def test_bad_input_exits_2_with_one_line(tmp_path, monkeypatch, capsys, args, expected):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        plan_cli.main(args)
    out, err = capsys.readouterr()
    assert info.value.code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert expected in err
    assert "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


# In-process from here: the same main(), without the cost of a new interpreter.


def _main_json(capsys, args) -> dict:
    assert plan_cli.main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_split_4_worked_example(capsys):
    out = _main_json(capsys, [*WORKED, "layerwise=s4"])
    assert (out["n_blocks"], out["uniform_n_blocks"]) == (5607, 1562)


def test_gflags_and_parallel_config_equal_the_overrides(capsys, tmp_path):
    via_overrides = _main_json(capsys, [*WORKED, "layerwise.enable=true", "layerwise.split_size=2"])
    via_gflags = _main_json(capsys, ["--gflags", "--enable_layerwise_split=true --layerwise_split_size=2", *WORKED])
    pc = tmp_path / "parallel_config.json"
    pc.write_text('{"layerwise_split_size": 2}')
    # a ParallelConfig carries only the size: on under upstream semantics (off under the adaptation's)
    via_json = _main_json(capsys, ["--semantics", "upstream", "--parallel-config", str(pc), *WORKED])
    assert via_overrides["n_blocks"] == 2978
    assert via_gflags["digest"] == via_overrides["digest"] == via_json["digest"]


def test_table(capsys):
    assert plan_cli.main(["--table", "model=qwen3_5_moe", "hardware=bi_v100", "layerwise=s2"]) == 0
    text = capsys.readouterr().out
    assert "model qwen3_5_moe" in text and "capacity gain" in text and "peak" in text
    # Qwen3.5 full layers 3, 7, ..., 39; round-robin at s = 2: split rank 0 gets 3, 11, ..., 35
    assert "3,11,19,...,35" in text and "7,15,23,...,39" in text


def test_options_may_come_anywhere_among_the_overrides(capsys):
    """``model=x --table layerwise=s2``: every override is read, whichever side of an option it is on."""
    assert plan_cli.main(["--table", "model=qwen3_5_moe", "hardware=bi_v100", "layerwise=s2"]) == 0
    first = capsys.readouterr().out
    assert plan_cli.main(["model=qwen3_5_moe", "--table", "hardware=bi_v100", "--semantics", "adaptation",
                          "layerwise=s2"]) == 0
    assert capsys.readouterr().out == first


def test_compact_ids():
    assert plan_cli.compact_ids([]) == "-"
    assert plan_cli.compact_ids([1, 5]) == "1,5"
    assert plan_cli.compact_ids(list(range(0, 61, 2))) == "0,2,4,...,60"
    assert plan_cli.compact_ids([0, 1, 2, 4, 8]) == "0,1,2,4,8"


@pytest.mark.parametrize("args, expected", [
    (["--gflags", "--layerwise_split_size=x"], "--layerwise_split_size='x'"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--parallel-config", "/nonexistent/pc.json"], "--parallel-config='/nonexistent/pc.json'"),
    (["model=llama3_8b", "layerwise=s2"], "supports layerwise split"),
    (["hardware.topology=/nonexistent/topo.txt"], "hardware.topology="),
    (["implementation._target_=nowhere.Impl"], "implementation='nowhere.Impl'"),
])
def test_bad_input_in_process(capsys, args, expected):
    with pytest.raises(SystemExit) as info:
        plan_cli.main(args)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: ")
    assert expected in captured.err


def test_parallel_config_layout_keys_are_planned(capsys, tmp_path):
    """world_size / dp_size / tp_size of a ParallelConfig are the plan's layout, not dropped."""
    pc = tmp_path / "parallel_config.json"
    pc.write_text('{"world_size": 8, "dp_size": 2, "tp_size": 4}')
    out = _main_json(capsys, ["--parallel-config", str(pc), *WORKED])
    assert (out["world_size"], out["dp_size"], out["attn_tp_size"]) == (8, 2, 4)
