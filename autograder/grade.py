"""Grade a submission: find each problem's function, run hidden cases in a worker, judge here.

The judging (types, values, scores, messages) happens in this process, from plain data. The
learner's code never runs here; the reference solutions do, to compute expected values.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import importlib
import os
import re
import shutil
import sys
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

import numpy as np

from autograder import codec, extract, files, registry
from autograder.hidden import Case, Hidden, load
from autograder.returns import Raises
from autograder.sandbox import outside as sandbox

DEFAULT_SALT = "sharded-ckpt-course/2026"


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

    def public(self) -> dict:
        d = asdict(self)
        for private in ("seconds", "code_seconds", "category", "worker_peak_bytes", "worker_waited"):
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


def course_salt() -> str:
    return os.environ.get("CKPT_COURSE_SALT", DEFAULT_SALT)


def case_seed(learner: str, problem_id: str, salt: str | None = None) -> int:
    """Same learner and problem, same cases; another learner, other cases."""
    # surrogateescape: a learner id from a file name that is not UTF-8 is its bytes
    digest = hashlib.sha256(f"{salt or course_salt()}\x00{learner}\x00{problem_id}".encode("utf-8", "surrogateescape")).digest()
    return int.from_bytes(digest[:8], "little")


def hidden_cases(problem: registry.Problem, learner: str, salt: str | None = None) -> tuple[Hidden, list[Case]]:
    hidden = load(problem)
    public = [Case("public", tuple(ex.args)) for ex in problem.examples]
    return hidden, public + hidden.cases(np.random.default_rng(case_seed(learner, problem.id, salt)))


def reference(problem: registry.Problem):
    return getattr(importlib.import_module(f"solutions.unit{problem.unit}"), problem.function)


def expected_outcome(problem: registry.Problem, args: tuple):
    """The reference's return value, or a :class:`Raises` where raising is the right answer
    (from the hidden tests' own ``expected``, held equal to the reference, where they have one)."""
    compute = load(problem).expected or reference(problem)
    try:
        value = compute(*codec.materialize(copy.deepcopy(args)))
        # Through the codec, as the worker's answer comes: both sides compare as the same plain data.
        return codec.loads(codec.dumps(value))
    except Exception as exc:
        if type(exc).__name__ in problem.raises or any(c.__name__ in problem.raises for c in type(exc).__mro__):
            return Raises(next(c.__name__ for c in type(exc).__mro__ if c.__name__ in problem.raises))
        raise


def _result(problem, status, message, seconds=0.0, category=None):
    return ProblemResult(problem.id, problem.function, status, float(problem.points if status == "correct" else 0),
                         float(problem.points), message, seconds,
                         category=status if category is None and status != "correct" else (category or ""))


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


def _origin_of(module_source: str, line: int | None) -> str:
    """Map a line of the module the worker ran back to the learner's cell/file and line. The line
    is the worker's word (learner code can claim any): one outside the module is not shown, and
    no text of the module is quoted (a message carries no text the learner's code controls)."""
    lines = module_source.splitlines()
    if type(line) is not int or not 1 <= line <= len(lines):
        return ""
    header = re.compile(r"^# (.*), line (\d+)$")
    for i in range(line - 1, -1, -1):
        m = header.match(lines[i])
        if m:
            return f" at {m.group(1)}, line {int(m.group(2)) + line - i - 2}"
    return ""


# Exception classes of the libraries a message may name (the worker says which class was raised,
# and learner code can make a class of any name: only these and the builtins are named).
LIBRARY_EXCEPTIONS = frozenset({
    "IndivisibleError", "XlaRuntimeError", "JaxRuntimeError", "ConcretizationTypeError",
    "TracerArrayConversionError", "TracerBoolConversionError", "TracerIntegerConversionError",
    "UnexpectedTracerError", "SafetensorError", "ScopeParamShapeError", "ScopeParamNotFoundError"})


def exception_name(name) -> str:
    """The class a worker says its code raised, named only if it is a builtin exception or one of
    :data:`LIBRARY_EXCEPTIONS`: a class learner code makes could carry any text in its name."""
    import builtins

    cls = getattr(builtins, name, None) if isinstance(name, str) and name.isidentifier() else None
    if (isinstance(cls, type) and issubclass(cls, BaseException)) or name in LIBRARY_EXCEPTIONS:
        return name
    return "an exception of a class defined in your code"


def return_detail(detail) -> str:
    """Why a worker could not send a return value, from the codec's fixed words only: a type is
    named where it is a real class of a library the grader has loaded (learner code can name a
    class anything, hidden inputs included)."""
    if detail in codec.ENCODE_ERRORS:
        return detail
    m = re.fullmatch(re.escape(codec.UNKNOWN_TYPE).replace(r"\{\}", r"([A-Za-z_][\w.]{0,100})"),
                     detail if isinstance(detail, str) else "")
    if m:
        module, _, qualname = m.group(1).rpartition(".")
        owner = sys.modules.get(module) if module.split(".")[0] in ("builtins", "collections", "numpy", "jax",
                                                                     "jaxlib", "flax", "orbax", "ml_dtypes") else None
        for part in qualname.split(".") if owner is not None else ():
            owner = getattr(owner, part, None)
        if isinstance(owner, type):
            return m.group(0)
    return "it returned an object of a class that is not plain data (return ints, floats, strs, lists, tuples, " \
           "dicts, NumPy or JAX arrays)"


def _diagnose(hidden: Hidden, case: Case, actual, expected) -> str | None:
    if hidden.diagnose is None or isinstance(expected, Raises):
        return None
    try:
        return hidden.diagnose(case.args, actual, expected)
    except Exception:  # noqa: BLE001 - a diagnosis is a nicety, never a crash
        return None


def judge(problem, hidden: Hidden, cases: list[Case], expected: list, run: sandbox.RunResult,
          module_source: str, timeout: float) -> tuple[str, str, str]:
    """Turn a worker's plain-data outputs into (status, category, message). Never shows hidden data.

    ``category`` names why, for instructors' class summaries: a key of the hidden messages (the
    diagnosed mistake or the failing case family) or the kind of error; empty when correct."""
    if run.status == "timeout":
        return "timeout", "timeout", (f"Did not finish all hidden cases within {timeout:.0f} s of CPU time (or "
                                      f"{sandbox.WALL_FACTOR * timeout:.0f} s on the clock, whichever came first). Look for an endless loop, "
                                      "a wait that never ends, or work that grows much faster than the input.")
    if run.status == "malformed":
        return "error", "malformed", ("The worker running your code sent back something that is not a result (too "
                                      "large, nested too deeply, or not plain data). Return plain values of the "
                                      "type the problem asks for.")
    if run.status == "scratch_full":
        return "error", "scratch_full", (f"Your code wrote more than {sandbox.jail.SCRATCH_BYTES >> 20} MiB, or more than "
                                         f"{sandbox.jail.SCRATCH_INODES:,} files and folders, to its scratch folder, and was "
                                         "stopped. No problem needs that much: look for a loop that keeps writing.")
    if run.status == "crashed":
        how = f"killed by signal {-run.returncode}" if (run.returncode or 0) < 0 else f"exit code {run.returncode}"
        return "error", "crashed", (f"The worker running your code stopped without a result ({how}). This usually means it "
                         f"ran out of memory (the limit is {sandbox.DEFAULT_MEMORY // 2**30} GiB) or your code "
                         "exits the interpreter (sys.exit / os._exit).")
    if run.setup:
        kind, name = run.setup.get("kind"), run.setup.get("type")
        where = _origin_of(module_source, run.setup.get("line"))
        if kind == "memory":
            return "error", "memory", f"Ran out of memory while loading your code{where}. Avoid huge allocations at top level."
        if kind == "devices":
            return "error", "devices", f"The grader could not set up its simulated devices: {run.setup.get('detail', '')}"
        return "error", "load_error", (f"{exception_name(name)} while loading the code {problem.function} needs{where}. Make sure your notebook "
                         "runs top to bottom in a fresh kernel.")
    if len(run.cases) != len(cases):
        return "error", "incomplete", "The worker returned an incomplete result; please grade again."

    outcomes = list(zip(cases, expected, run.cases))
    if all(o.get("error", {}).get("kind") == "not_implemented" for _, _, o in outcomes):
        return "not_attempted", "not_attempted", f"{problem.function} still raises NotImplementedError: replace it with your code."
    failing: list[tuple[Case, str | None]] = []
    for case, exp, out in outcomes:
        if isinstance(exp, Raises):
            err = out.get("error")
            if err is None:
                failing.append((case, "should_raise"))
                continue
            if err.get("kind") == "exception":
                if exp.type not in err.get("mro", []):
                    failing.append((case, "wrong_exception"))
                elif hidden.check_raise is not None and not hidden.check_raise(case.args, err.get("message", "")):
                    failing.append((case, "unclear_error"))
                continue
        if "error" in out:
            err = out["error"]
            # Where a hidden case failed is not shown: the line learner code fails at can encode
            # that case's inputs. A public example's is.
            where = _origin_of(module_source, err.get("line")) if case.category == "public" else ""
            label = "a public example" if case.category == "public" else "a hidden case"
            if err.get("kind") == "memory":
                return "error", "memory", (f"Ran out of memory{where} on {label} (the limit is "
                                 f"{sandbox.DEFAULT_MEMORY // 2**30} GiB). Nothing here needs more than a few MB: "
                                 "look for an allocation that grows with a value instead of a shape.")
            if err.get("kind") == "bad_return":
                return "incorrect", "wrong_type", f"{problem.function} must return {problem.returns.describe}: {return_detail(err.get('detail'))}."
            if err.get("kind") == "not_implemented":
                return "error", "not_implemented", f"Raised NotImplementedError{where} on {label}: finish every branch of your function."
            see = "Run the check cell in the notebook to see the full traceback." if case.category == "public" else ""
            return "error", "exception", " ".join(x for x in (f"Raised {exception_name(err.get('type'))}{where} on {label}.",
                                                 hidden.on_exception, see) if x)
        actual = out["value"]
        # Terse even for public examples: the notebook's check shows those in full.
        bad_type = problem.returns.type_error(actual, detail=False)
        if bad_type:
            # A recognised mistake can also break the type (an extra entry, say): name the mistake.
            diagnosis = _diagnose(hidden, case, actual, exp)
            if diagnosis in hidden.type_diagnoses:
                failing.append((case, diagnosis))
                continue
            return "incorrect", "wrong_type", f"{problem.function} {bad_type}."
        if problem.returns.has_nan(actual):
            return "incorrect", "nan", f"{problem.function} returned NaN on {'a public example' if case.category == 'public' else 'a hidden case'}: look for 0/0 or an uninitialised value."
        if not problem.returns.equal(actual, exp):
            failing.append((case, _diagnose(hidden, case, actual, exp)))
        elif hidden.check_outcome is not None:
            problem_key = hidden.check_outcome(case.args, out)
            if problem_key:
                failing.append((case, problem_key))
    if not failing:
        return "correct", "", f"All {len(cases)} cases passed."
    # The mistake that explains the most failing cases; else the first failing family, in message order.
    diagnosed = Counter(d for _, d in failing if d)
    hidden_failing = [c.category for c, _ in failing if c.category != "public"]
    public_failing = len(hidden_failing) < len(failing)
    if diagnosed:
        category = diagnosed.most_common(1)[0][0]
    elif hidden_failing:
        order = list(hidden.messages)
        category = min(hidden_failing, key=order.index)
    else:
        category = "public"
    message = hidden.messages.get(category, "")
    if public_failing:
        message += (" " if message else "") + "It fails a public example too: run the check cell in the notebook to see it."
    return "incorrect", category, f"Wrong on {len(failing)} of {len(cases)} cases. {message}"


@dataclass
class _Plan:
    problem: registry.Problem
    result: ProblemResult | None = None
    source: str = ""
    hidden: Hidden | None = None
    cases: list = field(default_factory=list)
    timeout: float = 0.0
    # Filled by the references' thread (:class:`_References`), in plan order:
    workdir: str = ""  # the worker's folder, its cases' files written
    worker_args: list = field(default_factory=list)
    files_ready: threading.Event = field(default_factory=threading.Event)
    expected: list = field(default_factory=list)
    expected_ready: threading.Event = field(default_factory=threading.Event)
    failure: BaseException | None = None  # the trusted side failed on this problem


_DEVICES = threading.Lock()


def course_devices() -> None:
    """The course's 16 devices in this process, started by whichever thread asks first (several
    learners' references run at once in grade-batch)."""
    with _DEVICES:
        from ckptlab import setup_devices

        setup_devices()


def _needs_jax(plan: _Plan) -> bool:
    """Whether the trusted side needs JAX for this problem: to run its reference, build a mesh or
    write a checkpoint; not where the hidden tests compute the expected values themselves (Unit 1:
    a learner who has done only Unit 1 is graded without JAX starting here, beside the zygote)."""
    return plan.hidden.expected is None or any(files.has_files(c.args) or codec.needs_jax(c.args) for c in plan.cases)


class _References:
    """The trusted side's own work, on one thread, ahead of the workers: for each problem in order
    (the course's devices first, where it needs JAX) its cases' files and the expected values.

    It starts before the isolation level is known, so it overlaps the zygote's start-up (a
    second of imports on the other core), and it never competes with itself for the GIL: a
    worker's thread only drives its worker. Learner code never runs here."""

    def __init__(self, plans: list[_Plan]):
        self.plans = [p for p in plans if p.result is None]
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="ckpt-references")
        self.thread.start()

    def _run(self) -> None:
        for i, plan in enumerate(self.plans):
            if self.stopped.is_set():
                self._fail(self.plans[i:], RuntimeError("grading stopped"))
                return
            try:
                if _needs_jax(plan):
                    course_devices()
                self._prepare(plan)
            except BaseException as exc:  # noqa: BLE001 - a grader-side failure costs this problem only
                self._fail([plan], exc)

    @staticmethod
    def _fail(plans: list[_Plan], exc: BaseException) -> None:
        for plan in plans:
            plan.failure = plan.failure or exc
            plan.files_ready.set()
            plan.expected_ready.set()

    @staticmethod
    def _prepare(plan: _Plan) -> None:
        workdir = sandbox.new_workdir()
        lazy = plan.problem.count_reads  # its files are written one case at a time, while reads are counted
        # The references read files of their own: learner code may rewrite every file in its folder.
        reference_dir = sandbox.new_workdir() if any(files.has_files(c.args) for c in plan.cases) else workdir
        try:
            args = [files.realize(c.args, reference_dir) for c in plan.cases]
            if lazy:
                plan.worker_args = [c.args for c in plan.cases]
            elif reference_dir != workdir:  # the same files, copied into the worker's own folder
                plan.worker_args = files.mirror(args, reference_dir, workdir)
            else:
                plan.worker_args = args
            plan.workdir = workdir
            plan.files_ready.set()
            # A reference given a checkpoint restores it with Orbax: one learner's at a time.
            reads_checkpoints = any(files.has_files(c.args, files.CheckpointArg) for c in plan.cases)
            with files.ORBAX if reads_checkpoints else contextlib.nullcontext():
                plan.expected = [expected_outcome(plan.problem, a) for a in args]
            plan.expected_ready.set()
        except BaseException:
            if not plan.files_ready.is_set():
                shutil.rmtree(workdir, ignore_errors=True)
            raise
        finally:
            if reference_dir != workdir:
                shutil.rmtree(reference_dir, ignore_errors=True)

    def close(self) -> None:
        """Stop after the current problem; remove any folder no worker took."""
        self.stopped.set()
        self.thread.join()
        for plan in self.plans:
            if plan.workdir:
                shutil.rmtree(plan.workdir, ignore_errors=True)


def locate(problem, sub: extract.Submission) -> ProblemResult | None:
    """The result of a problem whose function cannot run (missing, broken, a stub, a wrong
    signature), or None when it is there to run. Shared with the public checks."""
    block = sub.function(problem.function)
    broken = sub.broken_function(problem.function)
    if broken is not None and (block is None or extract.is_stub(block.node)):  # an attempt, even broken, beats a stub
        return _result(problem, "error", f"{broken.error}: fix the syntax error in {problem.function}.",
                       category="syntax_error")
    if block is None:
        if sub.unreadable:
            return _result(problem, "error", f"{sub.unreadable}.", category="unreadable")
        return _result(problem, "not_attempted",
                       f"No function named {problem.function} found. Define it as `def {problem.call}:`.")
    if extract.is_stub(block.node):
        return _result(problem, "not_attempted", "Not attempted yet: the function is still the stub.")
    bad = _signature_error(problem, block.node)
    return _result(problem, "error", bad, category="signature") if bad else None


def _plan(problem, sub: extract.Submission, learner: str, salt: str | None, timeout: float | None) -> _Plan:
    plan = _Plan(problem, timeout=timeout or problem.timeout, result=locate(problem, sub))
    if plan.result is None:
        plan.source = sub.module_source(problem.function)
        plan.hidden, plan.cases = hidden_cases(problem, learner, salt)
    return plan


class _ShortGilSlices:
    """While anything is graded in this process, a thread gets the GIL within 0.5 ms of asking,
    not Python's 5 ms: each case's round trip with a worker waits for the GIL on the grader's side,
    while the references of later problems are computed. (The whole reference submission's first
    workers spent 0.23 s beyond the learner's function, 0.08 s with this.) Restored when the last
    grading in the process ends."""

    def __init__(self):
        self.lock, self.users, self.saved = threading.Lock(), 0, 0.005

    def hold(self) -> None:
        with self.lock:
            if not self.users:
                self.saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self.saved, 0.0005))
            self.users += 1

    def release(self) -> None:
        with self.lock:
            self.users -= 1
            if not self.users:
                sys.setswitchinterval(self.saved)


_SHORT_GIL_SLICES = _ShortGilSlices()


def grade(paths, learner: str = "local", *, problems=None, salt: str | None = None,
          timeout: float | None = None, jobs: int | None = None, isolation: str | sandbox.Isolation = "auto",
          slots: threading.Semaphore | None = None) -> Report:
    """Grade the files or folders in ``paths`` for ``learner``; never raises for bad submissions.

    ``jobs`` workers at most run at once; ``slots``, shared by the learners a class is graded for
    at once, bounds them all together (so the class's last learner uses every core).

    ``isolation`` is ``strict``, ``basic`` or ``auto`` (the best this machine has), or a level
    already resolved; ``strict`` raises :class:`~autograder.sandbox.outside.IsolationUnavailable`
    where the machine cannot give it."""
    chosen = [registry.get(p) for p in problems] if problems else list(registry.PROBLEMS)
    sub = extract.load_submissions(list(paths))
    plans = [_plan(p, sub, learner, salt, timeout) for p in chosen]
    runs = any(plan.result is None for plan in plans)
    references = None
    if runs:
        if getattr(isolation, "level", isolation) in (sandbox.STRICT, sandbox.AUTO):
            # Strict workers fork from it: it imports while the references start, and then what
            # these problems' code imports.
            sandbox.start_zygote([(plan.source, plan.problem.count_reads) for plan in plans if plan.result is None])
        references = _References(plans)
    _SHORT_GIL_SLICES.hold()
    try:
        if isinstance(isolation, sandbox.Isolation):
            level = isolation
        elif runs or isolation == sandbox.STRICT:
            level = sandbox.resolve(isolation)
        else:
            level = sandbox.Isolation(sandbox.NO_CODE_RAN)  # no learner code to run: no level to choose

        def run(plan: _Plan) -> ProblemResult:
            try:
                return grade_plan(plan)
            except Exception as exc:  # noqa: BLE001 - a grader-side failure costs this problem only
                return _result(plan.problem, "error", f"The grader itself failed on this problem ({type(exc).__name__}); "
                                                      "your other problems are graded. Please report this.", category="grader")

        def grade_plan(plan: _Plan) -> ProblemResult:
            if plan.result is not None:
                return plan.result
            plan.files_ready.wait()
            if plan.failure is not None:
                raise plan.failure
            with slots or contextlib.nullcontext():
                worker = sandbox.Worker(plan.source, plan.problem.function, plan.worker_args, timeout=plan.timeout,
                                        workdir=plan.workdir, count_reads=plan.problem.count_reads, level=level.level)
                plan.workdir = ""  # the worker's now: removed when it is done
                plan.expected_ready.wait()
                if plan.failure is not None:
                    worker.kill()
                    raise plan.failure
                out = worker.wait()
            try:
                status, category, message = judge(plan.problem, plan.hidden, plan.cases, plan.expected, out,
                                                  plan.source, plan.timeout)
            except Exception as exc:  # noqa: BLE001 - a judging bug must not sink the other problems
                status, category, message = "error", "grader", f"The grader failed on this problem ({type(exc).__name__}); please report it."
            result = _result(plan.problem, status, message, out.seconds, category)
            result.code_seconds = out.code_seconds
            result.worker_peak_bytes = out.peak_bytes
            result.worker_waited = out.waited
            return result

        jobs = jobs or min(2, os.cpu_count() or 1)
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            results = list(pool.map(run, plans))
    finally:
        _SHORT_GIL_SLICES.release()
        if references is not None:
            references.close()
    return Report(learner, results, level.level, level.missing if level.level == sandbox.BASIC else ())
