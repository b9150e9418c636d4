"""Learners' work on an nbgrader assignment, made from the released notebook: what a learner
submits after editing the answer cells. Shared by the nbgrader round-trip test and its benchmark."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from tests.wrong_answers import WRONG

_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")


def _answer_id(cell) -> str | None:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    if meta.get("solution") and meta.get("grade_id", "").endswith("-answer"):
        return meta["grade_id"][1:-len("-answer")].replace("_", ".")
    return None


def reference_answers(source_nb: Path) -> dict[str, str]:
    """Each problem's answer cell from the instructor's source notebook, markers removed."""
    nb = nbformat.read(str(source_nb), as_version=4)
    return {pid: "\n".join(line for line in cell.source.splitlines() if not _MARKER.match(line))
            for cell in nb.cells if (pid := _answer_id(cell))}


def wrong_answer(pid: str, index: int = 0) -> str:
    """A curated wrong answer (its imports come from the notebook's import cell)."""
    return WRONG[pid][index][1].strip()


def submit(released_nb: Path, answers: dict[str, str], out: Path, extra_cells: dict[str, str] | None = None) -> Path:
    """The released notebook with some answer cells replaced (others left as the stub), and
    optional extra code cells inserted after a problem's answer cell (``extra_cells[pid]``)."""
    nb = nbformat.read(str(released_nb), as_version=4)
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        pid = _answer_id(cell)
        if pid and pid in answers:
            cell.source = answers[pid]
        if pid and extra_cells and pid in extra_cells:
            cells.append(nbformat.v4.new_code_cell(extra_cells[pid]))
    nb.cells = cells
    out.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(out))
    return out
