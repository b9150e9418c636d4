"""Leak scans: windows of reference and hidden-test code, and hidden message strings, to look for
in anything a learner receives (the release bundle, nbgrader feedback)."""

from __future__ import annotations

import ast
import html
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 3  # consecutive lines: single idioms (`checkpointer = ocp.StandardCheckpointer()`) are shared


def code_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith(("#", "import ", "from "))]


def windows(lines: list[str]) -> set[str]:
    if len(lines) < WINDOW:
        return {"\n".join(lines)} if lines else set()
    return {"\n".join(lines[i:i + WINDOW]) for i in range(len(lines) - WINDOW + 1)}


def file_text(path: Path) -> str:
    """A file as a learner reads it: a notebook's cell sources and text outputs, an HTML page's
    text (tags removed), anything else as it is."""
    text = path.read_text(errors="replace")
    if path.suffix == ".ipynb":
        parts = []
        for cell in json.loads(text)["cells"]:
            parts.append("".join(cell["source"]))
            for out in cell.get("outputs", []):
                parts += ["".join(out.get("text", "")), "\n".join(out.get("traceback", []))]
                parts.append("".join(out.get("data", {}).get("text/plain", "")))
        return "\n".join(parts)
    if path.suffix == ".html":
        return html.unescape(re.sub(r"<[^>]+>", "", text))
    return text


def tree_windows(root: Path) -> tuple[set[str], str]:
    """Every code window, and all the text, of the files under ``root``."""
    found, texts = set(), []
    for p in sorted(root.rglob("*")):
        if p.is_file():
            text = file_text(p)
            found |= windows(code_lines(text))
            texts.append(text)
    return found, "\n".join(texts)


def solution_windows():
    """Every run of WINDOW lines of every reference function body."""
    for path in sorted((ROOT / "solutions").glob("unit*.py")):
        lines = path.read_text().splitlines()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef):
                for w in windows(code_lines("\n".join(lines[node.body[0].lineno - 1:node.end_lineno]))):
                    yield f"{path.name}:{node.name}", w


def hidden_code_windows():
    for path in sorted((ROOT / "autograder" / "hidden").glob("unit*.py")):
        for w in windows(code_lines(path.read_text())):
            yield path.name, w


def hidden_messages():
    """Every message and other text of the hidden tests, but their quotes of the public statements
    (each requirement of a problem's map is one, word for word: tests/completeness.py checks it)."""
    from autograder import registry

    public = [p.statement for p in registry.PROBLEMS]
    for path in sorted((ROOT / "autograder" / "hidden").glob("unit*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) >= 30 \
                    and not any(node.value in statement for statement in public):
                yield path.name, node.value
