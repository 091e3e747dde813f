"""A GitHub Actions `if:` expression evaluated for one event: True, False, or None when it
depends on something other than the event (a ref, an input, a repository setting)."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\)|,|<=|>=|<|>)|"
                    r"(?P<num>\d+(?:\.\d+)?)|(?P<id>[A-Za-z_][\w.\-*]*(?:\[[^\]]*\])*))")
UNKNOWN = object()


def evaluate(text: str, event: str) -> bool | None:
    """Whether ``text`` (with or without ``${{ }}``) holds when ``event`` triggers the run."""
    text = text.strip()
    m = re.fullmatch(r"\$\{\{(.*)\}\}", text, re.S)
    if m:
        text = m.group(1)
    elif "${{" in text:
        return None  # text with embedded expressions: a non-empty string
    try:
        tokens = _tokens(text)
        value, pos = _or(tokens, 0, event)
    except (ValueError, IndexError):
        return None
    if pos != len(tokens):
        return None
    return _truth(value)


def _tokens(text: str) -> list[tuple[str, str]]:
    out = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(text[pos:])
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _truth(value: object) -> bool | None:
    if value is UNKNOWN:
        return None
    if isinstance(value, str):
        return value != ""
    return bool(value)


def _or(tokens: list[tuple[str, str]], pos: int, event: str) -> tuple[object, int]:
    left, pos = _and(tokens, pos, event)
    while pos < len(tokens) and tokens[pos][1] == "||":
        right, pos = _and(tokens, pos + 1, event)
        a, b = _truth(left), _truth(right)
        left = True if (a is True or b is True) else (False if a is False and b is False
                                                      else UNKNOWN)
    return left, pos


def _and(tokens: list[tuple[str, str]], pos: int, event: str) -> tuple[object, int]:
    left, pos = _cmp(tokens, pos, event)
    while pos < len(tokens) and tokens[pos][1] == "&&":
        right, pos = _cmp(tokens, pos + 1, event)
        a, b = _truth(left), _truth(right)
        left = False if (a is False or b is False) else (True if a and b else UNKNOWN)
    return left, pos


def _cmp(tokens: list[tuple[str, str]], pos: int, event: str) -> tuple[object, int]:
    left, pos = _unary(tokens, pos, event)
    while pos < len(tokens) and tokens[pos][1] in ("==", "!=", "<", ">", "<=", ">="):
        op = tokens[pos][1]
        right, pos = _unary(tokens, pos + 1, event)
        if left is UNKNOWN or right is UNKNOWN or op not in ("==", "!="):
            left = UNKNOWN
            continue
        same = str(left).lower() == str(right).lower()
        left = same if op == "==" else not same
    return left, pos


def _unary(tokens: list[tuple[str, str]], pos: int, event: str) -> tuple[object, int]:
    if tokens[pos][1] == "!":
        value, pos = _unary(tokens, pos + 1, event)
        truth = _truth(value)
        return (UNKNOWN if truth is None else not truth), pos
    return _primary(tokens, pos, event)


def _primary(tokens: list[tuple[str, str]], pos: int, event: str) -> tuple[object, int]:
    kind, text = tokens[pos]
    if text == "(":
        value, pos = _or(tokens, pos + 1, event)
        if tokens[pos][1] != ")":
            raise ValueError("unclosed (")
        return value, pos + 1
    if kind == "str":
        return text[1:-1].replace("''", "'"), pos + 1
    if kind == "num":
        return text, pos + 1
    if kind == "id":
        if pos + 1 < len(tokens) and tokens[pos + 1][1] == "(":
            args: list[object] = []
            pos += 2
            while tokens[pos][1] != ")":
                value, pos = _or(tokens, pos, event)
                args.append(value)
                if tokens[pos][1] == ",":
                    pos += 1
            return _call(text, args, event), pos + 1
        if text in ("true", "false"):
            return text == "true", pos + 1
        if text == "github.event_name":
            return event, pos + 1
        return UNKNOWN, pos + 1
    raise ValueError(text)


def _call(name: str, args: list[object], event: str) -> object:
    name = name.lower()
    if name in ("success", "always"):
        return True
    if name in ("failure", "cancelled"):
        return False
    if any(a is UNKNOWN for a in args):
        return UNKNOWN
    if name == "startswith" and len(args) == 2:
        return str(args[0]).lower().startswith(str(args[1]).lower())
    if name == "endswith" and len(args) == 2:
        return str(args[0]).lower().endswith(str(args[1]).lower())
    if name == "contains" and len(args) == 2:
        return str(args[1]).lower() in str(args[0]).lower()
    return UNKNOWN
