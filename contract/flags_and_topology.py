"""The former home of two parsers, now each in a module named for it: ``contract.server_flags`` (the
layerwise and other xllm_server flags) and ``contract.topology_text`` (``topo -m`` and YAML topologies).
Only the name a caller still imports from here is kept (``load_topology``, for the explorer's strategies)."""

from __future__ import annotations

from contract.topology_text import load_topology

__all__ = ["load_topology"]
