"""Build the problem notebooks from the registry, so statements, stubs and checks never drift.

``python -m autograder notebooks`` rewrites ``problems/*.ipynb``; a test checks the committed
notebooks equal what this module builds. Issue-6 exports reuse :func:`problem_notebook`.

Each problem's own cells carry a Jupyter cell tag (``cell.metadata["tags"]``) naming it: its
function (``answer-1.1``), its check (``check-1.1``) and its commented hint call (``hint-1.1``).
Whatever reads these notebooks finds our cells by those tags (:func:`tag`, :func:`tagged`), not
by their text.
"""

from __future__ import annotations

import inspect
import textwrap
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from autograder import registry

SETUP_CELL = (
    "# Run this cell first: it creates the course's 16 simulated CPU devices before JAX starts.\n"
    "from ckptlab import setup_devices\n"
    "\n"
    "devices = setup_devices()\n"
    'print(f"{len(devices)} {devices[0].platform.upper()} devices ready")'
)

METADATA = {
    "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def _var(p: registry.Problem) -> str:
    return "q" + p.id.replace(".", "_")


TAG_KINDS = ("answer", "check", "hint")


def tag(kind: str, p: registry.Problem) -> str:
    """The tag of problem ``p``'s cell of ``kind`` (one of :data:`TAG_KINDS`): ``answer-1.1``."""
    assert kind in TAG_KINDS, kind
    return f"{kind}-{p.id}"


def _tagged(cell, kind: str, p: registry.Problem):
    cell.metadata["tags"] = [tag(kind, p)]
    return cell


def tagged(nb, kind: str, p: registry.Problem):
    """Problem ``p``'s cell of ``kind`` in ``nb``, found by its tag; None where no cell has it."""
    return next((c for c in nb.cells if tag(kind, p) in c.get("metadata", {}).get("tags", [])), None)


def solution_body(p: registry.Problem) -> str:
    """The reference function's body, with the imports and helpers it uses inlined (for exports)."""
    from autograder.engine import extract
    from autograder.engine.cases import reference

    sub = extract.load_submission(inspect.getsourcefile(reference(p)))
    target = sub.function(p.function)
    helpers = [b.source for b in sub.closure(p.function)
               if b is not target and "from __future__" not in b.source]
    lines = target.source.splitlines()
    body = "\n".join(lines[target.node.body[0].lineno - target.node.lineno:])
    return (textwrap.indent("\n\n".join(helpers), "    ") + "\n\n" if helpers else "") + body


_GRADED_BY = {
    "repo": "Hidden tests run when you grade: `make check` in a terminal at the top of the repository (in a "
            "class, your instructor runs them).",
    "nbgrader": "Hidden tests run when your instructor autogrades the notebook you submit; the test cell "
                "under each problem runs them on what your kernel has run so far, where your course has "
                "installed them (else the public examples).",
}
_DONE = {
    "repo": "Run `make check` in a terminal to grade this notebook with the hidden tests (in a class bundle, "
            "`make check` runs the public examples of every problem and your instructor grades). Save the "
            "notebook first: the grader reads the file, not the kernel.",
    "nbgrader": "Save the notebook and submit it as your instructor says: the grader reads the saved file, not "
                "your kernel, and finds each function by its name.",
}


def problem_notebook(unit: int, with_solutions: bool = False, problems=None,
                     audience: str = "repo") -> nbformat.NotebookNode:
    """Unit ``unit``'s problem notebook: its ``problems`` (default: all of the unit's), each as a
    stub (or the reference, ``with_solutions``). ``audience`` "repo" says to grade with ``make
    check``; "nbgrader" says that the instructor autogrades the submitted notebook."""
    record = registry.UNITS[unit]
    title, intro = record.title, record.intro
    chosen = {p.id for p in problems} if problems is not None else None
    problems = [p for p in registry.PROBLEMS if p.unit == unit and (chosen is None or p.id in chosen)]
    total = sum(p.points for p in problems)
    cells = [
        new_markdown_cell(
            f"# Unit {unit} problems: {title}\n\n{intro}\n\n"
            "**How to work.** Write each function in its cell, run it, then run the check cell "
            "under it. A check runs the public examples here, in your kernel, and says *not "
            "attempted*, *incorrect* (with what to look at) or *correct*; a correct one also says why the "
            "answer is right and what an interviewer would ask next (`.debrief()` shows it again). `.hint()` "
            "gives hints one step at a time.\n\n"
            f"**How you are graded.** {_GRADED_BY[audience]} They call your functions with other "
            "inputs (fresh for each learner), in a separate process with a time and a memory limit, and compare "
            "with the reference solutions. Keep the function names and argument orders as given; "
            f"this notebook is worth {total} points."
        ),
        new_code_cell(SETUP_CELL),
        new_code_cell(record.imports),
    ]
    for p in problems:
        v = _var(p)
        cells += [
            new_markdown_cell(f"## Problem {p.id} ({p.points} points): {p.title}\n\n*{p.difficulty.capitalize()}; "
                              f"{p.category}.*\n\n`{p.call}`\n\n{p.statement}"
                              + (f"\n\n*As seen in* {p.seen_in}." if p.seen_in else "")),
            _tagged(new_code_cell(registry.stub_source(p, solution_body(p) if with_solutions else None)), "answer", p),
            _tagged(new_code_cell(f'{v} = problem("{p.id}")\n{v}.check()'), "check", p),
            new_markdown_cell(f"Stuck? `{v}.hint()` shows the next hint ({len(p.hints)} in all)."),
            _tagged(new_code_cell(f"# {v}.hint()"), "hint", p),
        ]
    cells.append(new_markdown_cell(f"## Done?\n\n{_DONE[audience]}"))
    nb = new_notebook(cells=cells, metadata=METADATA)
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"u{unit}-{i:02d}"
    return nb


def notebook_path(unit: int, root: Path) -> Path:
    return root / "problems" / registry.UNITS[unit].notebook


def write_problem_notebooks(root: Path) -> list[Path]:
    written = []
    for unit in registry.units():
        path = notebook_path(unit, root)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(problem_notebook(unit), str(path))
        written.append(path)
    return written
