"""What every harness command does with its user: one concern per module, the names commands use here.

``UserError`` (wrong override, bad file, invalid plan) is the user's input, not a
bug, so it prints ``error: <message>`` and no traceback. Anything else is a bug
and keeps its traceback.

* ``error_line``: the one ``error:`` line, the exit statuses, ``user_errors`` (``UserError`` -> exit 2);
* ``arguments``: ``Parser`` (argparse whose usage errors are that line), ``join_flag_values``;
* ``working_directory``: a deleted working directory said plainly;
* ``stdout_guard``: standard output that cannot be written (``> /dev/full``, a closed pipe);
* ``command_wrapper``: ``command``, the decorator every ``main`` wears, which puts the above together;
* holding signals while files that belong together are written: ``harness.signals.signals_deferred``.
"""

from __future__ import annotations

from harness.signals import signals_deferred
from harness.usage.arguments import Parser, join_flag_values
from harness.usage.command_wrapper import command
from harness.usage.error_line import (
    FAILURE_EXIT_CODE,
    INTERRUPTED_EXIT_CODE,
    USAGE_EXIT_CODE,
    fail,
    one_line,
    say_error,
    user_errors,
)
from harness.usage.working_directory import check_working_directory

__all__ = [
    "FAILURE_EXIT_CODE", "INTERRUPTED_EXIT_CODE", "USAGE_EXIT_CODE", "Parser", "check_working_directory",
    "command", "fail", "join_flag_values", "one_line", "say_error", "signals_deferred", "user_errors",
]

