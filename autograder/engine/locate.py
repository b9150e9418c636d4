"""Finding a problem's function in a submission: missing, broken, a stub, a wrong signature, or
there to run. Shared by grading and the public checks."""

from __future__ import annotations

import ast

from autograder.engine import extract
from autograder.engine.results import ProblemResult, problem_result


def _signature_error(problem, node) -> str | None:
    names, varargs = extract.positional_params(node)
    want = list(problem.params)
    if varargs and len(names) <= len(want):
        return None
    required = len(names) - len(node.args.defaults)
    if not (required <= len(want) <= len(names)):
        return (f"{problem.function} must take {len(want)} arguments ({', '.join(want)}), in that order; yours "
                f"takes ({', '.join(names)}). Keep the signature from the problem statement.")
    if set(names[: len(want)]) == set(want) and names[: len(want)] != want:
        return (f"{problem.function}'s arguments are in the wrong order: it is called as "
                f"{problem.call}, yours is ({', '.join(names)}).")
    return None


def locate(problem, sub: extract.Submission) -> ProblemResult | None:
    """The result of a problem whose function cannot run (missing, broken, a stub, a wrong
    signature), or None when it is there to run. Shared with the public checks."""
    block = sub.function(problem.function)
    broken = sub.broken_function(problem.function)
    if broken is not None and (block is None or extract.is_stub(block.node)):  # an attempt, even broken, beats a stub
        return problem_result(problem, "error", f"{broken.error}: fix the syntax error in {problem.function}.",
                       category="syntax_error")
    if block is None:
        if sub.unreadable:
            return problem_result(problem, "error", f"{sub.unreadable}.", category="unreadable")
        return problem_result(problem, "not_attempted",
                       f"No function named {problem.function} found. Define it as `def {problem.call}:`.")
    if extract.is_stub(block.node):
        return problem_result(problem, "not_attempted", "Not attempted yet: the function is still the stub.")
    bad = _signature_error(problem, block.node)
    if bad:
        return problem_result(problem, "error", bad, category="signature")
    used = _uses(sub, problem)
    if used:
        return problem_result(problem, "incorrect", course_helper_message(problem, used), category="course_helper")
    return None


def course_helper_message(problem, used: str) -> str:
    """What a function that uses a module of ``problem.forbidden`` is told (here and by the notebook's check)."""
    return (f"{problem.function} uses the course's own {used}, the lesson's answer to this problem: write it "
            "yourself, with the libraries the statement names (JAX, Orbax, safetensors...) or plain arithmetic, as "
            "that helper does inside.")


def _uses(sub: extract.Submission, problem) -> str | None:
    """The first module of ``problem.forbidden`` (or below one) the function's code (its closure) imports or names."""
    if not problem.forbidden:
        return None
    for block in sub.closure(problem.function):
        for node in ast.walk(block.node):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                names = [f"{node.value.id}.{node.attr}"]
            for name in names:
                if any(name == f or name.startswith(f + ".") for f in problem.forbidden):
                    return name  # as the learner wrote it: ckptlab.tool.diffing, under ckptlab.tool
    return None
