"""The house's plan, checked from its import statements (read, never run): no import cycle, no
import from a lower floor to a higher one, and no module too long to read whole.

Floors, from the top: the front ends (CLI, batch, Gradescope, nbgrader, practice, drills, progress,
release, notebook checks, revision sheets), the engine, the course's content (its registry, unit declarations and
hidden tests), the sandbox, the wall (what crosses to a worker), the ground (sources read, limits,
text). A module may import its own floor and the floors below. ``ckptlab`` (the course's shared
code) and ``solutions`` import nothing of the grader's."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("autograder", "ckptlab", "solutions")
FLOORS = (
    ("front", ("autograder.__main__", "autograder.cli", "autograder.batch", "autograder.gradescope",
               "autograder.nbgrader_course", "autograder.nbgrader_cell", "autograder.nbgrader_autograde",
               "autograder.nbgrader", "autograder.practice", "autograder.drills",
               "autograder.progress", "autograder.release", "autograder.report", "autograder.public",
               "autograder.notebook", "autograder.problem_notebooks", "autograder.item_analysis",
               "autograder.similarity", "autograder.revision")),
    ("engine", ("autograder.engine",)),
    ("content", ("autograder.registry", "autograder.declarations", "autograder.units", "autograder.hidden")),
    ("sandbox", ("autograder.sandbox",)),
    ("wall", ("autograder.wall",)),
    ("ground", ("autograder.source", "autograder.limits", "autograder.text", "autograder.outputs", "autograder.stack",
                "autograder.invoke", "autograder")),
)
MAX_LINES = 500
LONG_ALLOWED = ("autograder/hidden/", "ckptlab/plotting.py")


def _modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def _imports(name: str, path: Path, modules: dict) -> set[str]:
    """The modules of ours that ``path`` imports (``from a import b`` counts ``a.b`` where it is one)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _floor(name: str) -> int | None:
    """Index of the floor ``name`` is on (0 the top); None outside the grader (ckptlab, solutions)."""
    best = None
    for i, (_, prefixes) in enumerate(FLOORS):
        for prefix in prefixes:
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (i, len(prefix))
    return None if best is None else best[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle():
    assert _cycles(_graph()) == []


def test_every_grader_module_is_on_a_floor():
    assert [m for m in _graph() if m.startswith("autograder") and _floor(m) is None] == []


def test_no_import_from_a_lower_floor_to_a_higher_one():
    upward = [f"{a} ({FLOORS[_floor(a)][0]}) imports {b} ({FLOORS[_floor(b)][0]})"
              for a, targets in _graph().items() if a.startswith("autograder")
              for b in targets if b.startswith("autograder") and _floor(b) < _floor(a)]
    assert upward == []


def test_the_shared_code_and_the_references_import_nothing_of_the_graders():
    assert [(a, b) for a, targets in _graph().items() if not a.startswith("autograder")
            for b in targets if b.startswith("autograder")] == []


def test_no_module_is_too_long_to_read_whole():
    long = []
    for path in _modules().values():
        relative = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and not relative.startswith(LONG_ALLOWED):
            long.append(f"{relative}: {lines} lines")
    assert long == []


def test_the_checks_can_fail():
    """Each check finds what it looks for: a planted cycle, an upward import, a stray module."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _floor("autograder.wall.codec") > _floor("autograder.engine.grade") > _floor("autograder.cli")
    assert _floor("autograder.hidden.unit5") == _floor("autograder.registry")
    assert _floor("autograder.source") == len(FLOORS) - 1 and _floor("ckptlab.layout") is None


def test_each_package_map_names_every_module_it_holds():
    """A package's docstring is its map: a module it does not name is one a reader will not find."""
    import importlib

    missing = []
    for package in ("autograder.engine", "autograder.sandbox", "autograder.wall"):
        doc = importlib.import_module(package).__doc__ or ""
        folder = ROOT.joinpath(*package.split("."))
        missing += [f"{package}.{p.stem}" for p in sorted(folder.glob("*.py"))
                    if p.stem != "__init__" and f"{package}.{p.stem}`" not in doc]
    assert missing == []
