"""Curated right answers, graded a round at a time: a round is one submission holding at most one
answer per problem of a unit, so a unit's answers cost a few grading runs, not one each; the rounds
are graded as one class, two at a time.
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


class Rounds:
    """Every round graded once, when one of its answers is first asked for: all rounds as one class
    (grade-batch, two learners at a time, at the strict level where the machine has it), each round
    a learner of its own. ``whole``: learners graded in the same class, each a folder of files (the
    references, ``solutions/``), their whole reports kept (:meth:`report`)."""

    def __init__(self, answers: dict, headers: dict, learner_prefix: str, whole: dict | None = None):
        self.rounds = rounds(answers, headers)
        self.prefix = learner_prefix
        self.whole = dict(whole or {})
        self.where = {key: i for i, (_, keys) in enumerate(self.rounds) for key in keys}
        self.results: dict | None = None
        self.reports: dict = {}

    def _grade_all(self) -> dict:
        import json
        import tempfile
        from pathlib import Path
        from types import SimpleNamespace

        from autograder.classroom.batch import grade_batch
        from tests.conftest import best_isolation

        self._folder = tempfile.TemporaryDirectory(prefix="ckpt-rounds-")  # (removed with this object)
        subs, out = Path(self._folder.name, "subs"), Path(self._folder.name, "out")
        subs.mkdir()
        for i, (source, _) in enumerate(self.rounds):
            (subs / f"{self.prefix}-{i}.py").write_text(source)
        for name, folder in self.whole.items():
            (subs / name).mkdir()
            for path in sorted(p for p in Path(folder).glob("*.py") if not p.name.startswith("_")):
                (subs / name / path.name).write_text(path.read_text())
        pids = {pid for _, keys in self.rounds for pid, _ in keys}
        if self.whole:
            pids = {p.id for p in registry.PROBLEMS}
        grade_batch(subs, out, jobs=2, progress=False, isolation=best_isolation(),
                    problems=tuple(p for p in registry.PROBLEMS if p.id in pids), shared_cases=True)
        results = {}
        for i, (_, keys) in enumerate(self.rounds):
            report = json.loads((out / "learners" / f"{self.prefix}-{i}.json").read_text())
            for pid, name in keys:
                results[pid, name] = SimpleNamespace(**next(p for p in report["problems"] if p["id"] == pid))
        for name in self.whole:
            self.reports[name] = json.loads((out / "learners" / f"{name}.json").read_text())
        return results

    def result(self, pid: str, name: str):
        if self.results is None:
            self.results = self._grade_all()
        return self.results[pid, name]

    def report(self, name: str) -> dict:
        """The whole report of a learner of ``whole``."""
        if self.results is None:
            self.results = self._grade_all()
        return self.reports[name]


_RIGHT: list = []


def right_rounds() -> Rounds:
    """The curated right answers and the references (learner ``reference``: solutions/), one class."""
    if not _RIGHT:
        from pathlib import Path

        from tests.right_answers import HEADERS, RIGHT

        _RIGHT.append(Rounds(RIGHT, HEADERS, "right", whole={"reference": Path(__file__).parents[1] / "solutions"}))
    return _RIGHT[0]
