"""Revision sheets: each lesson on one page, built from the lesson itself so that it cannot drift.

Lessons 1-7 each end with a markdown cell tagged ``revision`` in its metadata ("## Revision sheet",
then "### Terms", "### Formulas" and "### Rules of thumb"), written from what the lesson teaches and
shows. ``python -m autograder revision`` copies each into ``course/revision/unitN.md``, under a
header naming the lesson it came from, with an index (``course/revision/README.md``); the files are
committed, and ``tests/exports/test_revision.py`` holds them equal to what this module builds.

A sheet may state only what its lesson states (:func:`check_sheet`, run before anything is written):
every term it defines (in bold) and every name it quotes (in backticks) occurs in the lesson's other
cells, and so does every number (with its unit: ``16x``, ``8 MiB``); and it fits one printed page
(:data:`MAX_LINES` lines of at most :data:`MAX_WIDTH` characters).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from autograder import registry

TAG = "revision"
FOLDER = Path("course") / "revision"
HEADING = "## Revision sheet"
SECTIONS = ("### Terms", "### Formulas", "### Rules of thumb")
MAX_LINES = 35  # the cell's lines: with the file's header, one printed page
MAX_WIDTH = 100

_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")
# A number not inside a name (float32, v5p, e4m3): a power (2^24, 2^-8), or digits with the unit that
# follows them, which must follow them in the lesson too (16x, 8 MiB, 0.1%).
_NUMBER = re.compile(r"(?<![A-Za-z_\d.^])(\d+\^-?\d+|\d+(?:[.,]\d+)*)(x\b|%| ?(?:MiB|KiB|GiB|GB|TB|bytes)\b)?")


def _source(cell: dict) -> str:
    source = cell["source"]
    return source if isinstance(source, str) else "".join(source)


def lesson_path(unit: int, root: Path) -> Path:
    return Path(root) / "course" / registry.UNITS[unit].lesson


def split_lesson(lesson: Path) -> tuple[str, str]:
    """(the revision cell's source, the text of every other cell): ValueError unless the lesson has exactly
    one cell tagged ``revision``, a markdown cell, its last."""
    cells = json.loads(Path(lesson).read_text())["cells"]
    tagged = [i for i, cell in enumerate(cells) if TAG in cell.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        raise ValueError(f"{Path(lesson).name} has {len(tagged)} cells tagged {TAG!r}: it needs exactly one")
    (index,) = tagged
    if cells[index]["cell_type"] != "markdown" or index != len(cells) - 1:
        raise ValueError(f"{Path(lesson).name}'s revision cell must be a markdown cell, the lesson's last")
    rest = "\n".join(_source(cell) for i, cell in enumerate(cells) if i != index)
    return _source(cells[index]), rest


def _flat(text: str) -> str:
    return " ".join(text.split())


def _numbers(text: str) -> list[str]:
    return sorted({number + (unit or "") for number, unit in _NUMBER.findall(text)})


def _states_number(token: str, rest: str) -> bool:
    number, unit = _NUMBER.fullmatch(token).groups()
    space = " ?" if unit and unit.strip() not in ("x", "%") else ""
    pattern = rf"(?<![A-Za-z_\d.^]){re.escape(number)}" + (rf"{space}{re.escape(unit.strip())}(?![A-Za-z])" if unit
                                                           else r"(?!\d|[.,]\d)")
    return re.search(pattern, rest) is not None


def check_sheet(sheet: str, rest: str) -> list[str]:
    """What is wrong with a revision cell ``sheet``, given the rest of its lesson ``rest``: its shape and length,
    and each term, quoted name and number the lesson does not state."""
    problems = []
    lines = sheet.rstrip("\n").splitlines()
    if not lines or lines[0] != HEADING:
        problems.append(f"its first line must be {HEADING!r}")
    at = [lines.index(s) if s in lines else -1 for s in SECTIONS]
    if -1 in at or at != sorted(at):
        problems.append(f"it needs the sections {', '.join(SECTIONS)}, in that order")
    if len(lines) > MAX_LINES:
        problems.append(f"{len(lines)} lines: more than one page ({MAX_LINES} at most)")
    problems += [f"line {n} is {len(line)} characters wide ({MAX_WIDTH} at most)"
                 for n, line in enumerate(lines, 1) if len(line) > MAX_WIDTH]
    flat_rest = _flat(rest)
    plain_rest = _flat(rest.replace("*", "").replace("`", "")).lower()
    for term in dict.fromkeys(_BOLD.findall(_flat(sheet))):
        plain = _flat(term.replace("`", "")).strip(" :").lower()
        if plain not in plain_rest:
            problems.append(f"the term **{term}** does not occur in the lesson")
    for name in dict.fromkeys(_CODE.findall(_flat(sheet))):
        if _flat(name) not in flat_rest:
            problems.append(f"`{name}` does not occur in the lesson")
    problems += [f"the number {token!r} does not occur in the lesson" for token in _numbers(_flat(sheet))
                 if not _states_number(token, flat_rest)]
    return problems


def _title(unit: int) -> str:
    return f"Unit {unit}: {registry.UNITS[unit].title}"


def sheet_text(unit: int, root: Path) -> str:
    """The file ``course/revision/unitN.md``: a header naming the lesson, then its revision cell."""
    lesson = registry.UNITS[unit].lesson
    sheet, _ = split_lesson(lesson_path(unit, root))
    body = []
    for line in sheet.rstrip("\n").splitlines()[1:]:
        body += ["", "##" + line.removeprefix("###")] if line in SECTIONS else [line]
    return "\n".join([
        f"<!-- Built by `python -m autograder revision` from the cell tagged \"{TAG}\" at the end of",
        f"     course/{lesson}: edit that cell, not this file. -->",
        f"# Revision sheet, {_title(unit)}",
        "",
        f"From the lesson [`course/{lesson}`](../{lesson}), its last cell: its terms,",
        "formulas and rules of thumb, in the lesson's own words and numbers.",
        *body,
    ]) + "\n"


def index_text() -> str:
    rows = [f"- [{_title(unit)}](unit{unit}.md), from `course/{record.lesson}`"
            for unit, record in sorted(registry.UNITS.items())]
    return "\n".join([
        "<!-- Built by `python -m autograder revision`: edit the lessons' revision cells, not these files. -->",
        "# Revision sheets",
        "",
        "One page per unit: its terms, formulas and the rules of thumb a practitioner uses, each built from the",
        "last cell of its lesson (so it says what the lesson says, in the lesson's own numbers).",
        "",
        *rows,
    ]) + "\n"


def build(root: Path) -> dict[str, str]:
    """{path under the repository: text} of every revision file the lessons make."""
    files = {(FOLDER / f"unit{unit}.md").as_posix(): sheet_text(unit, root) for unit in sorted(registry.UNITS)}
    return {(FOLDER / "README.md").as_posix(): index_text(), **files}


def problems(root: Path) -> list[str]:
    """Every unit's lesson without exactly one revision cell, and every rule a sheet breaks."""
    found = []
    for unit in sorted(registry.UNITS):
        try:
            sheet, rest = split_lesson(lesson_path(unit, root))
        except ValueError as e:
            found.append(f"unit {unit}: {e}")
            continue
        found += [f"unit {unit} ({registry.UNITS[unit].lesson}): {p}" for p in check_sheet(sheet, rest)]
    return found


def differences(root: Path) -> list[str]:
    """The revision files that are missing, stale or left over, against what the lessons build."""
    built, folder = build(root), Path(root) / FOLDER
    out = [f"{path}: {'missing' if not (Path(root) / path).exists() else 'not what the lessons build'}"
           for path, text in built.items()
           if not (Path(root) / path).exists() or (Path(root) / path).read_text() != text]
    if folder.is_dir():
        out += [f"{FOLDER.as_posix()}/{p.name}: no lesson builds it" for p in sorted(folder.iterdir())
                if (FOLDER / p.name).as_posix() not in built]
    return out


def write(root: Path) -> list[str]:
    """Rewrite the revision files from the lessons (and remove any no lesson builds); the paths changed."""
    changed = differences(root)
    folder = Path(root) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    built = build(root)
    for p in folder.iterdir():
        if (FOLDER / p.name).as_posix() not in built:
            p.unlink()
    for path, text in built.items():
        target = Path(root) / path
        if not target.exists() or target.read_text() != text:
            target.write_text(text)
    return changed


def command(root: Path, check: bool = False) -> int:
    """``python -m autograder revision [--check]``: rebuild the sheets (or only say which are stale); 1 when
    a sheet breaks the rules (then nothing is written) or, with ``check``, is stale."""
    broken = problems(root)
    for problem in broken:
        print(f"error: {problem}", file=sys.stderr)
    if broken:
        return 1
    if check:
        stale = differences(root)
        for line in stale:
            print(f"{line} (run `python -m autograder revision`)", file=sys.stderr)
        return 1 if stale else 0
    changed = write(root)
    print("\n".join(f"wrote {line.split(':')[0]}" for line in changed) or "the revision sheets are up to date")
    return 0
