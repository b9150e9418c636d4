"""The stack the course runs on, said the same everywhere: pyproject.toml is the one source, the
installed libraries are those it pins, and environment.yml, the README, Gradescope's setup.sh and
the nbgrader course say what it says. The course's own code calls nothing deprecated, and reaches
private names only through its adapters, which say which name moved in which version."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from autograder import stack

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_installed_libraries_are_those_pyproject_pins():
    pinned = {}
    for requirement in PYPROJECT["project"]["dependencies"]:
        name, _, version = requirement.partition("==")
        pinned[name.split("[")[0].lower()] = version  # an extra (moto[s3]) is of the distribution
    assert stack.pins() == pinned  # (the metadata read at run time: the same file, installed)
    installed = {name: metadata.version(name) for name in pinned}
    assert installed == pinned, "run `make venv`: .venv is older than pyproject.toml"
    low, high = stack.pythons()[0], stack.pythons()[-1]
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in stack.pythons(), (sys.version, low, high)


def test_environment_yml_the_readme_setup_sh_and_nbgrader_say_the_same(tmp_path):
    from autograder.exports import nbgrader_course
    from autograder.exports.gradescope import setup_sh

    conda = re.search(r"^\s*- python=(3\.\d+)\s*$", (ROOT / "environment.yml").read_text(), re.M)
    assert conda and conda.group(1) == stack.newest_python(), "environment.yml's python= is not the newest pyproject allows"
    assert "-e .[test]" in (ROOT / "environment.yml").read_text()  # its packages: pyproject's, installed by pip
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert f"You need Python {' or '.join(stack.pythons())}" in readme
    for name, label in stack.NAMES.items():
        for stated in re.findall(rf"\b{re.escape(label)} (\d+\.\d+[\d.]*\d)", readme):
            assert stated == stack.pins()[name], f"README says {label} {stated}; pyproject.toml pins {stack.pins()[name]}"
    assert f"python{stack.newest_python()} -m venv /autograder/venv" in setup_sh()
    assert "pip install /autograder/source" in setup_sh()  # the pinned course, from its pyproject.toml
    nbgrader_course.write_course(tmp_path / "course")
    assert stack.describe() in " ".join((tmp_path / "course" / "README.md").read_text().split())


def test_private_names_only_in_the_adapters():
    """No module of the course, lesson or reference imports a library's private (``_src``) names but
    the adapters (tests/right_answers may: they are answers learners could write)."""
    found = []
    for folder in ("autograder", "ckptlab", "course", "solutions", "problems", "bench", "tools"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".ipynb") and "adapters" not in path.parts:
                found += [f"{path.relative_to(ROOT)}: {line.strip()[:120]}" for line in path.read_text().splitlines()
                          if re.search(r"\b(jax|orbax|flax|tensorstore|optax)[\w.]*\._src\b|from jax import _src", line)]
    assert not found, found


def test_the_adapters_find_every_private_name_and_say_which_moved(monkeypatch):
    from ckptlab import adapters
    from ckptlab.adapters import jax_internals, orbax_internals

    assert adapters.check() == []
    # The control: a release that moved a name is named, with the installed version, and the module to fix.
    import orbax.checkpoint._src.serialization.replica_slices as moved_module

    monkeypatch.delattr(moved_module, "get_replica_slices")
    problems = orbax_internals.check()
    assert len(problems) == 1 and f"orbax-checkpoint {metadata.version('orbax-checkpoint')} has no" in problems[0]
    assert "get_replica_slices" in problems[0] and "ckptlab/adapters/orbax_internals.py" in problems[0]
    from jax._src.array import ArrayImpl

    monkeypatch.delattr(ArrayImpl, "_arrays")
    with pytest.raises(adapters.MovedError, match=rf"jax {re.escape(metadata.version('jax'))} has no .*_arrays"):
        jax_internals.array_type()


# A deprecation warning raised by a call in the course's own code (its module the warning's origin)
# is an error in this run; the libraries' own are not ours to fix.
_STRICT = """
import warnings, sys, importlib, pkgutil
for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
    warnings.filterwarnings("error", category=category, module=r"(ckptlab|autograder|solutions|course_probe)(\\.|$)")
"""
_EXERCISE = _STRICT + """
from ckptlab import setup_devices
setup_devices()
import ckptlab, autograder, solutions
for package in (ckptlab, autograder, solutions):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
# The course's own models and tools that call Orbax's v1 saves and loads (where deprecations land).
import json, tempfile, os
from tests.deprecations import exercise
exercise(tempfile.mkdtemp(prefix="ckpt-deprecations-"))
print("ran", flush=True)
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**__import__("os").environ, "JAX_PLATFORMS": "cpu"})


def test_the_courses_code_calls_nothing_deprecated():
    out = _run(_EXERCISE)
    assert out.returncode == 0 and out.stdout.strip().endswith("ran"), out.stderr[-3000:]


def test_the_deprecation_check_fails_on_a_deprecated_call(tmp_path):
    """The control: the same filter, and a module named like the course's that calls Orbax's
    deprecated ``ocp.v1.save_pytree``."""
    probe = tmp_path / "course_probe.py"
    probe.write_text("import numpy as np\nimport orbax.checkpoint as ocp\n"
                     "def save(path):\n    ocp.v1.save_pytree(path, {'a': np.zeros(3)})\n")
    out = _run(_STRICT + f"sys.path.insert(0, {str(tmp_path)!r})\nimport course_probe\n"
               f"course_probe.save({str(tmp_path / 'ckpt')!r})\n")
    assert out.returncode != 0 and "DeprecationWarning" in out.stderr, out.stderr[-2000:]
