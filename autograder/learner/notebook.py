"""In-notebook checks: run a problem's public examples in the kernel, and give hints in steps.

    from autograder.notebook import problem
    q1 = problem("1.1")
    q1.check()    # not attempted / incorrect (with what to do next) / correct
    q1.hint()     # the next hint; q1.hint(2) shows hint 2

Only public examples run here; the hidden tests run when you grade (``make check``). Each hint
shown and each check's result go to your progress record (``make progress``), as grading runs,
practice sets and drills do; not while nbgrader validates or autogrades the notebook.
"""

from __future__ import annotations

import contextlib
import copy
import html
import inspect
import os
import sys
import textwrap
import traceback

import numpy as np

from autograder import registry
from autograder.outputs import COLOURS, label
from autograder.wall.returns import Raises


class CheckResult:
    """What a check found; shows itself as coloured HTML in Jupyter and as text elsewhere."""

    def __init__(self, problem: registry.Problem, status: str, message: str, detail: str = ""):
        self.problem, self.status, self.message, self.detail = problem, status, message, detail

    @property
    def passed(self) -> bool:
        return self.status == "correct"

    def __repr__(self) -> str:
        text = f"[{label(self.status).capitalize()}] {self.problem.id} {self.problem.function}: {self.message}"
        return text + (f"\n{self.detail}" if self.detail else "")

    def _repr_html_(self) -> str:
        colour = COLOURS[self.status]
        from autograder.text import message_html

        detail = f"<pre style='margin:4px 0 0 0'>{html.escape(self.detail)}</pre>" if self.detail else ""
        return (f"<div style='border-left:4px solid {colour};padding:4px 10px'>"
                f"<b style='color:{colour}'>{label(self.status).capitalize()}</b> &nbsp;"
                f"<code>{self.problem.function}</code>: {message_html(self.message)}{detail}</div>")


class CheckFailed(Exception):
    """A check that did not pass, raised while nbgrader validates: its message, not a traceback."""

    def __init__(self, result: CheckResult):
        super().__init__(repr(result))
        self.result = result

    def _render_traceback_(self) -> list[str]:
        # nbgrader validate cuts each line at 87 characters: wrap them first.
        return [piece for line in repr(self.result).splitlines()
                for piece in (textwrap.wrap(line, 80, subsequent_indent="    ", break_on_hyphens=False) or [""])]


def fmt_value(v, dtype: bool = True) -> str:
    if isinstance(v, np.ndarray):
        return np.array2string(v, separator=", ") + (f" (dtype {v.dtype})" if dtype else "")
    if isinstance(v, dict) and len(v) > 3:
        return "{" + ", ".join(f"{k!r}: {x!r}" for k, x in v.items()) + "}"
    return repr(v)


def describe_args(args) -> str:
    """An example's arguments as the learner's function receives them, in the learner's terms: a mesh,
    a spec, a checkpoint folder and what it holds, never the grader's own objects
    (:func:`autograder.wall.words.in_words`)."""
    from autograder.wall.words import in_words

    return ", ".join(in_words(a) for a in args)


def _to_plain(value):
    """Bring JAX arrays to NumPy so the same type checks as the grader apply."""
    from autograder.wall.codec import EncodeError, decode, encode

    try:
        return decode(encode(value))
    except (EncodeError, ValueError, TypeError) as e:
        raise TypeError(str(e)) from None


class ProblemHandle:
    """One problem, as seen from a notebook."""

    def __init__(self, problem: registry.Problem, namespace: dict | None = None):
        self.problem = problem
        self._namespace = namespace
        self._hints_shown = 0

    def __repr__(self) -> str:
        p = self.problem
        return f"Problem {p.id} ({p.points} points): {p.title}\n  {p.call}\n\n{p.statement}"

    def _repr_markdown_(self) -> str:
        p = self.problem
        return f"**Problem {p.id}** ({p.points} points): {p.title}\n\n`{p.call}`\n\n{p.statement}"

    def _find(self):
        ns = self._namespace if self._namespace is not None else vars(sys.modules["__main__"])
        return ns.get(self.problem.function)

    def check(self, fn=None) -> CheckResult:
        """Run the public examples against your function and say how it went.

        While ``nbgrader validate`` runs the notebook, a check that does not pass raises
        :class:`CheckFailed`, so Validate lists the cell instead of reporting success."""
        try:
            result = self._check(fn)
        finally:
            _remove_example_files()
        if self._namespace is None and result.status != "skipped":  # the notebook's own check, not `autograder check`
            _record("check", self.problem.id, result.status)
        if os.environ.get("NBGRADER_EXECUTION") == "validate" and not result.passed:
            raise CheckFailed(result)
        return result

    def _check(self, fn=None) -> CheckResult:
        p = self.problem
        if os.environ.get("NBGRADER_EXECUTION") == "autograde":
            # nbgrader is autograding: the test cell below grades with the hidden tests, in a
            # worker with a time limit; the public examples would only cost time (or hang) here.
            return CheckResult(p, "skipped", "public examples skipped while nbgrader autogrades.")
        fn = fn or self._find()
        if fn is None:
            return CheckResult(p, "not_attempted", f"no function named {p.function} yet: run the cell that defines it.")
        try:
            params = [q for q in inspect.signature(fn).parameters.values()
                      if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)]
            if len(params) != len(p.signature) and not any(q.kind == q.VAR_POSITIONAL for q in inspect.signature(fn).parameters.values()):
                return CheckResult(p, "error", f"{p.function} must take {len(p.signature)} arguments: {p.call}.")
        except (TypeError, ValueError):
            pass
        used = _course_helper(p, fn)
        if used:  # as grading and `autograder check` say it (engine/locate.py)
            from autograder.engine.locate import course_helper_message

            return CheckResult(p, "incorrect", course_helper_message(p, used))
        ready = _real_examples(p.examples)
        for i, ex in enumerate(p.examples, 1):
            if isinstance(ex.expected, Raises):
                bad = _expect_raise(fn, ex, ready[i - 1] if ready else None)
                if bad:
                    return CheckResult(p, "incorrect", f"example {i}: {bad}",
                                       f"{p.function}({describe_args(ex.args)})\n  expected: raise {ex.expected.type} "
                                       f"mentioning {ex.expected.mentions if ex.expected.values else repr(ex.expected.mentions)}")
                continue
            try:
                real_args = ready[i - 1] if ready else _real_args(ex.args)
                with _reading(p) as reads:
                    got = p.returns.run_example(fn, ex.args, real_args)
            except NotImplementedError:
                return CheckResult(p, "not_attempted", "still the stub: replace `raise NotImplementedError` with your code.")
            except Exception as exc:  # noqa: BLE001 - show the learner their own traceback
                tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next))
                return CheckResult(p, "error", f"example {i} raised {type(exc).__name__}: {exc}", tb[-3000:])
            if p.returns.checks_examples:  # checked from the example's own arguments
                bad = p.returns.check_example(ex.args, real_args, got)
                if bad:
                    return CheckResult(p, "incorrect", f"example {i}: {bad}.", ex.note)
                if p.count_reads:
                    bad = _too_many_reads(ex, reads.bytes)
                    if bad:
                        return CheckResult(p, "incorrect", f"example {i}: right values, but {bad}", ex.note)
                continue
            try:
                got = _to_plain(got)
            except TypeError as e:
                return CheckResult(p, "incorrect", f"{p.function} must return {p.returns.describe}: {e}.")
            bad = p.returns.type_error(got)
            if bad:
                return CheckResult(p, "incorrect", f"example {i}: {p.function} {bad}.")
            if p.returns.has_nan(got) or not p.returns.equal(got, ex.expected):
                note = f" ({ex.note})" if ex.note else ""
                # The dtype passed the type check: showing it would send the learner after it.
                return CheckResult(p, "incorrect", f"example {i} is wrong{note}.",
                                   f"{p.function}({describe_args(ex.args)})\n  expected {fmt_value(ex.expected, False)}\n"
                                   f"  got      {fmt_value(got, False)}")
        n = len(p.examples)
        self._debriefed = True  # a correct check opens .debrief(); the result shows the debrief under it
        # (memory is measured from outside the process running the function: the grader's worker, never the kernel)
        memory = " They measure your function's memory too, which this check cannot." if p.measure_memory else ""
        return CheckResult(p, "correct", f"public examples {n}/{n} passed. Hidden tests run when graded (make check, or "
                                         f"your instructor).{memory}",
                           "\n".join(p.debrief()))

    def debrief(self) -> None:
        """Why a correct answer is right, and the question an interviewer would ask next: once a check
        of this problem has said correct (here, or as your progress records have it), never before."""
        p = self.problem
        opened = getattr(self, "_debriefed", False)
        if not opened:
            try:
                from autograder.invoke import default_learner
                from autograder.learner import progress

                opened = any((r.get("problem") == p.id and r.get("status") == "correct")
                             or any(x.get("id") == p.id and x.get("status") == "correct" for x in r.get("problems", ()))
                             for r in progress.load(default_learner()))
            except Exception:  # noqa: BLE001 - progress is a convenience: without it, only this kernel's checks count
                pass
        print("\n".join(p.debrief()) if opened else
              f"Not yet: the debrief of {p.id} opens once its check says correct (.check(), or a grading run).")

    def hint(self, n: int | None = None) -> str | None:
        """Show hint ``n`` (1-based), or the next one you have not seen."""
        hints = self.problem.hints
        all_seen = n is None and self._hints_shown >= len(hints)
        if n is None:
            n = min(self._hints_shown + 1, len(hints))
        if not 1 <= n <= len(hints):
            raise ValueError(f"problem {self.problem.id} has hints 1 to {len(hints)}")
        self._hints_shown = max(self._hints_shown, n)
        _record("hint", self.problem.id, n, len(hints))
        text = f"Hint {n}/{len(hints)}: {hints[n - 1]}"
        if all_seen:
            text = (f"No more hints: you have seen all {len(hints)}. The last one again:\n{text}\n"
                    f"(Any one again: .hint(1) to .hint({len(hints)}); the lesson for this problem has the rest.)")
        elif n < len(hints):
            text += f"\n(More: .hint({n + 1}))"
        try:
            from IPython.display import Markdown, display

            if _in_ipython():
                display(Markdown(text.replace("\n", "  \n")))
                return None
        except ImportError:
            pass
        print(text)
        return None


def _record(kind: str, problem_id: str, *facts) -> None:
    """Note a notebook hint or check in the learner's progress. Not while nbgrader runs the notebook
    (validating or autograding: the learner did not ask), and never at the cost of the cell."""
    if os.environ.get("NBGRADER_EXECUTION"):
        return
    try:
        from autograder.invoke import default_learner
        from autograder.learner import progress

        if kind == "hint":
            progress.record_hint(default_learner(), problem_id, *facts)
        else:
            progress.record_check(default_learner(), problem_id, *facts)
    except Exception:  # noqa: BLE001 - progress is a convenience; the hint or check is what was asked
        pass


def _in_ipython() -> bool:
    try:
        from IPython import get_ipython

        return get_ipython() is not None
    except ImportError:
        return False


_EXAMPLE_FOLDERS: list[str] = []  # the temporary folders of the check under way


def _real_args(args):
    """Fresh copies of an example's arguments, with checkpoints saved (in a temporary directory,
    removed when the check is done: :func:`_remove_example_files`) and meshes and specs built as
    JAX objects."""
    from autograder.wall import codec, files

    args = copy.deepcopy(args)
    if files.has_files(args):
        import tempfile

        folder = tempfile.mkdtemp(prefix="ckpt-example-")
        _EXAMPLE_FOLDERS.append(folder)
        args = files.realize(args, folder)
    return codec.materialize(args)


def _course_helper(problem: registry.Problem, fn) -> str | None:
    """The first module of ``problem.forbidden`` (or below one) the function reaches, as the kernel holds
    it (grading reads the source instead: engine/locate.py): a name its code uses bound to such a module
    or to something defined in one, a module it imports itself, or the same in a function of the
    learner's it calls (one defined in the same namespace)."""
    import types

    if not problem.forbidden:
        return None

    def banned(name) -> bool:
        return isinstance(name, str) and any(name == f or name.startswith(f + ".") for f in problem.forbidden)

    seen, functions = set(), [fn]
    while functions:
        function = functions.pop()
        code, names = getattr(function, "__code__", None), getattr(function, "__globals__", None)
        if code is None or names is None or code in seen:
            continue
        seen.add(code)
        used, codes = set(), [code]
        while codes:  # its own names and those of the functions and comprehensions inside it
            c = codes.pop()
            used.update(c.co_names)
            codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]
        for name in sorted(used):
            dotted = [name] + [f"{name}.{attr}" for attr in used]  # an import inside: `from ckptlab import hf`
            hit = next((d for d in dotted if banned(d)), None)
            if hit:
                return hit
            value = names.get(name)
            reached = [value] + ([_attribute(value, attr) for attr in used] if isinstance(value, types.ModuleType) else [])
            for v in reached:
                where = v.__name__ if isinstance(v, types.ModuleType) else _attribute(v, "__module__")
                if banned(where):
                    return where
            if isinstance(value, types.FunctionType) and value.__globals__ is names:
                functions.append(value)
    return None


def _attribute(value, name: str):
    try:
        return getattr(value, name, None)
    except Exception:  # noqa: BLE001 - a module's lazy attribute, or an object of the learner's that raises
        return None


_MADE: dict = {}  # repr of a problem's examples -> (a folder its helper-made files were written to, once; their args)
_MADE_PREFIX = "ckpt-examples-"  # then this process's pid: a kernel killed (restarted) leaves its folder, the next removes it


def _sweep_made_folders(parent: str) -> None:
    """Remove the folders of :data:`_MADE` that processes of this uid which no longer run left in ``parent``."""
    import re
    import shutil

    for name in os.listdir(parent):
        match = re.fullmatch(re.escape(_MADE_PREFIX) + r"(\d+)-\w+", name)
        path = os.path.join(parent, name)
        if match is None or int(match.group(1)) == os.getpid() or os.path.islink(path):
            continue
        try:
            if os.lstat(path).st_uid != os.geteuid():
                continue
            os.kill(int(match.group(1)), 0)  # its process runs: kept
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:
            continue


def _real_examples(examples) -> list | None:
    """Every example's arguments at once (as :func:`_real_args` makes them) where any holds a folder that a
    helper process writes (a killed saver's root, tiers: seconds apiece): written once in this process, for
    all the examples, then copied afresh for each check (a function may write where it should only read).
    None where none does: each example's files are then written when it runs."""
    import atexit
    import shutil
    import tempfile

    from autograder.wall import codec, files, kinds

    if not any(files.has_files(ex.args, (kinds.PreemptedRootArg, kinds.TieredRootArg)) for ex in examples):
        return None
    key = repr(tuple(ex.args for ex in examples))
    if key not in _MADE:
        folder = tempfile.mkdtemp(prefix=f"{_MADE_PREFIX}{os.getpid()}-")
        if not _MADE:
            _sweep_made_folders(os.path.dirname(folder))
            atexit.register(lambda: [shutil.rmtree(f, ignore_errors=True) for f, _ in _MADE.values()])
        _MADE[key] = folder, files.realize(copy.deepcopy(tuple(ex.args for ex in examples)), folder)
    source, made = _MADE[key]
    target = tempfile.mkdtemp(prefix="ckpt-example-")
    _EXAMPLE_FOLDERS.append(target)
    shutil.copytree(source, target, dirs_exist_ok=True)

    def moved(leaf):
        if not (isinstance(leaf, str) and leaf.startswith(source + os.sep)):
            return leaf
        path = target + leaf[len(source):]
        if type(leaf) is str:
            return path
        kind, args = leaf.__reduce__()[:2]  # a path carrying facts (files.TieredPath's restore): kept
        return kind(path, *args[1:])

    return list(codec.materialize(codec.map_leaves(made, moved)))


def _remove_example_files() -> None:
    """Remove the folders a check's examples were written to (a checkpoint each: megabytes a run of
    the check cell would otherwise leave in the temporary folder, every time)."""
    import shutil

    while _EXAMPLE_FOLDERS:
        shutil.rmtree(_EXAMPLE_FOLDERS.pop(), ignore_errors=True)


@contextlib.contextmanager
def _reading(p: registry.Problem):
    """For a read-counted problem: count the bytes read, with memory maps off, as the grader does."""
    if not p.count_reads:
        yield None
        return
    from autograder.wall.reads import memory_maps_off
    from ckptlab.readcount import count_reads

    with memory_maps_off(), count_reads() as reads:
        yield reads


def _too_many_reads(ex, read: int | None) -> str | None:
    if read is None:
        return None  # not on Linux: the grader counts, this check cannot
    arg, name, bounds = ex.args
    needed, budget = arg.nbytes(name, bounds), arg.read_budget(name, bounds)
    if read <= budget:
        return None
    return (f"it read {read:,} bytes from files; the shard needs {needed:,} (the file's header and "
            f"{budget - needed:,} bytes more are allowed). Read only the shard's runs, with "
            "open(path, 'rb', buffering=0): a buffered file fetches a whole buffer (the file's st_blksize, often 4 KiB) for each small read.")


def _expect_raise(fn, ex, real_args=None) -> str | None:
    """None when ``fn`` raises the expected exception with a message naming what is wrong."""
    want = ex.expected
    try:
        got = fn(*(real_args if real_args is not None else _real_args(ex.args)))
    except NotImplementedError:
        return "still the stub: replace `raise NotImplementedError` with your code."
    except Exception as exc:  # noqa: BLE001
        if want.type not in [c.__name__ for c in type(exc).__mro__]:
            return f"should raise {want.type}, but raised {type(exc).__name__}: {exc}"
        if not want.message_ok(str(exc)):
            if want.values:
                return (f"raised {want.type}, but its message should give the values at fault, as numbers "
                        f"({want.mentions}); it says: {exc}")
            return f"raised {want.type}, but its message should name {want.mentions!r}; it says: {exc}"
        return None
    return f"should raise {want.type}, but returned {fmt_value(got)}"


def problem(key: str) -> ProblemHandle:
    """The problem with this id (e.g. "1.1") or function name."""
    return ProblemHandle(registry.get(key))
