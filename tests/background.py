"""The suite's heaviest gradings, run beside it in a process of their own: the tests that read them
(marked ``@pytest.mark.background("class")`` or ``("public")``) are moved to the end of the run
(tests/conftest.py), and everything else runs meanwhile, on the core the grading leaves free.

- ``class``: one class graded as an instructor grades one (grade-batch, at the strict level where
  the machine has it, every learner on the class's shared hidden cases, so the references run once
  per problem for all of them): every curated wrong answer a learner of its own
  (``wrong-<function>-<answer>``), the curated right answers in rounds (tests/graded_together.py,
  ``right-<i>``), 8.3's control and forgeries (tests/engine/test_grace.py, ``grace-<name>``) and the
  references (``reference``: solutions/). Kept: each learner's whole report, and the expected
  outcomes the class was judged against, as they were computed.
- ``public``: every curated answer through its problem's public check (tests/public_catches.py).

Two learners at a time (many of their runs wait: for evaluations, grace windows, killed processes),
then one unit at a time: the grading takes about one core, the suite the other.
Each result is written whole (a pickle renamed into place) or not at all; a run that ends without
one fails the tests that read it, with the run's own last words.
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOBS = ("class", "public")
_RUN: dict = {}


def start(jobs=JOBS) -> None:
    """Start the run of ``jobs`` (once a session: later calls add nothing)."""
    if _RUN:
        return
    folder = Path(tempfile.mkdtemp(prefix="ckpt-suite-background-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    log = open(folder / "log", "w")  # noqa: SIM115 - closed by stop()
    proc = subprocess.Popen([sys.executable, "-m", "tests.background", str(folder), *jobs], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    _RUN.update(folder=folder, jobs=tuple(jobs), log=log, proc=proc, loaded={})


def result(job: str, timeout: float = 1700.0):
    """What ``job`` left, waiting for it (started now if it was not: a test run on its own)."""
    if not _RUN:
        start([job])
    if job not in _RUN["jobs"]:
        raise RuntimeError(f"the suite's background run does not hold {job!r}: mark the test that reads it "
                           f"@pytest.mark.background({job!r})")
    if job in _RUN["loaded"]:
        return _RUN["loaded"][job]
    path, proc = _RUN["folder"] / f"{job}.pickle", _RUN["proc"]
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None and not path.exists():
            raise RuntimeError(f"the suite's background gradings ended (exit code {proc.returncode}) without "
                               f"{job}'s results:\n{_tail()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{job}'s background grading took over {timeout:.0f} s:\n{_tail()}")
        time.sleep(0.5)
    _RUN["loaded"][job] = pickle.loads(path.read_bytes())
    return _RUN["loaded"][job]


def wait(timeout: float = 1700.0) -> None:
    """Until the run has ended (at once if none was started): for tests that look at, or kill, every
    grading process on the machine (tests/sandbox/), which must not see or touch this one's."""
    if _RUN:
        try:
            _RUN["proc"].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(f"the suite's background gradings ran over {timeout:.0f} s:\n{_tail()}") from None


def _tail() -> str:
    _RUN["log"].flush()
    return (_RUN["folder"] / "log").read_text(errors="replace")[-3000:]


def end_run(proc: subprocess.Popen, files, folder: Path) -> None:
    """A run the suite started beside itself, ended: its process group killed if still going (a run
    cut short), its open files closed, its folder removed."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    for f in files:
        f.close()
    shutil.rmtree(folder, ignore_errors=True)


def stop() -> None:
    """At the session's end: the run stopped if still going, its folder removed."""
    if not _RUN:
        return
    end_run(_RUN["proc"], [_RUN["log"]], _RUN["folder"])
    _RUN.clear()


def _write(folder: Path, job: str, value) -> None:
    part = folder / f"{job}.pickle.part"
    part.write_bytes(pickle.dumps(value))
    part.rename(folder / f"{job}.pickle")


def grade_class(folder: Path) -> dict:
    """The ``class`` job: ``{"reports": {learner: report}, "expected": {(problem id, salt): outcomes},
    "wrong": {(problem id, answer): learner}, "rounds": [[(problem id, answer), ...], ...]}``."""
    import json

    from autograder import registry, text
    from autograder.classroom.batch import grade_batch
    from autograder.engine.shared import SharedCases
    from tests import right_answers, wrong_answers
    from tests.conftest import best_isolation
    from tests.graded_together import rounds

    subs, out = folder / "class-subs", folder / "class-results"
    subs.mkdir()
    wrong = {}
    for pid, items in wrong_answers.WRONG.items():
        for name, source, _, _ in items:
            learner = f"wrong-{registry.get(pid).function}-{name}"
            assert learner not in wrong.values(), learner  # (a class has one learner of a name)
            wrong[pid, name] = learner
            (subs / f"{learner}.py").write_text(wrong_answers.HEADERS[pid] + source)
    graded_rounds = rounds(right_answers.RIGHT, right_answers.HEADERS)
    for i, (source, _) in enumerate(graded_rounds):
        (subs / f"right-{i}.py").write_text(source)
    from tests.engine.test_grace import class_sources

    for name, source in class_sources().items():
        (subs / f"grace-{name}.py").write_text(source)
    (subs / "reference").mkdir()
    for path in sorted(p for p in (ROOT / "solutions").glob("*.py") if not p.name.startswith("_")):
        (subs / "reference" / path.name).write_text(path.read_text())
    expected: dict = {}
    prepared = SharedCases.prepared

    def kept(self, key, compute):
        written = prepared(self, key, compute)
        expected[key] = written.expected
        return written

    SharedCases.prepared = kept
    try:
        grade_batch(subs, out, jobs=2, progress=False, isolation=best_isolation(), problems=registry.PROBLEMS,
                    shared_cases=True)
    finally:
        SharedCases.prepared = prepared
    learners = [*wrong.values(), *(f"right-{i}" for i in range(len(graded_rounds))),
                *(f"grace-{name}" for name in class_sources()), "reference"]
    reports = {learner: json.loads((out / "learners" / f"{text.file_key(learner)}.json").read_text())
               for learner in learners}
    return {"reports": reports, "expected": expected, "wrong": wrong,
            "rounds": [list(keys) for _, keys in graded_rounds]}


def public_checks() -> list[dict]:
    """The ``public`` job: every unit's answers through the public checks, a unit at a time."""
    from autograder import registry
    from tests import public_catches as pc

    return pc.run_units(registry.units(), jobs=1)


def main(argv: list[str]) -> int:
    from ckptlab import setup_devices

    setup_devices()  # (the grading process, as the suite's own: the references' process starts JAX)
    folder, jobs = Path(argv[0]), argv[1:]
    for job in jobs:
        started = time.monotonic()
        value = grade_class(folder) if job == "class" else public_checks()
        _write(folder, job, value)
        print(f"{job}: {time.monotonic() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
