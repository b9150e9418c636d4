"""Shared fixtures: the course's 16 devices for this process, and a quick way to grade code."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import textwrap
from pathlib import Path

import pytest

from ckptlab import setup_devices

ROOT = Path(__file__).resolve().parents[1]
setup_devices()  # before any test touches JAX
# Progress records of grading runs (and of kernels and CLIs the tests start) go to a throwaway
# folder, never into the home of whoever runs the tests.
os.environ["CKPT_COURSE_HOME"] = tempfile.mkdtemp(prefix="ckpt-course-home-")
atexit.register(shutil.rmtree, os.environ["CKPT_COURSE_HOME"], True)  # (not left in /tmp, run after run)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def best_isolation() -> str:
    """The level the honest-side tests grade at: strict wherever the machine has it."""
    from autograder.sandbox import strict_missing

    return "basic" if strict_missing() else "strict"


@pytest.fixture
def grade_code(tmp_path):
    """Grade a snippet of Python source (as a learner's .py file) for the given problems, at the
    strict isolation level where the machine has it."""
    from autograder.engine.grade import grade

    def run(source: str, problems=None, learner="tester", **kw):
        path = tmp_path / f"submission_{len(list(tmp_path.iterdir()))}.py"
        path.write_text(textwrap.dedent(source))
        kw.setdefault("isolation", best_isolation())
        return grade([path], learner, problems=problems, **kw)

    return run


@pytest.fixture(autouse=True)
def _sandbox_tests_after_the_background(request):
    """The sandbox's tests count, and kill, grading processes machine-wide: they run once the suite's
    background gradings (tests/background.py) have ended, never beside them."""
    if request.node.nodeid.startswith("tests/sandbox/"):
        from tests import background

        background.wait()


def pytest_configure(config):
    config.addinivalue_line("markers", "background(job): reads a grading the suite runs beside it "
                                       "(tests/background.py); moved to the end of the run")
    config.addinivalue_line("markers", "pip_route: reads the course's installs in fresh environments, which the "
                                       "suite runs beside it (tests/pip_route.py); moved to the end of the run")


@pytest.hookimpl(trylast=True)  # (after -k and -m have deselected what they deselect)
def pytest_collection_modifyitems(session, config, items):
    """Work that runs for minutes, started now in the background, when a test that reads it is
    collected, so the suite runs beside it; the tests that read it, moved to the end, wait for it:
    - the suite's heaviest gradings (tests/background.py: one class of every curated wrong and right
      answer and the references, then every curated answer through the public checks), on one core;
    - the whole course's try inside Gradescope's container (tests/sandbox/test_container.py), held
      to half a CPU, last;
    - the course installed with pip in fresh environments, and the hosted route (tests/pip_route.py),
      once the background's gradings have ended: on the core the sandbox's tests leave.
    The sandbox's tests, which wait for the background to end, come after every other, then the
    notebooks, which run two at a time."""
    if config.option.collectonly:
        return
    reading = [item for item in items if item.get_closest_marker("background")]
    whole = [item for item in items
             if item.name == "test_the_references_whole_submission_at_full_marks_inside_gradescopes_default_container"]
    if reading:
        from tests import background

        jobs = {mark.args[0] for item in reading for mark in item.iter_markers("background")}
        background.start([job for job in background.JOBS if job in jobs])
    if whole:
        from tests.sandbox.test_container import start_whole_course_try

        start_whole_course_try()
    routes = [item for item in items if item.get_closest_marker("pip_route")]
    if routes:
        from tests import pip_route

        pip_route.start(pip_route.collected_keys(routes))  # (its installs wait for the background's gradings)
    # The sandbox's tests wait for the background to end: everything else runs first, meanwhile. Then
    # the notebooks, two kernels at a time, on the cores the background left (tests/lessons/
    # test_notebooks.py); those that read the background after them (the container's try the very last).
    reading_or_whole = set(reading) | set(whole) | set(routes)

    def place(item) -> int:
        if item in reading_or_whole:
            return 3 + (item in whole)
        if item.nodeid.startswith("tests/lessons/test_notebooks.py::"):
            return 2
        return 1 if item.nodeid.startswith("tests/sandbox/") else 0

    items.sort(key=place)  # (stable: each group keeps its order)


def pytest_sessionfinish(session, exitstatus):
    import sys

    # (the pip route first: it waits for the background, and must not start its installs when that ends)
    for name, stop in (("tests.pip_route", "stop"), ("tests.sandbox.test_container", "stop_whole_course_try"),
                       ("tests.background", "stop")):
        module = sys.modules.get(name)
        if module is not None:
            getattr(module, stop)()
