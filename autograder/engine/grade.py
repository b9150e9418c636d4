"""Grade a submission: find each problem's function, run hidden cases in a worker, judge here
(:mod:`autograder.engine` lists the parts).

The judging (types, values, scores, messages) happens in this process, from plain data. The
learner's code never runs here; the reference solutions do, to compute expected values.
"""

from __future__ import annotations

import contextlib
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed

from autograder import registry, sandbox
from autograder.engine import extract, runners, trusted_side
from autograder.engine.cases import expected_outcome, hidden_cases
from autograder.engine.gil import SHORT_GIL_SLICES
from autograder.engine.judge import judge
from autograder.engine.locate import locate
from autograder.engine.plan import Plan, Prepared
from autograder.engine.results import ProblemResult, Report, problem_result
from autograder.engine.shared import SharedCases
from autograder.source import serialize_syntax_trees
from autograder.wall import codec, files, kinds
from ckptlab.memory import give_back_freed_memory


class _Room:
    """Where this process's workers run: any number together, or one alone (a worker tried again
    after the machine's memory killed it: no other worker of any grading in this process, a
    class's included, runs beside it; those waiting to start wait for it)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.inside = 0
        self.alone_wanted = 0

    @contextlib.contextmanager
    def _enter(self, alone: bool):
        with self.cond:
            if alone:  # wanted now: no worker starts meanwhile, and this one waits for the room to empty
                self.alone_wanted += 1
                self.cond.wait_for(lambda: self.inside == 0)
            else:
                self.cond.wait_for(lambda: not self.alone_wanted)
            self.inside += 1
        try:
            yield
        finally:
            with self.cond:
                self.inside -= 1
                self.alone_wanted -= alone
                self.cond.notify_all()

    def together(self):
        return self._enter(alone=False)

    def alone(self):
        return self._enter(alone=True)


_ROOM = _Room()


def fitted_jobs(jobs: int | None = None) -> int:
    """Workers run at once for one grading: ``jobs`` (default 2), no more than the CPUs the grader's
    container allows (its cgroup's quota: Gradescope's default is half a CPU), and one where its
    memory is short (under :data:`MEMORY_PER_JOB` a worker: a worker of Units 5-7 and the grading
    process's own references use hundreds of MiB each)."""
    memory, cpus = sandbox.container_limits()
    fit = max(1, min(int(cpus) if cpus >= 1 else 1, memory // MEMORY_PER_JOB))
    return max(1, min(jobs or 2, fit))


MEMORY_PER_JOB = 1536 * 2**20


def _needs_jax(plan: Plan) -> bool:
    """Whether the trusted side needs JAX for this problem: to run its reference, build a mesh or
    write a checkpoint; not where the hidden tests compute the expected values themselves (Unit 1's
    arithmetic, here: no process of its own to start)."""
    return plan.hidden.expected is None or any(files.has_files(c.args) or codec.needs_jax(c.args) for c in plan.cases)


def _written_by_a_job(plan: Plan) -> bool:
    """Whether a job of several JAX processes writes this plan's files (8.2's tiers: about 100 MiB each)."""
    return any(files.has_files(c.args, (kinds.TieredRootArg,)) for c in plan.cases)


def _writing(plan: Plan):
    """Where the grader's memory is short (a container: one worker at a time), a plan whose files a job of
    processes writes writes them alone: no worker runs beside the job, and none starts until it ends."""
    short = sandbox.container_limits()[0] < 2 * MEMORY_PER_JOB
    return _ROOM.alone() if short and _written_by_a_job(plan) else contextlib.nullcontext()


def _reads_checkpoints(plan: Plan) -> bool:
    """Whether the reference, given this plan's cases, restores a checkpoint with Orbax (one
    learner's at a time: :data:`autograder.wall.kinds.ORBAX`)."""
    return any(files.has_files(c.args, (kinds.CheckpointArg, kinds.PreemptedRootArg, kinds.TieredRootArg, kinds.RunFolder))
               for c in plan.cases)


def _in_a_process_of_its_own(plan: Plan) -> bool:
    """Whether this plan's references run in a short-lived process (:mod:`autograder.engine.trusted_side`):
    every plan whose references need JAX, but 5.3's and 8.3's, whose expected values already come from
    the grader's trusted workers (sandbox/trusted.py, which need this process's zygote)."""
    return _needs_jax(plan) and plan.hidden.plant_table is None


def _references(plan: Plan, folder: str):
    """The plan's case arguments, their files written under ``folder``; then each case's expected
    outcome: in a short-lived process of their own where :func:`_in_a_process_of_its_own`, else here.
    (Where memory is short, no worker runs beside a job of processes writing files; one trusted Orbax
    restore at a time.)"""
    raw = [c.args for c in plan.cases]
    reads = kinds.ORBAX if _reads_checkpoints(plan) else contextlib.nullcontext()
    if _in_a_process_of_its_own(plan):
        made = trusted_side.parts("autograder.engine.trusted_side:references", plan.problem.id, raw, folder)
        try:
            with _writing(plan):
                yield next(made)
            with reads:
                yield next(made)
        finally:
            made.close()
        return
    with _writing(plan):
        args = files.realize(raw, folder)  # all at once: one saver helper
    yield args
    with reads:
        yield [expected_outcome(plan.problem, a) for a in args]


class _References:
    """The trusted side's own work, on one thread, ahead of the workers: for each plan in order its
    cases' files, then the expected outcomes (where they need JAX, in a process of their own:
    :func:`_references`; this process never starts the course's devices).

    It starts before the isolation level is known, so it overlaps the zygote's start-up (a
    second of imports on the other core), and it never competes with itself for the GIL: a
    worker's thread only drives its worker. Learner code never runs here."""

    def __init__(self, plans: list[Plan], shared: SharedCases | None = None, salt: str | None = None):
        # Plans whose files a job of processes writes go first, before any other plan's references (in
        # Gradescope's 768 MB, a job of 4 processes beside the references of another plan would not fit).
        self.plans = sorted((p for p in plans if p.result is None), key=lambda p: not _written_by_a_job(p))
        self.shared, self.salt = shared, salt
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="ckpt-references")
        self.thread.start()

    def _run(self) -> None:
        for i, plan in enumerate(self.plans):
            if self.stopped.is_set():
                for rest in self.plans[i:]:
                    rest.fail(RuntimeError("grading stopped"))
                return
            try:
                if self.shared is not None:
                    self._prepare_shared(plan, self.shared, self.salt)
                else:
                    self._prepare(plan)
            except BaseException as exc:  # noqa: BLE001 - a grader-side failure costs this problem only
                plan.fail(exc)

    @staticmethod
    def _prepare(plan: Plan) -> None:
        workdir = sandbox.new_workdir(on_disk=plan.problem.measure_memory)
        lazy = plan.problem.count_reads  # its files are written one case at a time, while reads are counted
        # The references read files of their own: learner code may rewrite every file in its folder.
        reference_dir = sandbox.new_workdir() if any(files.has_files(c.args) for c in plan.cases) else workdir
        made = _references(plan, reference_dir)
        try:
            args = next(made)
            if lazy:
                worker_args = [c.args for c in plan.cases]
            elif reference_dir != workdir:  # the same files, copied into the worker's own folder
                worker_args = files.mirror(args, reference_dir, workdir)
            else:
                worker_args = args
            plan.files.set_result(Prepared(workdir, worker_args))
            plan.expected.set_result(next(made))
        except BaseException:
            if not plan.files.done():
                sandbox.remove_folder(workdir)
            raise
        finally:
            made.close()
            if reference_dir != workdir:
                shutil.rmtree(reference_dir, ignore_errors=True)

    @staticmethod
    def _prepare_shared(plan: Plan, shared: SharedCases, salt: str | None) -> None:
        """As :meth:`_prepare`, the files and expected outcomes computed once for the class
        (:mod:`autograder.engine.shared`), each learner's worker given its own copy of the files."""

        written = shared.prepared((plan.problem.id, salt), lambda folder: tuple(_references(plan, folder)))
        workdir = sandbox.new_workdir(on_disk=plan.problem.measure_memory)
        try:
            worker_args = [c.args for c in plan.cases] if plan.problem.count_reads \
                else files.mirror(written.args, written.folder, workdir)
        except BaseException:
            sandbox.remove_folder(workdir)
            raise
        plan.files.set_result(Prepared(workdir, worker_args))
        plan.expected.set_result(written.expected)

    def close(self) -> None:
        """Stop after the current plan; remove any folder no runner took."""
        self.stopped.set()
        self.thread.join()
        for plan in self.plans:
            folder = plan.untaken_folder()
            if folder:
                sandbox.remove_folder(folder)


def _plan(problem, sub: extract.Submission, learner: str, salt: str | None, timeout: float | None) -> Plan:
    plan = Plan(problem, timeout=timeout or problem.timeout, result=locate(problem, sub))
    if plan.result is None:
        plan.source = sub.module_source(problem.function)
        plan.hidden, plan.cases = hidden_cases(problem, learner, salt)
    return plan


def grade(paths, learner: str = "local", *, problems=None, salt: str | None = None,
          timeout: float | None = None, jobs: int | None = None, isolation: str | sandbox.Isolation = "auto",
          slots: threading.Semaphore | None = None, shared: SharedCases | None = None,
          on_result: Callable[[ProblemResult], None] | None = None) -> Report:
    """Grade the files or folders in ``paths`` for ``learner``; never raises for bad submissions.

    ``jobs`` workers at most run at once; ``slots``, shared by the learners a class is graded for
    at once, bounds them all together (so the class's last learner uses every core).

    ``isolation`` is ``strict``, ``basic`` or ``auto`` (the best this machine has), or a level
    already resolved; ``strict`` raises :class:`~autograder.sandbox.IsolationUnavailable`
    where the machine cannot give it.

    ``shared``: the class's shared hidden cases (:mod:`autograder.engine.shared`): this learner's
    are the class's, and the trusted side's work on them is done once for all.

    ``on_result``, where given, is called with each problem's final result as it is known, in the
    calling thread: first those decided without running (not attempted, a syntax error), then each
    graded one as its worker finishes (a worker the machine's memory killed, once it has been tried
    again). The report is the same either way, in the course's order."""
    serialize_syntax_trees()  # before any thread of this grading builds a syntax tree
    chosen = [registry.get(p) for p in problems] if problems else list(registry.PROBLEMS)
    sub = extract.load_submissions(list(paths))
    plans = [_plan(p, sub, shared.learner if shared else learner, salt, timeout) for p in chosen]
    runs = any(plan.result is None for plan in plans)
    references = _start_references(plans, isolation, shared, salt) if runs else None
    SHORT_GIL_SLICES.hold()
    try:
        level = _level(isolation, runs)
        to_retry: set[str] = set()  # problems the machine failed (its memory, or its timing alone): graded again alone
        results = _grade_together(plans, level, slots, fitted_jobs(jobs), to_retry, on_result)
        # A worker the machine's memory killed (not its own limit) is tried once more, with no other
        # worker of this grader beside it; killed again, it is the grader's failure (the judge says so).
        # So is a problem failed on the machine's timing (the hidden tests' ``retry_alone``: 8.3's run still
        # going when its grace window closed, a window a loaded machine can close on a right answer): the
        # second grading, alone, is the one that counts, whatever it says.
        for i, plan in enumerate(plans):
            if plan.problem.id in to_retry:
                again = _plan(plan.problem, sub, shared.learner if shared else learner, salt, timeout)
                results[i] = _grade_alone(again, level, slots, shared, salt)
                if on_result is not None:
                    on_result(results[i])
    finally:
        SHORT_GIL_SLICES.release()
        if references is not None:
            references.close()
    return Report(learner, results, level.level, level.missing if level.level == sandbox.BASIC else ())


def _start_references(plans: list[Plan], isolation: str | sandbox.Isolation, shared: SharedCases | None,
                      salt: str | None) -> _References:
    """The trusted side's work begun, for plans with learner code to run (and the zygote strict workers
    fork from started, where they may be strict)."""
    if getattr(isolation, "level", isolation) in (sandbox.STRICT, sandbox.AUTO):
        # Strict workers fork from it: it imports while the references start, and then what
        # these problems' code imports.
        sandbox.start_zygote([(plan.source, plan.problem.count_reads) for plan in plans if plan.result is None])
    # The references save and restore checkpoints of tens of MiB one problem after another: freed,
    # their memory goes back to the kernel, so the grader's peak is the largest one, not their sum.
    give_back_freed_memory()
    return _References(plans, shared, salt)


def _level(isolation: str | sandbox.Isolation, runs: bool) -> sandbox.Isolation:
    """The level of isolation this grading's workers run at."""
    if isinstance(isolation, sandbox.Isolation):
        return isolation
    if runs or isolation == sandbox.STRICT:
        return sandbox.resolve(isolation)
    return sandbox.Isolation(sandbox.NO_CODE_RAN)  # no learner code to run: no level to choose


def _grade_together(plans: list[Plan], level: sandbox.Isolation, slots: threading.Semaphore | None, jobs: int,
                    to_retry: set[str], on_result: Callable[[ProblemResult], None] | None) -> list[ProblemResult | None]:
    """Every plan's result, ``jobs`` workers at once; each told to ``on_result`` as it is known, but those
    of the problems to grade again alone (added to ``to_retry`` as their grading finds them)."""
    results: list[ProblemResult | None] = [plan.result for plan in plans]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        running = {pool.submit(_graded, plan, level, slots, to_retry): i for i, plan in enumerate(plans) if plan.result is None}
        for decided in (r for r in results if r is not None and on_result is not None):
            on_result(decided)  # decided without running: known at once
        for done in as_completed(running):
            i = running[done]
            results[i] = done.result()
            if on_result is not None and plans[i].problem.id not in to_retry:
                on_result(results[i])
    return results


def _graded(plan: Plan, level: sandbox.Isolation, slots: threading.Semaphore | None, to_retry: set[str]) -> ProblemResult:
    """:func:`_grade_plan`, or the grader's own failure: it costs this problem only."""
    try:
        return _grade_plan(plan, level, slots, to_retry)
    except Exception as exc:  # noqa: BLE001 - a grader-side failure costs this problem only
        return _grader_failed(plan, exc)


def _grade_alone(plan: Plan, level: sandbox.Isolation, slots: threading.Semaphore | None, shared: SharedCases | None,
                 salt: str | None) -> ProblemResult:
    """A problem graded again, with no other worker beside it: its files and expected outcomes made
    again first."""
    try:
        if shared is not None:
            _References._prepare_shared(plan, shared, salt)
        else:
            _References._prepare(plan)
        return _grade_plan(plan, level, slots, set(), alone=True)
    except Exception as exc:  # noqa: BLE001 - as in _graded(): this problem only
        return _grader_failed(plan, exc)


def _grader_failed(plan: Plan, exc: Exception) -> ProblemResult:
    """The result of a problem the grader itself failed on (``exc``, its own exception)."""
    return problem_result(plan.problem, "error", f"The grader itself failed on this problem ({type(exc).__name__}); "
                                                 "your other problems are graded. Please report this.", category="grader")


def _grade_plan(plan: Plan, level: sandbox.Isolation, slots: threading.Semaphore | None, to_retry: set[str],
                alone: bool = False) -> ProblemResult:
    """One problem's worker run (in the room, with the others or ``alone``) and its outcome judged; a first
    grading the machine failed (its memory, or its timing alone) adds the problem to ``to_retry``."""
    if plan.result is not None:
        return plan.result
    plan.files.result()  # (written, or the trusted side's failure: before a slot is taken)
    with slots or contextlib.nullcontext(), (_ROOM.alone() if alone else _ROOM.together()):
        out = runners.run(plan, level.level)
    if out.status == "machine_killed" and not alone:
        to_retry.add(plan.problem.id)
    expected = plan.expected_outcomes()
    try:
        status, category, message = judge(plan.problem, plan.hidden, plan.cases, expected, out,
                                          plan.source, plan.timeout)
    except Exception as exc:  # noqa: BLE001 - a judging bug must not sink the other problems
        status, category, message = "error", "grader", f"The grader failed on this problem ({type(exc).__name__}); please report it."
    if not alone and status != "correct" and category in getattr(plan.hidden, "retry_alone", ()):
        to_retry.add(plan.problem.id)
    result = problem_result(plan.problem, status, message, out.seconds, category)
    result.code_seconds = out.code_seconds
    result.worker_peak_bytes = out.peak_bytes
    result.worker_waited = out.waited
    result.killed_seconds = out.killed_seconds
    return result
