"""``python -m harness.conformance LOGFILE [overrides]``: does a real engine's log agree with the spec?

Reads the KV cache lines an xLLM engine prints (``llm_engine.cpp`` at upstream 494f293b5:
``worker #i: available memory: ...`` and ``kv cache capacity: ...``), composes the same
model and configuration from the overrides (the harness's one override vocabulary),
computes what FEATURE.md predicts with ``harness.oracle`` (never with an implementation),
and prints each figure with agree / DISAGREE. Exit status 0 when every figure agrees,
1 on a disagreement, 2 with one ``error:`` line on an unreadable or truncated log or a
bad override.
"""

from harness.conformance.check import Figure, check, render
from harness.conformance.log import EngineLog, LogError, parse_log_text, read_log, readable_size, size_interval

__all__ = ["Figure", "check", "render", "EngineLog", "LogError", "parse_log_text", "read_log", "readable_size",
           "size_interval"]
