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
