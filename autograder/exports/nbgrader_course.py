"""The course as an nbgrader course: ``python -m autograder nbgrader COURSE_DIR`` writes it.

It writes ``nbgrader_config.py`` and one assignment per unit, ``source/unitN/<notebook>.ipynb``:
the problem notebook with the reference code between ``### BEGIN SOLUTION`` / ``### END
SOLUTION`` (``nbgrader generate_assignment`` turns it back into the stub) and, under each
problem, a locked autograder test cell worth the problem's points (:mod:`autograder.exports.nbgrader_cell`:
the cell and what it runs in a learner's kernel). Autograding runs no learner kernel
(:mod:`autograder.exports.nbgrader_autograde`: the course's grader writes each test cell's outcome).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell

from autograder import registry, stack

# Re-exported: the test cells written into instructors' courses run
# `from autograder.exports.nbgrader_course import grade_cell` (and grade_cell raises NotFullMarks).
from autograder.exports.nbgrader_cell import (
    NotFullMarks as NotFullMarks,
    grade_cell as grade_cell,
    grading_cell_source,
    nbgrader_meta,
)

COURSE_ID = "sharded-checkpointing"
_ASSIGNMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

# A course id names folders in the exchange and, on a JupyterHub, the groups nbgrader checks
# (``nbgrader-<id>`` and ``formgrade-<id>``): letters, digits, '_' and '-' only.
_COURSE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

# release_assignment, fetch, submit and collect go through the exchange: a folder beside the config,
# for one course and its instructor; or one folder every course on a machine shares (mode 1777, as
# nbgrader asks of it), each course in a sub-folder of its own id.
_OWN_EXCHANGE = """\
# release_assignment, fetch, submit and collect go through this folder, beside this file.
c.Exchange.root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "exchange")"""
_SHARED_EXCHANGE = """\
# release_assignment, fetch, submit and collect go through this folder, which every course on this
# machine shares (each in a sub-folder of its id); learners' fetched copies go in <course id>/<assignment>.
c.Exchange.root = {root!r}
c.Exchange.path_includes_course = True"""
# An instructor's collect on an exchange several accounts share: a submission is the account's that
# wrote it, whatever learner its folder names (nbgrader's own only warns).
_OWNERS_COLLECT = '\nc.ExchangeFactory.collect = "autograder.exports.nbgrader_exchange.OwnersCollect"'

CONFIG = '''\
# nbgrader configuration written by `python -m autograder nbgrader`. Edit freely: the command
# never overwrites this file once it exists.
import os

from autograder.exports.nbgrader_course import AUTOGRADE_PREPROCESSORS, SANITIZE_PREPROCESSORS, quiet_known_warnings

c = get_config()  # noqa: F821 - provided by nbgrader

c.CourseDirectory.course_id = "{course_id}"
{exchange}
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


def learners_config(exchange: Path) -> str:
    """What learners' nbgrader needs to fetch and submit through a shared exchange (on a JupyterHub,
    a config every learner's server reads: /etc/jupyter/nbgrader_config.py, or a folder on
    JUPYTER_CONFIG_PATH); no course id, so a learner sees every course they belong to."""
    return "c = get_config()  # noqa: F821 - provided by nbgrader\n" + \
        _SHARED_EXCHANGE.format(root=str(Path(exchange).resolve())) + "\n"


def check_course_id(course_id: str) -> None:
    """Refuse a course id nbgrader cannot use as a folder and a JupyterHub group."""
    if not _COURSE_ID.fullmatch(course_id):
        raise ValueError(f"course id {course_id!r}: use letters, digits, '_' and '-' only (nbgrader makes it a "
                         "folder, and a JupyterHub group nbgrader-<id>)")


def course_config(course_id: str = COURSE_ID, exchange: Path | None = None) -> str:
    """The ``nbgrader_config.py`` of a course: its id, and its exchange (``None``: a folder of its own
    beside the config; else the folder every course on the machine shares)."""
    check_course_id(course_id)
    where = _OWN_EXCHANGE if exchange is None else (_SHARED_EXCHANGE.format(root=str(Path(exchange).resolve())) +
                                                     _OWNERS_COLLECT)
    return CONFIG.format(course_id=course_id, exchange=where)

COURSE_README = """\
# Sharded checkpointing in JAX: the nbgrader course

Written by `python -m autograder nbgrader`. Run nbgrader in this folder, with the course's
environment first on PATH (nbgrader runs `alembic` and the `python3` kernel from there; in the
course repository, `make venv` builds it and `source .venv/bin/activate` puts it first). The
course runs on {stack}: grade in that environment, so that what learners ran is what is graded.

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


# Re-exported, and loaded only when asked for: nbgrader_config.py files, those written before the
# nbgrader modules were split and those CONFIG writes now, import these from here. A learner's
# kernel imports grade_cell from here too, and must never load nbconvert or nbgrader, which
# autograder.exports.nbgrader_autograde does.
_FROM_AUTOGRADE = ("AUTOGRADE_PREPROCESSORS", "SANITIZE_PREPROCESSORS", "GradeInSandbox", "quiet_known_warnings")


def __getattr__(name: str):
    if name in _FROM_AUTOGRADE:
        from autograder.exports import nbgrader_autograde

        return getattr(nbgrader_autograde, name)
    raise AttributeError(name)


# --- the course ----------------------------------------------------------------------------------

def assignment_id(unit: int) -> str:
    return f"unit{unit}"


def source_notebook(unit: int, problems=None) -> nbformat.NotebookNode:
    """The unit's problem notebook (``problems`` of it, default all) with solutions inside
    nbgrader's markers, nbgrader cell metadata, and a test cell after each problem's check cell
    (each found by its tag)."""
    from autograder.exports.problem_notebooks import problem_notebook, tag

    chosen = [p for p in (problems or registry.PROBLEMS) if p.unit == unit]
    nb = problem_notebook(unit, with_solutions=True, problems=chosen, audience="nbgrader")
    answers = {tag("answer", p): p for p in chosen}
    checks = {tag("check", p): p for p in chosen}
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type == "markdown":
            cell.metadata["nbgrader"] = nbgrader_meta(f"{cell.id}-text", locked=True)
            continue
        tags = cell.metadata.get("tags", [])
        for p in (answers[t] for t in tags if t in answers):
            cell.metadata["nbgrader"] = nbgrader_meta(f"p{p.id.replace('.', '_')}-answer", solution=True)
        for p in (checks[t] for t in tags if t in checks):
            test = new_code_cell(grading_cell_source(p))
            test.id = f"{cell.id}-test"
            test.metadata["nbgrader"] = nbgrader_meta(f"p{p.id.replace('.', '_')}-tests", grade=True,
                                                       locked=True, points=p.points)
            cells.append(test)
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


def write_course(course_dir: Path, problems=None, name: str | None = None, course_id: str = COURSE_ID,
                 exchange: Path | None = None) -> list[Path]:
    """Write (or refresh) the nbgrader course: its config and README, and the assignments holding
    ``problems`` (default: one per unit, every problem; ``name`` puts them in one assignment); its
    id ``course_id``, its exchange ``exchange`` (default: an ``exchange/`` folder of its own; a shared
    one must exist, writable by everyone, as nbgrader requires). An existing ``nbgrader_config.py``
    and gradebook are kept."""
    if name is not None and not _ASSIGNMENT_NAME.fullmatch(name):
        raise ValueError(f"assignment name {name!r}: use letters, digits, '_' and '-' only (nbgrader makes it a folder)")
    text = course_config(course_id, exchange)
    if exchange is not None:
        import os
        import stat

        where = Path(exchange)
        if not where.is_dir():
            raise ValueError(f"the exchange {where} does not exist: nbgrader needs it made beforehand, writable by every "
                             f"user with the sticky bit (as root: install -d -m 1777 {where})")
        if where.stat().st_mode & 0o777 != 0o777 and os.geteuid() != where.stat().st_uid:
            raise ValueError(f"the exchange {where} is mode {stat.filemode(where.stat().st_mode)}: every user must "
                             f"write it (as root: chmod 1777 {where})")
    course_dir.mkdir(parents=True, exist_ok=True)
    if exchange is None:
        (course_dir / "exchange").mkdir(exist_ok=True)
    written = []
    config = course_dir / "nbgrader_config.py"
    if not config.exists():
        config.write_text(text)
        written.append(config)
    readme = course_dir / "README.md"
    readme.write_text(COURSE_README.format(last=max(registry.units()), stack=stack.describe()))
    written.append(readme)
    for assignment, units in assignments(problems, name).items():
        for unit, chosen in units.items():
            path = course_dir / "source" / assignment / registry.UNITS[chosen[0].unit].notebook
            path.parent.mkdir(parents=True, exist_ok=True)
            nbformat.write(source_notebook(unit, chosen), str(path))
            written.append(path)
    return written
