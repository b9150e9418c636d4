"""The course without make, as the README's "Without make" says, in fresh virtual environments, timed.

For each Python asked for (default: 3.12 and 3.13, found on PATH or under pyenv), the steps the suite
checks (tests/pip_route.py, tests/learner/test_pip_route.py), here with pip's byte-compiling left on
as the README's plain ``pip install .`` does:

1. **pip**: a copy of the clone's tracked files, ``python -m venv``, ``pip install .`` there (not
   editable); the installed package holds every file of the course's packages; the README's
   ``jupyter lab`` line answers and opens the course; from a folder outside the clone,
   ``python -m autograder grade`` of Unit 1's references as a learner's file (full marks, and the
   isolation level), ``practice`` left at once, two ``drill`` questions, ``progress``.
2. **A hosted notebook** (Colab and the like), emulated: a second fresh environment with only
   ``ipykernel``, as a hosted kernel has; a real kernel of it runs, in a writable folder outside the
   clone, the README's first cell (``%pip install`` of the course, from the copy's folder instead of
   the repository's address) and then lesson 1 whole, headless.

It prints each step's time and fails on the first step that does not do what the README says.
Run: ``python bench/bench_pip_route.py`` (``--python 3.13`` for one; about 2 minutes a Python here).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import registry  # noqa: E402
from tests import pip_route  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", nargs="+", default=list(pip_route.PYTHONS))
    args = parser.parse_args(argv)
    points = sum(p.points for p in registry.PROBLEMS if p.unit == 1)
    figures = {}
    for version in args.python:
        python = pip_route.find_python(version)
        if python is None:
            raise SystemExit(f"no python{version} that runs, on PATH or under pyenv")
        print(f"Python {version}: {python}", flush=True)
        steps = pip_route.Steps(echo=True)
        with tempfile.TemporaryDirectory(prefix=f"ckpt-pip-{version}-") as tmp:
            work = Path(tmp)
            (work / "pip").mkdir()
            got = pip_route.install(python, work / "pip", steps, compile_=True)
            assert got["missing"] == [] and got["lab_opens"] == "/lab/tree/course/00_start_here.ipynb", got
            out = pip_route.learner_commands(Path(got["venv"]), work / "pip", steps)
            assert f"Total: {points}/{points}" in out["grade"], out["grade"][-1500:]
            isolation = next(line for line in out["grade"].splitlines() if line.startswith("Isolation:"))
            (work / "hosted").mkdir()
            hosted = pip_route.hosted(python, work / "hosted", steps, compile_=True)
            assert hosted["errors"] == 0 and "16 CPU devices ready" in hosted["text"], hosted["text"][-2000:]
            assert not hosted["left"] and not hosted["left_in_temp"], hosted
        figures[version] = {"isolation": isolation, "seconds": dict(steps.times)}
    print(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
