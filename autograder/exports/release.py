"""The learner bundle: what an instructor hands to a class.

``python -m autograder release OUT_DIR`` writes the lessons, fresh problem notebooks (built from
the registry, so an instructor's own answers in ``problems/`` never leak), the shared package and
the public half of the autograder (registry, notebook checks, the public-example check command).
No reference solution and no hidden test goes in: ``solutions/``, the hidden case generators and
their messages (``autograder/hidden/unit*.py``) and the project's tests stay behind. Learners
check their work with the public examples (``make check``) and submit ``problems/``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

# Never copied: references, hidden tests, the project's own tests and tooling.
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints"}
_HIDDEN = re.compile(r"^unit\d+\.py$")

BUNDLE_README = """\
# Sharded checkpointing in JAX: course materials

```bash
make lab      # first run installs everything into .venv, then opens JupyterLab
make check    # runs every problem's public examples against your saved notebooks
```

Work through the lessons in `course/` and solve the problems in `problems/`; each problem's check
cell runs its public examples and `.hint()` gives hints in steps. Your instructor grades your
`problems/` folder with hidden tests (other inputs than the public examples), so passing the
checks is a good sign, not a score. Submit the notebooks in `problems/` as your instructor says.

To practise: `make practice MINUTES=30` (a timed set of problems with hints in steps, checked
against the public examples at the end) and `make drill` (quick numeric questions with worked
answers); `make progress` shows your drill record.
"""


def _copy_tree(src: Path, dst: Path, skip_file=lambda p: False) -> None:
    for path in sorted(src.rglob("*")):
        rel = path.relative_to(src)
        if any(part in _SKIP_DIRS for part in rel.parts) or path.is_dir() or skip_file(path):
            continue
        target = dst / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)


def _is_hidden(path: Path) -> bool:
    return path.parent.name == "hidden" and path.parent.parent.name == "autograder" and bool(_HIDDEN.match(path.name))


def _bundle_pyproject(text: str) -> str:
    text = text.replace('include = ["ckptlab*", "autograder*", "solutions*"]', 'include = ["ckptlab*", "autograder*"]')
    # Learners need no nbgrader: without it their JupyterLab has no instructor tools (formgrader,
    # Create Assignment, a Validate that cannot see the hidden tests).
    assert '    "nbgrader==' in text, "the pyproject changed: update autograder.exports.release"
    text = "\n".join(line for line in text.splitlines() if not line.startswith('    "nbgrader==')) + "\n"
    assert "solutions" not in text.split("[tool.setuptools.packages.find]")[1].split("[")[0]
    # The bundle has no test-suite and no linting: drop their configuration (from [tool.ruff] on).
    assert text.index("[tool.ruff]") < text.index("[tool.pytest.ini_options]"), "update autograder.exports.release"
    return text.split("[tool.ruff]")[0].rstrip() + "\n"


def _bundle_makefile(text: str) -> str:
    """The course's Makefile, for learners: no test-suite or benchmarks, and `make check` runs the
    public examples (there are no hidden tests to run)."""
    swaps = [
        ('-e ".[test]"', "-e ."),
        ("@$(BIN)/python -m autograder grade problems/", "@$(BIN)/python -m autograder check problems/"),
        ("make check  - grade your work in problems/ with the hidden tests",
         "make check  - run every problem's public examples on your saved notebooks"),
        (".PHONY: help lab check progress practice drill test bench platforms venv clean",
         ".PHONY: help lab check progress practice drill venv clean"),
    ]
    for old, new in swaps:
        assert old in text, f"the Makefile changed: update autograder.exports.release ({old!r})"
        text = text.replace(old, new)
    text = "\n\n".join(block for block in text.split("\n\n") if not block.startswith(("test:", "bench:", "platforms:")))
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith(("\t@echo \"make test", "\t@echo \"make bench", "\t@echo \"make platforms", "PYTEST_ARGS"))) + "\n"


def build_release(root: Path, out: Path) -> list[Path]:
    """Write the learner bundle into ``out`` (which must not exist, or be empty); return its files."""
    root, out = Path(root), Path(out)
    if out.exists() and any(out.iterdir()):
        raise FileExistsError(f"{out} is not empty: give a new folder for the bundle")
    if out.resolve() == root.resolve():
        raise ValueError("the bundle needs its own folder, not the course's")
    out.mkdir(parents=True, exist_ok=True)
    _copy_tree(root / "course", out / "course")
    _copy_tree(root / "ckptlab", out / "ckptlab")
    _copy_tree(root / "autograder", out / "autograder", skip_file=_is_hidden)
    _copy_tree(root / "jupyter_config", out / "jupyter_config")  # make lab's settings
    _copy_tree(root / "tools", out / "tools")  # make's environment set-up
    from autograder.exports.problem_notebooks import write_problem_notebooks  # nbformat: a second to import, only here

    write_problem_notebooks(out)
    (out / "pyproject.toml").write_text(_bundle_pyproject((root / "pyproject.toml").read_text()))
    shutil.copy2(root / "environment.yml", out / "environment.yml")
    (out / "Makefile").write_text(_bundle_makefile((root / "Makefile").read_text()))
    (out / "README.md").write_text(BUNDLE_README)
    return sorted(p for p in out.rglob("*") if p.is_file())

