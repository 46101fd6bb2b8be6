"""Upstream xLLM's layerwise split at 494f293b5, rule for rule."""

from implementations.xllm_upstream.impl import XllmUpstreamImplementation

__all__ = ["XllmUpstreamImplementation"]
