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

from autograder import ACROSS, FLOORS as GRADER_FLOORS, WINGS as GRADER_WINGS
from ckptlab import WINGS

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("autograder", "ckptlab", "solutions")
# The grader's map (autograder.WINGS, FLOORS, ACROSS): each floor's prefixes, from the top, derived
# from its wings; the package itself (its map) is ground.
FLOORS = tuple((" / ".join(floor), tuple(f"autograder.{m}" for wing in floor for m in GRADER_WINGS[wing])
                + (("autograder",) if floor == GRADER_FLOORS[-1] else ()))
               for floor in GRADER_FLOORS)
# ckptlab's map (its WINGS): what the grader never imports, directly or through another module, is
# the lessons' own modules and the tool; the tool imports no lesson's module either.
_WINGS = {wing: tuple(f"ckptlab.{m}" for m in modules) for wing, modules in WINGS.items()}
LESSON_MODULES = _WINGS["lessons"]
TOOL_MODULES = ("ckptlab.__main__", *_WINGS["tool"])
# A lesson's module that is also a problem's own model: the names the grader may take from it.
TAKEN_ALONE = {"ckptlab.preempt": ("SaverSpec", "kill_savers")}
MAX_LINES = 500
# A function is read whole, on a screen and a half: 80 lines, its docstring included. Past that, it
# holds phases a reader has to find by scrolling, and each phase is a function with a name.
MAX_FUNCTION_LINES = 80
# At most this many modules of more than FACE_LINES lines at the grader's top; the rest live in wings.
TOP_MODULES, FACE_LINES = 10, 20
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


def _wing(name: str) -> str | None:
    """The wing of the grader ``name`` is in (the longest prefix of ``autograder.WINGS`` it has)."""
    best = None
    for wing, members in GRADER_WINGS.items():
        for member in members:
            prefix = f"autograder.{member}"
            if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (wing, prefix)
    return "ground" if best is None and name == "autograder" else (best and best[0])


def _across(graph: dict[str, set[str]]) -> list[str]:
    """Each import between two wings of one floor that ``autograder.ACROSS`` does not give a reason for."""
    return [f"{a} ({_wing(a)}) imports {b} ({_wing(b)})" for a, targets in sorted(graph.items())
            if a.startswith("autograder") for b in sorted(targets)
            if b.startswith("autograder") and _floor(a) == _floor(b) and _wing(a) != _wing(b)
            and (_wing(a), _wing(b)) not in ACROSS]


def _long_functions(name: str, source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """Each function of ``source`` longer than ``limit`` lines (its def to its last line)."""
    return [f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno + 1 > limit]


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


def test_no_import_between_wings_of_a_floor_without_a_reason():
    graph = _graph()
    assert _across(graph) == []
    used = {(_wing(a), _wing(b)) for a, targets in graph.items() if a.startswith("autograder") for b in targets
            if b.startswith("autograder") and _wing(a) != _wing(b)}
    assert sorted(set(ACROSS) - used) == [], "a reason in autograder.ACROSS for an import no module makes"


def test_every_wing_is_on_one_floor_and_holds_what_it_names():
    on_floors = [wing for floor in GRADER_FLOORS for wing in floor]
    assert sorted(on_floors) == sorted(GRADER_WINGS) and len(set(on_floors)) == len(on_floors)
    modules = _modules()
    assert [f"autograder.{m}" for members in GRADER_WINGS.values() for m in members
            if f"autograder.{m}" not in modules] == []


def test_the_graders_top_holds_few_modules_and_thin_faces():
    """Past ten modules at the top a reader needs a map to find one; the rest live in wings. The
    paths learners type stay as faces: a few lines that import from their wing."""
    top = {p.stem: len(p.read_text().splitlines()) for p in (ROOT / "autograder").glob("*.py") if p.stem != "__init__"}
    assert len([m for m, n in top.items() if n > FACE_LINES]) <= TOP_MODULES, top
    faces = [m for m in GRADER_WINGS["learner"] if (ROOT / "autograder" / f"{m}.py").exists()]
    assert faces and [m for m in faces if top[m] > FACE_LINES] == []


def test_no_function_is_too_long_to_read_whole():
    long = [f for name, path in _modules().items() for f in _long_functions(name, path.read_text())]
    assert long == []


def _imports_tests(source: str) -> bool:
    """Whether ``source`` imports the project's tests (``tests`` or a module under it)."""
    for node in ast.walk(ast.parse(source)):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
        if isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module":
            names = [a.value for a in node.args[:1] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if any(n == "tests" or n.startswith("tests.") for n in names):
            return True
    return False


def test_product_code_imports_no_tests():
    """What ships stands without the test suite: data it needs lives with it (similarity's calibration,
    measured on the curated right answers, is a file of its own). ``bench/`` may: it measures the
    grader on the curated answers, from a checkout, and ships in no install."""
    found = [path.relative_to(ROOT).as_posix() for package in PACKAGES
             for path in sorted((ROOT / package).rglob("*.py")) if _imports_tests(path.read_text())]
    assert found == []


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


def _tests_held(tests: Path) -> set[str]:
    """What the tests' map must name: each helper and folder at the top of ``tests/`` (a folder with
    an ``__init__.py``), and each test file in a folder."""
    names = {p.name + ("/" if p.is_dir() else "") for p in tests.iterdir()
             if (p.suffix == ".py" and p.name != "__init__.py") or (p.is_dir() and (p / "__init__.py").exists())}
    return names | {p.name for p in tests.glob("*/test_*.py")}


def test_the_tests_map_names_every_file_once():
    tests = ROOT / "tests"
    names = _tests_held(tests)
    assert not list(tests.glob("test_*.py")), "a test file at the top of tests/: it goes in the folder of its part"
    assert len(names) > 70 and _unmapped_tests(names, (tests / "README.md").read_text()) == []


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
    assert _wing("autograder.notebook") == _wing("autograder.learner.drills.unit3") == "learner"
    assert _across({"autograder.classroom.batch": {"autograder.learner.report", "autograder.registry"},
                    "autograder.exports.nbgrader_cell": {"autograder.learner.notebook"}}) == [
        "autograder.classroom.batch (classroom) imports autograder.learner.report (learner)"]
    body = "def f():\n" + "    x = 1\n" * 79
    assert _long_functions("m", body) == [] and _long_functions("m", body + "    x = 2\n") == ["m.f: 81 lines"]
    assert _imports_tests("def f():\n    from tests.right_answers import unit1\n")
    assert _imports_tests("import importlib\nimportlib.import_module('tests.right_answers')\n")
    assert _imports_tests("import tests\n") and not _imports_tests("from .tests import x\nimport testsuite\n")
    assert _private_names_taken("autograder.learner.practice", "from autograder.learner.notebook import describe_args, _fmt\n") == [
        "autograder.learner.practice takes autograder.learner.notebook._fmt"]
    assert _private_names_taken("autograder.learner.drills", "from autograder.learner.drills import _own\nfrom __future__ import annotations\n") == []
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
    for package in ("autograder", "autograder.cli", "autograder.learner", "autograder.classroom", "autograder.exports",
                    "autograder.engine", "autograder.sandbox", "autograder.wall", "ckptlab", "ckptlab.tool"):
        doc = importlib.import_module(package).__doc__ or ""
        folder = ROOT.joinpath(*package.split("."))
        held = [p.stem for p in sorted(folder.glob("*.py")) if p.stem != "__init__"]
        held += [p.parent.name for p in sorted(folder.glob("*/__init__.py"))]
        missing += [f"{package}.{m}" for m in held if f"{package}.{m}`" not in doc]
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
