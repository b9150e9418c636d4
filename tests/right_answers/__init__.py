"""Curated right answers, the mirror of ``tests/wrong_answers``: for every problem, correct
solutions written unlike its reference (another Orbax API, v0 or v1; manager options such as step
names; a library's own idiom such as safetensors' ``safe_open`` or a memory map; plain arithmetic
where the reference asks JAX, or JAX where it counts by hand), each of which the hidden tests must
grade correct at the strict level. When one fails, the grader is wrong, not the answer.

A unit's file holds ``RIGHT = {function: [(name, source of the learner's function), ...]}`` and
``IMPORTS``, what those sources run with (a notebook's import cell). Here they are gathered by
problem id, as the tests use them; adding a file adds a unit.
"""

from __future__ import annotations

import importlib
import pkgutil

from autograder import registry

_MODULES = [importlib.import_module(f"{__name__}.{m.name}")
            for m in sorted((m for m in pkgutil.iter_modules(__path__) if m.name.startswith("unit")),
                           key=lambda m: int(m.name.removeprefix("unit")))]

RIGHT = {registry.get(function).id: answers for m in _MODULES for function, answers in m.RIGHT.items()}
HEADERS = {registry.get(function).id: m.IMPORTS for m in _MODULES for function in m.RIGHT}
