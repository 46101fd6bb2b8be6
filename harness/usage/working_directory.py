"""The working directory a command reads relative paths against: one that is gone is said plainly."""

from __future__ import annotations

import os

from harness.usage.error_line import fail


def check_working_directory() -> None:
    """A command reads relative paths (overrides, results folders) against the working directory: one that
    was deleted (or unmounted) under the shell is said plainly, not blamed on the overrides."""
    try:
        os.getcwd()
    except FileNotFoundError:
        fail("the working directory no longer exists (deleted or unmounted); cd into an existing folder "
             "and run the command again")
