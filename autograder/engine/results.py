"""What grading returns: a result per problem and a learner's report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class ProblemResult:
    id: str
    function: str
    status: str
    score: float
    max_score: float
    message: str
    seconds: float = 0.0  # wall time grading this problem
    code_seconds: float = 0.0  # of which inside the learner's function
    category: str = ""  # why it failed, for instructors (see judge); not in learner reports
    worker_peak_bytes: int = 0  # the worker's largest resident set (benchmarks)
    worker_waited: float = 0.0  # before its worker started, for the zygote's imports (benchmarks)
    killed_seconds: float = 0.0  # of seconds, in workers the grader killed on purpose (5.3; benchmarks)

    def public(self) -> dict:
        d = asdict(self)
        for private in ("seconds", "code_seconds", "category", "worker_peak_bytes", "worker_waited", "killed_seconds"):
            d.pop(private)
        return d


@dataclass
class Report:
    learner: str
    problems: list[ProblemResult] = field(default_factory=list)
    isolation: str = ""  # the level learner code ran at: strict or basic (see SECURITY.md)
    isolation_missing: tuple = ()  # at basic: what this machine lacks for strict

    @property
    def score(self) -> float:
        return sum(p.score for p in self.problems)

    @property
    def max_score(self) -> float:
        return sum(p.max_score for p in self.problems)

    def to_json(self) -> dict:
        return {"learner": self.learner, "score": self.score, "max_score": self.max_score,
                "isolation": self.isolation, **({"isolation_missing": list(self.isolation_missing)}
                                                if self.isolation_missing else {}),
                "problems": [p.public() for p in self.problems]}


def problem_result(problem, status, message, seconds=0.0, category=None):
    """A problem's result: full points when correct, none otherwise."""
    return ProblemResult(problem.id, problem.function, status, float(problem.points if status == "correct" else 0),
                         float(problem.points), message, seconds,
                         category=status if category is None and status != "correct" else (category or ""))
