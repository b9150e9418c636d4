"""The course without make, as the README's "Without make: pip, and hosted notebooks" says: on Python
3.12 and 3.13, a fresh venv and `pip install .` of a copy of the clone, then what a learner does from
a folder outside it (JupyterLab, grade, practice, drill, progress); and the hosted-notebook route,
emulated (tests/pip_route.py says how, and how the suite runs it beside the sandbox's tests)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autograder import registry
from tests import pip_route
from tests.conftest import best_isolation


def _ran(key: str, request) -> dict:
    got = pip_route.result(key)
    # When it ran beside the suite, and each step's time, kept by the JUnit report (--junitxml) without
    # record_property's warning under its default family.
    request.node.user_properties.append(("route", {k: got.get(k) for k in ("began", "ended", "steps")}))
    if got["python"] is None:
        version = pip_route.HOSTED_PYTHON if key == "hosted" else key
        pytest.skip(f"no python{version} here, on PATH or under pyenv (pyenv install {version}, or uv python "
                    f"install {version}): the route is not tried on it")
    assert "error" not in got, got["error"]
    return got


def test_the_readme_says_what_the_suite_runs():
    """The routes' commands are the README's own (the suite runs its `jupyter lab` line as it is):
    a change there fails here until the test follows. Before: `jupyter lab course/00_start_here.ipynb`,
    which roots the lab at course/, out of reach of problems/."""
    blocks = pip_route.readme_blocks()
    lines = [line.split("#", 1)[0].strip() for line in blocks["Without make"].splitlines()]
    for line in ("pip install .", "python -m autograder grade problems/", "python -m autograder practice --minutes 30"):
        assert line in lines, line
    assert pip_route.readme_lab_lines() == [pip_route.README_LAB] * 2, pip_route.readme_lab_lines()
    # The hosted route's first cell: the one the suite runs, from a folder here instead of the address.
    first = pip_route.FIRST_CELL.format(options="", source='"sharded-checkpointing-course @ git+')
    assert first in (pip_route.ROOT / "README.md").read_text(), first


def test_the_install_is_checked_for_every_file_of_the_course_packages(root):
    """What the install must hold: each package's modules and its data (the JSON files the wheel
    takes only because pyproject.toml names them), the references and the hidden tests among them."""
    files = pip_route.tracked_package_files(root)
    assert {"autograder/classroom/similarity_calibration.json", "autograder/exports/gradescope_profile.json",
            "autograder/hidden/unit1.py", "solutions/unit1.py", "ckptlab/__init__.py"} <= files
    assert not [f for f in files if "__pycache__" in f]


@pytest.mark.parametrize("version", pip_route.PYTHONS, ids=lambda v: f"python{v}")
@pytest.mark.slow
@pytest.mark.pip_route  # (waits for its installs, which the suite runs beside itself: tests/conftest.py)
def test_the_pip_route_in_a_fresh_venv(version, request):
    got = _ran(version, request)
    # The install holds every file of the course's packages (a file left out of the wheel is a
    # problem that cannot be graded outside a clone), and a learner's python imports it, not a clone.
    assert got["missing"] == [], got["missing"]
    assert Path(got["autograder"]).is_relative_to(got["prefix"]) and Path(got["prefix"]) == Path(got["venv"])
    # JupyterLab opens the course's first notebook, with the problems beside it.
    assert got["lab_page"] and got["lab_opens"] == "/lab/tree/course/00_start_here.ipynb", got["lab_opens"]
    assert got["lab_serves"] == {"course/00_start_here.ipynb": "notebook", "problems": "directory"}, got["lab_serves"]
    out = pip_route.learner_commands(Path(got["venv"]), Path(got["work"]), pip_route.steps())
    points = sum(p.points for p in registry.PROBLEMS if p.unit == 1)
    assert f"Total: {points}/{points}" in out["grade"], out["grade"][-2000:]
    assert f"Isolation: {best_isolation()}" in out["grade"], out["grade"][-2000:]
    assert "Practice: 1 problem(s)" in out["practice"] and "Stopped without grading" in out["practice"], out["practice"]
    assert out["drill"].count("Worked answer: ") == 2 and "Done: 0/2 right." in out["drill"], out["drill"]
    assert re.search(rf"Unit 1: .*\] {points}/{points} points", out["progress"]), out["progress"][:2000]
    assert "Drills: 0/2 right" in out["progress"], out["progress"][-1000:]


@pytest.mark.slow
@pytest.mark.pip_route  # (waits for its installs, which the suite runs beside itself: tests/conftest.py)
def test_the_hosted_route_emulated(request):
    """Lesson 1 after the README's first cell, in a real kernel of an environment that had only
    ipykernel: its devices set up before JAX started, no error, nothing left in its folder or its
    temporary folder."""
    got = _ran("hosted", request)
    assert got["errors"] == 0, got["text"][-3000:]
    assert "16 CPU devices ready" in got["text"], got["text"][:3000]
    assert got["left"] == [] and got["left_in_temp"] == [], (got["left"][:10], got["left_in_temp"][:10])
