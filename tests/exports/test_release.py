"""The learner bundle: nothing of the references or the hidden tests inside, and its own checks run."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from autograder import registry
from autograder.exports.problem_notebooks import problem_notebook
from autograder.exports.release import build_release
from autograder.hidden import load
from tests.leaks import hidden_code_windows, hidden_messages, solution_windows, tree_windows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "course-for-class"
    build_release(ROOT, out)
    return out


def test_bundle_holds_no_reference_and_no_hidden_test(bundle):
    names = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    assert not any(n.startswith(("solutions/", "tests/", "bench/")) for n in names)
    assert not any(n.startswith("autograder/hidden/unit") for n in names)
    assert {"README.md", "Makefile", "pyproject.toml", "environment.yml"} <= names
    assert {f"course/{p.name}" for p in (ROOT / "course").glob("*.ipynb")} <= names
    windows, text = tree_windows(bundle)
    code = [*solution_windows(), *hidden_code_windows()]
    messages = list(hidden_messages())
    assert len(code) > 200 and len(messages) > 100
    hits = [w for w in code if w[1] in windows] + [m for m in messages if m[1] in text]
    assert not hits, hits[:5]
    # The scan can fail: a reference function or a hidden message copied into the bundle is found.
    leaked = bundle / "problems" / "leak.py"
    leaked.write_text(inspect.getsource(__import__("solutions.unit4", fromlist=["x"]).read_shard) + "\n# " + messages[0][1])
    try:
        windows, text = tree_windows(bundle)
        assert any(w[1] in windows for w in code) and messages[0][1] in text
    finally:
        leaked.unlink()


def test_bundle_problem_notebooks_are_untouched_stubs(bundle):
    for unit in registry.units():
        nb = nbformat.read(next(bundle.glob(f"problems/unit{unit}_*.ipynb")), as_version=4)
        assert nb == problem_notebook(unit)  # built from the registry, never copied from problems/
        assert "BEGIN SOLUTION" not in json.dumps(nb)


def test_bundle_installs_only_public_packages(bundle):
    text = (bundle / "pyproject.toml").read_text()
    assert 'include = ["ckptlab*", "autograder*"]' in text and "solutions" not in text.split("packages.find")[1]
    # No nbgrader: a learner's JupyterLab has none of its instructor tools.
    assert "nbgrader" not in text and "nbgrader" in (ROOT / "pyproject.toml").read_text()
    # make lab's settings and make's set-up come along.
    assert (bundle / "jupyter_config" / "jupyter_server_config.json").is_file()
    assert (bundle / "tools" / "setup_env.py").is_file()


def _in_bundle(bundle, *args, timeout=600):
    # The bundle's own code, with the references made unimportable (they are installed in this venv).
    code = ("import sys; sys.modules['solutions'] = None; sys.path.insert(0, '.'); "
            "from autograder.cli import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *args], cwd=bundle, capture_output=True, text=True,
                          timeout=timeout, env={"PATH": "/usr/bin:/bin", "JAX_PLATFORMS": "cpu", "HOME": str(bundle)})


def test_bundle_makefile_runs_the_public_checks(bundle):
    out = subprocess.run(["make", "-n", "-C", str(bundle), "check", "lab"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "autograder check problems/" in out.stdout and "jupyter lab" in out.stdout
    assert "[test]" not in out.stdout
    assert subprocess.run(["make", "-n", "-C", str(bundle), "test"], capture_output=True).returncode != 0


def test_bundle_refuses_to_grade_and_says_why(bundle):
    out = _in_bundle(bundle, "grade", "problems/")
    assert out.returncode == 2 and "no hidden tests" in out.stderr and "check problems/" in out.stderr


@pytest.mark.slow
def test_bundle_checks_run_on_stubs_and_on_solved_notebooks(bundle, tmp_path):
    out = _in_bundle(bundle, "check", "problems/")
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("not attempted") == len(registry.PROBLEMS)
    assert f"Public examples pass for 0 of {len(registry.PROBLEMS)}" in out.stdout
    solved = tmp_path / "solved"
    solved.mkdir()
    for unit in registry.units():
        nbformat.write(problem_notebook(unit, with_solutions=True), str(solved / f"unit{unit}.ipynb"))
    out = _in_bundle(bundle, "check", str(solved))
    assert out.returncode == 0, out.stderr
    n = len(registry.PROBLEMS)
    assert f"Public examples pass for {n} of {n}" in out.stdout, out.stdout


def test_release_refuses_a_folder_that_is_not_empty(tmp_path):
    (tmp_path / "x").write_text("keep me")
    with pytest.raises(FileExistsError, match="not empty"):
        build_release(ROOT, tmp_path)
    assert (tmp_path / "x").read_text() == "keep me"


def test_hidden_modules_are_what_the_scan_reads():
    # Every problem's hidden cases live in a module the scan covers.
    for p in registry.PROBLEMS:
        module = inspect.getmodule(load(p).generate)
        assert Path(module.__file__).parent == ROOT / "autograder" / "hidden" and module.__name__.split(".")[-1].startswith("unit")
