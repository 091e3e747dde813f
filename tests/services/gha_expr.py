"""GitHub Actions expressions (``${{ ... }}``), evaluated as GitHub documents them.

Written from GitHub's reference ("Evaluate expressions in workflows and actions", "Contexts
reference"), not from any runner's code:

- literals: ``null``, ``true``, ``false``, numbers (``711``, ``-9.2``, ``0xff``, ``-2.99e-2``),
  strings in single quotes with ``''`` for a quote;
- operators, loosest first: ``||``, ``&&``, ``==``/``!=``, ``<``/``<=``/``>``/``>=``, ``!``,
  then property access (``a.b``, ``a['b']``, ``a[0]``), the object filter ``a.*.b`` and calls;
  ``&&``/``||`` return an operand, not a boolean (``a || 'default'``);
- comparisons are loose: operands of different types are both coerced to numbers (null 0,
  booleans 1/0, a string parsed as a number, '' 0, anything else NaN, which equals nothing),
  strings compare ignoring case, arrays and objects are equal only to themselves;
- falsy: ``false``, ``0``, ``''``, ``null``, NaN; a missing property is ``null``;
  context names, property names and function names are matched ignoring case;
- functions: ``contains`` (case-insensitive substring, or an array element loosely equal),
  ``startsWith``, ``endsWith`` (case-insensitive), ``format`` (``{0}``, ``{{``/``}}``), ``join``
  (default separator ``,``), ``toJSON`` (pretty-printed), ``fromJSON``, and the status
  functions ``success()``, ``always()``, ``cancelled()``, ``failure()``, answered by the caller
  (they mean different things for a job's and a step's ``if:``); ``hashFiles`` is refused.
- in a string (``run:``, ``env:``), each ``${{ }}`` becomes text: null ``''``, booleans
  ``true``/``false``, integral numbers without a fraction, an array ``Array`` and an object
  ``Object``; a value that is one whole ``${{ }}`` keeps its type (a ``with:`` boolean, a
  ``matrix: ${{ fromJSON(...) }}``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

Status = Callable[[str], bool]  # 'success' | 'always' | 'cancelled' | 'failure' -> value


class ExpressionError(ValueError):
    """An expression GitHub would refuse (syntax, an unknown function or context)."""


_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<num>-?(?:0x[0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?))
  | (?P<str>'(?:[^']|'')*')
  | (?P<op>==|!=|<=|>=|&&|\|\||[<>!()\[\].,*])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
""", re.X)

_FUNCTIONS = {"contains", "startswith", "endswith", "format", "join", "tojson", "fromjson",
              "success", "always", "cancelled", "failure", "hashfiles"}


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise ExpressionError(f"unexpected {text[pos:pos + 10]!r} in {text!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        if kind == "num" and out and out[-1][0] in ("num", "str", "name", ")", "]"):
            # 'a -1' is not an operator GitHub has; a minus after a value is a syntax error
            raise ExpressionError(f"unexpected {m[0]!r} in {text!r}")
        if kind != "ws":
            out.append((m[0] if kind == "op" else kind, m[0]))
    return out


class _Parser:
    """Recursive descent over the token list, evaluating as it goes (no AST: the workflow
    expressions are short, and ``&&``/``||`` short-circuit by skipping with ``live=False``)."""

    def __init__(self, text: str, contexts: Mapping[str, Any], status: Status | None) -> None:
        self.text, self.toks, self.i = text, _tokens(text), 0
        self.contexts = {k.lower(): v for k, v in contexts.items()}
        self.status = status

    def peek(self) -> str:
        return self.toks[self.i][0] if self.i < len(self.toks) else ""

    def take(self, kind: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks) or (kind and self.toks[self.i][0] != kind):
            raise ExpressionError(f"expected {kind or 'more'} in {self.text!r}")
        self.i += 1
        return self.toks[self.i - 1]

    def parse(self) -> Any:
        value = self.or_(True)
        if self.i != len(self.toks):
            raise ExpressionError(f"unexpected {self.toks[self.i][1]!r} in {self.text!r}")
        return value

    def or_(self, live: bool) -> Any:
        value = self.and_(live)
        while self.peek() == "||":
            self.take()
            right = self.and_(live and not truthy(value))
            value = value if truthy(value) else right
        return value

    def and_(self, live: bool) -> Any:
        value = self.eq(live)
        while self.peek() == "&&":
            self.take()
            right = self.eq(live and truthy(value))
            value = right if truthy(value) else value
        return value

    def eq(self, live: bool) -> Any:
        value = self.cmp(live)
        while self.peek() in ("==", "!="):
            op = self.take()[0]
            right = self.cmp(live)
            value = loose_equal(value, right) == (op == "==")
        return value

    def cmp(self, live: bool) -> Any:
        value = self.unary(live)
        while self.peek() in ("<", "<=", ">", ">="):
            op = self.take()[0]
            value = _compare(op, value, self.unary(live))
        return value

    def unary(self, live: bool) -> Any:
        if self.peek() == "!":
            self.take()
            return not truthy(self.unary(live))
        return self.postfix(live)

    def postfix(self, live: bool) -> Any:
        value = self.primary(live)
        while self.peek() in (".", "["):
            if self.take()[0] == ".":
                if self.peek() == "*":
                    self.take()
                    value = _filter(value)
                else:
                    value = _index(value, self.take("name")[1])
            else:
                key = self.or_(live)
                self.take("]")
                value = _index(value, key)
        return value

    def primary(self, live: bool) -> Any:
        kind, text = self.take()
        if kind == "num":
            return float(int(text, 16)) if "x" in text.lower() else float(text)
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "(":
            value = self.or_(live)
            self.take(")")
            return value
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r} in {self.text!r}")
        word = text.lower()
        if word in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[word]
        if self.peek() == "(":
            return self.call(word, live)
        if word not in self.contexts:
            raise ExpressionError(f"unknown context {text!r} in {self.text!r}")
        return self.contexts[word]

    def call(self, name: str, live: bool) -> Any:
        if name not in _FUNCTIONS:
            raise ExpressionError(f"unknown function {name!r} in {self.text!r}")
        self.take("(")
        args: list[Any] = []
        while self.peek() != ")":
            args.append(self.or_(live))
            if self.peek() != ")":
                self.take(",")
        self.take(")")
        if name in ("success", "always", "cancelled", "failure"):
            if args or self.status is None:
                raise ExpressionError(f"{name}() is not available here: {self.text!r}")
            return self.status(name)
        if not live:
            return None  # a short-circuited call: fromJSON('') must not raise there
        return _call(name, args, self.text)


def truthy(value: Any) -> bool:
    if isinstance(value, float) and math.isnan(value):
        return False
    return value not in (None, False, 0, "") or isinstance(value, (list, dict))


def to_number(value: Any) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return 0.0
        try:
            return float(int(text, 16)) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan


def loose_equal(a: Any, b: Any) -> bool:
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return a is b
    if type(a) is type(b) or (_is_num(a) and _is_num(b)):
        if isinstance(a, str):
            return a.lower() == str(b).lower()
        return bool(a == b)
    return bool(to_number(a) == to_number(b))  # NaN == NaN is False, as GitHub says


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _compare(op: str, a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        x: Any = a.lower()
        y: Any = b.lower()
    else:
        x, y = to_number(a), to_number(b)
    return bool({"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op])


class _Filtered(list[Any]):
    """The result of ``.*``: a property access after it applies to each element (and drops
    the elements that lack it), as ``github.event.pull_request.labels.*.name`` does."""


def _index(value: Any, key: Any) -> Any:
    if isinstance(value, _Filtered):
        return _Filtered(x for x in (_index(v, key) for v in value) if x is not None)
    if isinstance(value, dict):
        if not isinstance(key, str):
            key = to_string(key)
        if key in value:
            return value[key]
        low = key.lower()
        return next((v for k, v in value.items() if k.lower() == low), None)
    if isinstance(value, list):
        n = to_number(key)
        if math.isnan(n) or n != int(n) or not 0 <= int(n) < len(value):
            return None
        return value[int(n)]
    return None


def _filter(value: Any) -> list[Any]:
    if isinstance(value, _Filtered):
        return _Filtered(x for v in value for x in _filter(v))
    if isinstance(value, dict):
        return _Filtered(value.values())
    if isinstance(value, list):
        return _Filtered(value)
    return _Filtered()


def _call(name: str, args: list[Any], text: str) -> Any:
    def arity(lo: int, hi: int) -> None:
        if not lo <= len(args) <= hi:
            raise ExpressionError(f"{name}() takes {lo}..{hi} arguments: {text!r}")

    if name == "contains":
        arity(2, 2)
        hay, needle = args
        if isinstance(hay, list):
            return any(loose_equal(x, needle) for x in hay)
        return to_string(needle).lower() in to_string(hay).lower()
    if name in ("startswith", "endswith"):
        arity(2, 2)
        s, part = to_string(args[0]).lower(), to_string(args[1]).lower()
        return s.startswith(part) if name == "startswith" else s.endswith(part)
    if name == "format":
        arity(1, 99)
        return _format(to_string(args[0]), [to_string(a) for a in args[1:]], text)
    if name == "join":
        arity(1, 2)
        sep = to_string(args[1]) if len(args) > 1 else ","
        items = args[0] if isinstance(args[0], list) else [args[0]]
        return sep.join(to_string(x) for x in items)
    if name == "tojson":
        arity(1, 1)
        return json.dumps(_plain(args[0]), indent=2)
    if name == "fromjson":
        arity(1, 1)
        try:
            return _numbers(json.loads(to_string(args[0])))
        except json.JSONDecodeError as exc:
            raise ExpressionError(
                f"fromJSON: not JSON ({exc}): {to_string(args[0])[:80]!r}") from None
    raise ExpressionError(f"{name}() is not interpreted here (no files): {text!r}")


def _format(fmt: str, args: list[str], text: str) -> str:
    def one(m: re.Match[str]) -> str:
        if m[0] in ("{{", "}}"):
            return m[0][0]
        n = int(m[1])
        if n >= len(args):
            raise ExpressionError(f"format(): no argument {n}: {text!r}")
        return args[n]

    return re.sub(r"\{\{|\}\}|\{(\d+)\}", one, fmt)


def _numbers(value: Any) -> Any:
    """JSON numbers as GitHub holds them (one number type): 3 and 3.0 are the same."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return float(value)
    if isinstance(value, list):
        return [_numbers(x) for x in value]
    if isinstance(value, dict):
        return {k: _numbers(v) for k, v in value.items()}
    return value


def _plain(value: Any) -> Any:
    if _is_num(value) and float(value).is_integer():
        return int(value)
    if isinstance(value, list):
        return [_plain(x) for x in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def to_string(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if _is_num(value):
        f = float(value)
        if math.isnan(f):
            return "NaN"
        return str(int(f)) if f.is_integer() else repr(f)
    if isinstance(value, list):
        return "Array"
    if isinstance(value, dict):
        return "Object"
    return str(value)


def evaluate(expr: str, contexts: Mapping[str, Any], status: Status | None = None) -> Any:
    """The value of one expression (the text inside ``${{ }}``)."""
    return _Parser(expr, contexts, status).parse()


_WHOLE = re.compile(r"\s*\$\{\{(.*?)\}\}\s*", re.S)
_PART = re.compile(r"\$\{\{(.*?)\}\}", re.S)


def interpolate(value: Any, contexts: Mapping[str, Any], status: Status | None = None) -> Any:
    """A workflow value with its ``${{ }}`` evaluated: a string that is one whole expression
    keeps the expression's type, any other string becomes text; lists and mappings are
    interpolated item by item (keys too)."""
    if isinstance(value, str):
        whole = _WHOLE.fullmatch(value)
        if whole and "${{" not in whole[1]:
            return evaluate(whole[1], contexts, status)
        return _PART.sub(lambda m: to_string(evaluate(m[1], contexts, status)), value)
    if isinstance(value, list):
        return [interpolate(x, contexts, status) for x in value]
    if isinstance(value, dict):
        return {interpolate(k, contexts, status): interpolate(v, contexts, status)
                for k, v in value.items()}
    return value


def text(value: Any, contexts: Mapping[str, Any], status: Status | None = None) -> str:
    """A value as a step or job gets it in ``env:``/``run:``: always text."""
    return to_string(interpolate(value, contexts, status))


def condition(value: Any, contexts: Mapping[str, Any], status: Status) -> bool:
    """An ``if:``: an expression with or without ``${{ }}``; with no status function in it,
    GitHub evaluates ``success() && (...)``. Text around a ``${{ }}`` makes it a string, which
    is true unless empty (GitHub's documented pitfall)."""
    if value is None or value == "":
        return status("success")
    if isinstance(value, bool):
        return value and status("success")
    raw = str(value).strip()
    whole = _WHOLE.fullmatch(raw)
    if whole and "${{" not in whole[1]:
        raw = whole[1]
    elif "${{" in raw:
        return truthy(interpolate(raw, contexts, status)) and status("success")
    if not re.search(r"\b(success|always|cancelled|failure)\s*\(", raw, re.I):
        raw = f"success() && ({raw})"
    return truthy(evaluate(raw, contexts, status))
