"""A command's ``--docs``: the writer of the docs' generated blocks (``tools.docs_blocks``), in a checkout only.

Not imported by ``harness.usage`` itself: this module reaches ``tools/`` by name, and ``tools.docs_blocks``
reads the app's tables, so a command that merely starts must not come through here.
"""

from __future__ import annotations

import importlib

from harness.usage.error_line import fail


def docs_writer():
    """``tools.docs_blocks``, the writer of the docs' generated blocks, for a command's ``--docs``: the project's
    own tooling, in a checkout only (the wheel ships no ``tools/``); without it, one ``error:`` line."""
    try:
        return importlib.import_module("tools.docs_blocks")
    except ModuleNotFoundError as exc:
        if exc.name not in ("tools", "tools.docs_blocks"):
            raise
        fail("--docs writes the docs of a checkout (tools/docs_blocks.py); run the command from one")
