"""``python -m harness.conformance``: an engine log in upstream's exact format, against the spec.

The log lines are written out by hand in the format ``llm_engine.cpp`` prints at upstream
494f293b5 (``estimate_kv_cache_capacity`` and ``allocate_kv_cache``), behind a glog
prefix; the expected figures beside them are worked out by hand from FEATURE.md.
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.conformance import check, parse_log_text, readable_size, size_interval
from harness.conformance.__main__ import main
from testcases import ROOT

pytestmark = pytest.mark.unit

PREFIX = "I1130 19:00:00.000001  4242 llm_engine.cpp:{line}] "
WORKER = (PREFIX.format(line=482) + "worker #{i}: available memory: 128.00 MB, total memory: 512.00 MB. "
          "Using max_memory_utilization: 1, max_cache_size: 0.00 B")


def capacity_line(size="128.00 MB", blocks=23, slot_size=1152, index_slot_size=256, indexer_layers=61,
                  scale_slot_size=0, linear_slot_size=0, linear_blocks=2, linear_state_slots=0,
                  max_linear_state_cache_slots=0, reserved="0.00 B", n_layers=61, kv_cache_dtype="auto"):
    return (PREFIX.format(line=554) + f"kv cache capacity: {size}, blocks: {blocks}, slot_size: {slot_size}, "
            f"index_slot_size: {index_slot_size}, indexer_layers: {indexer_layers}, "
            f"scale_slot_size: {scale_slot_size}, linear_slot_size: {linear_slot_size}, "
            f"linear_blocks: {linear_blocks}, linear_state_slots: {linear_state_slots}, "
            f"max_linear_state_cache_slots: {max_linear_state_cache_slots}, "
            f"reserved_linear_bytes: {reserved}, n_layers: {n_layers}, kv_cache_dtype: {kv_cache_dtype}")


def write_log(tmp_path, *lines) -> str:
    path = tmp_path / "xllm.INFO"
    path.write_text("Log file created at: 2026/11/30 19:00:00\n" + "\n".join(lines) + "\n")
    return str(path)


# DeepSeek-V3.2 on the CPU profile (128 MiB per rank), tp 4, s = 2: one layer is
# (1152 + 256) * 128 = 180,224 B/block; split rank 0 owns 31 layers + scratch = 32:
# 134,217,728 // 5,767,168 = 23 blocks. No linear layers: 2 padding slots, 0 bytes.
DSV32 = ["model=deepseek_v32", "parallel=tp4", "layerwise=s2"]


def run_main(argv, capsys):
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_matching_run_agrees(tmp_path, capsys):
    log = write_log(tmp_path, *(WORKER.format(i=i) for i in range(4)), capacity_line())
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0, out + err
    assert "result: agree" in out and "DISAGREE" not in out
    assert "blocks" in out and "23" in out


def test_wrong_block_count_disagrees(tmp_path, capsys):
    log = write_log(tmp_path, WORKER.format(i=0), capacity_line(blocks=24))
    code, out, _ = run_main([log, *DSV32], capsys)
    assert code == 1
    assert "result: DISAGREE on target.blocks" in out


def test_wrong_slot_size_disagrees(tmp_path, capsys):
    # 1408 = slot + index folded together: the engine must print the KV slot alone
    log = write_log(tmp_path, WORKER.format(i=0), capacity_line(slot_size=1408))
    code, out, _ = run_main([log, *DSV32], capsys)
    assert code == 1
    assert "result: DISAGREE on target.slot_size" in out


def test_truncated_log_is_one_error_line(tmp_path):
    full = capacity_line()
    log = write_log(tmp_path, WORKER.format(i=0), full[: full.index("index_slot_size") + 5])
    out = subprocess.run([sys.executable, "-m", "harness.conformance", log, *DSV32], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "truncated" in lines[0], out.stderr
    assert "Traceback" not in out.stderr


def test_log_without_capacity_line_or_missing_file(tmp_path, capsys):
    log = write_log(tmp_path, WORKER.format(i=0))
    code, _, err = run_main([log, *DSV32], capsys)
    assert code == 2 and err.startswith("error: ") and "kv cache capacity" in err
    code, _, err = run_main([str(tmp_path / "nope.log"), *DSV32], capsys)
    assert code == 2 and err.startswith("error: cannot read log")


def test_hybrid_model_linear_state_figures(tmp_path, capsys):
    # Qwen3.5-35B-A3B tp 4, s = 2, prefix cache on (upstream's default), C = 128 MiB:
    # ls = 274,432 B; L = 30; slots = int(C * 0.9 / 1.9 / 8,232,960) = 7 (cap 14);
    # reserved 30 * 7 * 274,432 = 57,630,720 B = 54.96 MB; full slot 2 * 2 * 256 * 1 = 1024;
    # 5 owned + scratch = 786,432 B/block: (C - 57,630,720) // 786,432 = 97 blocks.
    line = capacity_line(blocks=97, slot_size=1024, index_slot_size=0, indexer_layers=0,
                         linear_slot_size=274432, linear_blocks=7, linear_state_slots=7,
                         reserved="54.96 MB", n_layers=40)
    log = write_log(tmp_path, WORKER.format(i=0), line)
    code, out, err = run_main([log, "model=qwen3_5_moe", "parallel=tp4", "layerwise=s2"], capsys)
    assert code == 0, out + err
    # upstream's owner rule (layer_id % 2) gives 53 blocks here: the spec disagrees
    log = write_log(tmp_path, WORKER.format(i=0), capacity_line(
        blocks=53, slot_size=1024, index_slot_size=0, indexer_layers=0, linear_slot_size=274432,
        linear_blocks=7, linear_state_slots=7, reserved="54.96 MB", n_layers=40))
    code, out, _ = run_main([log, "model=qwen3_5_moe", "parallel=tp4", "layerwise=s2"], capsys)
    assert code == 1 and "result: DISAGREE on target.blocks" in out


def test_speculative_target_and_draft_lines(tmp_path, capsys):
    # DeepSeek-V3 (slot 1152) + 1-layer MTP draft charged at the target slot:
    # D = 128 * 1152 = 147,456; s = 2: (31 + 1 scratch + 1 draft) * 147,456 = 4,866,048
    # -> 134,217,728 // 4,866,048 = 27 blocks for both engines.
    target = capacity_line(blocks=27, index_slot_size=0, indexer_layers=0)
    draft = capacity_line(blocks=27, index_slot_size=0, indexer_layers=0, n_layers=1)
    log = write_log(tmp_path, WORKER.format(i=0), WORKER.format(i=0), target, draft)
    argv = [log, "model=deepseek_v3", "draft=deepseek_mtp", "parallel=tp4", "layerwise=s2"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, out + err
    assert "draft    n_layers" in out
    # the target line alone is a truncated speculative log
    code, _, err = run_main([write_log(tmp_path, target), *argv[1:]], capsys)
    assert code == 2 and "truncated" in err


def test_budget_given_exactly_is_checked_against_the_printed_size():
    log = parse_log_text(capacity_line(), "x.log")
    from testcases.unit._models import DEEPSEEK_V32, MiB, run_spec

    run = run_spec(DEEPSEEK_V32, split=2, budget_bytes=1 << 40)
    inside = SimpleNamespace(**{**vars(run), "cache": SimpleNamespace(**{**vars(run.cache), "kv_budget_bytes": 128 * MiB})})
    figures = {(f.engine, f.name): f for f in check(inside, log)}
    assert figures[("target", "cache_size")].agree is True
    assert figures[("target", "blocks")].agree is True
    outside = SimpleNamespace(**{**vars(run), "cache": SimpleNamespace(**{**vars(run.cache), "kv_budget_bytes": 130 * MiB})})
    figures = {(f.engine, f.name): f for f in check(outside, log)}
    assert figures[("target", "cache_size")].agree is False


@pytest.mark.parametrize(
    ("n_bytes", "text"),
    [(0, "0.00 B"), (1023, "1023.00 B"), (1024, "1.00 KB"), (134_217_728, "128.00 MB"),
     (57_630_720, "54.96 MB"), (17_179_869_184, "16.00 GB"), (1_048_575, "1024.00 KB")],
)
def test_readable_size_and_its_interval(n_bytes, text):
    assert readable_size(n_bytes) == text
    number, suffix = text.split()
    interval = size_interval(number, suffix)
    assert interval.contains(n_bytes)
    # the interval's ends print the same way, and one byte beyond does not
    assert readable_size(interval.lo) == text and readable_size(interval.hi) == text
    if interval.lo > 0:
        assert readable_size(interval.lo - 1) != text
    assert readable_size(interval.hi + 1) != text


def test_gflags_spelling_of_the_split(tmp_path, capsys):
    log = write_log(tmp_path, WORKER.format(i=0), capacity_line())
    argv = [log, "--gflags", "--enable_layerwise_split=true --layerwise_split_size=2", "model=deepseek_v32"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, out + err
    assert "layerwise.enable=true layerwise.split_size=2" in out
    code, _, err = run_main([log, "--gflags", "--enable_layerwise_split=maybe", "model=deepseek_v32"], capsys)
    assert code == 2 and err.startswith("error: --gflags:")


def test_a_fifo_or_a_directory_is_refused_unread(tmp_path):
    """A log that is not a regular file is one error, not a hang (a FIFO) or a read of a device."""
    import os

    from harness.conformance.log import LogError, read_log

    fifo = tmp_path / "xllm.INFO"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(LogError, match="not a regular file"):
            read_log(str(path))


def test_an_over_long_line_is_cut_not_held(tmp_path):
    """A line longer than the reader keeps is cut, and the lines after it are still read."""
    from harness.conformance.log import MAX_LINE_CHARS, read_log

    path = tmp_path / "xllm.INFO"
    path.write_text("x" * (3 * MAX_LINE_CHARS + 7) + "\n" + WORKER.format(i=0) + "\n" + capacity_line() + "\n")
    log = read_log(str(path))
    assert len(log.workers) == 1 and log.capacities[0].line_no == 3
