"""Hints that teach, not dictate: no problem's hints, alone or together, spell out its reference
(tests/dictation.py says how that is measured); the check is shown to catch hints that do."""

from __future__ import annotations

import importlib
import inspect

import pytest

from autograder import registry
from tests.dictation import dictates, measure


def _reference(p):
    return getattr(importlib.import_module(f"solutions.unit{p.unit}"), p.function)


@pytest.mark.parametrize("pid", [p.id for p in registry.PROBLEMS])
def test_no_problem_s_hints_dictate_its_reference(pid):
    p = registry.get(pid)
    covered, dictated = measure(p.hints, _reference(p))
    assert not dictates(p.hints, _reference(p)), (
        f"{pid}'s hints spell out its reference: {covered:.0%} of its code, {dictated:.0%} of its statements; "
        "rewrite them as steps that leave the code to the learner")


@pytest.mark.parametrize("pid", ["1.1", "3.3", "5.2", "7.1", "7.4"])
def test_hints_that_quote_the_reference_are_caught(pid):
    """Controls: the reference itself, quoted a line per hint, dictates it; so does the recipe 3.3's
    hints were before issue 48, whose names differ from the reference's."""
    p = registry.get(pid)
    reference = _reference(p)
    source = inspect.getsource(reference).splitlines()[1:]
    assert dictates([f"`{line.strip()}`" for line in source if line.strip()], reference)
    assert not dictates([], reference)


def test_a_recipe_in_other_names_is_caught():
    reference = _reference(registry.get("3.3"))
    recipe = ("`ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree` maps each name to an ArrayMetadata.",
              "Build the target with a dict comprehension over `specs`: "
              "`jax.ShapeDtypeStruct(meta.shape, meta.dtype, sharding=NamedSharding(mesh, spec))`.",
              "`ocp.StandardCheckpointer().restore(ckpt_dir, target)` returns arrays placed as the target says.")
    assert dictates(recipe, reference)
    assert not dictates(recipe[:1], reference)  # one step of it teaches
