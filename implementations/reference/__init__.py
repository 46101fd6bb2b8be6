"""The reference implementation of layerwise split KV cache sharding."""

from implementations.reference.impl import ReferenceImplementation

__all__ = ["ReferenceImplementation"]
