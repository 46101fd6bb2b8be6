"""Registers the schemas in Hydra's ConfigStore (once; calling again is harmless).

``conf/config.yaml`` extends ``base_config``; every group option merges into a
typed node of it, so no group needs a schema of its own.
"""

from __future__ import annotations

from hydra.core.config_store import ConfigStore

from harness.config.schema import Config

BASE_CONFIG = "base_config"

_registered = False


def register() -> None:
    """Store ``base_config`` (the ``Config`` schema)."""
    global _registered
    if _registered:
        return
    ConfigStore.instance().store(name=BASE_CONFIG, node=Config)
    _registered = True
