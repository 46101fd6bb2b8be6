"""What the C preprocessor keeps of one file under given defines: its ``#if`` groups evaluated, nothing included.

``live(text, defines)`` blanks every line of a group the preprocessor drops (``#if`` / ``#ifdef`` /
``#ifndef`` / ``#elif`` / ``#else`` / ``#endif``) and the directive lines themselves, keeping each newline,
so that offsets and line numbers stay the file's own (the cut's ``#line`` still names the tree's lines).
A condition is evaluated over the defines (``NAME`` is 1, ``NAME=VALUE`` its value) and the file's own
``#define`` / ``#undef`` above it: ``defined X``, ``defined(X)``, ``!``, ``&&``, ``||``, comparisons, ``+``,
``-``, parentheses, integers; a name no define gives is 0, as the C standard says (a macro that only an
included header defines is unknown here). A condition outside that grammar, met where it decides what is
kept, raises ``Unevaluable`` naming its line.
"""

from __future__ import annotations

import operator
import re
from typing import Iterable

_DIRECTIVE = re.compile(r"^[ \t]*#[ \t]*(ifdef|ifndef|if|elif|else|endif|define|undef)\b(.*)$", re.S)
_TOKEN = re.compile(r"\s*(?:(0[xX][0-9a-fA-F]+|\d+)[uUlL]*|([A-Za-z_]\w*)|(&&|\|\||==|!=|<=|>=|[()!<>+\-]))")
_BINARY = (("||",), ("&&",), ("==", "!="), ("<", ">", "<=", ">="), ("+", "-"))
_OPS = {"||": lambda a, b: bool(a or b), "&&": lambda a, b: bool(a and b), "==": operator.eq, "!=": operator.ne,
        "<": operator.lt, ">": operator.gt, "<=": operator.le, ">=": operator.ge, "+": operator.add, "-": operator.sub}


class Unevaluable(ValueError):
    """A condition this evaluator cannot decide: its 1-based line and its text."""

    def __init__(self, line: int, directive: str) -> None:
        super().__init__(f"line {line}: {directive}")
        self.line = line
        self.directive = directive


def macros_of(defines: Iterable[str]) -> dict:
    """``-D`` style defines as a table: ``NAME`` -> ``1``, ``NAME=VALUE`` -> ``VALUE``."""
    table = {}
    for d in defines:
        name, _, value = d.partition("=")
        table[name] = value if "=" in d else "1"
    return table


def _tokens(expr: str) -> list:
    out, i = [], 0
    expr = expr.rstrip()
    while i < len(expr):
        m = _TOKEN.match(expr, i)
        if m is None or m.end() == i:
            raise ValueError(expr[i:])
        out.append(("int", int(m.group(1), 0)) if m.group(1) else ("name", m.group(2)) if m.group(2)
                   else ("op", m.group(3)))
        i = m.end()
    return out


def _value(name: str, macros: dict, depth: int = 0) -> int:
    if name not in macros:
        return 0
    text = macros[name].strip() or "0"
    if re.fullmatch(r"[A-Za-z_]\w*", text) and depth < 8:
        return _value(text, macros, depth + 1)
    return evaluate(text, macros, depth + 1)


def evaluate(expr: str, macros: dict, depth: int = 0) -> int:
    """The integer value of ``#if expr`` under ``macros``; ``ValueError`` outside the grammar."""
    if depth > 8:
        raise ValueError(expr)
    toks = _tokens(expr)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else ("end", "")

    def take(op: str) -> None:
        nonlocal pos
        if peek() != ("op", op):
            raise ValueError(expr)
        pos += 1

    def unary() -> int:
        nonlocal pos
        kind, val = peek()
        if kind == "int":
            pos += 1
            return val
        if kind == "name" and val == "defined":
            pos += 1
            paren = peek() == ("op", "(")
            if paren:
                pos += 1
            kind, name = peek()
            if kind != "name":
                raise ValueError(expr)
            pos += 1
            if paren:
                take(")")
            return int(name in macros)
        if kind == "name":
            pos += 1
            if peek() == ("op", "("):  # a function-like macro (__has_include(...), ...): not decidable here
                raise ValueError(expr)
            return _value(val, macros, depth)
        if (kind, val) == ("op", "("):
            pos += 1
            v = binary(0)
            take(")")
            return v
        if (kind, val) == ("op", "!"):
            pos += 1
            return int(not unary())
        if (kind, val) == ("op", "-"):
            pos += 1
            return -unary()
        raise ValueError(expr)

    def binary(level: int) -> int:
        nonlocal pos
        if level == len(_BINARY):
            return unary()
        left = binary(level + 1)
        while peek()[0] == "op" and peek()[1] in _BINARY[level]:
            op = peek()[1]
            pos += 1
            right = binary(level + 1)
            left = int(_OPS[op](left, right))
        return left

    result = binary(0)
    if pos != len(toks):
        raise ValueError(expr)
    return result


def _decide(kind: str, cond: str, macros: dict, line: int, directive: str) -> bool:
    """Whether the group of ``#<kind> cond`` is kept; ``Unevaluable`` outside the grammar."""
    try:
        if kind in ("ifdef", "ifndef"):
            name = cond.split()[0] if cond.split() else ""
            if not re.fullmatch(r"[A-Za-z_]\w*", name):
                raise ValueError(cond)
            return (name in macros) == (kind == "ifdef")
        return bool(evaluate(cond, macros))
    except (ValueError, RecursionError):
        raise Unevaluable(line, directive.strip()) from None


def live(text: str, defines: Iterable[str] = ()) -> str:
    """``text`` (comments already blanked) with what the preprocessor drops under ``defines`` blanked,
    newlines kept; ``Unevaluable`` for a condition that decides what is kept and cannot be evaluated."""
    macros = macros_of(defines)
    lines = text.split("\n")
    out: list = []
    stack: list = []  # per open group: [parent live, a branch taken]
    keep = True
    i = 0
    while i < len(lines):
        j = i
        while lines[j].endswith("\\") and j + 1 < len(lines):
            j += 1
        logical = " ".join(line[:-1] if line.endswith("\\") else line for line in lines[i:j + 1])
        m = _DIRECTIVE.match(logical)
        span = lines[i:j + 1]
        i = j + 1
        if m is None:
            out += span if keep else [" " * len(line) for line in span]
            continue
        kind, rest = m.group(1), m.group(2).strip()
        out += [" " * len(line) for line in span]
        first = i - len(span) + 1  # the directive's 1-based line
        if kind in ("if", "ifdef", "ifndef"):
            taken = keep and _decide(kind, rest, macros, first, logical)
            stack.append([keep, taken])
            keep = taken
        elif kind in ("elif", "else", "endif") and not stack:
            raise Unevaluable(first, f"{logical.strip()} without its #if")
        elif kind == "elif":
            parent, taken = stack[-1]
            keep = parent and not taken and _decide(kind, rest, macros, first, logical)
            stack[-1][1] = taken or keep
        elif kind == "else":
            parent, taken = stack[-1]
            keep = parent and not taken
            stack[-1][1] = True
        elif kind == "endif":
            keep = stack.pop()[0]
        elif keep and kind == "define":
            parts = rest.split(None, 1)
            if parts and re.fullmatch(r"[A-Za-z_]\w*", parts[0]):  # function-like macros (NAME(x)) are skipped
                macros[parts[0]] = parts[1] if len(parts) > 1 else ""
        elif keep and kind == "undef":
            macros.pop(rest.split()[0] if rest.split() else "", None)
    return "\n".join(out)
