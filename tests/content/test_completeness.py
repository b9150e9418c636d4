"""Every problem and unit has all its parts (tests/completeness.py says which are missing), and
the check fails when any one part is taken away."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from autograder import registry
from tests.completeness import Parts, _hidden, _reference, missing

P = registry.get("2.3")


def test_every_problem_and_unit_is_complete():
    assert missing() == []


def _root_without(tmp_path, change):
    """A copy of what the check reads from disk (README, course/, problems/), changed by ``change``."""
    from tests.completeness import ROOT

    for name in ("course", "problems"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "README.md", tmp_path / "README.md")
    change(tmp_path)
    return tmp_path


def _drop_stub(root):
    path = root / "problems" / registry.UNITS[P.unit].notebook
    path.write_text(path.read_text().replace(f"def {P.function}(", f"def renamed_{P.function}("))


def _drop_lesson(root):
    next((root / "course").glob("02_*.ipynb")).unlink()


def _wrong_count(root):
    path = root / "README.md"
    path.write_text(path.read_text().replace("(6 problems, 90 points)", "(5 problems, 75 points)"))


def _drop_start_item(root):
    path = root / "course" / "00_start_here.ipynb"
    path.write_text(path.read_text().replace("2. *Sharded save layouts*", "2. *Sharded layouts*"))


def _reference_source(p):
    import inspect

    return inspect.getsource(_reference(p))


def _without(d, key):
    return {k: v for k, v in d.items() if k != key}


KINDS = {
    "declaration": (lambda parts, tmp: dataclasses.replace(parts, problems=tuple(
        dataclasses.replace(p, hints=p.hints[:1]) if p is P else p for p in parts.problems)), "2.3 orbax_chunk_shape declaration"),
    "debrief": (lambda parts, tmp: dataclasses.replace(parts, problems=tuple(
        dataclasses.replace(p, why="") if p is P else p for p in parts.problems)), "2.3 orbax_chunk_shape debrief: its why is missing"),
    "a debrief too long": (lambda parts, tmp: dataclasses.replace(parts, problems=tuple(
        dataclasses.replace(p, next_question=p.next_question * 3) if p is P else p for p in parts.problems)),
        "2.3 orbax_chunk_shape debrief: its next_question is"),
    "hidden cases": (lambda parts, tmp: dataclasses.replace(
        parts, hidden=lambda p: None if p is P else _hidden(p)), "2.3 orbax_chunk_shape hidden cases"),
    "reference": (lambda parts, tmp: dataclasses.replace(
        parts, reference=lambda p: None if p is P else _reference(p)), "2.3 orbax_chunk_shape reference"),
    "wrong answers": (lambda parts, tmp: dataclasses.replace(
        parts, wrong={**parts.wrong, "2.3": parts.wrong["2.3"][:3]}), "2.3 orbax_chunk_shape wrong answers: 3"),
    "wrong answers' imports": (lambda parts, tmp: dataclasses.replace(
        parts, headers=_without(parts.headers, "2.3")), "2.3 orbax_chunk_shape wrong answers: no IMPORTS"),
    "right answers": (lambda parts, tmp: dataclasses.replace(
        parts, right={**parts.right, "2.3": parts.right["2.3"][:2]}), "2.3 orbax_chunk_shape right answers: 2"),
    "right answers' imports": (lambda parts, tmp: dataclasses.replace(
        parts, right_headers=_without(parts.right_headers, "2.3")), "2.3 orbax_chunk_shape right answers: no IMPORTS"),
    "a right answer that is the reference": (lambda parts, tmp: dataclasses.replace(
        parts, right={**parts.right, "2.3": parts.right["2.3"][:2] + [("copied", _reference_source(P))]}),
        "2.3 orbax_chunk_shape right answers: copied is the reference itself"),
    "notebook": (lambda parts, tmp: dataclasses.replace(
        parts, root=_root_without(tmp, _drop_stub)), "2.3 orbax_chunk_shape notebook"),
    "unit record": (lambda parts, tmp: dataclasses.replace(parts, units=_without(parts.units, 2)), "unit 2 record"),
    "notebook imports": (lambda parts, tmp: dataclasses.replace(parts, units={
        **parts.units, 2: dataclasses.replace(parts.units[2], imports="")}), "unit 2 record: needs"),
    "lesson": (lambda parts, tmp: dataclasses.replace(
        parts, root=_root_without(tmp, _drop_lesson)), "unit 2 lesson: no course/02_"),
    "lesson figures": (lambda parts, tmp: dataclasses.replace(parts, units={
        **parts.units, 2: dataclasses.replace(parts.units[2], lesson_figures=0)}), "unit 2 lesson: its record counts no figure"),
    "libraries": (lambda parts, tmp: dataclasses.replace(parts, units={
        **parts.units, 2: dataclasses.replace(parts.units[2], imports=parts.units[2].imports + "\nimport pandas")}),
        "unit 2 libraries: pandas not in autograder/wall/libraries.py"),
    "drill": (lambda parts, tmp: dataclasses.replace(
        parts, drill_units=parts.drill_units - {2}), "unit 2 drill"),
    "README counts": (lambda parts, tmp: dataclasses.replace(
        parts, root=_root_without(tmp, _wrong_count)), "unit 2 README: its table row should say (6 problems, 90 points)"),
    "start notebook's unit list": (lambda parts, tmp: dataclasses.replace(
        parts, root=_root_without(tmp, _drop_start_item)),
        "unit 2 start notebook: course/00_start_here.ipynb's unit list should have the item '2. *Sharded save layouts* "
        "(`02_sharded_save_layouts.ipynb`, `unit2_sharded_save_layouts.ipynb`): ...'"),
}


@pytest.mark.parametrize("kind", KINDS)
def test_the_check_names_a_missing_part(kind, tmp_path):
    take_away, named = KINDS[kind]
    gaps = missing(take_away(Parts(), tmp_path))
    assert len(gaps) == 1 and gaps[0].startswith(named), gaps


# Requirements (issue 48): each requirement the statement makes is quoted in its hidden record's map
# and exercised by two or more hidden cases in every learner's draw; every requirement word of the
# statement falls inside a quoted requirement. 7.2's map, changed one way at a time.
M = registry.get("7.2")
PROVIDED = "where the checkpoint provides a leaf, its saved value is the one to keep"


def _with_requirements(change):
    def hidden(p):
        h = _hidden(p)
        return dataclasses.replace(h, requirements=change(dict(h.requirements))) if p is M else h
    return hidden


def _one_case(requirements):
    requirements[PROVIDED] = ("provided_and_new",)  # one case of that category per draw: too few
    return requirements


def _uncovered_word(requirements):
    del requirements["never cast or reshape it"]  # the sentence's "never" left outside every requirement
    return requirements


def _misquoted(requirements):
    # not the statement's words (a requirement with no requirement word, so that nothing else is uncovered)
    requirements["a saved leaf the new model lacks"] = requirements.pop(
        "a saved leaf with no place in the new model (not dropped on purpose)")
    return requirements


def _unknown_category(requirements):
    requirements[PROVIDED] = (*requirements[PROVIDED], "no_such_case")
    return requirements


REQUIREMENT_KINDS = {
    "a requirement with one case": (
        _one_case, f"7.2 migrate_checkpoint requirement {PROVIDED!r}: 1 hidden case(s) exercise it for learner"),
    "a requirement word outside every requirement": (
        _uncovered_word, "7.2 migrate_checkpoint requirement word 'never' outside every mapped requirement: "),
    "a requirement not quoted from the statement": (
        _misquoted, "7.2 migrate_checkpoint requirement 'a saved leaf the new model lacks': not quoted word for word"),
    "a requirement naming a category no case has": (
        _unknown_category, f"7.2 migrate_checkpoint requirement {PROVIDED!r}: no case of category no_such_case"),
    "no map at all": (lambda requirements: {}, "7.2 migrate_checkpoint requirements: no map"),
}


@pytest.mark.parametrize("kind", REQUIREMENT_KINDS)
def test_the_check_names_a_requirement_without_its_cases(kind):
    change, named = REQUIREMENT_KINDS[kind]
    gaps = missing(dataclasses.replace(Parts(), hidden=_with_requirements(change)))
    assert len(gaps) == 1 and gaps[0].startswith(named), gaps


def test_a_problem_listed_as_unmapped_must_have_no_map():
    import tests.completeness as completeness

    listed = completeness.NOT_YET_MAPPED
    try:
        completeness.NOT_YET_MAPPED = listed | {"7.2"}
        gaps = missing()
    finally:
        completeness.NOT_YET_MAPPED = listed
    assert gaps == ["7.2 migrate_checkpoint requirements: mapped, so it leaves tests/completeness.py's NOT_YET_MAPPED"]
