"""What each problem and each unit needs, and which parts are missing.

A problem is complete with: its declaration in the registry (statement, at least two hints, a
public example, and its debrief: why a correct answer is right and the question an interviewer
asks next, each ``MAX_DEBRIEF`` characters at most), hidden cases (each requirement of its statement quoted in the hidden record's
``requirements`` and exercised by two or more cases in every learner's draw; every requirement word
of the statement inside a quoted requirement), a reference solution, at least four curated wrong answers (and
their imports), at least three curated right answers unlike the reference (and their imports),
its stub in the unit's problem notebook (the cell tagged ``answer-<id>``). A unit is complete
with: its record (title, introduction, its notebook's import cell, the lesson and how many
figures it draws), at least one drill, libraries the sandbox knows
(``autograder/wall/libraries.py``) for its imports, its row in the README's unit table with
the registry's problem and point counts, and its item in the start notebook's unit list
(``course/00_start_here.ipynb``: its title, lesson and problem notebook, as the registry has them).

``missing(parts)`` names each gap ("2.7 reference: no orbax_thing in solutions/unit2.py");
``parts`` holds where each kind of part is looked up, so a test can take one away and watch the
check fail.
"""

from __future__ import annotations

import ast
import importlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from autograder import registry
from autograder.exports.problem_notebooks import tagged
from autograder.wall.libraries import LIBRARIES

ROOT = Path(__file__).resolve().parents[1]
MIN_WRONG = 4
MIN_RIGHT = 3
MIN_HINTS = 2
MAX_DEBRIEF = 300  # characters of each half of a debrief (why, next question): read after a result, in a terminal


def _hidden(p: registry.Problem):
    from autograder.hidden import load

    try:
        return load(p)
    except (ImportError, AttributeError, KeyError):
        return None


def _reference(p: registry.Problem):
    try:
        return getattr(importlib.import_module(f"solutions.unit{p.unit}"), p.function, None)
    except ImportError:
        return None


def _wrong() -> dict:
    from tests.wrong_answers import WRONG

    return WRONG


def _headers() -> dict:
    from tests.wrong_answers import HEADERS

    return HEADERS


def _right() -> dict:
    from tests.right_answers import RIGHT

    return RIGHT


def _right_headers() -> dict:
    from tests.right_answers import HEADERS

    return HEADERS


def _shape(source: str, function: str) -> str | None:
    """The function ``function`` of ``source`` as its syntax tree, docstrings left out: two answers
    written alike have the same shape, whatever their comments."""
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == function:
            body = node.body[1:] if node.body and isinstance(node.body[0], ast.Expr) and isinstance(
                getattr(node.body[0], "value", None), ast.Constant) and isinstance(node.body[0].value.value, str) else node.body
            return ast.dump(ast.Module(body=body, type_ignores=[]))
    return None


def _reference_shape(p: registry.Problem, reference) -> str | None:
    import inspect

    try:
        return _shape(inspect.getsource(reference), p.function)
    except (OSError, TypeError):
        return None


def _drill_units() -> set[int]:
    """The units whose file ``autograder/learner/drills/unitN.py`` lists drill kinds (``DRILLS``), each of
    them asking with ``unit_of_study=N``."""
    import pkgutil

    import numpy as np

    from autograder.learner import drills

    units = set()
    for info in pkgutil.iter_modules(drills.__path__):
        unit = int(info.name.removeprefix("unit"))
        rng = np.random.default_rng(0)
        makes = importlib.import_module(f"{drills.__name__}.{info.name}").DRILLS
        if makes and all(make(rng).unit_of_study == unit for make in makes):
            units.add(unit)
    return units


@dataclass
class Parts:
    """Where each kind of part is found (the repository's own, unless a test swaps one)."""

    problems: tuple = registry.PROBLEMS
    units: dict = field(default_factory=lambda: dict(registry.UNITS))
    hidden: object = _hidden
    reference: object = _reference
    wrong: dict = field(default_factory=_wrong)
    headers: dict = field(default_factory=_headers)
    right: dict = field(default_factory=_right)
    right_headers: dict = field(default_factory=_right_headers)
    drill_units: set = field(default_factory=_drill_units)
    libraries: tuple = LIBRARIES
    root: Path = ROOT


def _top_level_imports(source: str) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def _readme_rows(readme: str) -> dict[int, tuple[int, int]]:
    """Unit -> (problems, points) from the README's unit table."""
    rows = {}
    for m in re.finditer(r"^\| (\d+) \|.*?\((\d+) problems?, (\d+) points", readme, re.M):
        rows[int(m.group(1))] = (int(m.group(2)), int(m.group(3)))
    return rows


START = "course/00_start_here.ipynb"


def _start_units(root: Path) -> dict[int, str]:
    """Unit -> its item in the start notebook's unit list (the numbered list after **Units**)."""
    path = root / START
    if not path.exists():
        return {}
    nb = nbformat.read(str(path), as_version=4)
    text = next((c.source for c in nb.cells if c.cell_type == "markdown" and "**Units**" in c.source), "")
    text = text.split("**Units**", 1)[-1]
    return {int(m.group(1)): " ".join(m.group(2).split())
            for m in re.finditer(r"^(\d+)\. (.*?)(?=^\d+\. |^\S|\Z)", text, re.M | re.S)}


def _start_item(unit) -> str:
    """How the start notebook's list begins a unit's item."""
    return f"*{unit.title}* (`{unit.lesson}`, `{unit.notebook}`)"


# Learner ids whose hidden draws are counted: a requirement is exercised by the cases each of them gets.
LEARNERS = ("ada", "grace", "linus", "margaret", "alan", "learner-17")
MIN_CASES_PER_REQUIREMENT = 2
# A word that makes a sentence a requirement; "read-only" is a description, not one.
REQUIREMENT_WORDS = re.compile(r"(?<![\w-])(never|must|only|exactly|keeps?|kept|refuse[sd]?|raises?)(?![\w-])", re.I)
# Problems whose statements have not been read into a requirements map yet (issue 48): each is a
# gap to close, listed here so that the check holds every other problem to its map. A problem
# given a map must leave this list.
NOT_YET_MAPPED: frozenset[str] = frozenset()


def requirement_gaps(p: registry.Problem, hidden, learners=LEARNERS) -> list[str]:
    """What the problem's requirements map lacks: a requirement not quoted word for word from the
    statement, a category that no case has, fewer than two cases exercising a requirement in some
    learner's draw, a requirement word of the statement outside every quoted requirement."""
    import numpy as np

    from autograder.engine.cases import case_seed

    where = f"{p.id} {p.function}"
    requirements = getattr(hidden, "requirements", {}) or {}
    if not requirements:
        return [] if p.id in NOT_YET_MAPPED else [
            f"{where} requirements: no map from its statement's requirements to hidden cases (Hidden.requirements)"]
    gaps = []
    if p.id in NOT_YET_MAPPED:
        gaps.append(f"{where} requirements: mapped, so it leaves tests/completeness.py's NOT_YET_MAPPED")
    draws = {learner: [c.category for c in hidden.cases(np.random.default_rng(case_seed(learner, p.id)))]
             for learner in learners}
    categories = set().union(*map(set, draws.values())) if draws else set()
    spans = []
    for requirement, cats in requirements.items():
        at = p.statement.find(requirement)
        if at < 0:
            gaps.append(f"{where} requirement {requirement!r}: not quoted word for word from the statement")
        else:
            spans.append((at, at + len(requirement)))
        unknown = sorted(set(cats) - categories)
        if unknown:
            gaps.append(f"{where} requirement {requirement!r}: no case of category {', '.join(unknown)}")
        fewest, learner = min((sum(c in cats for c in draw), learner) for learner, draw in draws.items())
        if fewest < MIN_CASES_PER_REQUIREMENT:
            gaps.append(f"{where} requirement {requirement!r}: {fewest} hidden case(s) exercise it for learner "
                        f"{learner!r}, {MIN_CASES_PER_REQUIREMENT} needed")
    for m in REQUIREMENT_WORDS.finditer(p.statement):
        if not any(a <= m.start() < b for a, b in spans):
            start = p.statement.rfind(". ", 0, m.start()) + 2 if ". " in p.statement[:m.start()] else 0
            end = p.statement.find(". ", m.end())
            sentence = p.statement[start:end if end >= 0 else None]
            gaps.append(f"{where} requirement word {m.group(0)!r} outside every mapped requirement: {sentence!r}")
    return gaps


def missing(parts: Parts | None = None) -> list[str]:
    parts = parts or Parts()
    gaps = []
    notebooks: dict[str, nbformat.NotebookNode | None] = {}
    for p in parts.problems:
        where = f"{p.id} {p.function}"
        if not p.statement or len(p.hints) < MIN_HINTS or not p.examples:
            gaps.append(f"{where} declaration: needs a statement, {MIN_HINTS}+ hints and a public example")
        for name in ("why", "next_question"):
            text = getattr(p, name)
            if not text.strip() or len(text) > MAX_DEBRIEF:
                gaps.append(f"{where} debrief: its {name} is {'missing' if not text.strip() else f'{len(text)} characters'}"
                            f" (autograder/units/unit{p.unit}.py: {MAX_DEBRIEF} characters at most, shown once it is correct)")
        hidden = parts.hidden(p)
        if hidden is None:
            gaps.append(f"{where} hidden cases: no HIDDEN[{p.function!r}] in autograder/hidden/unit{p.unit}.py")
        else:
            gaps += requirement_gaps(p, hidden)
        reference = parts.reference(p)
        if reference is None:
            gaps.append(f"{where} reference: no {p.function} in solutions/unit{p.unit}.py")
        wrong = parts.wrong.get(p.id, [])
        if len(wrong) < MIN_WRONG:
            gaps.append(f"{where} wrong answers: {len(wrong)} in tests/wrong_answers/unit{p.unit}.py, {MIN_WRONG} needed")
        if wrong and p.id not in parts.headers:
            gaps.append(f"{where} wrong answers: no IMPORTS for them in tests/wrong_answers/unit{p.unit}.py")
        right = parts.right.get(p.id, [])
        if len(right) < MIN_RIGHT:
            gaps.append(f"{where} right answers: {len(right)} in tests/right_answers/unit{p.unit}.py, {MIN_RIGHT} needed")
        if right and p.id not in parts.right_headers:
            gaps.append(f"{where} right answers: no IMPORTS for them in tests/right_answers/unit{p.unit}.py")
        shapes = [_shape(source, p.function) for _, source in right]
        for (name, _), shape in zip(right, shapes):
            if shape is None:
                gaps.append(f"{where} right answers: {name} defines no {p.function}")
            elif reference is not None and shape == _reference_shape(p, reference):
                gaps.append(f"{where} right answers: {name} is the reference itself; write it another way")
            elif shapes.count(shape) > 1:
                gaps.append(f"{where} right answers: {name} is written as another of them is")
        notebook = registry.UNITS[p.unit].notebook
        path = parts.root / "problems" / notebook
        if notebook not in notebooks:
            notebooks[notebook] = nbformat.read(str(path), as_version=4) if path.exists() else None
        stub = tagged(notebooks[notebook], "answer", p) if notebooks[notebook] else None  # the cell by its tag
        if stub is None or f"def {p.function}(" not in stub.source:
            gaps.append(f"{where} notebook: no stub in problems/{notebook} (python -m autograder notebooks)")
    readme = (parts.root / "README.md").read_text()
    rows = _readme_rows(readme)
    listed = _start_units(parts.root)
    for unit in sorted(set(listed) - {p.unit for p in parts.problems}):
        gaps.append(f"unit {unit} start notebook: {START} lists a unit the registry does not have")
    for unit in sorted({p.unit for p in parts.problems}):
        ps = [p for p in parts.problems if p.unit == unit]
        record = parts.units.get(unit)
        if record is None:
            gaps.append(f"unit {unit} record: no autograder/units/unit{unit}.py with its UNIT")
            continue
        if not (record.title and record.intro and record.imports):
            gaps.append(f"unit {unit} record: needs a title, an introduction and the notebook's imports")
        unknown = sorted(_top_level_imports(record.imports) - set(parts.libraries) - set(sys.stdlib_module_names)
                         - {"autograder", "ckptlab"})
        if unknown:
            gaps.append(f"unit {unit} libraries: {', '.join(unknown)} not in autograder/wall/libraries.py")
        if not (parts.root / "course" / record.lesson).exists():
            gaps.append(f"unit {unit} lesson: no course/{record.lesson}")
        elif record.lesson_figures < 1:
            gaps.append(f"unit {unit} lesson: its record counts no figure (lesson_figures): each lesson draws")
        if unit not in parts.drill_units:
            gaps.append(f"unit {unit} drill: no drill kind in autograder/learner/drills/unit{unit}.py (DRILLS, each with "
                        f"unit_of_study={unit})")
        counts = (len(ps), sum(p.points for p in ps))
        if rows.get(unit) != counts:
            noun = "problem" if counts[0] == 1 else "problems"
            gaps.append(f"unit {unit} README: its table row should say ({counts[0]} {noun}, {counts[1]} points)")
        if not listed.get(unit, "").startswith(_start_item(record)):
            gaps.append(f"unit {unit} start notebook: {START}'s unit list should have the item "
                        f"'{unit}. {_start_item(record)}: ...'")
    return gaps
