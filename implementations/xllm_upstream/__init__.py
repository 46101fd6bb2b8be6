"""Upstream xLLM's literal layerwise split (owner = layer_id % s)."""

from implementations.xllm_upstream.impl import XllmUpstreamImplementation

__all__ = ["XllmUpstreamImplementation"]
