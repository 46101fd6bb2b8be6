"""Cutting one definition (a function with its body, a constant) out of a C++ file, as the preprocessor keeps it.

Comments and literals are blanked before braces are matched; ``conditionals.live`` drops the ``#if`` groups
the manifest's defines rule out, so a version in a dropped group is never the one cut.
"""

from __future__ import annotations

import re
from typing import Optional

from implementations.xllm_native.tree import conditionals

_MASK = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
_AFTER_PARAMS = re.compile(r"\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->\s*[\w:<>,\s*&]+?)?\s*\{")


def _masked(text: str) -> str:
    """``text`` with comments and literals blanked (same length, newlines kept), for brace matching."""
    return _MASK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _match(masked: str, i: int, open_: str, close: str) -> int:
    depth = 0
    for j in range(i, len(masked)):
        if masked[j] == open_:
            depth += 1
        elif masked[j] == close:
            depth -= 1
            if depth == 0:
                return j
    return -1


def _declaration_start(masked: str, pos: int) -> int:
    start = masked.rfind("\n", 0, pos) + 1
    while start > 0:
        prev_start = masked.rfind("\n", 0, start - 1) + 1
        prev = masked[prev_start:start - 1].strip()
        if not prev or prev.endswith((";", "}", "{", ":")) or prev.startswith("#"):
            break
        start = prev_start
    return start


def extract(text: str, name: str, macros: tuple[str, ...] = ()) -> Optional[tuple[int, str]]:
    """The definition of ``name`` in ``text`` (a function with its body, or a constant up to its ``;``) that
    the preprocessor keeps under the defines ``macros`` (``conditionals.live``: a version in a dropped
    ``#if`` group is never the one cut): (its first line number, its text), or None when ``text`` defines no
    such name there. ``conditionals.Unevaluable`` for a condition the cut cannot decide."""
    masked = conditionals.live(_masked(text), macros)
    for m in re.finditer(r"(?<![\w:])" + re.escape(name) + r"\s*([(=])", masked):
        if m.group(1) == "(":
            close = _match(masked, m.end(1) - 1, "(", ")")
            if close < 0:
                continue
            body = _AFTER_PARAMS.match(masked, close + 1)
            if body is None:
                continue
            end = _match(masked, body.end() - 1, "{", "}")
        else:
            end = masked.find(";", m.end())
        if end < 0:
            continue
        start = _declaration_start(masked, m.start())
        return text.count("\n", 0, start) + 1, text[start:end + 1]
    return None


_CONSTANT_BEFORE = re.compile(r"\b(?:constexpr|const)\b[^;{}()=]*$")


def defines(text: str, name: str) -> bool:
    """``text`` defines ``name``: a class or struct with its body or base list, a function with its parameter
    list and body (``extract``'s rule: a call, ``v.push_back(x);``, or a declaration is not one), or a
    ``const``/``constexpr`` constant with its initializer."""
    masked = _masked(text)
    short = name.split("::")[-1]
    if re.search(r"(?<![\w])(?:class|struct)\s+(?:\w+\s+)*?" + re.escape(short) + r"\s*(?:final\s*)?[{:]",
                 masked) is not None:
        return True
    for m in re.finditer(r"(?<![\w:.>])" + re.escape(name) + r"\s*([(=])", masked):
        if m.group(1) == "=":
            line_start = masked.rfind("\n", 0, m.start()) + 1
            if _CONSTANT_BEFORE.search(masked, line_start, m.start()) and masked[m.end():m.end() + 1] != "=":
                return True
            continue
        close = _match(masked, m.end(1) - 1, "(", ")")
        if close >= 0 and _AFTER_PARAMS.match(masked, close + 1) is not None:
            return True
    return False
