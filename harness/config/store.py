"""Registers the schemas in Hydra's ConfigStore (once; calling again is harmless).

``conf/config.yaml`` extends ``base_config``; every group option merges into a
typed node of it, so no group needs a schema of its own.
"""

from __future__ import annotations

import os
import secrets

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

from harness import procfs
from harness.config.schema import Config

BASE_CONFIG = "base_config"

_registered = False


RUN_ID_RESOLVER = "run_id"
"""``${run_id:}`` in ``conf/config.yaml``'s output folders: unique per process, stable within it."""


def _process_token() -> str:
    """Same for every import of this module in one process (pytest's in-process runs drop and
    re-import modules, while OmegaConf keeps the first resolver): the process's start time in
    clock ticks (/proc), with the pid unique among live processes; a random token elsewhere."""
    found = procfs.stat(os.getpid())
    return format(found.starttime, "x") if found is not None else secrets.token_hex(2)


_RUN_ID = f"{os.getpid()}-{_process_token()}"


def run_id() -> str:
    """This process's run id: two runs or sweeps started in the same second get different folders."""
    return _RUN_ID


def register() -> None:
    """Store ``base_config`` (the ``Config`` schema) and the ``run_id`` resolver."""
    global _registered
    if _registered:
        return
    ConfigStore.instance().store(name=BASE_CONFIG, node=Config)
    if not OmegaConf.has_resolver(RUN_ID_RESOLVER):
        OmegaConf.register_new_resolver(RUN_ID_RESOLVER, run_id, use_cache=True)
    _registered = True
