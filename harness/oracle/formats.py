"""Readers of outside formats (FEATURE sections 2 and 4), re-exported from ``harness/_oracle_formats.py``."""

from __future__ import annotations

from pathlib import Path

from harness import _oracle_formats as formats

# ---- readers of outside formats (sections 2 and 4), re-exported ------------------------------


def load_topology(name_or_path) -> formats.OracleTopology:
    """Section 4: a ``topo -m`` text or YAML fixture, read by the oracle's own parser."""
    return formats.load_topology(name_or_path)


def parse_layerwise_gflags(text: str, semantics: str = "adaptation") -> dict:
    """Section 2: the layerwise keys a gflags command line sets (``enable``, ``split_size``)."""
    return formats.parse_layerwise_gflags(text, semantics)


def parse_parallel_config_json(text: str, semantics: str = "adaptation") -> dict:
    """Section 2: ``split_size`` (and the adaptation's ``enable``) from a ParallelConfig JSON."""
    return formats.parse_parallel_config_json(text, semantics)


def expected_split_active(semantics: str, settings: dict) -> bool:
    """Section 2 (v2.1): whether the split is on, given what the flags set, under ``semantics``:
    adaptation: enable and s > 1; upstream: s > 1 alone (no enable flag)."""
    return formats.split_active(semantics, settings)


TOPOLOGY_DIR: Path = formats.TOPOLOGY_DIR
