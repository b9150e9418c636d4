"""A check cell's "Correct" means the statement's traps were met: every curated wrong answer through the
public check (as a learner's kernel runs it), each problem held to its floor and every named trap
caught, the reference and every curated right answer passing, and the README's table of it all
matching the run (tests/public_catches.py has the table and the runner)."""

from __future__ import annotations

import pytest

from autograder import registry
from tests import public_catches as pc
from tests.right_answers import RIGHT
from tests.wrong_answers import WRONG


def shortfalls(results: list[dict]) -> list[str]:
    """Each way the run falls short of the table: a named trap let through, a floor not reached, the
    reference or a right answer not passing, an answer or a problem the run did not cover."""
    rows, out = pc.tally(results), []
    for p in registry.PROBLEMS:
        row = rows.get(p.id)
        if row is None:
            out.append(f"{p.id}: not run")
            continue
        floor, _ = pc.FLOORS[p.id]
        trapped = [name for name in row["passing"] if not pc.may_pass(p.id, name)]
        if trapped:
            out.append(f"{p.id}: the public check says correct to {', '.join(trapped)}, whose trap the statement "
                       "names: add a public example that shows it")
        if row["caught"] < floor:
            out.append(f"{p.id}: {row['caught']} of {row['wrong']} wrong answers rejected, below its floor {floor}")
        if row["rights_failing"]:
            out.append(f"{p.id}: right answers the public check rejects: {'; '.join(row['rights_failing'])}")
        ran = {r["name"] for r in results if r["id"] == p.id and r["kind"] == "wrong"}
        missing = [name for name, *_ in WRONG.get(p.id, ()) if name not in ran]
        if missing:
            out.append(f"{p.id}: wrong answers not run: {', '.join(missing)}")
    return out


@pytest.fixture(scope="module")
def results() -> list[dict]:
    from tests import background

    return background.result("public")  # (run beside the suite, a unit at a time: tests/background.py)


@pytest.mark.slow
@pytest.mark.background("public")
@pytest.mark.timeout(1800)
def test_every_public_check_rejects_the_wrong_answers_its_statement_names_a_trap_for(results, capsys):
    with capsys.disabled():
        print("\nCurated wrong answers through each problem's public check:\n" + pc.report(results))
    assert not shortfalls(results), "\n".join(shortfalls(results))
    rights = [r for r in results if r["kind"] != "wrong"]
    assert len(rights) == len(registry.PROBLEMS) + sum(len(v) for v in RIGHT.values())


@pytest.mark.slow
@pytest.mark.background("public")
@pytest.mark.timeout(1800)
def test_the_readme_table_is_the_run(results, root):
    readme = (root / "README.md").read_text()
    assert pc.BEGIN in readme and pc.END in readme
    block = readme[readme.index(pc.BEGIN):readme.index(pc.END) + len(pc.END)]
    assert block == pc.readme_block(results), (
        "the README's table of public checks is not this run's: python -m tests.public_catches --readme rewrites it")


def test_the_table_names_every_problem_and_only_curated_answers():
    assert set(pc.FLOORS) == {p.id for p in registry.PROBLEMS}
    for pid, (floor, allowed) in pc.FLOORS.items():
        names = {name for name, *_ in WRONG[pid]}
        assert set(allowed) <= names | {"*"}, f"{pid}: no curated wrong answer named {sorted(set(allowed) - names - {'*'})}"
        assert floor <= len(names) - (0 if "*" in allowed else len(allowed)) or "*" in allowed, pid
        assert all(reason in pc.SHORT for reason in allowed.values()), f"{pid}: a reason with no words for the README"


def test_a_named_trap_let_through_or_a_right_answer_rejected_fails_the_run():
    # The judge of the run, on runs made up: each way of falling short is caught, and a full run passes.
    def run(changes=()):
        rows = []
        for p in registry.PROBLEMS:
            rows.append({"id": p.id, "kind": "reference", "name": "reference", "status": "correct", "message": ""})
            rows += [{"id": p.id, "kind": "right", "name": n, "status": "correct", "message": ""} for n, _ in RIGHT.get(p.id, ())]
            for name, *_ in WRONG.get(p.id, ()):
                status = "correct" if pc.may_pass(p.id, name) else "incorrect"
                rows.append({"id": p.id, "kind": "wrong", "name": name, "status": status, "message": ""})
        for pid, kind, name, status in changes:
            next(r for r in rows if (r["id"], r["kind"], r["name"]) == (pid, kind, name))["status"] = status
        return rows

    assert shortfalls(run()) == []
    trap = "sorted_numerically"  # 2.4's statement says "sorted as strings"
    assert trap in {name for name, *_ in WRONG["2.4"]}
    assert any("2.4: the public check says correct to sorted_numerically" in s
               for s in shortfalls(run([("2.4", "wrong", trap, "correct")])))
    right = RIGHT["3.3"][0][0]
    assert any(s.startswith("3.3: right answers the public check rejects") for s in
               shortfalls(run([("3.3", "right", right, "incorrect")])))
    assert shortfalls([r for r in run() if r["id"] != "9.3"]) == ["9.3: not run"]


def test_the_examples_a_process_wrote_once_are_removed_by_the_next_once_it_has_ended(tmp_path):
    """5.2's and 8.2's example folders are written once per process (a helper process each: seconds) and
    copied for each check. A kernel killed outright (a restart) leaves them: the next check's process
    removes those of processes that no longer run, and keeps a running one's."""
    import os
    import subprocess
    import sys

    from autograder.learner import notebook

    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)
    left = tmp_path / f"{notebook._MADE_PREFIX}{dead}-abc_12"
    live = tmp_path / f"{notebook._MADE_PREFIX}{os.getppid()}-def_34"
    other = tmp_path / f"ckpt-example-{dead}"
    for folder in (left, live, other):
        (folder / "ckpt-1").mkdir(parents=True)
    notebook._sweep_made_folders(str(tmp_path))
    assert not left.exists() and live.exists() and other.exists()
