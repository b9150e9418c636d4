"""The house's plan, checked from its import statements (read, never run): no import cycle, no
import from a lower floor to a higher one, and no module too long to read whole.

Floors, from the top: the front ends (CLI, batch, Gradescope, nbgrader, practice, drills, progress,
release, notebook checks, revision sheets), the engine, the course's content (its registry, unit declarations and
hidden tests), the sandbox, the wall (what crosses to a worker), the ground (sources read, limits,
text). A module may import its own floor and the floors below. ``ckptlab`` (the course's shared
code) and ``solutions`` import nothing of the grader's.

The grader reaches no lesson's module and not the tool (``ckptlab``'s map says which is which), by
any chain of imports: a fix to a lesson must not move a baseline. It takes from Lesson 5's
``ckptlab.preempt`` its saver alone (problem 5.2's roots); the names of a root's step folders come
from ``ckptlab.steps``, its memory tools from ``ckptlab.memory``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from ckptlab import WINGS

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("autograder", "ckptlab", "solutions")
FLOORS = (
    ("front", ("autograder.__main__", "autograder.cli", "autograder.batch", "autograder.gradescope",
               "autograder.nbgrader_course", "autograder.nbgrader_cell", "autograder.nbgrader_autograde",
               "autograder.practice", "autograder.drills",
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
# ckptlab's map (its WINGS): what the grader never imports, directly or through another module, is
# the lessons' own modules and the tool; the tool imports no lesson's module either.
_WINGS = {wing: tuple(f"ckptlab.{m}" for m in modules) for wing, modules in WINGS.items()}
LESSON_MODULES = _WINGS["lessons"]
TOOL_MODULES = ("ckptlab.__main__", *_WINGS["tool"])
# A lesson's module that is also a problem's own model: the names the grader may take from it.
TAKEN_ALONE = {"ckptlab.preempt": ("SaverSpec", "kill_savers")}
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


def _lessons_reached(graph: dict[str, set[str]]) -> list[str]:
    """Each grader module that reaches a lesson's module or the tool, by any chain of imports."""
    return _reached(graph, [m for m in graph if m.startswith("autograder")], LESSON_MODULES + TOOL_MODULES)


def _reached(graph: dict, starts, never) -> list[str]:
    """Each of ``starts`` that reaches a module of ``never``, by any chain of imports."""
    found = []
    for start in sorted(starts):
        seen, todo = set(), [start]
        while todo:
            for target in graph.get(todo.pop(), ()):
                if target not in seen:
                    seen.add(target)
                    todo.append(target)
        found += [f"{start} reaches {m}" for m in sorted(seen & set(never))]
    return found


def _taken(source: str, module: str) -> set[str]:
    """The names ``source`` takes from ``module`` (``*`` for the module whole, imported as one)."""
    parent, _, leaf = module.rpartition(".")
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == module:
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module == parent and any(a.name == leaf for a in node.names):
            names.add("*")
        elif isinstance(node, ast.Import) and any(a.name == module for a in node.names):
            names.add("*")
    return names


def test_the_grader_imports_no_lessons_module_nor_the_tool():
    assert _lessons_reached(_graph()) == []


def test_every_ckptlab_module_is_in_one_wing_of_its_map():
    mapped = [m for modules in _WINGS.values() for m in modules]
    assert sorted(m for m in set(mapped) if mapped.count(m) > 1) == []
    found = {m for m in _modules() if m.startswith("ckptlab.") and m not in ("ckptlab.__main__", "ckptlab.adapters.__main__")}
    assert sorted(found - set(mapped)) == [], "a module of ckptlab missing from its map (ckptlab.WINGS)"
    assert sorted(set(mapped) - found) == [], "the map names a module that is not there"
    assert all(m.startswith("ckptlab.tool") for m in _WINGS["tool"])  # the tool's wing is its folder
    assert sorted(m for m in found if m.startswith("ckptlab.tool")) == sorted(_WINGS["tool"])


def test_the_tool_imports_no_lessons_module():
    graph = _graph()
    assert _reached(graph, [m for m in graph if m in TOOL_MODULES], LESSON_MODULES + _WINGS["problem models"]) == []


def test_the_grader_takes_from_a_problems_lesson_module_only_what_the_problem_is():
    extra = [f"{name}: {sorted(_taken(path.read_text(), module) - set(allowed))}"
             for name, path in _modules().items() if name.startswith("autograder")
             for module, allowed in TAKEN_ALONE.items() if _taken(path.read_text(), module) - set(allowed)]
    assert extra == []


def test_no_module_is_too_long_to_read_whole():
    long = []
    for path in _modules().values():
        relative = path.relative_to(ROOT).as_posix()
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES and not relative.startswith(LONG_ALLOWED):
            long.append(f"{relative}: {lines} lines")
    assert long == []


def _unmatched_floors(modules) -> list[str]:
    """Each entry of FLOORS that names no module or package of ours (a floor's entry left behind)."""
    return [prefix for _, prefixes in FLOORS for prefix in prefixes
            if not any(m == prefix or m.startswith(prefix + ".") for m in modules)]


def _private_names_taken(name: str, source: str) -> list[str]:
    """Each ``from <a module of ours> import _name`` in ``source`` (module ``name``): another module's
    private name. A name two modules share is made public where it lives."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.split(".")[0] in PACKAGES + ("tests",) and node.module != name:
            out += [f"{name} takes {node.module}.{a.name}" for a in node.names
                    if a.name.startswith("_") and not a.name.startswith("__")]
    return out


def test_no_module_takes_another_modules_private_name():
    taken = [t for name, path in _modules().items() for t in _private_names_taken(name, path.read_text())]
    assert taken == []


def _unmapped_tests(names: set[str], text: str) -> list[str]:
    """The files and folders of ``tests/`` that its map (``tests/README.md``) does not name exactly once."""
    return sorted(n for n in names if len(re.findall(rf"`{re.escape(n)}`", text)) != 1)


def test_the_tests_map_names_every_file_once():
    tests = ROOT / "tests"
    names = {p.name + ("/" if p.is_dir() else "") for p in tests.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())}
    assert len(names) > 60 and _unmapped_tests(names, (tests / "README.md").read_text()) == []


def test_every_floors_entry_names_a_module():
    assert _unmatched_floors(_modules()) == []


def test_the_tools_face_names_every_command_it_has():
    """``python -m ckptlab``'s own description names every command its --help lists."""
    import subprocess
    import sys

    usage = subprocess.run([sys.executable, "-m", "ckptlab", "--help"], capture_output=True, text=True, cwd=ROOT,
                           check=True).stdout.splitlines()[0]
    commands = re.search(r"\{([a-z,]+)\}", usage).group(1).split(",")
    doc = ast.get_docstring(ast.parse((ROOT / "ckptlab" / "__main__.py").read_text()))
    assert len(commands) >= 4 and [c for c in commands if f"``{c}``" not in doc] == [], (commands, doc)


def test_the_checks_can_fail():
    """Each check finds what it looks for: a planted cycle, an upward import, a stray module."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _floor("autograder.wall.codec") > _floor("autograder.engine.grade") > _floor("autograder.cli")
    assert _floor("autograder.hidden.unit5") == _floor("autograder.registry")
    assert _floor("autograder.source") == len(FLOORS) - 1 and _floor("ckptlab.layout") is None
    assert _private_names_taken("autograder.practice", "from autograder.notebook import describe_args, _fmt\n") == [
        "autograder.practice takes autograder.notebook._fmt"]
    assert _private_names_taken("autograder.drills", "from autograder.drills import _own\nfrom __future__ import annotations\n") == []
    assert _unmapped_tests({"test_a.py", "b/"}, "`test_a.py` and `test_a.py`, no b") == ["b/", "test_a.py"]
    assert _unmatched_floors({"autograder.cli", "autograder.engine.grade"}) != []  # (most entries match none of these)
    assert "autograder.engine" not in _unmatched_floors({"autograder.engine.grade"})
    planted = {"autograder.wall.memory": {"ckptlab.steps"}, "ckptlab.steps": {"ckptlab.serving"},
               "autograder.engine.grade": {"ckptlab.memory"}, "ckptlab.memory": set()}
    assert _lessons_reached(planted) == ["autograder.wall.memory reaches ckptlab.serving"]
    assert _reached({"ckptlab.tool.cli": {"ckptlab.twohost"}, "ckptlab.twohost": {"ckptlab.explore"}},
                    ["ckptlab.tool.cli"], LESSON_MODULES) == ["ckptlab.tool.cli reaches ckptlab.explore"]
    assert _lessons_reached({"autograder.cli": {"ckptlab.tool.inspection"}}) == ["autograder.cli reaches ckptlab.tool.inspection"]
    assert _taken("from ckptlab.preempt import SaverSpec, step_of\n", "ckptlab.preempt") == {"SaverSpec", "step_of"}
    assert _taken("def f():\n    from ckptlab import preempt\n", "ckptlab.preempt") == {"*"}
    assert _taken("import ckptlab.preempt\nfrom ckptlab.steps import step_of\n", "ckptlab.preempt") == {"*"}


def test_each_ckptlab_module_is_of_one_kind():
    """The package's text and its map say the same: each wing's line names its modules (see
    ckptlab/__init__.py)."""
    import ckptlab

    doc = ckptlab.__doc__ or ""
    named = re.compile(r"`(ckptlab\.[\w.]+)`")
    heads = {"shared": "- shared:", "measuring": "- measuring tools:", "problem models": "- the problems' own models",
             "lessons": "- the lessons' own:", "tool": "- the tool"}
    starts = sorted((doc.index(head), wing) for wing, head in heads.items())
    for (start, wing), (end, _) in zip(starts, [*starts[1:], (len(doc), None)]):
        expected = ("ckptlab.__main__", "ckptlab.tool") if wing == "tool" else _WINGS[wing]
        assert sorted(named.findall(doc[start:end])) == sorted(expected), wing
    assert [m for m in (*LESSON_MODULES, *TOOL_MODULES, *TAKEN_ALONE) if m not in _modules()] == []


def test_each_package_map_names_every_module_it_holds():
    """A package's docstring is its map: a module it does not name is one a reader will not find."""
    import importlib

    missing = []
    for package in ("autograder.engine", "autograder.sandbox", "autograder.wall", "ckptlab", "ckptlab.tool"):
        doc = importlib.import_module(package).__doc__ or ""
        folder = ROOT.joinpath(*package.split("."))
        missing += [f"{package}.{p.stem}" for p in sorted(folder.glob("*.py"))
                    if p.stem != "__init__" and f"{package}.{p.stem}`" not in doc]
    assert missing == []


def test_the_tools_public_face_is_four_functions_and_imports_no_jax():
    import subprocess
    import sys

    code = ("import sys, ckptlab.tool as t; assert 'jax' not in sys.modules, 'jax imported'; "
            "print(sorted(t.__all__), [getattr(t, n).__module__ for n in sorted(t.__all__)])")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert "['diff_checkpoints', 'inspect_checkpoint', 'measure_restore', 'plan_restore']" in run.stdout
    assert "'ckptlab.tool.measuring'" in run.stdout
