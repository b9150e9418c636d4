"""The course's problems, gathered from ``autograder/units/``: lessons, notebook checks, the grader
and exports read them here.

Each unit is one file, ``autograder/units/unitN.py``, holding its ``UNIT`` record and its
``PROBLEMS`` (see :mod:`autograder.declarations`); adding a file adds a unit. Everything here is
public; the hidden cases live in ``autograder/hidden/`` (keyed by function name) and are loaded only
by the grader.
"""

from __future__ import annotations

import importlib
import pkgutil

from autograder import units as _units
from autograder.declarations import Example, Problem, Unit

__all__ = ["PROBLEMS", "UNITS", "Example", "Problem", "Unit", "get", "units"]


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
