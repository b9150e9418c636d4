"""The judge: a pure function from a worker's plain-data outputs to (status, category, message).

It runs on the grader's side, never shows hidden data, and names only what the grader knows to be
safe (builtin and library exception classes, the codec's fixed words, the learner's own cell and
line for a public example).
"""

from __future__ import annotations

import re
import sys
from collections import Counter

from autograder import sandbox
from autograder.hidden import Case, Hidden
from autograder.wall import codec
from autograder.wall.libraries import LIBRARIES
from autograder.wall.returns import Raises


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


# The package imported to look a library's class up, by its top-level name (the grader imports no
# library for its own work: the references run in processes of their own). JAX's import loads jaxlib's.
_LOOKED_UP_IN = {"jax": "jax", "jaxlib": "jax", "flax": "flax", "orbax": "orbax.checkpoint"}


def _module(name: str):
    """The module ``name`` where it is one of a library of :data:`LIBRARIES` (its package imported
    here if it is not yet, by the fixed name above: never a module the learner's words name), or a
    builtin one; else None."""
    top = name.split(".")[0]
    if top not in ("builtins", "collections", *LIBRARIES):
        return None
    if name not in sys.modules and top in LIBRARIES:
        import importlib

        try:
            importlib.import_module(_LOOKED_UP_IN.get(top, top))
        except ImportError:
            return None
    return sys.modules.get(name)


def return_detail(detail) -> str:
    """Why a worker could not send a return value, from the codec's fixed words only: a type is
    named where it is a real class of a library the course uses (learner code can name a class
    anything, hidden inputs included)."""
    if detail in codec.ENCODE_ERRORS:
        return detail
    m = re.fullmatch(re.escape(codec.UNKNOWN_TYPE).replace(r"\{\}", r"([A-Za-z_][\w.]{0,100})"),
                     detail if isinstance(detail, str) else "")
    if m:
        module, _, qualname = m.group(1).rpartition(".")
        owner = _module(module)
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
    ending = _grader_ending(run) or _stopped_ending(run, timeout)
    if ending is not None:
        return ending
    if run.setup:
        return _setup_ending(problem, run, module_source)
    if len(run.cases) != len(cases):
        return "error", "incomplete", "The worker returned an incomplete result; please grade again."

    outcomes = list(zip(cases, expected, run.cases))
    if all(o.get("error", {}).get("kind") == "not_implemented" for _, _, o in outcomes):
        return "not_attempted", "not_attempted", f"{problem.function} still raises NotImplementedError: replace it with your code."
    failing: list[tuple[Case, str | None]] = []
    for case, exp, out in outcomes:
        ending = _case_ending(problem, hidden, case, exp, out, module_source, failing)
        if ending is not None:
            return ending
    if not failing:
        return "correct", "", f"All {len(cases)} cases passed."
    return _incorrect(hidden, cases, failing)


def _grader_ending(run: sandbox.RunResult) -> tuple[str, str, str] | None:
    """The ending of a run the grader's worker or the machine ended (a worker that did not start, the
    machine's memory), or that held half the container's memory; None for any other run."""
    if run.status == "failed_start":
        return "error", "grader", (f"The grader's worker failed to start, before any of your code ran ({sandbox.start_failure(run)}). "
                                   "This is the grader's failure (or this machine's), not your code's: grade again, and "
                                   "report it if it happens again.")
    if run.status == "machine_killed":
        return "error", "grader", ("The grader's worker was killed by this machine's memory limit (the kernel's out-of-memory "
                                   "killer, for the container's or the machine's memory: not your code's own "
                                   f"{sandbox.DEFAULT_MEMORY // 2**30} GiB limit), in a second try too, with nothing else "
                                   "graded beside it. This is the grader's failure, not your code's, and it does not count "
                                   "as an attempt: your instructor's report names it (the container needs more memory).")
    if run.status == "container_memory":
        return "error", "memory", (f"Your code held {run.peak_bytes / 2**20:,.0f} MiB, over half of what the machine grading "
                                   f"it can give in all ({sandbox.container_limits()[0] / 2**20:,.0f} MiB), and was "
                                   "stopped. No problem here needs that much: look for an allocation that grows with a "
                                   "value instead of a shape.")
    return None


def _stopped_ending(run: sandbox.RunResult, timeout: float) -> tuple[str, str, str] | None:
    """The ending of a run stopped before it answered (out of time, a frame that is not a result, a
    scratch or run folder too full, a crash); None for any other run."""
    from autograder.engine.preempted import CLOCK_DETAIL, PROBLEM_CLOCK

    if run.status == "timeout" and run.detail == CLOCK_DETAIL:

        return "timeout", "timeout", (f"Your runs, all cases together, did not finish within {PROBLEM_CLOCK / 60:.0f} "
                                      "minutes on the clock, the most one learner's grading of this problem may take "
                                      "(the reference takes under a minute). Look for a wait that never ends, or a loop "
                                      "that trains or evaluates more than the statement asks.")
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
    if run.status == "crowded":
        from autograder.engine.preempted import MAX_ENTRIES

        return "error", "crowded", (f"Your run folder held more than {MAX_ENTRIES} files and folders, and your run was "
                                    "stopped. A run's checkpoint folder holds its steps (one folder each) and the save "
                                    "under way: write nothing else there.")
    if run.status == "crashed":
        how = f"killed by signal {-run.returncode}" if (run.returncode or 0) < 0 else f"exit code {run.returncode}"
        return "error", "crashed", (f"The worker running your code stopped without a result ({how}). This usually means it "
                         f"ran out of memory (the limit is {sandbox.DEFAULT_MEMORY // 2**30} GiB) or your code "
                         "exits the interpreter (sys.exit / os._exit).")
    return None


def _setup_ending(problem, run: sandbox.RunResult, module_source: str) -> tuple[str, str, str]:
    """The ending of a run whose worker could not load the learner's code (``run.setup``: what it said)."""
    kind, name = run.setup.get("kind"), run.setup.get("type")
    where = _origin_of(module_source, run.setup.get("line"))
    if kind == "memory":
        return "error", "memory", f"Ran out of memory while loading your code{where}. Avoid huge allocations at top level."
    if kind == "devices":
        return "error", "grader", (f"The grader could not set up its simulated devices, before any of your code ran "
                                   f"({run.setup.get('type') or 'error'}: {run.setup.get('detail', '')}). This is the "
                                   "grader's failure, not your code's: grade again, and report it if it happens again.")
    if run.setup.get("extension"):  # (a module name only: the words are the grader's own)
        return "error", "load_error", (f"Your code imports {run.setup['extension']}{where}, a compiled extension "
                                       f"module, which cannot load while {problem.function}'s reads are counted "
                                       "(memory maps are off from the start of your code). Use the standard "
                                       "library's pure-Python modules or those the statement names.")
    return "error", "load_error", (f"{exception_name(name)} while loading the code {problem.function} needs{where}. Make sure your notebook "
                     "runs top to bottom in a fresh kernel.")


def _case_ending(problem, hidden: Hidden, case: Case, exp, out: dict, module_source: str,
                 failing: list[tuple[Case, str | None]]) -> tuple[str, str, str] | None:
    """Judge one case's outcome against its expected one: a failure is added to ``failing`` (with its
    diagnosis, if any); an outcome no case may have (an error, a wrong type, a NaN) is the ending
    returned. None: judging goes on."""
    if hidden.expected_after is not None and "value" in out:
        exp = hidden.expected_after(exp, out)
    if isinstance(exp, Raises):
        err = out.get("error")
        if err is None:
            # A family of its own where the hidden tests name what that case's silence is.
            specific = f"should_raise/{case.category}"
            failing.append((case, specific if specific in hidden.messages else "should_raise"))
            return None
        if err.get("kind") == "exception":
            if exp.type not in err.get("mro", []):
                failing.append((case, "wrong_exception"))
            elif hidden.check_raise is not None and not hidden.check_raise(case.args, err.get("message", "")):
                failing.append((case, "unclear_error"))
            return None
    if "error" in out:
        return _error_ending(problem, hidden, case, out["error"], module_source)
    actual = out["value"]
    # Terse even for public examples: the notebook's check shows those in full.
    bad_type = problem.returns.type_error(actual, detail=False)
    if bad_type:
        # A recognised mistake can also break the type (an extra entry, say): name the mistake.
        diagnosis = _diagnose(hidden, case, actual, exp)
        if diagnosis in hidden.type_diagnoses:
            failing.append((case, diagnosis))
            return None
        return "incorrect", "wrong_type", f"{problem.function} {bad_type}."
    if problem.returns.has_nan(actual):
        return "incorrect", "nan", f"{problem.function} returned NaN on {'a public example' if case.category == 'public' else 'a hidden case'}: look for 0/0 or an uninitialised value."
    if not problem.returns.equal(actual, exp):
        failing.append((case, _diagnose(hidden, case, actual, exp)))
    elif hidden.check_outcome is not None:
        problem_key = hidden.check_outcome(case.args, out)
        if problem_key:
            failing.append((case, problem_key))
    return None


def _error_ending(problem, hidden: Hidden, case: Case, err: dict, module_source: str) -> tuple[str, str, str]:
    """The ending of a case the learner's function did not answer (``err``: what the worker said)."""
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


def _incorrect(hidden: Hidden, cases: list[Case], failing: list[tuple[Case, str | None]]) -> tuple[str, str, str]:
    """The ending of a run that answered every case, some wrongly: named by the mistake that explains
    the most failing cases, else by the first failing family, in message order."""
    diagnosed = Counter(d for _, d in failing if d)
    if any(c.category != "public" and d and d.startswith("should_raise/") for c, d in failing):
        # A public example's silence (a bare "should raise": an example has no family) is one a hidden case
        # names: it does not outvote the family that names it.
        diagnosed -= Counter(d for c, d in failing if c.category == "public" and d == "should_raise")
    hidden_failing = [c.category for c, _ in failing if c.category != "public"]
    public_failing = len(hidden_failing) < len(failing)
    if diagnosed:
        # (a tie goes to the silence a hidden case named over the bare "should raise" of an example)
        category = max(diagnosed, key=lambda d: (diagnosed[d], d != "should_raise"))
        # (a root mistake the hidden tests rank first wins wherever it shows: it explains the rest)
        category = next((d for d in hidden.precedence if d in diagnosed), category)
    elif hidden_failing:
        order = list(hidden.messages)
        category = min(hidden_failing, key=order.index)
    else:
        category = "public"
    message = hidden.messages.get(category, "")
    if public_failing:
        message += (" " if message else "") + "It fails a public example too: run the check cell in the notebook to see it."
    return "incorrect", category, f"Wrong on {len(failing)} of {len(cases)} cases. {message}"
