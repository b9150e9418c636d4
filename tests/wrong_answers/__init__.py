"""Curated wrong answers, one file per unit (``unitN.py``), each keyed by the function name: each
must be rejected by the hidden tests with its intended message.

A unit's file holds ``WRONG = {function: [(name, source of the learner's function, expected status,
a fragment of the message), ...]}`` and ``IMPORTS``, what those sources run with. Here they are
gathered by problem id, as the tests use them; adding a file adds a unit.
"""

from __future__ import annotations

import importlib
import pkgutil

from autograder import registry

_MODULES = [importlib.import_module(f"{__name__}.{m.name}")
            for m in sorted(pkgutil.iter_modules(__path__), key=lambda m: int(m.name.removeprefix("unit")))]

WRONG = {registry.get(function).id: answers for m in _MODULES for function, answers in m.WRONG.items()}
HEADERS = {registry.get(function).id: m.IMPORTS for m in _MODULES for function in m.WRONG}
IMPORTS = HEADERS["1.1"]  # Unit 1's: JAX, Flax and the course's models
