"""Does a problem's set of hints dictate its reference? A hint teaches a step; hints that together
spell out the reference's code leave nothing to learn (issue 48: 7.1's three hints were its six-line
reference, 3.3's and Unit 1's last hints were the answer's lines).

Only the code a hint quotes (between backticks) is compared with the reference's body, as tokens
whose local names are made alike (``meta.shape`` and ``m.shape`` are one thing): names a call,
attribute or keyword uses stay, numbers and strings become placeholders. Two measures:

- ``covered``: the share of the reference's token 5-grams found in the hints' quoted code;
- ``dictated``: the reference's statements (6 tokens or more) whose 4-grams the hints' code holds
  at least 60 % of, as a share of those statements.

A set of hints dictates its reference when either reaches its limit (``COVERED_LIMIT``,
``DICTATED_LIMIT``). The course's hints measured 0.08 and 0.33 at most once rewritten; the hints
they replaced, 0.35 and 0.5.
"""

from __future__ import annotations

import ast
import inspect
import keyword
import re
import textwrap

COVERED_LIMIT = 0.2
DICTATED_LIMIT = 0.5
_TOKEN = re.compile(r"[A-Za-z_]\w*|\d+(?:\.\d*)?|'[^']*'|\"[^\"]*\"|\*\*|//|[-+*/%<>=!]=|->|[^\s\w]")


def tokens(code: str) -> list[str]:
    raw = _TOKEN.findall(code)
    out = []
    for i, t in enumerate(raw):
        if re.match(r"[A-Za-z_]", t) and not keyword.iskeyword(t):
            before, after = (raw[i - 1] if i else ""), (raw[i + 1] if i + 1 < len(raw) else "")
            if before != "." and after not in ("(", "="):
                t = "V"
        elif t[0] in "'\"":
            t = "S"
        elif t[0].isdigit():
            t = "N"
        out.append(t)
    return out


def grams(toks: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)}


def quoted(hints) -> list[str]:
    return [s for h in hints for s in re.findall(r"`([^`]+)`", h)]


def _body(function) -> list[ast.stmt]:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    f = tree.body[0]
    first = f.body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant)
    return f.body[1:] if docstring else f.body


def statements(function) -> list[str]:
    """The reference's simple statements, each on its one first line (a loop's or a branch's own
    line is left out: its body's statements are in)."""
    out = []
    for s in _body(function):
        for node in ast.walk(s):
            if isinstance(node, ast.stmt) and not isinstance(
                    node, (ast.If, ast.For, ast.While, ast.With, ast.Try, ast.FunctionDef)):
                out.append(ast.unparse(node).split("\n")[0])
    return out


def measure(hints, function) -> tuple[float, float]:
    """``(covered, dictated)`` for ``hints`` against the reference ``function``."""
    code = quoted(hints)
    body = "\n".join(ast.unparse(s) for s in _body(function))
    ref5 = grams(tokens(body), 5)
    hint5 = set().union(*(grams(tokens(c), 5) for c in code)) if code else set()
    hint4 = set().union(*(grams(tokens(c), 4) for c in code)) if code else set()
    lines = [line for line in statements(function) if len(tokens(line)) >= 6]
    told = 0
    for line in lines:
        g = grams(tokens(line), 4)
        told += bool(g) and len(g & hint4) / len(g) >= 0.6
    return len(ref5 & hint5) / max(1, len(ref5)), told / max(1, len(lines))


def dictates(hints, function) -> bool:
    covered, dictated = measure(hints, function)
    return covered >= COVERED_LIMIT or dictated >= DICTATED_LIMIT
