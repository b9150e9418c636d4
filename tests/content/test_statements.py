"""Statements and hints name only what a learner can import on this stack: every backticked dotted
name (`ocp.v1.training.Checkpointer`, `training.load_train_state`, `orbax.checkpoint.v1.load`) is
looked up in the problem notebook's import cell (a few usual aliases beside it: `ocp`, `ocp_v1`,
`optax`...), a fully qualified one as `from a.b import c` would find it, a bare class name in
those modules. A name that moved or never existed sends a learner after a `ModuleNotFoundError` or
`AttributeError` (5.3 once named a `training.Checkpointer` that the unit's `training`, ckptlab's,
does not have). Locals (`batches.get_state()`, `leaf.size`) and text that is not Python are left
alone."""

from __future__ import annotations

import ast
import builtins
import functools
import importlib
import re
import types

import pytest

from autograder import registry

# The aliases the course writes everywhere, whether or not a unit's import cell binds them (the
# cell's own bindings come first: unit 5's `training` is ckptlab's).
USUAL = (
    "import itertools, json, math, os\n"
    "import jax\n"
    "import jax.numpy as jnp\n"
    "import numpy as np\n"
    "import optax\n"
    "import orbax.checkpoint as ocp\n"
    "import orbax.checkpoint.experimental.v1 as ocp_v1\n"
    "import safetensors\n"
    "import tensorstore as ts\n"
    "from flax import linen as nn\n"
    "from flax import nnx\n"
)


@functools.cache
def namespace(unit: int) -> dict:
    names: dict = {}
    exec(USUAL, names)  # noqa: S102 (the course's own import lines)
    exec(registry.UNITS[unit].imports, names)  # noqa: S102
    return names


def _chains(span: str) -> list[list[str]]:
    """The maximal dotted names in ``span`` (``a.b.c``; a chain stops at a call or subscript)."""
    try:
        tree = ast.parse(span.strip(), mode="exec")
    except SyntaxError:
        return []
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)) and id(node) not in inner:
            parts = []
            while isinstance(node, ast.Attribute):
                parts.append(node.attr)
                node = node.value
            if isinstance(node, ast.Name):
                out.append([node.id, *reversed(parts)])
    return out


def _walk(obj, parts: list[str]) -> str | None:
    """Why ``obj.<parts>`` is not there, or None; a submodule counts (`safetensors.numpy`: a
    learner imports it by that name)."""
    for i, part in enumerate(parts):
        if not hasattr(obj, part) and isinstance(obj, types.ModuleType):
            try:
                importlib.import_module(f"{obj.__name__}.{part}")
            except ImportError:
                pass
        if not hasattr(obj, part):
            return f"has no {'.'.join(parts[:i + 1])!r}"
        obj = getattr(obj, part)
    return None


def _qualified(parts: list[str]) -> str | None:
    """Why ``a.b.c`` is not found as ``from a.b import c`` finds it, or None."""
    name = ".".join(parts)
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        rest = parts[cut:]
        if cut < len(parts) - 1:  # a module in the middle reached only as an attribute
            below = getattr(module, rest[0], None)
            if isinstance(below, types.ModuleType):
                return (f"`import {'.'.join(parts[:cut + 1])}` fails: it is {below.__name__}, "
                        f"reached only as an attribute")
        why = _walk(module, rest)
        return None if why is None else f"{name}: {module.__name__} {why}"
    return f"{name}: no module {parts[0]!r}"


def _anywhere(name: str, names: dict) -> bool:
    """A bare class name: a builtin, bound by the cell, or in one of its modules (two levels)."""
    if hasattr(builtins, name) or name in names:
        return True
    modules = [v for v in names.values() if isinstance(v, types.ModuleType)]
    for module in modules:
        if hasattr(module, name):
            return True
        for value in list(vars(module).values()):
            if isinstance(value, types.ModuleType) and hasattr(value, name):
                return True
    return False


def unimportable(text: str, unit: int) -> list[str]:
    """What ``text``'s backticked names get wrong in ``unit``'s notebook: one line each."""
    names = namespace(unit)
    out = []
    for span in re.findall(r"`([^`]+)`", text):
        for parts in _chains(span):
            root = parts[0]
            if root in names:
                why = _walk(names[root], parts[1:])
                if why:
                    out.append(f"`{'.'.join(parts)}`: {root} ({getattr(names[root], '__name__', root)}) {why}")
            elif len(parts) > 1 and importlib.util.find_spec(root) is not None:
                why = _qualified(parts)
                if why:
                    out.append(f"`{'.'.join(parts)}`: {why}")
            elif len(parts) == 1 and re.fullmatch(r"[A-Z]\w*[a-z]\w*", root) and not _anywhere(root, names):
                out.append(f"`{root}`: no such class in the unit's imports")
    return out


def _texts():
    for p in registry.PROBLEMS:
        yield pytest.param(p.unit, "\n".join([p.title, p.statement, *p.hints]), id=p.id)
    for number, unit in registry.UNITS.items():
        yield pytest.param(number, unit.intro, id=f"unit{number}-intro")


@pytest.mark.parametrize(("unit", "text"), list(_texts()))
def test_statements_and_hints_name_only_what_imports(unit, text):
    assert unimportable(text, unit) == []


def test_the_check_catches_a_name_that_does_not_import():
    # Control: the names a learner could not find, beside the right ones for the same things.
    bad = ("Keep a `training.Checkpointer`; the grader loads with `orbax.checkpoint.v1.load(out_dir)`; "
           "`ocp.args.PyTreeRestorer` and `ocp_v1.load_pytrees`; a `CheckpointManagr`; `nnx.Lineer(2, 3)`.")
    found = unimportable(bad, 5)
    assert len(found) == 6, found
    assert any("training.Checkpointer" in f and "ckptlab.training" in f for f in found)
    assert any("import orbax.checkpoint.v1` fails" in f for f in found)
    good = ("Keep an `ocp.v1.training.Checkpointer` (`orbax.checkpoint.experimental.v1.training.Checkpointer`); "
            "load with `orbax.checkpoint.experimental.v1.load(out_dir)` or `ocp_v1.load`; "
            "`training.load_train_state`, `batches.set_state`, `ocp.args.PyTreeRestore(..., partial_restore=True)`, "
            "`CheckpointManager`, `StandardSave`, `ValueError`, `nnx.Linear(2, 3)`, `.astype`, `<step>/`.")
    assert unimportable(good, 5) == []
