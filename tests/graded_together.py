"""Curated right answers, graded a round at a time: a round is one submission holding at most one
answer per problem of a unit, so a unit's answers cost a few grading runs, not one each; the rounds
are graded in one class with the curated wrong answers and the references (tests/background.py).
Each problem is still graded in a worker of its own, as in any submission; two answers share a round
only if their top-level names (functions, helpers, constants) do not clash, since a submission's
later definition of a name would shadow the earlier one (a 3.2 answer may define 3.1's function). Units 5's and 8's are graded one at a time: their problems
kill or signal real processes at chosen moments, best not beside another problem's work."""

from __future__ import annotations

import ast
import textwrap

from autograder import registry

ALONE_UNITS = {5, 8}  # units whose runs the grader times (kills, a SIGTERM's grace window): one answer a grading


def _names(source: str) -> dict[str, str]:
    """The top-level names ``source`` binds, each with the statement that binds it (two answers may
    import a name alike; one that defines another problem's function as a helper clashes with it)."""
    out = {}
    for node in ast.parse(textwrap.dedent(source)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [(a.asname or a.name).split(".")[0] for a in node.names]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            continue
        for name in names:
            out[name] = ast.dump(node)
    return out


def rounds(answers: dict, headers: dict) -> list[tuple[str, list[tuple[str, str]]]]:
    """``answers``: ``{problem id: [(name, source, ...), ...]}``. Returns ``[(submission source,
    [(problem id, answer name), ...]), ...]``: every answer in exactly one round."""
    out = []
    by_unit: dict[int, list[str]] = {}
    for pid in answers:
        by_unit.setdefault(registry.get(pid).unit, []).append(pid)
    for unit, pids in sorted(by_unit.items()):
        left = {pid: list(answers[pid]) for pid in pids}
        while any(left.values()):
            taken, bound, sources = [], {}, []
            for pid in pids:
                for i, answer in enumerate(left[pid]):
                    names = _names(answer[1])
                    if all(bound.get(n, dump) == dump for n, dump in names.items()):
                        bound.update(names)
                        taken.append((pid, answer[0]))
                        sources.append(answer[1])
                        del left[pid][i]
                        break
                if unit in ALONE_UNITS and taken:
                    break
            header = headers[taken[0][0]]
            out.append((header + "\n".join(textwrap.dedent(s) for s in sources), taken))
    return out


class ClassResults:
    """The curated right answers' rounds and the references, as the suite's background class graded
    them (tests/background.py: one class with the curated wrong answers, every learner on its shared
    hidden cases, one grading for all)."""

    def __init__(self, graded: dict):
        self.reports = graded["reports"]
        self.where = {tuple(key): i for i, keys in enumerate(graded["rounds"]) for key in keys}

    def result(self, pid: str, name: str):
        from types import SimpleNamespace

        report = self.reports[f"right-{self.where[pid, name]}"]
        return SimpleNamespace(**next(p for p in report["problems"] if p["id"] == pid))

    def report(self, name: str) -> dict:
        """The whole report of learner ``name`` (``reference``: solutions/)."""
        return self.reports[name]


def right_rounds() -> ClassResults:
    """The curated right answers and the references (learner ``reference``: solutions/), one class."""
    from tests import background

    return ClassResults(background.result("class"))
