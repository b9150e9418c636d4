"""The nbgrader round trip, with real nbgrader: generate_assignment, three collected submissions,
autograde, generate_feedback, export. Scores must equal `python -m autograder grade`, and nothing
of the hidden tests or the references may reach the learners' release or feedback."""

from __future__ import annotations

import csv
import inspect
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import registry
from autograder.engine.grade import grade
from autograder.exports.nbgrader_cell import grading_cell_source
from autograder.exports.nbgrader_course import source_notebook, write_course
from autograder.exports.problem_notebooks import tagged
from solutions import unit1
from tests.leaks import hidden_code_windows, solution_windows, tree_windows
from tests.nbgrader_work import reference_answers, submit, wrong_answer

TAMPER = ("import autograder.exports.nbgrader_course as _course\n"
          "_course.grade_cell = lambda problem_id, *args, **kwargs: print('full marks')")
STUDENTS = ("ada", "bob", "cy", "dan", "eve", "fay")
UNIT = 1
NOTEBOOK = registry.UNITS[UNIT].notebook
PROBLEMS = [p for p in registry.PROBLEMS if p.unit == UNIT]
BIN = Path(sys.executable).parent
ROOT = Path(__file__).resolve().parents[2]


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    # nbgrader runs `alembic` and the python3 kernel through PATH: this environment's bin/ first.
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    out = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{out.stderr[-3000:]}"
    return out


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    if shutil.which("nbgrader", path=str(BIN)) is None:
        pytest.fail("nbgrader is not installed in this environment: pip install -e '.[test]'")
    course = tmp_path_factory.mktemp("nbgrader") / "course"
    write_course(course)
    nbgrader(course, "generate_assignment", f"unit{UNIT}")
    released = course / "release" / f"unit{UNIT}" / NOTEBOOK
    ref = reference_answers(course / "source" / f"unit{UNIT}" / NOTEBOOK)
    work = {
        # every problem solved
        "ada": (ref, None),
        # two right, one curated wrong answer, one left as the stub
        "bob": ({"1.1": ref["1.1"], "1.2": wrong_answer("1.2"), "1.3": ref["1.3"]}, None),
        # a syntax error in one answer, a cell that crashes at the top level, one right answer
        "cy": ({"1.1": ref["1.1"].replace("):", ")", 1), "1.2": ref["1.2"]},
               {"1.2": "raise RuntimeError('a cell that crashes at the top level')"}),
        # every answer a stub, and an early cell that replaces the test cells' grader with a no-op:
        # in a learner's kernel that passed every test cell
        # every problem solved, and a test cell copied (its nbgrader metadata too): nbgrader's own
        # de-duplication stopped the whole autograde on it, so eve, after dan, was never graded
        "dan": (ref, None),
        "eve": ({}, {"1.1": TAMPER}),
    }
    for student, (answers, extra) in work.items():
        folder = course / "submitted" / student / f"unit{UNIT}"
        submit(released, answers, folder / NOTEBOOK, extra)
        (folder / "timestamp.txt").write_text("2026-11-20 12:00:00.000000 UTC")
    dan = nbformat.read(str(course / "submitted" / "dan" / f"unit{UNIT}" / NOTEBOOK), as_version=4)
    first_test = next(i for i, c in enumerate(dan.cells) if c.metadata.get("nbgrader", {}).get("grade"))
    copy = nbformat.from_dict(dan.cells[first_test])
    copy.id = "copied-test-cell"
    dan.cells.insert(first_test + 1, copy)
    nbformat.write(dan, str(course / "submitted" / "dan" / f"unit{UNIT}" / NOTEBOOK))
    # fay submits the notebook the README points learners to (problems/, no nbgrader cells at all):
    # one right answer, one curated wrong answer, two stubs.
    repo_nb = nbformat.read(str(ROOT / "problems" / NOTEBOOK), as_version=4)
    for pid, answer in (("1.1", ref["1.1"]), ("1.2", wrong_answer("1.2"))):
        tagged(repo_nb, "answer", registry.get(pid)).source = answer
    (course / "submitted" / "fay" / f"unit{UNIT}").mkdir(parents=True)
    nbformat.write(repo_nb, str(course / "submitted" / "fay" / f"unit{UNIT}" / NOTEBOOK))
    out = nbgrader(course, "autograde", f"unit{UNIT}")
    (course / "autograde.log").write_text(out.stdout + out.stderr)
    nbgrader(course, "generate_feedback", f"unit{UNIT}")
    nbgrader(course, "export")
    return course


def test_source_notebooks_are_valid_nbgrader_notebooks():
    for unit in registry.units():
        nb = source_notebook(unit)
        nbformat.validate(nb)
        tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        problems = [p for p in registry.PROBLEMS if p.unit == unit]
        assert [c.metadata.nbgrader.points for c in tests] == [p.points for p in problems]
        assert [c.source for c in tests] == [grading_cell_source(p) for p in problems]
        answers = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")]
        assert len(answers) == len(problems)
        assert all("### BEGIN SOLUTION" in c.source and "### END SOLUTION" in c.source for c in answers)
        ids = [c.metadata.nbgrader.grade_id for c in nb.cells if "nbgrader" in c.metadata]
        assert len(ids) == len(set(ids))


def test_each_problems_cells_are_tagged_once():
    """The course writer finds a problem's answer and check cells by their tags: each problem
    notebook tags exactly one cell of each kind per problem, the answer defining its function."""
    from autograder.exports.problem_notebooks import TAG_KINDS, problem_notebook, tag

    for unit in registry.units():
        nb = problem_notebook(unit)
        tags = [t for c in nb.cells for t in c.metadata.get("tags", [])]
        problems = [p for p in registry.PROBLEMS if p.unit == unit]
        assert sorted(tags) == sorted(tag(kind, p) for p in problems for kind in TAG_KINDS)
        for p in problems:
            assert tagged(nb, "answer", p).source.startswith(f"def {p.call}:")
            assert tagged(nb, "check", p).source.endswith(".check()")


def test_course_keeps_the_instructors_config(tmp_path):
    write_course(tmp_path)
    assert "GradeInSandbox" in (tmp_path / "nbgrader_config.py").read_text()
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\nc.Execute.timeout = 999\n")
    write_course(tmp_path)
    assert "999" in (tmp_path / "nbgrader_config.py").read_text()
    assert len(list((tmp_path / "source").glob("unit*/*.ipynb"))) == len(registry.units())


@pytest.mark.slow
def test_release_has_stubs_not_solutions(course):
    released = nbformat.read(str(course / "release" / f"unit{UNIT}" / NOTEBOOK), as_version=4)
    answers = [c for c in released.cells if c.metadata.get("nbgrader", {}).get("solution")]
    assert len(answers) == len(PROBLEMS)
    assert all("raise NotImplementedError" in c.source and "BEGIN SOLUTION" not in c.source for c in answers)
    found, _ = tree_windows(course / "release")
    refs = list(solution_windows())
    assert not [w for w in refs if w[1] in found]
    found, _ = tree_windows(course / "source" / f"unit{UNIT}")
    assert [w for w in refs if w[1] in found]  # the scan finds them where they are


def _gradebook(course: Path) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for student in STUDENTS:
            nb = gb.find_submission_notebook(NOTEBOOK[:-len(".ipynb")], f"unit{UNIT}", student)
            scores[student] = {g.name: g.score for g in nb.grades}
            # Every test cell got a score: formgrader asks for no manual grading.
            assert not any(g.needs_manual_grade for g in nb.grades), (student, [g.name for g in nb.grades])
    return scores


@pytest.mark.slow
def test_gradebook_scores_equal_the_autograder(course):
    book = _gradebook(course)
    with open(course / "grades.csv", newline="") as f:
        totals = {row["student_id"]: float(row["score"]) for row in csv.DictReader(f) if row["assignment"] == f"unit{UNIT}"}
    expected_totals = {"ada": 45.0, "bob": 20.0, "cy": 10.0, "dan": 45.0, "eve": 0.0, "fay": 10.0}
    assert totals == expected_totals
    for student in STUDENTS:
        report = grade([course / "submitted" / student / f"unit{UNIT}" / NOTEBOOK], student,
                       problems=[p.id for p in PROBLEMS])
        ours = {f"p{r.id.replace('.', '_')}-tests": r.score for r in report.problems}
        assert book[student] == ours, student
        assert report.score == totals[student]


@pytest.mark.slow
def test_feedback_shows_messages_and_no_hidden_test(course):
    feedback = course / "feedback"
    pages = sorted(feedback.glob(f"*/unit{UNIT}/*.html"))
    assert [p.parts[-3] for p in pages] == list(STUDENTS)
    bob = tree_windows(feedback / "bob")[1]
    assert "orbax_save_count: incorrect, 0/10 points" in bob and "only the kernel was counted" in bob
    cy = tree_windows(feedback / "cy")[1]
    assert "SyntaxError" in cy and "code cell 3" in cy
    for student in STUDENTS:
        for where in (feedback / student, course / "autograded" / student):
            assert not _leaks(where, course / "submitted" / student), where
            # Test cells are shown in full (nbgrader issue 917): ours hold no test, only the call.
            text = tree_windows(where)[1]
            copies = student == "dan"  # its copied test cell stays, a plain cell now
            assert "BEGIN HIDDEN TESTS" not in text and text.count('grade_cell("1.') == len(PROBLEMS) + copies


def _leaks(shown: Path, submitted: Path) -> list[str]:
    """Hidden-test code in what a learner is shown, or reference code the learner did not write
    (a full-marks learner's own answers are the references)."""
    own, _ = tree_windows(submitted)
    found, _ = tree_windows(shown)
    return ([w for _, w in hidden_code_windows() if w in found]
            + [w for _, w in solution_windows() if w in found and w not in own])


@pytest.mark.slow
def test_autograding_runs_no_learner_kernel_and_says_its_isolation(course):
    for student in STUDENTS:
        nb = nbformat.read(str(course / "autograded" / student / f"unit{UNIT}" / NOTEBOOK), as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        tests = [c for c in code if c.metadata.get("nbgrader", {}).get("grade")]
        assert all(c.outputs == [] and c.execution_count is None for c in code if c not in tests)
        assert len(tests) == len(PROBLEMS)
        for cell in tests:
            *shown, last = cell.outputs
            if last.output_type == "error":  # the grader's message as HTML, then the error that scores 0
                (shown,) = shown
                assert shown.output_type == "display_data" and "(isolation: strict)" in shown.data["text/plain"]
                assert "(isolation: strict)" in shown.data["text/html"] and "<script" not in shown.data["text/html"]
                assert all(len(line) <= 100 for line in shown.data["text/plain"].splitlines())
            else:
                assert not shown and "(isolation: strict)" in last.text
        if student == "eve":  # the tampering cell never ran: every test cell says what the grader found
            assert all(c.outputs[-1].output_type == "error" and "not attempted" in c.outputs[-1].evalue for c in tests)


@pytest.mark.slow
def test_a_notebook_without_test_cells_is_graded_by_function_name(course):
    """fay's notebook is the problems/ one: its test cells are added, each after the function it
    grades, and the console says so."""
    nb = nbformat.read(str(course / "autograded" / "fay" / f"unit{UNIT}" / NOTEBOOK), as_version=4)
    sources = [c.source for c in nb.cells]
    for p in PROBLEMS:
        test = sources.index(grading_cell_source(p))
        assert f"def {p.function}(" in sources[test - 1], (p.id, sources[test - 1][:200])
    log = (course / "autograde.log").read_text()
    assert "fay's unit1_parameter_accounting.ipynb has no test cell for 1.1, 1.2, 1.3, 1.4" in log
    assert "fay's unit1_parameter_accounting.ipynb: 10/45 (1.1 correct, 1.2 incorrect" in log
    assert "SAWarning" not in log  # nbgrader's known, harmless SQLAlchemy warnings are hidden


def test_autograding_refuses_without_the_strict_level(monkeypatch):
    from autograder import sandbox
    from autograder.exports.nbgrader_autograde import GradeInSandbox

    monkeypatch.setattr("autograder.sandbox.worker.strict_missing", lambda: ("Landlock ABI 0 (a test)",))
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("def f():\n    pass")])
    resources = {"nbgrader": {"student": "ada", "notebook": "unit1", "assignment": "unit1"}}
    with pytest.raises(sandbox.IsolationUnavailable, match="Landlock ABI 0"):
        GradeInSandbox().preprocess(nb, resources)


@pytest.mark.slow
def test_a_feedback_leak_would_be_found(course, tmp_path):
    planted = tmp_path / "feedback"
    shutil.copytree(course / "feedback" / "bob", planted)
    assert not _leaks(planted, course / "submitted" / "bob")
    page = next(planted.rglob("*.html"))
    # bob's 1.2 is wrong: the reference 1.2 in his feedback is a leak.
    page.write_text(page.read_text() + "<pre>" + inspect.getsource(unit1.orbax_save_count) + "</pre>")
    assert _leaks(planted, course / "submitted" / "bob")


def test_grade_cell_runs_the_public_examples_where_hidden_tests_are_absent(monkeypatch, capsys):
    # A learner running a test cell in a class environment without the hidden tests.
    from autograder.exports.nbgrader_cell import NotFullMarks, grade_cell

    monkeypatch.setattr(registry, "hidden_tests_available", lambda: False)
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    main = sys.modules["__main__"]
    monkeypatch.setattr(main, "param_bytes", unit1.param_bytes, raising=False)
    grade_cell("1.3")
    assert "Correct" in capsys.readouterr().out
    monkeypatch.setattr(main, "param_bytes", lambda params, dtype: 0, raising=False)
    with pytest.raises(NotFullMarks) as err:
        grade_cell("1.3")
    lines = err.value._render_traceback_()  # what IPython shows: the message, no grader traceback
    assert lines[0].startswith("[Incorrect] 1.3 param_bytes") and "hidden tests run when" in lines[-1]


def test_a_learner_kernel_running_a_test_cell_loads_neither_nbgrader_nor_nbconvert():
    """A test cell imports grade_cell from autograder.exports.nbgrader_course, which also re-exports the
    autograding names older nbgrader_config.py files import: those load only when asked for."""
    code = ("import sys; from autograder.exports.nbgrader_course import grade_cell; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'nbgrader', 'nbconvert'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", (out.stdout, out.stderr[-2000:])
    # ...which the check would see: a course's config loads both.
    code = code.replace("import grade_cell;", "import grade_cell, AUTOGRADE_PREPROCESSORS;")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "['nbconvert', 'nbgrader']", (out.stdout, out.stderr[-2000:])


def test_public_checks_step_aside_while_nbgrader_autogrades(monkeypatch):
    from autograder.notebook import problem

    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert problem("1.3").check(lambda params, dtype: 0).status == "skipped"


def test_an_assignment_of_chosen_problems(tmp_path):
    from autograder.registry import selection

    write_course(tmp_path, selection(only=["1.3", "2.1"]), "hw1")
    notebooks = sorted((tmp_path / "source" / "hw1").glob("*.ipynb"))
    assert [n.name for n in notebooks] == [registry.UNITS[1].notebook, registry.UNITS[2].notebook]
    for path, pid in zip(notebooks, ("1.3", "2.1")):
        nb = nbformat.read(str(path), as_version=4)
        tests = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
        assert [c.source for c in tests] == [grading_cell_source(registry.get(pid))]
        text = "\n".join(c.source for c in nb.cells)
        others = [p for p in registry.PROBLEMS if p.unit == registry.get(pid).unit and p.id != pid]
        assert not any(f"def {p.function}(" in text for p in others)
        assert "make check" not in text and "worth 10 points" in text  # nbgrader learners submit; nothing to run
    assert not (tmp_path / "source" / "unit1").exists()
    assert (tmp_path / "exchange").is_dir()
    with pytest.raises(ValueError, match="letters, digits"):
        write_course(tmp_path, selection(units=[1]), "../escape")


def test_the_cli_writes_a_unit_and_names_it(tmp_path, capsys):
    from autograder.cli import main

    assert main(["nbgrader", str(tmp_path / "c"), "--unit", "2"]) == 0
    out = capsys.readouterr().out
    assert "assignments: unit2 (6 problems, 90 points" in out and "generate_assignment unit2" in out
    assert [p.name for p in (tmp_path / "c" / "source").iterdir()] == ["unit2"]
    assert main(["nbgrader", str(tmp_path / "d"), "--unit", "99"]) == 2
    assert "no unit 99" in capsys.readouterr().err


@pytest.mark.slow
def test_a_notebook_the_grader_cannot_grade_says_why(tmp_path):
    """The grader gives no result (here: a time limit it cannot meet): each test cell says so in
    the gradebook's notebook and the feedback, the console names the student, and formgrader shows a
    score (0), not "needs manual grading"."""
    from nbgrader.api import Gradebook

    from autograder.registry import selection

    course = tmp_path / "course"
    write_course(course, selection(only=["1.3"]), "hw")
    with open(course / "nbgrader_config.py", "a") as f:
        f.write("c.GradeInSandbox.timeout = 0.01\n")
    nbgrader(course, "generate_assignment", "hw")
    ref = reference_answers(course / "source" / "hw" / NOTEBOOK)
    submit(course / "release" / "hw" / NOTEBOOK, ref, course / "submitted" / "gus" / "hw" / NOTEBOOK)
    out = nbgrader(course, "autograde", "hw")
    assert "gus's unit1_parameter_accounting.ipynb not graded: the grader stopped without a result" in out.stderr
    nb = nbformat.read(str(course / "autograded" / "gus" / "hw" / NOTEBOOK), as_version=4)
    (test,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade")]
    assert test.outputs[-1].output_type == "error" and "Not graded: the grader stopped" in test.outputs[-1].evalue
    nbgrader(course, "generate_feedback", "hw")
    assert "Not graded: the grader stopped" in next((course / "feedback" / "gus").rglob("*.html")).read_text()
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        (grade_,) = gb.find_submission_notebook(NOTEBOOK[:-len(".ipynb")], "hw", "gus").grades
        assert grade_.score == 0 and not grade_.needs_manual_grade


@pytest.mark.slow
def test_validate_reports_what_the_checks_say(tmp_path):
    """`nbgrader validate` on a problems/ notebook, in a learner's terminal inside `make lab`
    (jupyter_config/ on JUPYTER_CONFIG_PATH): it lists the failing checks, and passes a solved one.
    nbgrader's default said "Success!" of any notebook without its test cells."""
    from autograder.exports.problem_notebooks import problem_notebook

    nb = nbformat.read(str(ROOT / "problems" / NOTEBOOK), as_version=4)
    tagged(nb, "answer", registry.get("1.1")).source = wrong_answer("1.1")
    nbformat.write(nb, str(tmp_path / "wrong.ipynb"))
    nbformat.write(problem_notebook(UNIT, with_solutions=True), str(tmp_path / "solved.ipynb"))
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
           "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter_config")}

    def validate(name: str) -> str:
        out = subprocess.run([str(BIN / "nbgrader"), "validate", name], cwd=tmp_path, env=env, capture_output=True,
                             text=True, timeout=600)
        return out.stdout

    wrong = validate("wrong.ipynb")
    assert "VALIDATION FAILED ON 4 CELL(S)" in wrong, wrong[-3000:]
    assert "[Incorrect] 1.1 dense_checkpoint_accounting" in wrong and wrong.count("[Not attempted]") == 3
    assert "Success" not in wrong
    assert "Success! Your notebook passes all the tests." in validate("solved.ipynb")


@pytest.mark.slow
def test_the_unit_3_5_and_6_attacks_earn_nothing_through_nbgrader(tmp_path):
    """Issue 35's forged resume (5.3: folders shaped like saves, training from scratch), pages given
    back while measured (6.1) and host arrays posing as placed ones (3.3), submitted as notebooks
    and autograded by nbgrader: no point, and the feedback says what the grader found. (Their
    contrasts, and an honest classmate beside them, in tests/sandbox/test_hostile.py.)"""
    from nbgrader.api import Gradebook

    from autograder.registry import selection
    from tests.hostile import SURFACES

    attacks = {a.problem: a.source({"ROOT": str(ROOT)}) for a in SURFACES
               if a.name in ("forge_resume", "give_back_restoring", "pose_as_resharded")}
    course = tmp_path / "course"
    write_course(course, selection(only=sorted(attacks)), "hw")
    nbgrader(course, "generate_assignment", "hw")
    for pid, code in attacks.items():
        notebook = registry.UNITS[registry.get(pid).unit].notebook
        submit(course / "release" / "hw" / notebook, {pid: code}, course / "submitted" / "mal" / "hw" / notebook)
    nbgrader(course, "autograde", "hw")
    nbgrader(course, "generate_feedback", "hw")
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        grades = [g for nb in gb.find_submission("hw", "mal").notebooks for g in nb.grades]
        assert len(grades) == 3 and all(g.score == 0 and not g.needs_manual_grade for g in grades)
    feedback = tree_windows(course / "feedback" / "mal")[1]
    assert "could not restore your latest committed step" in feedback  # 5.3: the grader's own restore
    assert "returned a NoneType" in feedback  # 6.1: the advice refused, so it returned nothing
    assert "cannot return a value of type" in feedback  # 3.3: not JAX's own array


def test_two_courses_share_one_exchange_each_in_its_own_folder(tmp_path):
    """Two instructors' courses on one machine, one exchange (``--course-id``, ``--exchange``): each
    releases its unit 1; a learner fetches from both into a folder per course and submits to one,
    once in a classmate's name and once as a link to someone else's folder; each instructor
    collects only their own course's submissions, each as the account that wrote it (real
    nbgrader, as one user)."""
    from autograder.exports.nbgrader_course import learners_config

    exchange = tmp_path / "exchange"
    exchange.mkdir(mode=0o1777)
    exchange.chmod(0o1777)
    with pytest.raises(ValueError, match="does not exist"):
        write_course(tmp_path / "nowhere", PROBLEMS, course_id="a", exchange=tmp_path / "missing")
    with pytest.raises(ValueError, match="course id"):
        write_course(tmp_path / "bad", PROBLEMS, course_id="two words", exchange=exchange)
    courses = {cid: tmp_path / cid for cid in ("course-a", "course-b")}
    for cid, course in courses.items():
        write_course(course, PROBLEMS, course_id=cid, exchange=exchange)
        assert not (course / "exchange").exists()  # (the shared one, not a folder of its own)
        nbgrader(course, "generate_assignment", f"unit{UNIT}")
        nbgrader(course, "release_assignment", f"unit{UNIT}")
        assert (exchange / cid / "outbound" / f"unit{UNIT}" / NOTEBOOK).is_file()
    learner = tmp_path / "learner"
    learner.mkdir()
    (learner / "nbgrader_config.py").write_text(learners_config(exchange))
    listed = nbgrader(learner, "list")
    listed = listed.stdout + listed.stderr
    assert "course-a" in listed and "course-b" in listed, listed
    for cid in courses:
        nbgrader(learner, "fetch_assignment", f"unit{UNIT}", "--course", cid)
        assert (learner / cid / f"unit{UNIT}" / NOTEBOOK).is_file()
    nbgrader(learner, "submit", f"unit{UNIT}", "--course", "course-a")
    # A submission naming a classmate (nbgrader's --student, with no course check, as on one machine):
    # collected as its writer's, never over the classmate's work.
    nbgrader(learner, "submit", f"unit{UNIT}", "--course", "course-a", "--student", "classmate")
    # ... and a link in the exchange, named after a user, to a folder of theirs: the link's writer's.
    theirs = tmp_path / "nobodys"
    shutil.copytree(learner / "course-a" / f"unit{UNIT}", theirs)
    for path in [theirs, *theirs.rglob("*")]:
        os.chown(path, pwd.getpwnam("nobody").pw_uid, -1)
    (exchange / "course-a" / "inbound" / f"nobody+unit{UNIT}+2999-01-01 00:00:00.000000 UTC+link").symlink_to(theirs)
    for course in courses.values():
        nbgrader(course, "collect", f"unit{UNIT}")
    me = pwd.getpwuid(os.geteuid()).pw_name
    assert sorted(p.name for p in (courses["course-a"] / "submitted").iterdir()) == [me]
    assert (courses["course-a"] / "submitted" / me / f"unit{UNIT}" / NOTEBOOK).is_file(), "course-a's submission"
    assert not list((courses["course-b"] / "submitted").glob(f"*/unit{UNIT}/*")), "course-b collected another's"
