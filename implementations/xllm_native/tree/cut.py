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


def statements_before(text: str, name: str, end: str, macros: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """The statements of function ``name``'s body (``extract``'s definition) from its first up to the line of the
    first whose text matches the pattern ``end``: (the line number of the first, their text, ""), or (0, "", why
    there are none: no such function, no such statement, or the statements before it not whole blocks)."""
    found = extract(text, name, macros)
    if found is None:
        return 0, "", f"defines no {name}"
    line, snippet = found
    masked = _masked(snippet)
    body = _AFTER_PARAMS.search(masked, _match(masked, masked.index("("), "(", ")") + 1).end()
    stop = re.compile(end).search(masked, body)
    if stop is None:
        return 0, "", f"{name} has no statement matching {end}"
    cut = max(masked.rfind("\n", body, stop.start()) + 1, body)  # the line of that statement, and after
    if masked[body:cut].count("{") != masked[body:cut].count("}"):
        return 0, "", f"{name}'s statements before {end} are not whole blocks"
    return line + snippet.count("\n", 0, body), snippet[body:cut], ""


def statements_between(text: str, name: str, start: str, end: str, macros: tuple[str, ...] = ()) -> tuple[int, str, str]:
    """The statements of function ``name``'s body from the line of the first whose text matches the pattern ``start``
    up to (not including) the line of the first after it matching ``end``: (the line number of the first, their
    text, ""), or (0, "", why there are none). A constructor's member initializers may stand between its
    parameters and its body (the body is the first brace after the parameters); the statements must be whole
    blocks. Comments and literals are blanked before the patterns are matched."""
    masked_all = conditionals.live(_masked(text), macros)
    for m in re.finditer(r"(?<![\w:])" + re.escape(name) + r"\s*\(", masked_all):
        close = _match(masked_all, m.end() - 1, "(", ")")
        open_ = masked_all.find("{", close) if close >= 0 else -1
        if open_ < 0 or ";" in masked_all[close:open_]:
            continue  # a declaration or a call, not the definition
        body_end = _match(masked_all, open_, "{", "}")
        first = re.compile(start).search(masked_all, open_ + 1, body_end)
        if first is None:
            return 0, "", f"{name} has no statement matching {start}"
        stop = re.compile(end).search(masked_all, first.end(), body_end)
        if stop is None:
            return 0, "", f"{name} has no statement matching {end} after {start}"
        begin = masked_all.rfind("\n", open_, first.start()) + 1
        cut = masked_all.rfind("\n", begin, stop.start()) + 1
        if cut <= begin or masked_all[begin:cut].count("{") != masked_all[begin:cut].count("}"):
            return 0, "", f"{name}'s statements from {start} to {end} are not whole blocks"
        return text.count("\n", 0, begin) + 1, text[begin:cut], ""
    return 0, "", f"defines no {name}"
