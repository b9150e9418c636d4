"""The course's problems, gathered from ``autograder/units/``: lessons, notebook checks, the grader
and exports read them here.

Each unit is one file, ``autograder/units/unitN.py``, holding its ``UNIT`` record and its
``PROBLEMS`` (see :mod:`autograder.declarations`); adding a file adds a unit. Everything here is
public; the hidden cases live in ``autograder/hidden/`` (keyed by function name) and are loaded only
by the grader.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import textwrap

from autograder import units as _units
from autograder.declarations import Example, Problem, Unit

__all__ = ["PROBLEMS", "UNITS", "Example", "Problem", "Unit", "get", "hidden_tests_available", "selection",
           "stub_source", "units"]


def _gather() -> tuple[dict[int, Unit], tuple[Problem, ...]]:
    found: dict[int, Unit] = {}
    problems: list[Problem] = []
    for info in sorted(pkgutil.iter_modules(_units.__path__), key=lambda m: int(m.name.removeprefix("unit"))):
        module = importlib.import_module(f"{_units.__name__}.{info.name}")
        unit = module.UNIT
        assert info.name == f"unit{unit.number}", f"{info.name}.py declares unit {unit.number}"
        bad = [p.id for p in module.PROBLEMS if p.unit != unit.number]
        assert not bad, f"{info.name}.py declares problems of another unit: {bad}"
        found[unit.number] = unit
        problems += module.PROBLEMS
    return found, tuple(problems)


UNITS, PROBLEMS = _gather()
_BY_KEY = {p.id: p for p in PROBLEMS} | {p.function: p for p in PROBLEMS}


def get(key: str) -> Problem:
    """Look a problem up by id ("1.1") or function name."""
    try:
        return _BY_KEY[key]
    except KeyError:
        names = ", ".join(f"{p.id} {p.function}" for p in PROBLEMS)
        raise KeyError(f"no problem {key!r}; known problems: {names}") from None


def units() -> list[int]:
    return sorted({p.unit for p in PROBLEMS})


def selection(units=(), only=()) -> tuple:
    """The problems an assignment covers: those of ``units`` and the problem ids or functions in
    ``only``, in the course's order (every problem when both are empty)."""
    if not units and not only:
        return PROBLEMS
    known = {p.unit for p in PROBLEMS}
    for unit in units:
        if unit not in known:
            raise ValueError(f"no unit {unit}: the course has units {', '.join(map(str, sorted(known)))}")
    wanted = {p.id for p in PROBLEMS if p.unit in set(units)} | {get(x).id for x in only}
    return tuple(p for p in PROBLEMS if p.id in wanted)


def hidden_tests_available() -> bool:
    """False in a learner bundle: there the hidden tests and references are not installed."""
    try:
        return (importlib.util.find_spec("solutions") is not None
                and importlib.util.find_spec("autograder.hidden.unit1") is not None)
    except ModuleNotFoundError:
        return False


def stub_source(p: Problem, solution: str | None = None) -> str:
    """The function a learner starts from: its signature and statement, and ``solution``'s body or a
    ``NotImplementedError`` (nbgrader's solution markers around a body)."""
    doc = textwrap.fill(p.statement.replace("`", ""), width=88, initial_indent="    ", subsequent_indent="    ")
    head = f"def {p.call}:\n    \"\"\"\n{doc}\n    \"\"\"\n"
    if solution is None:
        return head + "    # YOUR CODE HERE\n    raise NotImplementedError"
    return head + "    ### BEGIN SOLUTION\n" + solution.rstrip() + "\n    ### END SOLUTION"
