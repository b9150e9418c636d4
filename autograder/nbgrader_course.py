"""The course as an nbgrader course, and the autograder test cell its notebooks run.

``python -m autograder nbgrader COURSE_DIR`` writes ``nbgrader_config.py`` and one assignment per
unit, ``source/unitN/<notebook>.ipynb``: the problem notebook with the reference code between
``### BEGIN SOLUTION`` / ``### END SOLUTION`` (``nbgrader generate_assignment`` turns it back into
the stub) and, under each problem, a locked autograder test cell worth the problem's points::

    from autograder.nbgrader_course import grade_cell
    grade_cell("1.1")

The cell holds no test, so nbgrader's feedback, which shows test cells in full (nbgrader issue
917 for ``### BEGIN HIDDEN TESTS``), has no hidden test to show.

``nbgrader autograde`` never starts a kernel for a learner's notebook here: the course's
``nbgrader_config.py`` replaces nbgrader's Execute preprocessor with :class:`GradeInSandbox`,
which grades the collected notebook file with this grader (learner code only in isolated
workers, at the strict level by default) and writes each test cell's outcome as that cell's
output. nbgrader's own SaveAutoGrades then records the scores in its gradebook as usual (an
error output scores 0), so ``generate_feedback`` and ``export`` work unchanged, and no learner
cell can change a score (as it could when the test cells ran in the learner's kernel).

A learner running a test cell in their own kernel (or ``nbgrader validate``) runs
:func:`grade_cell`: the hidden tests in a separate process where they are installed, the public
examples where they are not.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_notebook

from autograder import registry

COURSE_ID = "sharded-checkpointing"
_ASSIGNMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
CELL_TIMEOUT = 180  # seconds nbgrader waits for one cell; a test cell takes a few seconds

CONFIG = f'''\
# nbgrader configuration written by `python -m autograder nbgrader`. Edit freely: the command
# never overwrites this file once it exists.
import os

from autograder.nbgrader_course import AUTOGRADE_PREPROCESSORS, SANITIZE_PREPROCESSORS, quiet_known_warnings

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "{COURSE_ID}"
# release_assignment, fetch, submit and collect go through this folder, beside this file.
c.Exchange.root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exchange")
# nbgrader 0.9.6 with SQLAlchemy 2 warns "Object of type <SubmittedAssignment> not in session"
# for every new submission; the gradebook is right (a known nbgrader issue). Only that is hidden.
quiet_known_warnings()
# Autograding runs no learner kernel: the course's grader grades each collected notebook file,
# with learner code only in isolated workers, and writes each test cell's outcome.
c.Autograde.autograde_preprocessors = AUTOGRADE_PREPROCESSORS
# A learner's copy of a test cell, or broken cell metadata, costs that learner only (nbgrader's own
# de-duplication stops the whole run on it).
c.Autograde.sanitize_preprocessors = SANITIZE_PREPROCESSORS
# "strict" refuses to grade where this machine cannot isolate learner code (see SECURITY.md);
# "basic" grades with resource limits only.
c.GradeInSandbox.isolation = "strict"
'''

COURSE_README = """\
# Sharded checkpointing in JAX: the nbgrader course

Written by `python -m autograder nbgrader`. Run nbgrader in this folder, with the course's
environment first on PATH (nbgrader runs `alembic` and the `python3` kernel from there; in the
course repository, `make venv` builds it and `source .venv/bin/activate` puts it first):

```bash
nbgrader generate_assignment unit1          # release/unit1/: solutions become stubs
# ... hand out release/unit1, then collect into submitted/<student>/unit1/ (nbgrader collect,
#     nbgrader zip_collect, or copy) ...
nbgrader autograde unit1                    # runs each problem's hidden tests; students created as needed
nbgrader generate_feedback unit1            # feedback/<student>/unit1/*.html
nbgrader export                             # grades.csv
```

One assignment per unit (`unit1` to `unit{last}`). Each problem has a locked test cell worth its
points. `nbgrader autograde` here starts no kernel for a learner's notebook: `nbgrader_config.py`
swaps nbgrader's Execute step for the course's grader, which grades the collected notebook file
with the hidden tests (learner code only in isolated workers) and writes each test cell's outcome
as its output; nbgrader records the scores as usual. The score equals `python -m autograder grade
--learner <student>` on the same notebook (set `CKPT_COURSE_SALT` the same way for both), and no
learner cell can change it. The test cells contain no tests, so the feedback shows no hidden input.

Autograding needs the strict isolation level (`python -m autograder isolation` says whether this
machine has it) and refuses to grade without it; `c.GradeInSandbox.isolation = "basic"` in
`nbgrader_config.py` grades with resource limits only (see SECURITY.md in the course repository).
"""


# --- the test cell -----------------------------------------------------------------------------

class NotFullMarks(Exception):
    """Raised by a test cell that did not earn its points: nbgrader gives an erroring cell 0.

    IPython shows ``_render_traceback_`` instead of a traceback, so feedback shows the grader's
    message and nothing of the grader's own code."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def _render_traceback_(self) -> list[str]:
        return wrapped_lines(self.message)


def _learner_id() -> str:
    """nbgrader autogrades in ``autograded/<student>/<assignment>/``: the student id, so cases match
    ``grade --learner <student>``. ``CKPT_LEARNER`` overrides; otherwise the user name."""
    if os.environ.get("CKPT_LEARNER"):
        return os.environ["CKPT_LEARNER"]
    cwd = Path.cwd()
    if cwd.parent.parent.name == "autograded":
        return cwd.parent.name
    from autograder.invoke import default_learner

    return default_learner()


def _kernel_cells() -> list[str]:
    """The cells this kernel has run, in order (the raw input history, magics and all)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise RuntimeError("grade_cell runs inside a Jupyter notebook")
    return list(shell.history_manager.input_hist_raw[1:])


def _autograding() -> bool:
    return os.environ.get("NBGRADER_EXECUTION") == "autograde"


def grade_cell(problem_id: str, timeout: float = CELL_TIMEOUT - 20) -> None:
    """Grade one problem with the hidden tests, from the code this kernel has run so far.

    Full marks: prints the result. Anything else raises :class:`NotFullMarks` with the grader's
    message (the cell errors, and nbgrader gives it 0)."""
    from autograder.release import hidden_tests_available

    p = registry.get(problem_id)
    if _autograding():
        # nbgrader is running this notebook in a kernel: the course's nbgrader_config.py (which
        # grades without one) was not loaded. A kernel's cells can change what this cell does.
        raise NotFullMarks(f"Problem {p.id}: not graded. nbgrader ran this notebook in a kernel, where the "
                           "learner's cells can change the test cells; autograde with the course's "
                           "nbgrader_config.py (python -m autograder nbgrader writes it).")
    if not hidden_tests_available():
        return _public_check(p)
    from autograder.invoke import run_json

    with tempfile.TemporaryDirectory(prefix="nbgrader-cell-") as tmp:
        # Named as the learner's notebook, so messages say "<notebook> code cell N".
        nb_path = Path(tmp) / registry.UNITS[p.unit].notebook
        nbformat.write(new_notebook(cells=[new_code_cell(c) for c in _kernel_cells()]), str(nb_path))
        try:
            data, status, _ = run_json(["grade", str(nb_path), "--only", p.id, "--learner", _learner_id(), "--no-record"],
                                    timeout)
        except subprocess.TimeoutExpired:
            raise NotFullMarks(f"Problem {p.id}: grading took longer than {timeout:.0f} s and was stopped.") from None
    if data is None:
        # No detail from the grader's output: it would reach learners' feedback.
        raise NotFullMarks(f"Problem {p.id}: the grader could not run here (exit status {status}). Your "
                           "instructor can grade the notebook with `python -m autograder grade`.")
    result = data["problems"][0]
    line = f"Problem {p.id} {p.function}: {result['status'].replace('_', ' ')}, {result['score']:g}/{result['max_score']:g} points."
    if result["status"] == "correct":
        print(line)
        return None
    raise NotFullMarks(f"{line}\n{result['message']}")


def _public_check(p: registry.Problem) -> None:
    from autograder.notebook import CheckFailed, problem

    try:
        result = problem(p.id).check()
    except CheckFailed as failed:  # raised while nbgrader validates: this cell says more
        result = failed.result
    if not result.passed:
        raise NotFullMarks(f"{result!r}\n(Public examples only: the hidden tests run when your instructor autogrades.)")
    print(f"{result!r}\n(Public examples only: the hidden tests run when your instructor autogrades.)")


# --- autograding: the grader instead of a learner kernel ------------------------------------------

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
        from autograder.sandbox.outside import resolve

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
        cell.metadata["nbgrader"] = _nbgrader_meta(gid, grade=True, locked=True, points=points)
        defines = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and f"def {p.function}(" in c.source]
        nb.cells.insert(defines[-1] + 1 if defines else len(nb.cells), cell)
        tests[gid] = cell
        added.append(gid)
    return added


def wrapped_lines(message: str, width: int = 100) -> list[str]:
    """The message's lines, each wrapped at ``width``: nbgrader's feedback and formgrader show an
    error output as preformatted text, where a long line runs off the page."""
    import textwrap

    return [piece for line in message.splitlines()
            for piece in (textwrap.wrap(line, width, subsequent_indent="    ", break_on_hyphens=False) or [""])]


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


# --- the course ----------------------------------------------------------------------------------

def _nbgrader_meta(grade_id: str, *, solution=False, grade=False, locked=False, points=None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def grading_cell_source(p: registry.Problem) -> str:
    return (f"# Autograder test for problem {p.id} ({p.points} points). The hidden tests run in a separate\n"
            "# process on the code above; outside autograding, the public examples run. Do not edit.\n"
            "from autograder.nbgrader_course import grade_cell\n"
            "\n"
            f'grade_cell("{p.id}")')


def assignment_id(unit: int) -> str:
    return f"unit{unit}"


def source_notebook(unit: int, problems=None) -> nbformat.NotebookNode:
    """The unit's problem notebook (``problems`` of it, default all) with solutions inside
    nbgrader's markers, nbgrader cell metadata, and a test cell after each problem's check cell."""
    from autograder.problem_notebooks import problem_notebook

    chosen = [p for p in (problems or registry.PROBLEMS) if p.unit == unit]
    nb = problem_notebook(unit, with_solutions=True, problems=chosen, audience="nbgrader")
    problems = {f"def {p.call}:": p for p in chosen}
    cells, current = [], None
    for cell in nb.cells:
        src = cell.source
        cells.append(cell)
        if cell.cell_type == "markdown":
            cell.metadata["nbgrader"] = _nbgrader_meta(f"{cell.id}-text", locked=True)
            continue
        head = src.splitlines()[0] if src else ""
        if head in problems:
            current = problems[head]
            cell.metadata["nbgrader"] = _nbgrader_meta(f"p{current.id.replace('.', '_')}-answer", solution=True)
        elif current is not None and ".check()" in src:
            test = new_code_cell(grading_cell_source(current))
            test.id = f"{cell.id}-test"
            test.metadata["nbgrader"] = _nbgrader_meta(f"p{current.id.replace('.', '_')}-tests", grade=True,
                                                       locked=True, points=current.points)
            cells.append(test)
            current = None
    graded = [c for c in cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert len(graded) == len(chosen), "every problem needs its test cell"
    nb.cells = cells
    return nb


def assignments(problems=None, name: str | None = None) -> dict[str, dict[int, list]]:
    """The assignments to write: ``name`` holding every chosen problem (a notebook per unit), or
    else one ``unitN`` per unit with its chosen problems."""
    chosen = list(problems or registry.PROBLEMS)
    by_unit: dict[int, list] = {}
    for p in chosen:
        by_unit.setdefault(p.unit, []).append(p)
    if name:
        return {name: by_unit}
    return {assignment_id(unit): {unit: ps} for unit, ps in by_unit.items()}


def write_course(course_dir: Path, problems=None, name: str | None = None) -> list[Path]:
    """Write (or refresh) the nbgrader course: its config and README, an ``exchange/`` folder, and
    the assignments holding ``problems`` (default: one per unit, every problem; ``name`` puts them
    in one assignment). An existing ``nbgrader_config.py`` and gradebook are kept."""
    if name is not None and not _ASSIGNMENT_NAME.fullmatch(name):
        raise ValueError(f"assignment name {name!r}: use letters, digits, '_' and '-' only (nbgrader makes it a folder)")
    course_dir.mkdir(parents=True, exist_ok=True)
    (course_dir / "exchange").mkdir(exist_ok=True)
    written = []
    config = course_dir / "nbgrader_config.py"
    if not config.exists():
        config.write_text(CONFIG)
        written.append(config)
    readme = course_dir / "README.md"
    readme.write_text(COURSE_README.format(last=max(registry.units())))
    written.append(readme)
    for assignment, units in assignments(problems, name).items():
        for unit, chosen in units.items():
            path = course_dir / "source" / assignment / registry.UNITS[chosen[0].unit].notebook
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(source_notebook(unit, chosen), str(path))
            written.append(path)
    return written
