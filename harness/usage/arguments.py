"""A command's arguments: argparse whose usage errors are one ``error:`` line, and gflags values glued on."""

from __future__ import annotations

import argparse
from typing import NoReturn, Sequence

from harness.usage.error_line import fail


class Parser(argparse.ArgumentParser):
    """``argparse`` whose usage errors are one ``error:`` line (no usage block) and exit 2."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        fail(f"{message} (see {self.prog} --help)")


def join_flag_values(argv: Sequence[str], flag: str = "--gflags") -> list[str]:
    """``--gflags "--x=1"``: glue the value on, since argparse reads a leading ``--`` as an option."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] == flag and i + 1 < len(argv):
            out.append(f"{flag}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out
