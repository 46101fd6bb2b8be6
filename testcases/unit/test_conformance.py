"""``python -m harness.conformance``: engine logs in upstream's exact formats, against the spec.

Every log line is written by hand from the format string upstream 494f293b5 prints it with
(each helper names the file and line), behind a glog prefix; the expected figures beside them
are worked out by hand from FEATURE.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from harness.conformance import check, parse_log_text, readable_size, size_interval
from harness.conformance.__main__ import main
from testcases import ROOT, shared_dir

pytestmark = pytest.mark.unit


def glog(source: str, message: str, severity: str = "I", year: bool = False) -> str:
    """glog's prefix ``Lmmdd hh:mm:ss.uuuuuu tid file:line] `` (``log_year_in_prefix``: ``L2026mmdd``)."""
    return f"{severity}{'2026' if year else ''}1130 19:00:00.000001  4242 {source}] {message}"


# llm_engine.cpp:482 (estimate_kv_cache_capacity), one line per worker
WORKER = glog("llm_engine.cpp:482", "worker #{i}: available memory: 128.00 MB, total memory: 512.00 MB. "
              "Using max_memory_utilization: 1, max_cache_size: 0.00 B")
WORKERS4 = [WORKER.format(i=i) for i in range(4)]
# vlm_engine.cpp:233: the VLM engine's worker line adds the encoder cache reserve, which it subtracts
VLM_WORKER = glog("vlm_engine.cpp:233", "worker #{i}: available memory: 192.00 MB, total memory: 512.00 MB. "
                  "Using max_memory_utilization: 1, max_cache_size: 0.00 B, encoder_cache_reserved: 64.00 MB")
# llm_engine.cpp:273 (init_model)
BLOCK_INFO = glog("llm_engine.cpp:273", "Block info, block_size: {bs}, n_local_kv_heads: 32, head_dim: 192, "
                  "n_layers: 61, dtype: BFloat16, kv_cache_dtype: auto")
# llm_engine.cpp:202 (init)
SUCCESS = glog("llm_engine.cpp:202", "Successfully initialized kv cache")


def shape(cache: str, dims, line: int) -> str:
    """kv_cache_shape.cpp:184-205 (print_shapes): glog prints a std::vector space separated."""
    return glog(f"kv_cache_shape.cpp:{line}", f"Initializing {cache} cache with shape: [{' '.join(map(str, dims))}]")


def capacity_line(size="128.00 MB", blocks=23, slot_size=1152, index_slot_size=256, indexer_layers=61,
                  scale_slot_size=0, linear_slot_size=0, linear_blocks=2, linear_state_slots=0,
                  max_linear_state_cache_slots=0, reserved="0.00 B", n_layers=61, kv_cache_dtype="auto",
                  source="llm_engine.cpp:554"):
    """llm_engine.cpp:554 / vlm_engine.cpp:292 (allocate_kv_cache): the 12-key line."""
    return glog(source, f"kv cache capacity: {size}, blocks: {blocks}, slot_size: {slot_size}, "
                f"index_slot_size: {index_slot_size}, indexer_layers: {indexer_layers}, "
                f"scale_slot_size: {scale_slot_size}, linear_slot_size: {linear_slot_size}, "
                f"linear_blocks: {linear_blocks}, linear_state_slots: {linear_state_slots}, "
                f"max_linear_state_cache_slots: {max_linear_state_cache_slots}, "
                f"reserved_linear_bytes: {reserved}, n_layers: {n_layers}, kv_cache_dtype: {kv_cache_dtype}")


def released_line(blocks=23, dtype: bool = True) -> str:
    """Released v0.9.x builds print llm_engine.cpp:554's line with only these keys (the older ones
    without kv_cache_dtype); the 12-key line came after v0.10.1 (whose line has 10 keys)."""
    return glog("llm_engine.cpp:554", f"kv cache capacity: 128.00 MB, blocks: {blocks}, slot_size: 1152, n_layers: 61"
                + (", kv_cache_dtype: auto" if dtype else ""))


def write_log(tmp_path, *lines, name="xllm.INFO") -> str:
    path = tmp_path / name
    path.write_text("Log file created at: 2026/11/30 19:00:00\n" + "\n".join(lines) + "\n")
    return str(path)


# DeepSeek-V3.2 on the CPU profile (128 MiB per rank, heads-major), tp 4, s = 2: one layer is
# (1152 + 256) * 128 = 180,224 B/block; split rank 0 owns 31 layers + scratch = 32:
# 134,217,728 // 5,767,168 = 23 blocks. No linear layers: 2 padding slots, 0 bytes.
DSV32 = ["model=deepseek_v32", "parallel=tp4", "layerwise=s2"]
DSV32_SHAPES = [shape("k", (23, 1, 128, 512), 184), shape("v", (23, 1, 128, 64), 188),
                shape("indexer", (23, 1, 128, 128), 192)]
# Section 3 refusals as upstream prints them: glog's CHECK text is "Check failed: <condition> <message>"
XTENSOR = "Check failed: layer_cache_owned.empty() XTensor does not support layerwise split."  # kv_cache.cpp:389
SPLIT_TP = ("Check failed: attn_tp_size % layerwise_split_size == 0 (1 vs. 0) attention tp size (4) must be "
            "divisible by layerwise_split_size (3).")  # layerwise_split_layout.h:45
MODEL_TYPE = ("Check failed: is_layerwise_split_supported_model(model_type) layerwise_split_size > 1 is only "
              "supported for deepseek_v32 and glm_moe_dsa, got deepseek_v3")  # layerwise_split_layout.h:41


def _run(entry, argv, capsys):
    try:
        code = entry(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def run_main(argv, capsys):
    return _run(main, argv, capsys)



def one_error(code, out, err, *needles):
    assert code == 2, out + err
    assert out == "" and err.startswith("error: ") and err.count("\n") == 1, out + err
    for needle in needles:
        assert needle in err, err


# ---- figures of a started engine ---------------------------------------------------------------


def test_matching_run_agrees_on_every_line(tmp_path, capsys):
    log = write_log(tmp_path, BLOCK_INFO.format(bs=128), *WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS)
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0, out + err
    assert "result: agree" in out and "DISAGREE" not in out
    for name in ("worker ids", "Block info block_size", "k cache shape", "indexer cache shape", "blocks"):
        assert name in out
    assert "note: adaptation semantics: split on" in out


@pytest.mark.parametrize("broken, figure", [
    (dict(blocks=24), "target.blocks"),
    (dict(slot_size=1408), "target.slot_size"),  # slot + index folded together
])
def test_a_wrong_capacity_figure_disagrees(tmp_path, capsys, broken, figure):
    log = write_log(tmp_path, *WORKERS4, capacity_line(**broken))
    code, out, _ = run_main([log, *DSV32], capsys)
    assert code == 1 and f"result: DISAGREE on {figure}" in out


def test_block_info_and_shapes_are_cross_checked(tmp_path, capsys):
    log = write_log(tmp_path, BLOCK_INFO.format(bs=64), *WORKERS4, capacity_line(), *DSV32_SHAPES)
    code, out, _ = run_main([log, *DSV32], capsys)
    assert code == 1 and "result: DISAGREE on target.Block info block_size" in out
    wrong_dim0 = [shape("k", (24, 1, 128, 512), 184), *DSV32_SHAPES[1:]]
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4, capacity_line(), *wrong_dim0), *DSV32], capsys)
    assert code == 1 and "result: DISAGREE on target.k cache shape" in out
    no_indexer = [*DSV32_SHAPES[:2], SUCCESS]  # the engine went on: print_shapes had finished
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4, capacity_line(), *no_indexer), *DSV32], capsys)
    assert code == 1 and "target.index cache shape" in out and "not printed" in out


@pytest.mark.parametrize("dtype", [True, False], ids=["5-key", "4-key"])
def test_released_capacity_lines_are_complete_logs(tmp_path, capsys, dtype):
    log = write_log(tmp_path, *WORKERS4, released_line(dtype=dtype))
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0, out + err
    assert "released" in out and "not in this line" in out and "index_slot_size" in out
    assert "truncated" not in out + err
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4, released_line(blocks=22, dtype=dtype)), *DSV32], capsys)
    assert code == 1 and "result: DISAGREE on target.blocks" in out


def test_a_capacity_line_of_no_known_format_names_what_it_lacks(tmp_path, capsys):
    full = capacity_line()
    cut = full[: full.index(", scale_slot_size")]
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, cut), *DSV32], capsys)
    one_error(code, out, err, "lacks scale_slot_size", "released 5-key")
    assert "truncated" not in err
    # the same text as the file's last bytes, without an end of line: a cut log, and it says so
    path = tmp_path / "cut.INFO"
    path.write_text("\n".join([*WORKERS4, cut]))
    code, out, err = run_main([str(path), *DSV32], capsys)
    one_error(code, out, err, "cut", "ends mid-line")


def test_hybrid_model_through_the_vlm_engine(tmp_path, capsys):
    # Qwen3.5-35B-A3B tp 4, s = 2, prefix cache on (upstream's default); the VLM workers see 192 MiB
    # and reserve 64 MiB for the encoder cache: C = 128 MiB. ls = 274,432 B; L = 30;
    # slots = int(C * 0.9 / 1.9 / 8,232,960) = 7 (cap 14); reserved 30 * 7 * 274,432 = 57,630,720 B
    # = 54.96 MB; full slot 2 * 2 * 256 * 1 = 1024; 5 owned + scratch = 786,432 B/block:
    # (C - 57,630,720) // 786,432 = 97 blocks.
    args = dict(slot_size=1024, index_slot_size=0, indexer_layers=0, linear_slot_size=274432, linear_blocks=7,
                linear_state_slots=7, reserved="54.96 MB", n_layers=40, source="vlm_engine.cpp:292")
    workers = [VLM_WORKER.format(i=i) for i in range(4)]
    # conv [7, 3, 128 * 4 * 2 + 128 * 8] and ssm [7, 8, 128, 128] (kv_cache_shape.cpp:200, 204)
    shapes = [shape("k", (97, 1, 128, 256), 184), shape("v", (97, 1, 128, 256), 188),
              shape("conv", (7, 3, 2048), 200), shape("ssm", (7, 8, 128, 128), 204)]
    # vlm_engine.cpp:162: the VLM engine's Block info has no kv_cache_dtype; 2 KV heads on tp 4 -> 1 per rank
    info = glog("vlm_engine.cpp:162", "Block info, block_size: 128, n_local_kv_heads: 1, head_dim: 256, "
                "n_layers: 40, dtype: BFloat16")
    qwen = ["model=qwen3_5_moe", "parallel=tp4", "layerwise=s2"]
    code, out, err = run_main([write_log(tmp_path, info, *workers, capacity_line(blocks=97, **args), *shapes), *qwen],
                              capsys)
    assert code == 0, out + err
    assert "less encoder_cache_reserved" in out and "Block info n_local_kv_heads" in out
    code, out, _ = run_main([write_log(tmp_path, info.replace("kv_heads: 1", "kv_heads: 2"), *workers,
                                       capacity_line(blocks=97, **args)), *qwen], capsys)
    assert code == 1 and "result: DISAGREE on target.Block info n_local_kv_heads" in out
    # the LLM engine's line for the same memory leaves the reserve in: the workers' C is 64 MiB too high
    llm = [w.replace(", encoder_cache_reserved: 64.00 MB", "") for w in workers]
    code, out, _ = run_main([write_log(tmp_path, *llm, capacity_line(blocks=97, **args)), *qwen], capsys)
    assert code == 1 and "result: DISAGREE on workers.cache_size" in out
    # upstream's owner rule (layer_id % 2) gives 53 blocks here: the spec disagrees
    code, out, _ = run_main([write_log(tmp_path, *workers, capacity_line(blocks=53, **args)), *qwen], capsys)
    assert code == 1 and "result: DISAGREE on target.blocks" in out


def test_speculative_target_and_draft_lines(tmp_path, capsys):
    # DeepSeek-V3 (slot 1152) + 1-layer MTP draft charged at the target slot:
    # D = 128 * 1152 = 147,456; s = 2: (31 + 1 scratch + 1 draft) * 147,456 = 4,866,048
    # -> 134,217,728 // 4,866,048 = 27 blocks for both engines.
    target = capacity_line(blocks=27, index_slot_size=0, indexer_layers=0)
    draft = capacity_line(blocks=27, index_slot_size=0, indexer_layers=0, n_layers=1)
    log = write_log(tmp_path, *WORKERS4, *WORKERS4, target, draft)
    argv = [log, "model=deepseek_v3", "draft=deepseek_mtp", "parallel=tp4", "layerwise=s2"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, out + err
    assert "draft    n_layers" in out
    # the target line alone, no refusal: the log ends before the draft's line
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, *WORKERS4, target), *argv[1:]], capsys)
    one_error(code, out, err, "ends before the draft")


def test_budget_given_exactly_is_checked_against_the_printed_size():
    log = parse_log_text(capacity_line() + "\n", "x.log")
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


# ---- refusals ------------------------------------------------------------------------------------


@pytest.mark.parametrize("year", [True, False], ids=["F2026mmdd", "Fmmdd"])
def test_a_refusal_for_the_rule_the_spec_names_agrees(tmp_path, capsys, year):
    fatal = glog("kv_cache.cpp:389", XTENSOR, "F", year)
    log = write_log(tmp_path, *WORKERS4, capacity_line(), fatal, "*** Check failure stack trace: ***")
    code, out, err = run_main([log, *DSV32, "cache.enable_xtensor=true"], capsys)
    assert code == 0, out + err
    assert "startup refusal" in out and "cache.enable_xtensor" in out and "result: agree" in out


def test_refusals_that_disagree(tmp_path, capsys):
    xtensor = glog("kv_cache.cpp:389", XTENSOR, "F")
    # refused, but the spec accepts (no xtensor in the config)
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4, capacity_line(), xtensor), *DSV32], capsys)
    assert code == 1 and "starts (the spec refuses nothing here)" in out
    # started, but the spec refuses
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4, capacity_line()), *DSV32, "cache.enable_xtensor=true"],
                            capsys)
    assert code == 1 and "started" in out and "refused: cache.enable_xtensor" in out
    # refused for another rule
    split = glog("layerwise_split_layout.h:45", SPLIT_TP, "F")
    code, out, _ = run_main([write_log(tmp_path, split), *DSV32, "cache.enable_xtensor=true"], capsys)
    assert code == 1 and "layerwise.split_size (layerwise_split_layout.h:45)" in out


@pytest.mark.parametrize("source, message", [
    ("llm_engine.cpp:199", "Failed to initialize kv cache"),  # LOG(ERROR), then LLMEngine::init returns false
    ("vlm_engine.cpp:124", "Failed to allocate kv cache"),  # the VLM engine's words for the same
])
def test_an_allocation_failure_without_a_check_is_no_start(tmp_path, capsys, source, message):
    failed = glog(source, message, "E")
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4, capacity_line(), failed), *DSV32], capsys)
    assert code == 1 and source in out and "starts (the spec refuses nothing here)" in out


def test_a_worker_side_refusal_in_another_log(tmp_path, capsys):
    master = write_log(tmp_path, *WORKERS4, capacity_line(), name="master.INFO")
    worker = write_log(tmp_path, glog("kv_cache.cpp:389", XTENSOR, "F"), name="worker1.INFO")
    code, out, err = run_main([master, worker, *DSV32, "cache.enable_xtensor=true"], capsys)
    assert code == 0, out + err
    assert "worker1.INFO:2" in out


def test_the_earliest_refusal_across_logs_is_judged(tmp_path, capsys):
    late = glog("kv_cache.cpp:389", XTENSOR, "F").replace("19:00:00.000001", "19:00:05.000000")
    early = glog("layerwise_split_layout.h:45", SPLIT_TP, "F")
    argv = [write_log(tmp_path, late, name="a.INFO"), write_log(tmp_path, early, name="b.INFO"), *DSV32,
            "cache.enable_xtensor=true"]
    code, out, _ = run_main(argv, capsys)
    assert code == 1 and "2 refusal lines; the earliest is judged" in out and "b.INFO:2" in out


def test_a_restart_without_a_refusal_line_is_a_new_start(tmp_path, capsys):
    """A start that died without a line (no capacity, no refusal): the next Block info opens a new start."""
    crashed = [BLOCK_INFO.format(bs=128), *WORKERS4]
    second = [BLOCK_INFO.format(bs=128), *WORKERS4, capacity_line()]
    code, out, err = run_main([write_log(tmp_path, *crashed, *second), *DSV32], capsys)
    assert code == 0, out + err
    assert "holds 2 starts" in out


def test_an_estimation_refusal(tmp_path, capsys):
    # 1 MiB cannot hold one split block of 5,767,168 B (kv_cache_estimation.cpp:184)
    fatal = glog("kv_cache_estimation.cpp:184", "Check failed: common_block_count > 0 (0 vs. 0) "
                 "No memory for one layerwise split block.", "F")
    argv = [write_log(tmp_path, *WORKERS4, fatal), *DSV32, "cache.kv_budget_bytes=1048576"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, out + err
    assert "estimation refusal" in out and "cache.kv_budget_bytes" in out


def test_every_upstream_refusal_message_names_a_field():
    """Each message maps to one field, and the oracle's startup fields are all covered."""
    from contract.upstream_checks import UPSTREAM_CHECKS
    from harness.conformance.check import refusal_field

    logged = [row for row in UPSTREAM_CHECKS if row.message]
    for row in logged:
        assert refusal_field(f"Check failed: x {row.message} y") == (row.field, row.where) \
            or refusal_field(row.message)[0] == row.field, row
    fields = {row.field for row in logged}
    for wanted in ("layerwise.split_size", "parallel.world_size", "model.model_type", "cache.host_blocks_factor",
                   "parallel.cp_size", "parallel.kv_split_size", "cache.enable_sleep_mode", "cache.enable_xtensor",
                   "cache.kv_cache_dtype", "cache.indexer_cache_dtype", "index_n_heads"):
        assert wanted in fields
    assert refusal_field("Check failed: something else entirely") == (None, "")


# ---- semantics -------------------------------------------------------------------------------------


def test_upstream_semantics_split_on_the_size_alone(tmp_path, capsys):
    log = write_log(tmp_path, *WORKERS4, capacity_line())
    code, out, err = run_main([log, "--semantics", "upstream", "--gflags", "--layerwise_split_size=2",
                               "model=deepseek_v32", "parallel=tp4"], capsys)
    assert code == 0, out + err
    assert "upstream semantics: split on: layerwise_split_size 2 > 1" in out
    # the adaptation reads the same flags as "split off": uniform blocks, so 23 disagrees
    code, out, _ = run_main([log, "--gflags", "--layerwise_split_size=2", "model=deepseek_v32", "parallel=tp4"], capsys)
    assert code == 1 and "adaptation semantics: split off" in out
    # an enable flag is not a flag of an upstream build
    code, out, err = run_main([log, "--semantics", "upstream", "--gflags",
                               "--enable_layerwise_split=true --layerwise_split_size=2", "model=deepseek_v32"], capsys)
    one_error(code, out, err, "--enable_layerwise_split", "upstream")


def test_a_parallel_config_and_a_bare_refusal_line(tmp_path, capsys):
    """The ParallelConfig route of the checker (upstream: the size alone splits), and a ``Check failed``
    line captured without its glog prefix."""
    pc = tmp_path / "parallel_config.json"
    pc.write_text('{"layerwise_split_size": 2, "world_size": 4}')
    log = write_log(tmp_path, *WORKERS4, capacity_line())
    code, out, err = run_main([log, "--semantics", "upstream", "--parallel-config", str(pc), "model=deepseek_v32"],
                              capsys)
    assert code == 0, out + err
    bare = write_log(tmp_path, XTENSOR, name="stderr.log")
    code, out, err = run_main([bare, *DSV32, "cache.enable_xtensor=true"], capsys)
    assert code == 0 and "no glog prefix" in out, out + err


def test_upstream_semantics_use_upstream_refusals(tmp_path, capsys):
    # deepseek_v3 is the adaptation's addition: an upstream build refuses it (layerwise_split_layout.h:41)
    fatal = glog("layerwise_split_layout.h:41", MODEL_TYPE, "F")
    argv = [write_log(tmp_path, fatal), "--semantics", "upstream", "model=deepseek_v3", "parallel=tp4",
            "layerwise.split_size=2"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, out + err
    assert "model.model_type" in out
    code, out, _ = run_main([*argv[:1], "model=deepseek_v3", "parallel=tp4", "layerwise=s2"], capsys)
    assert code == 1  # the adaptation supports deepseek_v3: the refusal disagrees


def test_gflags_and_parallel_config_follow_one_rule(tmp_path, capsys):
    from harness import plan as plan_cli

    pc = tmp_path / "parallel_config.json"
    pc.write_text('{"layerwise_split_size": 2}')

    def plan(*args):
        assert plan_cli.main([*args, "model=deepseek_v32", "parallel=tp4"]) == 0
        return json.loads(capsys.readouterr().out)

    for semantics, active in (("adaptation", False), ("upstream", True)):
        by_gflags = plan("--semantics", semantics, "--gflags", "--layerwise_split_size=2")
        by_json = plan("--semantics", semantics, "--parallel-config", str(pc))
        assert by_gflags["active"] is by_json["active"] is active
        assert by_gflags["digest"] == by_json["digest"]
        assert by_gflags["semantics"]["name"] == semantics
        assert ("split on" if active else "split off") in by_json["semantics"]["split"]


# ---- bad logs and bad values: one error line or a judged figure -----------------------------------


def test_an_unrelated_line_with_the_capacity_words_is_not_read(tmp_path, capsys):
    unrelated = [glog("kv_cache_estimation.cpp:427", "speculative kv cache capacity adjusted from 1 to 2"),
                 glog("chat_service.cpp:88", "kv cache capacity: what is it?"),
                 "user prompt: kv cache capacity: lots", "kv cache capacity: plenty, thanks"]
    code, out, err = run_main([write_log(tmp_path, *unrelated, *WORKERS4, capacity_line()), *DSV32], capsys)
    assert code == 0, out + err
    assert "1 line(s) without a glog prefix look like engine lines" in out and "xllm.INFO:5" in out


def test_lines_ending_in_a_lone_carriage_return(tmp_path, capsys):
    path = tmp_path / "cr.INFO"
    path.write_bytes("\r".join([*WORKERS4, capacity_line(), ""]).encode())
    code, out, err = run_main([str(path), *DSV32], capsys)
    assert code == 0, out + err


@pytest.mark.parametrize("semantics", ["adaptation", "upstream"])
@pytest.mark.parametrize("flags", ["--layerwise_split_size=2", "--layerwise_split_size=1", "",
                                   "--enable_layerwise_split --layerwise_split_size=4",
                                   "--enable_layerwise_split=false --layerwise_split_size=2",
                                   "--enable_layerwise_split=y --layerwise_split_size=2"])
def test_the_flag_reader_agrees_with_the_oracle(semantics, flags):
    """The harness's gflag reader (``contract.server_flags``) and the oracle's own reader give the
    same answer under each semantics (FEATURE section 2), or both refuse an enable flag under upstream."""
    from contract.errors import ConfigError
    from contract.server_flags import flags_from_gflags
    from harness import oracle

    try:
        want = oracle.expected_split_active(semantics, oracle.parse_layerwise_gflags(flags, semantics))
    except ValueError:
        with pytest.raises(ConfigError):
            flags_from_gflags(flags, semantics)
        return
    assert flags_from_gflags(flags, semantics).active is want


@pytest.mark.parametrize("override, field", [
    ("cache.kv_budget_bytes=-1", "cache.kv_budget_bytes"),
    ("cache.max_seqs_per_batch=-1", "cache.max_seqs_per_batch"),
    ("cache.block_size=0", "cache.block_size"),
    ("parallel.dp_size=0", "parallel.dp_size"),
    ("parallel.kv_split_size=-1", "parallel.kv_split_size"),
])
def test_schema_errors_as_the_plan_command_refuses_them(tmp_path, capsys, override, field):
    from harness import plan as plan_cli

    code, out, err = run_main([write_log(tmp_path, *WORKERS4, capacity_line()), *DSV32, override], capsys)
    one_error(code, out, err, field, ">=")
    plan_code, _, plan_err = _run(plan_cli.main, [*DSV32, override], capsys)
    assert plan_code == 2 and plan_err == err  # the same error line as the plan command's


@pytest.mark.parametrize("line, needle", [
    (WORKER.format(i=0).replace("128.00 MB", "nan GB"), "worker line"),
    (WORKER.format(i=0).replace("max_memory_utilization: 1", "max_memory_utilization: 1e400"), "finite"),
    (WORKER.format(i=0).replace("max_memory_utilization: 1", "max_memory_utilization: -1e400"), "finite"),
    (WORKER.format(i=0).replace("max_memory_utilization: 1", "max_memory_utilization: 0.8.1"), "not a number"),
    (WORKER.format(i=10 ** 30), "worker line"),
    (capacity_line().replace("slot_size: 1152", "slot_size: 1152, blocks: 5"), "repeats key blocks"),
    (capacity_line(blocks=10 ** 30), "at most 20 digits"),
])
def test_bad_values_are_one_error_line(tmp_path, capsys, line, needle):
    code, out, err = run_main([write_log(tmp_path, line, capacity_line()), *DSV32], capsys)
    one_error(code, out, err, needle)


def test_worker_ids_are_judged_against_the_world_size(tmp_path, capsys):
    four_zeros = [WORKER.format(i=0)] * 4
    code, out, _ = run_main([write_log(tmp_path, *four_zeros, capacity_line()), *DSV32], capsys)
    assert code == 1 and "result: DISAGREE on workers.worker ids" in out
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4[:3], capacity_line()), *DSV32], capsys)
    assert code == 1 and "workers.worker ids" in out


def test_a_restart_appended_judges_the_last_start(tmp_path, capsys):
    first = [BLOCK_INFO.format(bs=128), *WORKERS4, capacity_line(blocks=24), glog("kv_cache.cpp:389", XTENSOR, "F")]
    second = [BLOCK_INFO.format(bs=128), *WORKERS4, capacity_line(), SUCCESS]
    code, out, err = run_main([write_log(tmp_path, *first, *second), *DSV32], capsys)
    assert code == 0, out + err
    assert "holds 2 starts (a restart appended); judging the last, from line 9" in out


@pytest.mark.parametrize("content, needle", [
    (b"", "no xLLM engine line"),
    (b"\x00\xff\xfe" * 1000 + b"\n\x89PNG\r\n", "no xLLM engine line"),
])
def test_empty_or_binary_logs(tmp_path, capsys, content, needle):
    path = tmp_path / "x.INFO"
    path.write_bytes(content)
    code, out, err = run_main([str(path), *DSV32], capsys)
    one_error(code, out, err, needle)


def test_crlf_and_huge_logs(tmp_path, capsys):
    from harness.conformance.log import MAX_LINE_CHARS

    path = tmp_path / "crlf.INFO"
    path.write_bytes("\r\n".join([*WORKERS4, capacity_line(), ""]).encode())
    code, out, err = run_main([str(path), *DSV32], capsys)
    assert code == 0, out + err
    huge = tmp_path / "huge.INFO"
    huge.write_text("x" * (3 * MAX_LINE_CHARS + 7) + "\n" + "\n".join([*WORKERS4, capacity_line()]) + "\n")
    code, out, err = run_main([str(huge), *DSV32], capsys)
    assert code == 0, out + err


def test_a_fifo_or_a_directory_is_refused_unread(tmp_path):
    """A log that is not a regular file is one error, not a hang (a FIFO) or a read of a device."""
    from harness.conformance.log import LogError, read_log

    fifo = tmp_path / "xllm.INFO"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        with pytest.raises(LogError, match="not a regular file"):
            read_log(str(path))


# ---- the command line --------------------------------------------------------------------------------


def test_json_prints_each_check_and_its_verdict(tmp_path, capsys):
    log = write_log(tmp_path, *WORKERS4, capacity_line(blocks=24))
    code, out, _ = run_main([log, "--json", *DSV32], capsys)
    assert code == 1
    doc = json.loads(out)
    verdicts = {c["name"]: c["verdict"] for c in doc["checks"] if c["engine"] == "target"}
    assert verdicts["blocks"] == "disagree" and verdicts["slot_size"] == "agree"
    assert doc["result"] == "disagree" and doc["semantics"]["name"] == "adaptation"


@pytest.mark.parametrize("argv, needle", [
    (["model=deepseek_v32"], "no log given"),
    (["x.log", "--semantics", "both"], "--semantics"),
    (["x.log", "--bogus"], "unrecognized"),
    (["/nonexistent/x.log", "model=deepseek_v32"], "cannot read log"),
])
def test_bad_arguments_are_one_error_line(capsys, argv, needle):
    one_error(*run_main(argv, capsys), needle)


def test_a_full_stdout_and_a_cut_log_in_a_real_process(tmp_path):
    """As a process: a cut log is one error line; a result sent to /dev/full is one error line, no traceback."""
    full = capacity_line()
    log = write_log(tmp_path, *WORKERS4, full[: full.index("index_slot_size") + 5])
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "harness.conformance", log, *DSV32], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("error: "), proc.stderr
    good = write_log(tmp_path, *WORKERS4, capacity_line(), name="good.INFO")
    with open("/dev/full", "w") as devfull:
        proc = subprocess.run([sys.executable, "-m", "harness.conformance", good, *DSV32], cwd=ROOT,
                              stdout=devfull, stderr=subprocess.PIPE, text=True, timeout=120, env=env)
    assert "Traceback" not in proc.stderr and proc.stderr.startswith("error: stdout"), proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and proc.returncode == 2


# ---- logs as real runs write them ------------------------------------------------------------------

UPSTREAM = (shared_dir() or ROOT / "no-shared") / "upstream_494f293b5" / "xllm" / "core"
"""Upstream's source at 494f293b5 where a checkout has it beside (``../shared``); the log lines above are
written from its format strings by hand, so the tests below run without it."""


def test_the_int8_indexer_scale_line_as_upstream_prints_it(tmp_path, capsys):
    # kv_cache_shape.cpp:196 prints "Initializing indexer cache scale with shape: [...]" (no second "cache").
    # DeepSeek-V3.2 tp 4, s = 2, int8 indexer: slot 1152, index slot 128 + 4 = 132 (FEATURE section 4):
    # (1152 + 132) * 128 = 164,352 B/layer/block, 32 layers: 134,217,728 // 5,259,264 = 25 blocks; the scale
    # tensor is the index tensor's first three dims [25, 1, 128] (kv_cache_shape.cpp:362).
    shapes = [shape("k", (25, 1, 128, 512), 184), shape("v", (25, 1, 128, 64), 188),
              shape("indexer", (25, 1, 128, 128), 192),
              glog("kv_cache_shape.cpp:196", "Initializing indexer cache scale with shape: [25 1 128]")]
    argv = [write_log(tmp_path, *WORKERS4, capacity_line(blocks=25, index_slot_size=132), *shapes, SUCCESS),
            *DSV32, "cache.indexer_cache_dtype=int8"]
    code, out, err = run_main(argv, capsys)
    assert code == 0, out + err
    assert "indexer cache scale cache shape" in out and "not printed" not in out
    wrong = [*shapes[:3], shapes[3].replace("[25 1 128]", "[25 1 64]"), SUCCESS]
    code, out, _ = run_main([write_log(tmp_path, *WORKERS4, capacity_line(blocks=25, index_slot_size=132), *wrong),
                             *argv[1:]], capsys)
    assert code == 1 and "result: DISAGREE on target.indexer cache scale cache shape" in out


def _literal_at(text: str, literal: str, line: int, slack: int = 3) -> bool:
    """``"literal"`` (a C++ string literal) stands in ``text`` within ``slack`` lines after ``line``."""
    lines = text.splitlines()
    return any(f'"{literal}' in lines[i] for i in range(max(0, line - 1), min(len(lines), line + slack)))


@pytest.mark.skipif(not UPSTREAM.is_dir(), reason="upstream 494f293b5's source is not beside this checkout "
                    "(../shared/upstream_494f293b5); the log lines of the other tests are written from it by hand")
def test_every_pattern_matches_upstreams_format_strings():
    """Each line the checker reads, as the string literals stand in upstream's source at the place it cites."""
    import re

    from contract.upstream_checks import UPSTREAM_CHECKS
    from harness.conformance.log import BLOCK_INFO_KEYS, FAILED_MARKS, FULL_KEYS, SHAPE_FORMATS, SUCCESS_MARK

    def source(name: str) -> str:
        found = list(UPSTREAM.rglob(name))
        assert found, name
        return found[0].read_text()

    shapes = source("kv_cache_shape.cpp")
    for cache, literal in SHAPE_FORMATS.items():
        assert f'"{literal}"' in shapes, (cache, literal)
    for engine, capacity_at in (("llm_engine.cpp", 554), ("vlm_engine.cpp", 292)):
        text = source(engine)
        statement = "\n".join(text.splitlines()[capacity_at - 1:capacity_at + 25]).split(";")[0]
        assert '"kv cache capacity: "' in statement
        assert tuple(re.findall(r'", ([a-z_]+): "', statement)) == FULL_KEYS, engine
    llm, vlm = source("llm_engine.cpp"), source("vlm_engine.cpp")
    info = "\n".join(llm.splitlines()[272:278]).split(";")[0]
    assert tuple(re.findall(r'"(?:Block info, |, )([a-z_]+): "', info)) == BLOCK_INFO_KEYS
    for literal in ("worker #", ": available memory: ", ", total memory: ", ". Using max_memory_utilization: ",
                    ", max_cache_size: "):
        assert _literal_at(llm, literal, 482, 5) and _literal_at(vlm, literal, 233, 5), literal
    assert _literal_at(vlm, ", encoder_cache_reserved: ", 233, 6)
    assert _literal_at(llm, SUCCESS_MARK, 202, 0)
    for message, where in FAILED_MARKS.items():
        name, line = where.split(":")
        assert _literal_at(source(name), message, int(line), 0), where
    for text, where in ((row.message, row.where) for row in UPSTREAM_CHECKS if row.message):
        name, line = where.split(":")
        found = list(UPSTREAM.rglob(name))
        if found:  # the partial tree lacks some files
            lines = found[0].read_text().splitlines()
            near = "\n".join(lines[max(0, int(line) - 4):int(line) + 4])
            printed = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', near))  # the literals as the stream prints them
            assert text in printed, (where, text, printed)


# master.cpp:420 prints the options on every node; node_rank > 0 runs LLMAssistantMaster (llm_master.cpp:691),
# which starts no engine: its log has no engine line
ASSISTANT = [glog("master.cpp:420", "Master init options: node_rank: 1, nnodes: 4"),
             glog("collective_service.cpp:60", "Worker #1 registered")]


def test_several_nodes_judged_from_the_node_with_the_engine(tmp_path, capsys):
    node0 = write_log(tmp_path, BLOCK_INFO.format(bs=128), *WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS,
                      name="node0.INFO")
    node1 = write_log(tmp_path, *ASSISTANT, name="node1.INFO")
    for order in ([node0, node1], [node1, node0]):
        code, out, err = run_main([*order, *DSV32], capsys)
        assert code == 0, out + err
        assert f"figures from {node0}" in out and f"{node1} has no engine line" in out
    # another node is read for refusals only: its worker lines (a stray engine there) are not counted
    stray = write_log(tmp_path, *ASSISTANT, *WORKERS4, name="node4.INFO")
    code, out, err = run_main([node0, stray, *DSV32], capsys)
    assert code == 0 and "4 lines: #0,#1,#2,#3" in out, out + err
    # a refusal on another node is the run's answer
    refusing = write_log(tmp_path, *ASSISTANT, glog("kv_cache.cpp:389", XTENSOR, "F"), name="node2.INFO")
    code, out, err = run_main([node0, node1, refusing, *DSV32, "cache.enable_xtensor=true"], capsys)
    assert code == 0 and "node2.INFO:4" in out, out + err
    # no node printed an engine line: unusable, naming every log
    code, out, err = run_main([node1, write_log(tmp_path, *ASSISTANT, name="node3.INFO"), *DSV32], capsys)
    one_error(code, out, err, "node1.INFO, ", "node3.INFO: no xLLM engine line")


def _cut_log(tmp_path, *lines, cut: str) -> str:
    """A log whose last line is ``cut`` without its end of line (the engine killed while printing it)."""
    path = tmp_path / "cut.INFO"
    path.write_text("\n".join(["Log file created at: 2026/11/30 19:00:00", *lines, cut]))
    return str(path)


def test_a_log_cut_after_the_capacity_line_is_judged_on_what_is_complete(tmp_path, capsys):
    k, v, indexer = DSV32_SHAPES
    # cut inside the v shape line: the capacity line and the k shape are judged; v and indexer may be after the end
    log = _cut_log(tmp_path, *WORKERS4, capacity_line(), k, cut=v[:-8])
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0, out + err
    assert "cut.INFO:8: the file ends inside this shape line (cut log)" in out
    assert "not in the log (it ends at" in out and "cut.INFO:8)" in out and "DISAGREE" not in out
    # cut so early in the v shape line that it does not yet read as one: still no "not printed"
    code, out, err = run_main([_cut_log(tmp_path, *WORKERS4, capacity_line(), k, cut=v[:v.index(" cache with")]),
                               *DSV32], capsys)
    assert code == 0 and "not printed" not in out and "not in the log (it ends at" in out, out + err
    # ends (whole lines) after the k shape line: the same, nothing called "not printed"
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, capacity_line(), k), *DSV32], capsys)
    assert code == 0 and "not printed" not in out, out + err
    assert "rope cache shape" in out and "not in the log (it ends at" in out
    # another thread's line after the k shape does not end print_shapes (its own thread's next line does)
    other = glog("scheduler.cpp:77", "scheduler thread started").replace(" 4242 ", " 4243 ")
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, capacity_line(), k, other), *DSV32], capsys)
    assert code == 0 and "not printed" not in out and "not in the log (it ends at" in out, out + err
    # a shape print_shapes skipped before the last one it printed is missing, cut log or not
    code, out, _ = run_main([_cut_log(tmp_path, *WORKERS4, capacity_line(), k, indexer, cut="I1130 19:0"), *DSV32],
                            capsys)
    assert code == 1 and "target.rope cache shape" in out and "not printed" in out
    # cut inside the first shape line: every figure judged, and the output says no shape was
    code, out, err = run_main([_cut_log(tmp_path, *WORKERS4, capacity_line(), cut=k[:50]), *DSV32], capsys)
    assert code == 0 and "no shape line after" in out and "not judged" in out, out + err
    # a wrong figure before the cut still disagrees
    code, out, _ = run_main([_cut_log(tmp_path, *WORKERS4, capacity_line(blocks=24), cut=k[:-5]), *DSV32], capsys)
    assert code == 1 and "result: DISAGREE on target.blocks" in out


def test_a_log_cut_in_what_the_verdict_needs_is_unusable(tmp_path, capsys):
    full = capacity_line()
    # the capacity line itself, cut after "n_layers: 6" (61): never read as a figure
    code, out, err = run_main([_cut_log(tmp_path, *WORKERS4, cut=full[:-len("1, kv_cache_dtype: auto")]), *DSV32],
                              capsys)
    one_error(code, out, err, "mid-line, inside a `kv cache capacity:` line at", "cut.INFO:6 (a cut log)")
    # released 4-key line cut inside its last value: it would parse, but it is cut
    code, out, err = run_main([_cut_log(tmp_path, *WORKERS4, cut=released_line(dtype=False)[:-1]), *DSV32], capsys)
    one_error(code, out, err, "`kv cache capacity:` line at", "cut.INFO:6 (a cut log)")
    # a refusal cut before its rule can be read; one cut after it is judged
    xtensor = glog("kv_cache.cpp:389", XTENSOR, "F")
    code, out, err = run_main([_cut_log(tmp_path, *WORKERS4, cut=xtensor[:70]), *DSV32,
                               "cache.enable_xtensor=true"], capsys)
    one_error(code, out, err, "ends inside the refusal line", "cut.INFO:6")
    split = glog("layerwise_split_layout.h:45", SPLIT_TP, "F")
    code, out, err = run_main([_cut_log(tmp_path, *WORKERS4, cut=split[:-4]), *DSV32, "layerwise.split_size=3"],
                              capsys)
    assert code == 0 and "layerwise.split_size (layerwise_split_layout.h:45)" in out, out + err


def test_a_flood_of_refusal_lines_is_read_in_bounded_memory(tmp_path):
    """A log of a few MB of ``Check failed`` lines: the reader keeps the first few and a count, so its
    peak memory stays far below the file's size (it was 4x the size)."""
    import tracemalloc

    from harness.conformance.log import MAX_KEPT_LINES, read_log

    line = glog("kv_cache.cpp:389", XTENSOR, "F") + "\n"
    path = tmp_path / "flood.INFO"
    count = (2 << 20) // len(line)
    path.write_text(line * count)
    tracemalloc.start()
    try:
        log = read_log(str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert log.fatal_count == count and len(log.fatals) == MAX_KEPT_LINES
    assert peak < path.stat().st_size // 16, peak  # about 45 kB whatever the size (it was 4x the size)


def test_colour_codes_byte_order_mark_and_gbk_bytes(tmp_path, capsys):
    """glog's --colorlogtostderr wraps an F line in colour codes and resets at the start of the next line;
    a BOM before the first line; a GBK-encoded CHECK message (not UTF-8): the refusal is still read."""
    fatal = glog("kv_cache.cpp:389", XTENSOR, "F").encode() + " 不支持".encode("gbk")
    lines = [*(w.encode() for w in WORKERS4), capacity_line().encode(), b"\x1b[0;31m" + fatal,
             b"\x1b[m" + SUCCESS.encode(), b""]
    path = tmp_path / "colour.INFO"
    path.write_bytes("\ufeff".encode() + b"\n".join(lines))
    code, out, err = run_main([str(path), *DSV32, "cache.enable_xtensor=true"], capsys)
    assert code == 0 and "startup refusal" in out and "cache.enable_xtensor" in out, out + err
    # a BOM before a bare first line (captured stderr) is no part of the line
    path.write_bytes(("\ufeff" + "\n".join([*WORKERS4, capacity_line(), ""])).encode())
    code, out, err = run_main([str(path), *DSV32], capsys)
    assert code == 0 and "worker ids" in out and "DISAGREE" not in out, out + err


def test_every_engine_flag_that_changes_the_plan_is_read(tmp_path, capsys):
    """``--gflags`` is the engine's whole command line: a flag the plan depends on sets its config key
    (``--block_size=64`` halves the slots per block: 46 blocks, hand-worked from the 23 at 128), the budget
    flags are judged against the worker lines, and the rest is named as not read."""
    shapes = [shape("k", (46, 1, 64, 512), 184), shape("v", (46, 1, 64, 64), 188),
              shape("indexer", (46, 1, 64, 128), 192), SUCCESS]
    log = write_log(tmp_path, BLOCK_INFO.format(bs=64), *WORKERS4, capacity_line(blocks=46), *shapes)
    flags = ("--enable_layerwise_split --layerwise_split_size=2 --block_size 64 --max_memory_utilization=1 "
             "--max_cache_size=0 --port=9000 --model=/ckpt/DeepSeek-V3.2")
    code, out, err = run_main([log, "--gflags", flags, "model=deepseek_v32", "parallel=tp4"], capsys)
    assert code == 0, out + err
    assert "engine flags read: cache.block_size=64" in out and "not read" in out and "--port --model" in out
    assert "workers  max_memory_utilization" in out and "workers  max_cache_size" in out
    # the same log under --max_memory_utilization=0.9: the workers printed 1, which disagrees
    code, out, _ = run_main([log, "--gflags", flags.replace("utilization=1", "utilization=0.9"), "model=deepseek_v32",
                             "parallel=tp4"], capsys)
    assert code == 1 and "result: DISAGREE on workers.max_memory_utilization" in out
    # an int8 KV cache on hardware without one: the spec refuses it, so a started engine disagrees
    code, out, _ = run_main([log, "--gflags", flags + " --kv_cache_dtype=int8", "model=deepseek_v32", "parallel=tp4",
                             "hardware=bi_v100", "cache.kv_budget_bytes=134217728"], capsys)
    assert code == 1 and "refused: cache.kv_cache_dtype" in out


@pytest.mark.parametrize("flags, needle", [
    ("--model=/ckpt/DeepSeek-V3.2", "model=NAME or model_path=PATH/config.json"),
    ("--block_size=sixty", "--block_size"),
    ("--max_memory_utilization=0.9x", "--max_memory_utilization"),
    ("--kv_cache_dtype=in,t8", "--kv_cache_dtype"),
    ("--Block_Size=64", "case-sensitive"),
    ("--noenable_prefix_cache=true", "--noenable_prefix_cache"),
    ("--block_size", "--block_size"),
])
def test_an_engine_flag_that_cannot_be_read_is_one_error_line(tmp_path, capsys, flags, needle):
    log = write_log(tmp_path, *WORKERS4, capacity_line())
    code, out, err = run_main([log, "--gflags", flags, "parallel=tp4"], capsys)
    one_error(code, out, err, needle)


def test_the_plan_reads_the_same_flags_and_refuses_the_budget_ones(capsys):
    from harness import plan as plan_cli

    code, out, err = _run(plan_cli.main, ["--gflags", "--enable_layerwise_split --layerwise_split_size=2 "
                                          "--block_size=64 --nnodes=4 --noenable_prefix_cache", "model=deepseek_v32",
                                          "parallel=tp2"], capsys)
    assert code == 0, err
    plan = json.loads(out)
    # 64 slots x (1152 + 256) B x 32 layers = 2,883,584 B a block: 134,217,728 // 2,883,584 = 46
    assert plan["n_blocks"] == 46 and plan["block_size"] == 64 and plan["world_size"] == 4
    one_error(*_run(plan_cli.main, ["--gflags", "--max_memory_utilization=0.9", "model=deepseek_v32"], capsys),
              "--max_memory_utilization", "cache.kv_budget_bytes")


def test_the_checker_never_asks_the_reference_implementation(tmp_path, capsys, monkeypatch):
    """The log is judged by the oracle; the schema's bounds are the checker's own (the reference's
    ``check_cache`` is code under test)."""
    import implementations.reference.validation as validation

    def refuse(*_args, **_kwargs):
        raise AssertionError("the conformance checker called the reference implementation")

    monkeypatch.setattr(validation, "check_cache", refuse)
    log = write_log(tmp_path, *WORKERS4, capacity_line())
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0, out + err
    one_error(*run_main([log, *DSV32, "cache.host_blocks_factor=-1"], capsys), "cache.host_blocks_factor", ">= 0")


def test_the_earliest_refusal_across_a_new_year(tmp_path, capsys):
    """With ``log_year_in_prefix`` the year orders refusals too: 2026-12-31 comes before 2027-01-01."""
    late = glog("layerwise_split_layout.h:45", SPLIT_TP, "F", year=True).replace("F20261130", "F20270101")
    early = glog("kv_cache.cpp:389", XTENSOR, "F", year=True).replace("F20261130", "F20261231")
    argv = [write_log(tmp_path, late, name="a.INFO"), write_log(tmp_path, early, name="b.INFO"), *DSV32,
            "cache.enable_xtensor=true"]
    code, out, err = run_main(argv, capsys)
    assert code == 0 and "b.INFO:2" in out, out + err


@pytest.mark.parametrize("prefix", ["2026-11-30T19:00:00.123456789Z ", "2026-11-30T19:00:00.123456789Z stderr F ",
                                    "2026-11-30T19:00:00+08:00 stdout F "],
                         ids=["kubectl-timestamps", "cri-file", "cri-offset"])
def test_lines_behind_a_container_runtime_prefix(tmp_path, capsys, prefix):
    log = write_log(tmp_path, *(prefix + line for line in [*WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS]))
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0 and "worker ids" in out and "k cache shape" in out, out + err


def test_logs_given_twice_compressed_or_named_with_an_equals_sign(tmp_path, capsys):
    import gzip

    good = write_log(tmp_path, *WORKERS4, capacity_line())
    one_error(*run_main([good, good, *DSV32], capsys), "given twice")
    os.symlink(good, tmp_path / "link.INFO")
    one_error(*run_main([good, str(tmp_path / "link.INFO"), *DSV32], capsys), "given twice", "also as")
    packed = tmp_path / "xllm.INFO.gz"
    packed.write_bytes(gzip.compress(open(good, "rb").read()))
    one_error(*run_main([str(packed), *DSV32], capsys), "gzip-compressed", "decompress")
    # binary bytes with no end of line are no engine line (not a "cut log")
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\x01\x02garbage\xff" * 50)
    one_error(*run_main([str(junk), *DSV32], capsys), "no xLLM engine line")
    (tmp_path / "run=1").mkdir()
    named = write_log(tmp_path / "run=1", *WORKERS4, capacity_line())
    code, out, err = run_main([named, *DSV32], capsys)
    assert code == 0 and "run=1" in out, out + err


def test_a_refusal_older_than_the_judged_start_is_named(tmp_path, capsys):
    node0 = write_log(tmp_path, *WORKERS4, capacity_line(), name="node0.INFO")
    yesterday = glog("kv_cache.cpp:389", XTENSOR, "F").replace("1130 19:00", "1129 08:00")
    node1 = write_log(tmp_path, yesterday, name="node1.INFO")
    code, out, _ = run_main([node0, node1, *DSV32], capsys)
    assert code == 1 and "is older than the judged start" in out and "an earlier run?" in out


def test_a_budget_flag_must_be_finite(tmp_path, capsys):
    log = write_log(tmp_path, *WORKERS4, capacity_line())
    one_error(*run_main([log, "--gflags", "--max_memory_utilization=1e999", *DSV32], capsys),
              "--max_memory_utilization", "finite")


def test_a_utf16_log_and_a_flag_that_contradicts_an_override(tmp_path, capsys):
    """A log redirected by PowerShell 5 (UTF-16LE with a BOM) reads as the same lines; an override and an
    engine flag that set one key differently are one error line naming both."""
    path = tmp_path / "ps.INFO"
    path.write_bytes(("\n".join([*WORKERS4, capacity_line(), SUCCESS]) + "\n").encode("utf-16"))
    code, out, err = run_main([str(path), *DSV32], capsys)
    assert code == 0 and "worker ids" in out, out + err
    one_error(*run_main([str(path), "--gflags", "--block_size=64", "cache.block_size=128", *DSV32], capsys),
              "cache.block_size", "'128' vs engine flag '64'")
    code, out, err = run_main([str(path), "--gflags", "--enable_layerwise_split --layerwise_split_size=2 --block_size=128",
                               "cache.block_size=128", *DSV32], capsys)
    assert code == 0, out + err


def test_more_engine_lines_than_one_start_prints_is_refused(tmp_path, capsys, monkeypatch):
    from harness.conformance import log as log_module

    monkeypatch.setattr(log_module, "MAX_ENGINE_LINES", 8)
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, *WORKERS4, WORKERS4[0], capacity_line()), *DSV32], capsys)
    one_error(code, out, err, "xllm.INFO:10", "more than 8 worker, capacity")


# ---- every process, every capacity line, times, encodings and wrappers as real runs leave them -----------


def test_every_processs_own_capacity_and_shape_lines_are_judged(tmp_path, capsys):
    """Every process that starts an engine prints its own capacity and shape lines: node 1's are judged too,
    named by its log (a wrong block count or shape there disagrees)."""
    node0 = write_log(tmp_path, *WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS, name="node0.INFO")
    node1 = write_log(tmp_path, *WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS, name="node1.INFO")
    code, out, err = run_main([node0, node1, *DSV32], capsys)
    assert code == 0 and "node1.INFO:target" in out and "judged too" in out, out + err
    bad = write_log(tmp_path, *WORKERS4, capacity_line(blocks=24), shape("k", (24, 1, 128, 512), 184), SUCCESS,
                    name="node2.INFO")
    code, out, _ = run_main([node0, bad, *DSV32], capsys)
    assert code == 1 and "node2.INFO:target.blocks" in out, out


def test_a_second_capacity_line_in_one_start_is_judged(tmp_path, capsys):
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, capacity_line(), capacity_line(blocks=24)), *DSV32],
                              capsys)
    assert code == 1 and "result: DISAGREE on target#2.blocks" in out, out + err
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, *[capacity_line()] * 3, name="three.INFO"), *DSV32],
                              capsys)
    assert code == 0 and "3 capacity lines in one start" in out and "target#3" in out, out + err


def test_refusals_are_ordered_by_their_time_not_their_text(tmp_path, capsys):
    """``F20261129`` (with the year) is earlier than ``F1130`` of a file created in 2026; a bare ``Check failed:``
    line is as late as the stamped line before it in its file (it sorted before every stamped one)."""
    dated = glog("kv_cache.cpp:389", XTENSOR, "F", year=True).replace("F20261130", "F20261129")
    undated = glog("layerwise_split_layout.h:45", SPLIT_TP, "F")
    argv = [write_log(tmp_path, undated, name="a.INFO"), write_log(tmp_path, dated, name="b.INFO"), *DSV32,
            "cache.enable_xtensor=true"]
    code, out, err = run_main(argv, capsys)
    assert code == 0 and "b.INFO:2" in out, out + err
    late = glog("master.cpp:420", "Master init").replace("19:00:00.000001", "19:00:05.000000")
    bare = write_log(tmp_path, late, SPLIT_TP, name="c.INFO")
    early = write_log(tmp_path, glog("kv_cache.cpp:389", XTENSOR, "F"), name="d.INFO")
    code, out, err = run_main([bare, early, *DSV32, "cache.enable_xtensor=true"], capsys)
    assert code == 0 and "d.INFO:2" in out, out + err


@pytest.mark.parametrize("first, second", [("utf-16", "utf-8"), ("utf-8", "utf-16")])
def test_a_restart_appended_in_another_encoding_judges_the_latest_start(tmp_path, capsys, first, second):
    stale = "\n".join([*WORKERS4, capacity_line(blocks=24), ""])
    latest = "\n".join(["Log file created at: 2026/11/30 20:00:00", *WORKERS4, capacity_line(), SUCCESS, ""])
    path = tmp_path / "mixed.INFO"
    path.write_bytes(stale.encode(first) + latest.encode(second))
    code, out, err = run_main([str(path), *DSV32], capsys)
    assert code == 0 and "holds 2 starts" in out and "DISAGREE" not in out, out + err


def test_an_override_is_not_swallowed_by_a_file_of_its_name(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "layerwise=s2").write_text("not a log\n")
    log = write_log(tmp_path, *WORKERS4, capacity_line(), *DSV32_SHAPES)
    code, out, err = run_main([log, "model=deepseek_v32", "parallel=tp4", "layerwise=s2"], capsys)
    assert code == 0 and "split on" in out and "./layerwise=s2 reads it as a log" in out, out + err
    code, out, err = run_main([log, "./layerwise=s2", *DSV32], capsys)
    assert code == 0 and "./layerwise=s2 has no engine line" in out, out + err


CRI = "2026-11-30T19:00:00.123456789Z stdout {tag} {text}"


def test_cri_partial_records_are_joined_and_a_log_ending_in_one_is_cut(tmp_path, capsys):
    line = capacity_line()
    head, tail = line[:len(line) - 30], line[len(line) - 30:]
    records = [*(CRI.format(tag="F", text=w) for w in WORKERS4), CRI.format(tag="P", text=head),
               CRI.format(tag="F", text=tail), *(CRI.format(tag="F", text=s) for s in DSV32_SHAPES)]
    code, out, err = run_main([write_log(tmp_path, *records), *DSV32], capsys)
    assert code == 0 and "k cache shape" in out and "DISAGREE" not in out, out + err
    # the engine killed after the first record of the released 4-key line: "n_layers: 6" of "n_layers: 61"
    released = released_line(dtype=False)
    cut = [*(CRI.format(tag="F", text=w) for w in WORKERS4), CRI.format(tag="P", text=released[:-1])]
    one_error(*run_main([write_log(tmp_path, *cut, name="cut.INFO"), *DSV32], capsys), "cut.INFO:6",
              "kv cache capacity", "a CRI partial (P) record that no final (F) record ends")


def test_a_fatal_line_after_the_start_completed_is_no_start_up_refusal(tmp_path, capsys):
    crash = glog("llm_engine.cpp:689", "Failed to execute model, result has no value", "F").replace(
        "19:00:00.000001", "23:10:00.000000")
    log = write_log(tmp_path, *WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS, crash)
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0 and "after the start completed" in out and "startup refusal" not in out, out + err
    # on a worker process's log, later than the engine's success line
    engine = write_log(tmp_path, *WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS, name="engine.INFO")
    worker = write_log(tmp_path, crash.replace("llm_engine.cpp:689", "worker_impl.cpp:300"), name="worker.INFO")
    code, out, err = run_main([engine, worker, *DSV32], capsys)
    assert code == 0 and "after the start completed" in out, out + err


def test_rotated_glog_files_of_one_process_are_one_log(tmp_path, capsys):
    name = "xllm.node0.root.log.INFO.{}.4242"
    first = write_log(tmp_path, *WORKERS4, capacity_line(), name=name.format("20261130-190000"))
    second = write_log(tmp_path, *DSV32_SHAPES, SUCCESS, name=name.format("20261130-200000"))
    code, out, err = run_main([second, first, *DSV32], capsys)
    assert code == 0 and "(+1 rotated)" in out and "k cache shape" in out, out + err
    assert "has no engine line" not in out and "holds 2 starts" not in out


@pytest.mark.parametrize("lacking", [("linear_state_slots", "max_linear_state_cache_slots"),
                                     ("scale_slot_size", "reserved_linear_bytes")])
def test_the_released_ten_key_capacity_line(tmp_path, capsys, lacking):
    line = capacity_line()
    for key in lacking:
        line = re.sub(rf", {key}: [^,]*", "", line)
    code, out, err = run_main([write_log(tmp_path, *WORKERS4, line), *DSV32], capsys)
    assert code == 0 and "released 10-key (v0.10.0, v0.10.1)" in out, out + err
    assert re.search(r"not in this line +" + re.escape(", ".join(lacking)), out), out


def test_layerwise_flags_echoed_in_the_log_are_read(tmp_path, capsys):
    launcher = "+ /usr/local/bin/xllm --model=/models/dsv32 --enable_layerwise_split --layerwise_split_size 2 --port=9000"
    dump = glog("xllm.cpp:80", "--layerwise_split_size=2")
    log = write_log(tmp_path, launcher, dump, *WORKERS4, capacity_line(), *DSV32_SHAPES)
    code, out, err = run_main([log, "model=deepseek_v32", "parallel=tp4"], capsys)
    assert code == 0 and "split on" in out and "layerwise flags read from the log" in out, out + err
    one_error(*run_main([log, "--gflags", "--layerwise_split_size=4", "model=deepseek_v32"], capsys),
              "layerwise_split_size", "the log's command line")
    one_error(*run_main([log, "--semantics", "upstream", "model=deepseek_v32"], capsys),
              "--enable_layerwise_split", "xllm.INFO:2", "adaptation build")


@pytest.mark.parametrize("prefix", ["[pod/xllm-0/engine] ", "[pod/xllm-0/engine] 2026-11-30T19:00:00.1Z ",
                                    "Nov 30 19:00:00 node0 xllm[4242]: ",
                                    "2026-11-30T19:00:00.123456+08:00 node0 xllm[4242]: ", "\x1b]0;xllm\x07"],
                         ids=["kubectl-prefix", "kubectl-prefix-timestamps", "syslog", "rsyslog", "osc-title"])
def test_lines_behind_kubectl_syslog_and_terminal_title_prefixes(tmp_path, capsys, prefix):
    log = write_log(tmp_path, *(prefix + line for line in [*WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS]))
    code, out, err = run_main([log, *DSV32], capsys)
    assert code == 0 and "worker ids" in out and "k cache shape" in out, out + err


def test_a_worker_processs_own_shape_lines_are_judged(tmp_path, capsys):
    """A process that prints shapes but no capacity line of its own (a worker's ``print_shapes``): its shapes
    are judged against the engine's capacity line, named by its log."""
    engine = write_log(tmp_path, *WORKERS4, capacity_line(), *DSV32_SHAPES, SUCCESS, name="node0.INFO")
    worker = write_log(tmp_path, *DSV32_SHAPES, name="node1.INFO")
    code, out, err = run_main([engine, worker, *DSV32], capsys)
    assert code == 0 and "node1.INFO:target" in out, out + err
    wrong = write_log(tmp_path, shape("k", (24, 1, 128, 512), 184), name="node2.INFO")
    code, out, _ = run_main([engine, wrong, *DSV32], capsys)
    assert code == 1 and "node2.INFO:target.k cache shape" in out, out
