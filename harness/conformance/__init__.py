"""``python -m harness.conformance LOG [LOG ...] [overrides]``: does a real engine's log agree with the spec?

Reads what an xLLM engine prints while it starts (upstream 494f293b5: ``llm_engine.cpp``,
``vlm_engine.cpp``, ``kv_cache_shape.cpp``, and glog's ``F...] Check failed:`` refusals from
``master.cpp``, ``layerwise_split_layout.h``, ``kv_cache_estimation.cpp`` and the worker),
composes the same model and configuration from the overrides (the harness's one override
vocabulary) under the chosen flag semantics, computes what FEATURE.md predicts with
``harness.oracle`` (never with an implementation), and judges the engine's answer (refused, and
for which rule, or started) and then each figure. Exit status 0 when everything agrees, 1 on a
disagreement, 2 with one ``error:`` line on unusable input (an unreadable log, one cut where
the verdict needs it, a bad override or flag).
"""

from harness.conformance.check import Figure, check, render, render_json
from harness.conformance.log import EngineLog, LogError, parse_log_text, read_log, readable_size, size_interval

__all__ = ["Figure", "check", "render", "render_json", "EngineLog", "LogError", "parse_log_text", "read_log",
           "readable_size", "size_interval"]
