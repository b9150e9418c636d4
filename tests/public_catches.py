"""What each problem's public check catches of its curated wrong answers, and the floor it is held to.

A learner's check cell says "Correct" when the public examples pass; that must mean the statement's
traps were met. Every curated wrong answer (``tests/wrong_answers``) is run here through the public
check as a learner's kernel runs it: its source exec'd with its unit's imports, then
``ProblemHandle(problem, namespace).check()``, the notebook's own code path (``autograder check``
and practice run the same). The reference and every curated right answer (``tests/right_answers``)
go through it too, and must pass.

:data:`FLOORS` is the one table: per problem, how many of its wrong answers the check must reject
(anything but "correct"), and, by name, the few it may let through, each with why no public example
can show that trap. Every wrong answer not named there is a trap the statement names, and must be
caught. ``tests/content/test_public_checks_catch.py`` runs it all and prints the report; the README's table
of it (between :data:`BEGIN` and :data:`END`) is written by ``python -m tests.public_catches --readme``
and held to the run by that test.

Each unit runs in a process of its own (``python -m tests.public_catches --unit N``: one JSON line
per answer, a "start" line first, so a run that hangs names its answer), so a unit's libraries load
and its functions compile once for all its answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Why a wrong answer may pass the public check.
MEMORY = ("over the memory budget: the grader measures it from outside the worker, which a check in the "
          "learner's own process cannot (its 'correct' says so), and the public examples are too small for it")
NAMES_EVERY_LEAF = ("raises naming the leaf, among every other: the statement asks for a ValueError naming the "
                    "leaf, which this message does; the hidden tests' limit on other leaves named is theirs")
# Each reason in a few words, for the README's table.
SHORT = {MEMORY: "memory, measured by the grader only", NAMES_EVERY_LEAF: "a message naming every leaf, the faulty one too"}

# problem: (floor, {wrong answer the public check may let through: why}). Every other curated wrong
# answer of the problem is a trap its statement names: the check must reject it.
FLOORS: dict[str, tuple[int, dict[str, str]]] = {
    "1.1": (7, {}), "1.2": (6, {}), "1.3": (5, {}), "1.4": (5, {}),
    "2.1": (5, {}), "2.2": (5, {}), "2.3": (4, {}), "2.4": (4, {}), "2.5": (6, {}), "2.6": (5, {}),
    "3.1": (6, {}), "3.2": (7, {}), "3.3": (5, {}), "3.4": (6, {}),
    "4.1": (8, {}), "4.2": (5, {}), "4.3": (4, {}), "4.4": (9, {}), "4.5": (8, {}),
    "5.1": (7, {}), "5.2": (10, {}), "5.3": (9, {}),
    "6.1": (4, {"whole_state_then_drop": MEMORY, "casts_after_restore": MEMORY}),
    "6.2": (4, {"reads_the_whole_file": MEMORY, "reads_all_the_bytes_at_once": MEMORY,
                "safe_open_keeps_every_tensor": MEMORY, "one_save_of_the_whole_tree": MEMORY}),
    "7.1": (5, {"replicated_then_resharded": MEMORY}),
    "7.2": (13, {"names_every_leaf": NAMES_EVERY_LEAF}),
    "7.3": (12, {}),
    "7.4": (8, {"whole_model_at_once": MEMORY, "whole_model_read_first": MEMORY}),
    "8.1": (14, {}),
    "8.2": (16, {}),
    "8.3": (14, {}),
    "9.1": (15, {"whole_model_restored": MEMORY, "every_leaf_restored_before_writing": MEMORY}),
    "9.2": (10, {"load_file_on_every_file": MEMORY, "keeps_every_tensor_read": MEMORY, "whole_tree_saved_at_once": MEMORY}),
    "9.3": (9, {}),
    "10.1": (9, {}), "10.2": (7, {}), "10.3": (9, {}),
}

BEGIN = "<!-- public-checks: written by `python -m tests.public_catches --readme`; do not edit -->"
END = "<!-- /public-checks -->"


def may_pass(pid: str, name: str) -> bool:
    allowed = FLOORS[pid][1]
    return "*" in allowed or name in allowed


# --- the run of one unit, in its own process -------------------------------------------------------

def _answers(unit: int):
    """(problem, kind, name, source or None for the reference, imports) for every answer of the unit."""
    from autograder import registry
    from tests.right_answers import HEADERS as RIGHT_HEADERS, RIGHT
    from tests.wrong_answers import HEADERS as WRONG_HEADERS, WRONG

    for p in registry.PROBLEMS:
        if p.unit != unit:
            continue
        yield p, "reference", "reference", None, ""
        for name, source in RIGHT.get(p.id, ()):
            yield p, "right", name, source, RIGHT_HEADERS[p.id]
        for name, source, *_ in WRONG.get(p.id, ()):
            yield p, "wrong", name, source, WRONG_HEADERS[p.id]


def _run_unit(unit: int, only: set | None) -> None:
    import importlib

    from ckptlab import setup_devices

    setup_devices()
    from autograder.learner.notebook import ProblemHandle

    for p, kind, name, source, imports in _answers(unit):
        if only and p.id not in only:
            continue
        print(json.dumps({"start": [p.id, kind, name]}), flush=True)
        started = time.perf_counter()
        if source is None:
            namespace = {p.function: getattr(importlib.import_module(f"solutions.unit{p.unit}"), p.function)}
        else:
            namespace = {"__name__": f"submission_{name}"}
        try:
            if source is not None:
                exec(compile(imports + source, f"<{kind} {name}>", "exec"), namespace)  # noqa: S102 - curated answers
            result = ProblemHandle(p, namespace).check()
            status, message = result.status, result.message
        except Exception as exc:  # noqa: BLE001 - a check that raises is reported, as a learner would see it
            status, message = "error", f"the check raised {type(exc).__name__}: {exc}"
        print(json.dumps({"id": p.id, "kind": kind, "name": name, "status": status, "message": message[:300],
                          "seconds": round(time.perf_counter() - started, 2)}), flush=True)


def run_units(units, only=None, jobs: int = 1, timeout: float = 900.0) -> list[dict]:
    """Every answer of ``units`` through the public check, a process per unit, ``jobs`` at a time (a
    unit starts as soon as any running one ends), the results in the units' order."""
    from concurrent.futures import ThreadPoolExecutor

    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}

    def run_unit(unit) -> list[dict]:
        command = [sys.executable, "-m", "tests.public_catches", "--unit", str(unit)]
        command += ["--only", *only] if only else []
        with open(os.devnull, "w") as out:
            process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=out, text=True)
            try:
                stdout, _ = process.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, _ = process.communicate()
        lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        done = [line for line in lines if "status" in line]
        last = next((line["start"] for line in reversed(lines) if "start" in line), None)
        if process.returncode != 0 or (last and not any([d["id"], d["kind"], d["name"]] == last for d in done)):
            raise RuntimeError(f"unit {unit}'s public checks ended with code {process.returncode}"
                               + (f" during {last}" if last else ""))
        return done

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return [line for done in pool.map(run_unit, list(units)) for line in done]


# --- the report ---------------------------------------------------------------------------------

def tally(results: list[dict]) -> dict[str, dict]:
    """Per problem: wrong answers, those caught, those that pass (names), right answers failing (names)."""
    out: dict[str, dict] = {}
    for r in results:
        row = out.setdefault(r["id"], {"wrong": 0, "caught": 0, "passing": [], "rights_failing": []})
        if r["kind"] == "wrong":
            row["wrong"] += 1
            if r["status"] == "correct":
                row["passing"].append(r["name"])
            else:
                row["caught"] += 1
        elif r["status"] != "correct":
            row["rights_failing"].append(f"{r['name']} ({r['status']}: {r['message'][:120]})")
    return out


def report(results: list[dict]) -> str:
    rows = tally(results)
    lines = ["Problem  Wrong  Caught  Floor  Passing the public check", "-------  -----  ------  -----  " + "-" * 24]
    for pid in sorted(rows, key=lambda p: tuple(map(int, p.split(".")))):
        row = rows[pid]
        floor = FLOORS.get(pid, (None,))[0]
        lines.append(f"{pid:<7}  {row['wrong']:>5}  {row['caught']:>6}  {'?' if floor is None else floor:>5}  "
                     f"{', '.join(row['passing']) or '-'}")
    total = sum(r["wrong"] for r in rows.values()), sum(r["caught"] for r in rows.values())
    lines.append(f"All      {total[0]:>5}  {total[1]:>6}")
    return "\n".join(lines)


def readme_block(results: list[dict]) -> str:
    from autograder import registry

    rows = tally(results)
    lines = [BEGIN, "| Problem | Curated wrong answers | Rejected by the public check | Floor | Let through (why) |",
             "| --- | --- | --- | --- | --- |"]
    for p in registry.PROBLEMS:
        row, (floor, allowed) = rows[p.id], FLOORS[p.id]
        grouped: dict[str, list[str]] = {}
        for name, reason in allowed.items():
            if name in row["passing"]:
                grouped.setdefault(SHORT[reason], []).append(f"`{name}`")
        why = SHORT[allowed["*"]] if "*" in allowed else "; ".join(f"{', '.join(v)} ({k})" for k, v in grouped.items())
        lines.append(f"| {p.id} | {row['wrong']} | {row['caught']} | {floor} | {why or '-'} |")
    return "\n".join(lines + [END])


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--unit", type=int, help="run one unit's answers in this process (JSON lines)")
    parser.add_argument("--only", nargs="*", help="these problems only")
    parser.add_argument("--jobs", type=int, default=1, help="units run at a time")
    parser.add_argument("--readme", action="store_true", help="rewrite the README's table from a run of every unit")
    args = parser.parse_args(argv)
    if args.unit is not None:
        _run_unit(args.unit, set(args.only or ()))
        return 0
    from autograder import registry

    results = run_units(registry.units(), args.only, jobs=args.jobs)
    print(report(results))
    if args.readme:
        readme = ROOT / "README.md"
        text = readme.read_text()
        start, end = text.index(BEGIN), text.index(END) + len(END)
        readme.write_text(text[:start] + readme_block(results) + text[end:])
        print("README.md's table rewritten")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
