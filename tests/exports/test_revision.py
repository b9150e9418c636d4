"""Revision sheets (autograder.exports.revision): one page per unit, built from the cell its lesson tags
``revision``, committed in course/revision/; each states only what its lesson states. Every check here
has a control that breaks it in a temporary copy of the lessons. Read, never run: no lesson executes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autograder import registry
from autograder.cli import main
from autograder.exports import revision

ROOT = Path(__file__).resolve().parents[2]
UNIT = 3  # the lesson the controls edit


@pytest.fixture
def copy(tmp_path) -> Path:
    """The lessons and the committed sheets, in a folder of their own."""
    (tmp_path / "course").mkdir()
    for record in registry.UNITS.values():
        shutil.copy2(ROOT / "course" / record.lesson, tmp_path / "course" / record.lesson)
    shutil.copytree(ROOT / revision.FOLDER, tmp_path / revision.FOLDER)
    return tmp_path


def _edit_sheet(root: Path, edit) -> None:
    """Apply ``edit`` (text -> text) to lesson UNIT's revision cell, in ``root``."""
    path = revision.lesson_path(UNIT, root)
    nb = json.loads(path.read_text())
    cell = next(c for c in nb["cells"] if revision.TAG in c["metadata"].get("tags", []))
    cell["source"] = edit("".join(cell["source"]))
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")


def test_the_committed_sheets_are_what_the_lessons_build():
    assert revision.differences(ROOT) == [], "run `python -m autograder revision` and commit course/revision/"
    assert main(["revision", "--check", "--root", str(ROOT)]) == 0
    built = revision.build(ROOT)
    assert sorted(built) == sorted(f"course/revision/{name}" for name in ("README.md", *(f"unit{u}.md" for u in registry.UNITS)))
    for unit, record in registry.UNITS.items():  # each names the lesson it came from
        assert f"course/{record.lesson}" in built[f"course/revision/unit{unit}.md"].split("## Terms")[0]


def test_a_lesson_edited_makes_its_committed_sheet_stale(copy, capsys):
    """The control: one word of lesson 3's revision cell changed, its sheet no longer matches, and the
    command that rebuilds it makes it match again."""
    assert revision.differences(copy) == []
    _edit_sheet(copy, lambda s: s.replace("Plan with a range, not a number", "Plan with a range"))
    assert revision.differences(copy) == [f"course/revision/unit{UNIT}.md: not what the lessons build"]
    assert main(["revision", "--check", "--root", str(copy)]) == 1
    assert main(["revision", "--root", str(copy)]) == 0
    assert revision.differences(copy) == [] and "Plan with a range:" in (copy / f"course/revision/unit{UNIT}.md").read_text()
    (copy / revision.FOLDER / "unit99.md").write_text("left over\n")  # a sheet no lesson builds is found, and removed
    assert revision.differences(copy) == ["course/revision/unit99.md: no lesson builds it"]
    main(["revision", "--root", str(copy)])
    assert not (copy / revision.FOLDER / "unit99.md").exists()
    capsys.readouterr()


def test_every_lesson_has_exactly_one_revision_cell_its_last():
    for unit in registry.UNITS:
        sheet, rest = revision.split_lesson(revision.lesson_path(unit, ROOT))
        assert sheet.startswith(revision.HEADING) and revision.HEADING not in rest, unit


@pytest.mark.parametrize("change, says", [
    ("second", "has 2 cells tagged 'revision'"),
    ("untagged", "has 0 cells tagged 'revision'"),
    ("moved", "must be a markdown cell, the lesson's last"),
])
def test_a_lesson_without_exactly_one_revision_cell_is_found(copy, change, says):
    path = revision.lesson_path(UNIT, copy)
    nb = json.loads(path.read_text())
    cell = nb["cells"][-1]
    if change == "second":
        nb["cells"].insert(0, json.loads(json.dumps(cell)) | {"id": "another"})
    elif change == "untagged":
        cell["metadata"] = {}
    else:
        nb["cells"].insert(0, nb["cells"].pop())
    path.write_text(json.dumps(nb, indent=1))
    with pytest.raises(ValueError, match=says):
        revision.split_lesson(path)
    assert any(says in p for p in revision.problems(copy))


def test_each_sheet_fits_a_page_and_states_only_what_its_lesson_states():
    """Shape and length, and every term, quoted name and number of each sheet found in its lesson's other cells."""
    assert revision.problems(ROOT) == []
    for unit in registry.UNITS:
        sheet, _ = revision.split_lesson(revision.lesson_path(unit, ROOT))
        lines = sheet.rstrip("\n").splitlines()
        assert len(lines) <= revision.MAX_LINES and max(map(len, lines)) <= revision.MAX_WIDTH, unit
        terms = [line for line in sheet.split("### Terms")[1].split("### Formulas")[0].splitlines() if line.startswith("- ")]
        assert len(terms) >= 4 and all(line.startswith(("- **", "- `")) for line in terms), (unit, terms)


@pytest.mark.parametrize("edit, says", [
    # a term the lesson never uses, in the Terms section
    (lambda s: s.replace("### Formulas", "- **zero-copy restore**: one the lesson does not teach.\n### Formulas"),
     "the term **zero-copy restore** does not occur in the lesson"),
    # a name quoted that the lesson does not have
    (lambda s: s.replace("(`nnx.get_named_sharding`", "(`ocp.restore_everything`"),
     "`ocp.restore_everything` does not occur in the lesson"),
    # a number the lesson does not state: another axis read alone at 12x, not 16x
    (lambda s: s.replace("another axis 16x", "another axis 12x"), "the number '12x' does not occur in the lesson"),
    # the same number with another unit: 16 bytes in one process, not 16x
    (lambda s: s.replace("16x in one process", "16 bytes in one process"), "the number '16 bytes' does not occur in the lesson"),
    # longer than a page, and wider than one
    (lambda s: s + "- one more rule.\n" * 3, "lines: more than one page"),
    (lambda s: s.replace("- Read cost grows", "- " + "very " * 20 + "Read cost grows"), "characters wide"),
    # a section missing
    (lambda s: s.replace("### Formulas\n", ""), "it needs the sections"),
], ids=["term", "quoted name", "number", "unit", "length", "width", "sections"])
def test_a_sheet_that_states_what_its_lesson_does_not_is_found(copy, edit, says):
    """The controls: lesson 3's sheet passes as written (checked above), and each edit is caught, naming it.
    The sheet's own words never count as the lesson's: a term it alone uses is not found."""
    assert revision.problems(copy) == []
    _edit_sheet(copy, edit)
    found = revision.problems(copy)
    assert any(says in p for p in found), found
    assert main(["revision", "--root", str(copy)]) == 1  # nothing is written from a sheet that breaks the rules
    assert revision.differences(copy) != []


def test_the_readme_says_where_the_sheets_are_and_how_they_are_built():
    readme = (ROOT / "README.md").read_text()
    learners, maintainers = readme.split("## For maintainers")
    assert "course/revision/" in learners
    assert "python -m autograder revision" in maintainers
