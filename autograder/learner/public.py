"""Public checks from the command line: every problem's public examples, run on saved notebooks or
.py files, exactly as the notebook's check cells run them. For learners (and the learner bundle,
which has no hidden tests): it runs your own code in this process, like the notebook does."""

from __future__ import annotations

from autograder import registry
from autograder.engine import extract
from autograder.engine.locate import locate
from autograder.learner.notebook import CheckResult, ProblemHandle


def check_paths(paths, only=None) -> list[CheckResult]:
    sub = extract.load_submissions(list(paths))
    plans = []
    for p in [registry.get(x) for x in only] if only else registry.PROBLEMS:
        located = locate(p, sub)  # missing, broken, stub or wrong signature: the grader's own words
        if located is not None:
            plans.append((p, None, CheckResult(p, located.status, located.message)))
        else:
            plans.append((p, sub.module_source(p.function), None))
    if any(source is not None for _, source, _ in plans):
        from ckptlab import setup_devices  # examples build meshes; the learner's code may use JAX

        setup_devices()
    results = []
    for p, source, result in plans:
        if result is None:
            namespace: dict = {"__name__": f"submission_{p.function}"}
            try:
                exec(compile(source, f"<{p.function}>", "exec"), namespace)  # noqa: S102 - the learner's own code
                result = ProblemHandle(p, namespace).check()
            except Exception as exc:  # noqa: BLE001 - one problem's failure is reported, never raised
                result = CheckResult(p, "error", f"loading your code raised {type(exc).__name__}: {exc}")
        results.append(result)
    return results
