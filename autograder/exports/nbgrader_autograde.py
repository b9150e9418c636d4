"""Autograding the nbgrader course with the course's grader instead of a learner's kernel.

``nbgrader autograde`` never starts a kernel for a learner's notebook here: the course's
``nbgrader_config.py`` replaces nbgrader's Execute preprocessor with :class:`GradeInSandbox`,
which grades the collected notebook file with this grader (learner code only in isolated
workers, at the strict level by default) and writes each test cell's outcome as that cell's
output. nbgrader's own SaveAutoGrades then records the scores in its gradebook as usual (an
error output scores 0), so ``generate_feedback`` and ``export`` work unchanged, and no learner
cell can change a score (as it could when the test cells ran in the learner's kernel).

Instructors' side only: ``nbgrader_config.py`` loads this module (through the names
``autograder.exports.nbgrader_course`` re-exports); a learner's kernel never does.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from autograder import registry
from autograder.exports.nbgrader_cell import grading_cell_source, nbgrader_meta, wrapped_lines

try:
    from nbconvert.preprocessors import Preprocessor
    from traitlets import Bool, Float, Unicode
except ImportError:  # pragma: no cover - the learner bundle may lack nbconvert; the class is instructors'
    Preprocessor = object


class GradeInSandbox(Preprocessor):
    """nbgrader's Execute preprocessor, replaced: grade the notebook's code with the course's
    grader (hidden tests, learner code in isolated workers) and write each test cell's outcome
    as its output, an error where the problem did not earn its points."""

    if Preprocessor is not object:
        # nbconvert's preprocessors are off unless enabled: off, no test cell would get an output, and
        # nbgrader gives a test cell without an error its full points.
        enabled = Bool(True).tag(config=True)
        isolation = Unicode("strict", help="strict, basic or auto (see SECURITY.md)").tag(config=True)
        timeout = Float(900.0, help="seconds to grade one notebook").tag(config=True)

    def preprocess(self, nb, resources):
        from autograder.invoke import run_json
        from autograder.sandbox import resolve

        level = resolve(self.isolation)  # strict: refuse here, before any learner code runs
        info = resources["nbgrader"]
        student, where = info["student"], f"{info['student']}'s {info['notebook']}.ipynb"
        tests = _test_cells(nb)
        # Graded by function name, whatever cells the notebook has: a learner who submits the
        # problems/ notebook (no test cells) gets the test cells the assignment declares.
        added = _add_missing_test_cells(nb, _declared_tests(info), tests)
        if added:
            self.log.warning("autograder: %s has no test cell for %s (not the released notebook?): its functions "
                             "are graded by name, and the test cells are added", where,
                             ", ".join(problem_of(gid) or gid for gid in added))
        ids = {gid: pid for gid in tests if (pid := problem_of(gid))}
        results, why = {}, ""
        if ids:
            with tempfile.TemporaryDirectory(prefix="nbgrader-autograde-") as tmp:
                path = Path(tmp) / (info["notebook"] + ".ipynb")  # messages say "<notebook> code cell N"
                clean = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.source) for c in nb.cells
                                                        if c.cell_type == "code"])
                nbformat.write(clean, str(path))
                try:
                    data, status, last = run_json(["grade", str(path), "--only", *dict.fromkeys(ids.values()),
                                                   "--learner", student, "--no-record", "--isolation", level.level],
                                                  self.timeout)
                except subprocess.TimeoutExpired:
                    data, status, last = None, f"it took longer than {self.timeout:.0f} s", ""
            if data is None:
                why = ("the grader stopped without a result; your instructor sees this when autograding and can "
                       "grade the notebook by hand")
                self.log.error("autograder: %s not graded: the grader stopped without a result (exit status %s%s); "
                               "`python -m autograder grade %s --learner %s` shows why", where, status,
                               f": {last}" if last else "", info["notebook"] + ".ipynb", student)
            else:
                results = {p["id"]: p for p in data["problems"]}
        for gid, cell in tests.items():
            result = results.get(ids.get(gid, ""))
            cell.execution_count = None
            if result is None:
                cell.outputs = [_error_output(f"Not graded: {why or 'this test cell is not one of the course problems'}.")]
            elif result["status"] == "correct":
                text = (f"Problem {result['id']} {result['function']}: correct, {result['score']:g}/"
                        f"{result['max_score']:g} points. (isolation: {level.level})\n")
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
            else:
                cell.outputs = _failed_outputs(
                    f"Problem {result['id']} {result['function']}: {result['status'].replace('_', ' ')}, "
                    f"{result['score']:g}/{result['max_score']:g} points.",
                    f"{result['message']}\n(isolation: {level.level})")
        if results:
            got = sum(r["score"] for r in results.values())
            self.log.info("autograder: %s: %g/%g (%s)", where, got, sum(r["max_score"] for r in results.values()),
                          ", ".join(f"{r['id']} {r['status'].replace('_', ' ')}" for r in results.values()))
        return nb, resources


def problem_of(grade_id: str) -> str | None:
    """The problem id a test cell's grade id names ("p1_2-tests" -> "1.2"), if it is a course problem."""
    if not (grade_id.startswith("p") and grade_id.endswith("-tests")):
        return None
    pid = grade_id[1:-len("-tests")].replace("_", ".")
    try:
        return registry.get(pid).id
    except KeyError:
        return None


def _test_cells(nb) -> dict:
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells
            if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")}


def _declared_tests(info: dict) -> dict[str, float]:
    """The autograded test cells (grade id: points) the assignment's source notebook declares, from
    nbgrader's gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    if "db_url" not in info:  # not run by nbgrader's autograde: no gradebook to ask
        return {}
    with Gradebook(info["db_url"]) as gb:
        try:
            notebook = gb.find_notebook(info["notebook"], info["assignment"])
        except MissingEntry:
            return {}
        return {cell.name: cell.max_score for cell in notebook.grade_cells if cell.cell_type == "code"}


def _add_missing_test_cells(nb, declared: dict[str, float], tests: dict) -> list[str]:
    """Add each declared test cell of a course problem that ``nb`` lacks, after the cell that
    defines the problem's function (else at the end); return their grade ids. ``tests`` gains them."""
    added = []
    for gid, points in declared.items():
        pid = problem_of(gid)
        if gid in tests or pid is None:
            continue
        p = registry.get(pid)
        cell = new_code_cell(grading_cell_source(p))
        cell.metadata["nbgrader"] = nbgrader_meta(gid, grade=True, locked=True, points=points)
        defines = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and f"def {p.function}(" in c.source]
        nb.cells.insert(defines[-1] + 1 if defines else len(nb.cells), cell)
        tests[gid] = cell
        added.append(gid)
    return added


def _failed_outputs(headline: str, message: str) -> list:
    """A test cell that did not earn its points: the grader's message shown as HTML (its code spans
    as code, long lines wrapped), then an error (so nbgrader scores the cell 0) that says the score."""
    from autograder import text

    shown = nbformat.v4.new_output("display_data", data={
        "text/html": f"<div style='{text.MESSAGE_STYLE}'>{text.message_html(message)}</div>",
        "text/plain": "\n".join(wrapped_lines(message))})
    return [shown, _error_output(headline)]


def _error_output(message: str):
    lines = wrapped_lines(message)
    return nbformat.v4.new_output("error", ename="NotFullMarks", evalue=lines[0], traceback=lines)


def _autograde_preprocessors() -> list:
    try:
        from nbgrader.converters.autograde import Autograde
        from nbgrader.preprocessors import Execute
    except ImportError:  # pragma: no cover - instructors' side only
        return []
    return [GradeInSandbox if pp is Execute else pp for pp in Autograde.autograde_preprocessors.default()]


def _sanitize_preprocessors() -> list:
    """nbgrader's sanitizing steps, its DeduplicateIds replaced by one safe for the whole class: a
    cell whose nbgrader metadata repeats another's (a learner copied a test cell), is not a dict,
    or is of another schema, loses that metadata entirely. nbgrader's own leaves an empty dict
    there, which its next step takes for old-format metadata ("nbgrader update"), and autograde
    stops for every later student. The course's cells come back from the source notebook
    (nbgrader's OverwriteCells)."""
    try:
        from nbgrader.converters.autograde import Autograde
        from nbgrader.preprocessors import DeduplicateIds
    except ImportError:  # pragma: no cover - instructors' side only
        return []

    class DropBrokenCellMetadata(DeduplicateIds):
        def preprocess_cell(self, cell, resources, cell_index):
            meta = cell.get("metadata", {})
            if "nbgrader" not in meta:
                return cell, resources
            info = meta["nbgrader"]
            grade_id = info.get("grade_id") if isinstance(info, dict) else None
            if not isinstance(grade_id, str) or info.get("schema_version") != 3 or grade_id in self.grade_ids:
                self.log.warning("autograder: a cell's nbgrader metadata was dropped (copied or broken)")
                del meta["nbgrader"]
            else:
                self.grade_ids.add(grade_id)
            return cell, resources

    return [DropBrokenCellMetadata if pp is DeduplicateIds else pp for pp in Autograde.sanitize_preprocessors.default()]


def quiet_known_warnings() -> None:
    """Hide nbgrader's harmless SQLAlchemy 2 autoflush warnings ("Object of type <Submitted...> not
    in session"), which it prints three times for every new submission. Nothing else."""
    import warnings

    warnings.filterwarnings("ignore", message=r"Object of type <Submitted\w+> not in session")


def __getattr__(name: str):
    # Imported by nbgrader_config.py only: a learner's kernel running grade_cell never loads nbgrader.
    if name == "AUTOGRADE_PREPROCESSORS":
        return _autograde_preprocessors()
    if name == "SANITIZE_PREPROCESSORS":
        return _sanitize_preprocessors()
    raise AttributeError(name)
