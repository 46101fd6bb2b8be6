"""xLLM's own planning code, compiled from a source tree (``implementation=xllm_native``)."""

from implementations.xllm_native.impl import XllmNativeImplementation

__all__ = ["XllmNativeImplementation"]
