"""The hidden tests grade the way they promise: references full, stubs not attempted, curated
wrong answers rejected with their intended messages, and bad submissions cost one problem only."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import subprocess
import sys

import numpy as np
import pytest

from autograder import registry
from autograder.engine import cases, grade as grading
from autograder.hidden import load
from autograder.wall import files
from autograder.wall.returns import Raises
from tests.conftest import best_isolation
from tests.wrong_answers import HEADERS, IMPORTS, WRONG

pytestmark = pytest.mark.slow


def _status(report, pid):
    return next(p for p in report.problems if p.id == pid)


@pytest.mark.background("class")
@pytest.mark.timeout(1800)
def test_reference_solutions_get_full_marks(root):
    # At the strict level: 3.3 restores a real checkpoint and 4.4's reads are counted from outside.
    # Full marks hold every reference to its problem's return type on every hidden case too: the
    # judge checks the worker's value's type before its value. Graded as a learner of the suite's
    # background class (solutions/ as its folder), as an instructor grades one: the class's
    # hidden cases are computed once for the references, the right and the wrong answers.
    from tests.graded_together import right_rounds

    report = right_rounds().report("reference")
    assert report["isolation"] == best_isolation()
    assert [p["id"] for p in report["problems"]] == [p.id for p in registry.PROBLEMS]
    assert [p["status"] for p in report["problems"]] == ["correct"] * len(registry.PROBLEMS), report
    assert report["score"] == report["max_score"] == sum(p.points for p in registry.PROBLEMS)


def test_untouched_problems_are_not_attempted(root):
    report = grading.grade([root / "problems"], "fresh-clone")
    assert {p.status for p in report.problems} == {"not_attempted"}
    assert report.score == 0


class _Graded(dict):
    """Each wrong answer's result, by (problem, answer); ``expected``: each problem's expected outcomes
    as the class's grading computed them, for every one of its cases (public ones first, as drawn)."""

    expected: dict


@pytest.fixture(scope="module")
def wrong_graded() -> _Graded:
    """Every curated wrong answer graded once, as an instructor grades a class (grade-batch, at the
    strict level where the machine has it), in the suite's background class (tests/background.py):
    each answer a learner of its own (no answer's names, imports or failure reach another's), named
    ``wrong-<function>-<answer>`` (two problems' answers may share a name; the function keeps them
    apart, and adds no digit to a message naming the file), every learner on the class's shared
    hidden cases (``--shared-cases``: the references run once per problem for the whole class). The
    expected outcomes the class was judged against are kept as they were computed (read, never
    changed), for the messages' test below."""
    from tests import background

    graded = background.result("class")
    results = _Graded()
    results.expected = {pid: outcomes for (pid, salt), outcomes in graded["expected"].items() if salt is None}
    for (pid, name), learner in graded["wrong"].items():
        results[pid, name] = next(p for p in graded["reports"][learner]["problems"] if p["id"] == pid)
    return results


# The first of these tests may wait for the class's grading (run beside the suite: 12 to 19 minutes on
# 2 cores, as measured), which a loaded machine may double, past the suite's 900 s a test: its own budget.
@pytest.mark.background("class")
@pytest.mark.timeout(1800)
@pytest.mark.parametrize(
    ("pid", "name", "status", "fragment"),
    [pytest.param(pid, n, st, f, id=f"{pid}-{n}") for pid, items in WRONG.items() for n, _, st, f in items],
)
def test_curated_wrong_answers_are_rejected_with_their_message(wrong_graded, pid, name, status, fragment):
    result = wrong_graded[pid, name]
    assert result["status"] == status, result["message"]
    assert fragment in result["message"]
    assert result["score"] == 0


def test_every_problem_has_curated_wrong_answers():
    for p in registry.PROBLEMS:
        assert len(WRONG.get(p.id, [])) >= 4, f"problem {p.id} needs curated wrong answers"


MIXED = IMPORTS + '''
from solutions_are_not_here import nothing  # an import that fails must not sink everything

def dense_checkpoint_accounting(seed, x, num_shards, features):
    seed, num_shards, features = int(seed), int(num_shards), int(features)
    total = x.shape[-1] * features + features
    return np.array([total, total / num_shards])

def orbax_save_count(seed, x, features, num_shards)
    return None

def param_bytes(params, dtype):
    while True:
        pass

def nnx_param_table(seed, layer_sizes):
    return {}["boom"]
'''


def test_mixed_submission_gets_exactly_the_correct_problems_points(grade_code):
    # The failing import would break everything; drop it, the rest is the scenario of the issue.
    report = grade_code(MIXED.replace("from solutions_are_not_here import nothing", ""), timeout=6)
    by = {p.id: p for p in report.problems}
    assert by["1.1"].status == "correct" and by["1.1"].score == 10
    assert by["1.2"].status == "error" and "SyntaxError" in by["1.2"].message
    assert by["1.3"].status == "timeout" and by["1.3"].seconds < 2 * 6 + 5  # (within the clock cap)
    assert by["1.4"].status == "error" and "KeyError" in by["1.4"].message
    assert report.score == 10


def test_a_failing_top_level_import_costs_only_what_uses_it(grade_code):
    report = grade_code(MIXED + "\ndef shard_shape(global_shape, mesh_shape, spec):\n    return nothing(global_shape)\n",
                        problems=["1.1", "2.1"], timeout=20)
    by = {p.id: p for p in report.problems}
    assert by["1.1"].status == "correct"
    assert by["2.1"].status == "error" and "ModuleNotFoundError" in by["2.1"].message
    assert "while loading" in by["2.1"].message


def test_syntax_error_in_one_cell_keeps_the_others(tmp_path, root):
    import nbformat

    from autograder.exports.problem_notebooks import problem_notebook, tagged

    nb = problem_notebook(1, with_solutions=True)
    cell = tagged(nb, "answer", registry.get("1.3"))
    cell.source = cell.source.replace("itemsize = ", "itemsize = = ")
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, str(path))
    report = grading.grade([path], "nb-syntax")
    by = {p.id: p for p in report.problems}
    assert by["1.3"].status == "error" and "SyntaxError" in by["1.3"].message and "code cell" in by["1.3"].message
    assert all(by[i].status == "correct" for i in ("1.1", "1.2", "1.4"))


HOSTILE = {
    "huge_allocation": ("""
def param_bytes(params, dtype):
    big = np.ones((64, 1024, 1024, 1024), dtype=np.float32)
    return int(big.sum())
""", "error", "memory"),
    "nan": ("""
def dense_checkpoint_accounting(seed, x, num_shards, features):
    return np.array([np.nan, 1.0])
""", "incorrect", "NaN"),
    "always_equal_object": ("""
class Sneaky(np.ndarray):
    def __eq__(self, other):
        return True
def dense_checkpoint_accounting(seed, x, num_shards, features):
    class Anything:
        def __eq__(self, other): return True
        shape = (2,)
    return Anything()
""", "incorrect", "must return"),
    "missing_function": ("""
def dense_checkpoint_accounting_v2(seed, x, num_shards, features):
    return np.zeros(2)
""", "not_attempted", "No function named dense_checkpoint_accounting"),
    "wrong_signature": ("""
def dense_checkpoint_accounting(seed, x):
    return np.zeros(2)
""", "error", "must take 4 arguments"),
    "exits_interpreter": ("""
import os
def dense_checkpoint_accounting(seed, x, num_shards, features):
    os._exit(3)
""", "error", "stopped without a result"),
    "sys_exit": ("""
import sys
def dense_checkpoint_accounting(seed, x, num_shards, features):
    sys.exit(0)
""", "error", "SystemExit"),
    "imports_the_reference": ("""
def dense_checkpoint_accounting(seed, x, num_shards, features):
    from solutions.unit1 import dense_checkpoint_accounting as ref
    return ref(seed, x, num_shards, features)
""", "error", "ImportError"),
    "reads_hidden_tests": ("""
def dense_checkpoint_accounting(seed, x, num_shards, features):
    import autograder.hidden.unit1
    return np.zeros(2)
""", "error", "ImportError"),
    "fills_the_disk": ("""
def param_bytes(params, dtype):
    with open("big.bin", "wb") as f:
        while True:
            f.write(b"x" * 2**20)
""", "error", "OSError"),
    "exfiltrates_through_a_conversion_error": ("""
def dense_checkpoint_accounting(seed, x, num_shards, features):
    class Leaky:  # poses as a jax.Array; converting it raises with a hidden input in the message
        __module__ = "jax.leaky"
        shape, dtype = (2,), np.dtype("float32")
        def __array__(self, *args, **kwargs):
            raise ValueError(f"SECRET {x.shape} {features}")
    return Leaky()
""", "incorrect", "not plain data"),  # (not JAX's own array class: never converted, its message never made)
    "exfiltrates_through_a_deleted_array": ("""
import jax.numpy as jnp


def dense_checkpoint_accounting(seed, x, num_shards, features):
    value = jnp.zeros(2)
    value.delete()  # a real jax.Array whose conversion raises
    return value
""", "incorrect", "could not be converted to plain data"),
    "exfiltrates_through_an_exception_class_name": ("""
def dense_checkpoint_accounting(seed, x, num_shards, features):
    raise type(f"SECRET_{x.shape[0]}_{int(features)}", (Exception,), {"__module__": "builtins"})()
""", "error", "a class defined in your code"),
    "stub_with_docstring": ('''
def dense_checkpoint_accounting(seed, x, num_shards, features):
    """Return [total, per_shard]."""
    # YOUR CODE HERE
    raise NotImplementedError()
''', "not_attempted", "stub"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_bad_submissions_get_a_clear_status(grade_code, name):
    source, status, fragment = HOSTILE[name]
    pid = "1.3" if "param_bytes" in source else "1.1"
    (result,) = grade_code(IMPORTS + source, problems=[pid], timeout=30).problems
    assert result.status == status, result.message
    assert fragment in result.message, result.message
    assert not re.search(r"SECRET[_ ]\(?\d", result.message)  # a hidden value, not the learner's own code line


def test_same_learner_same_cases_other_learner_other_cases():
    p = registry.get("1.1")
    _, a1 = grading.hidden_cases(p, "ada")
    _, a2 = grading.hidden_cases(p, "ada")
    _, b = grading.hidden_cases(p, "bob")
    key = lambda cases: [(c.category, repr(c.args)) for c in cases]  # noqa: E731
    assert key(a1) == key(a2)
    assert key(a1) != key(b)
    assert cases.case_seed("ada", "1.1", salt="course-A") != cases.case_seed("ada", "1.1", salt="course-B")


def test_every_hidden_category_has_a_message_and_cases_are_plain_data():
    from autograder.wall import codec, kinds

    for p in registry.PROBLEMS:
        hidden, cases = grading.hidden_cases(p, "someone")
        assert {c.category for c in cases} - {"public"} <= set(hidden.messages)
        for c in cases:  # what crosses to the worker: a file argument as the path it is written to (every
            # hidden case's files are written in test_references, by the references' own type check)
            crossing = codec.map_leaves(c.args, lambda leaf: "/w/ckpt" if isinstance(leaf, kinds.FILE_KINDS) else leaf)
            assert codec.loads(codec.dumps(crossing)) is not None


def _numbers(value, out):
    """Every number >= 10 inside a value (array shapes included), as the text it would print as."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # file arguments: their shapes
        _numbers(dataclasses.astuple(value), out)
    elif isinstance(value, np.ndarray):
        for n in value.shape:
            _numbers(n, out)
        if value.size <= 64:
            for x in value.ravel().tolist():
                _numbers(x, out)
    elif isinstance(value, dict):
        for k, v in value.items():
            _numbers(k, out)
            _numbers(v, out)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _numbers(v, out)
    elif isinstance(value, (int, float, np.number)) and not isinstance(value, bool) and abs(float(value)) >= 10:
        out.add(f"{float(value):g}")
    return out


def _scrub(text: str) -> str:
    """Remove the fixed texts a message may be built from; what is left must hold no hidden data."""
    for p in registry.PROBLEMS:
        hidden = load(p)
        for fixed in [*hidden.messages.values(), hidden.on_exception]:
            text = text.replace(fixed, "")
    # counts of cases, and line numbers in the learner's own file, are not hidden data
    return re.sub(r"(Wrong on \d+ of \d+ cases\.|All \d+ cases passed\.|line \d+)", "", text)


@pytest.mark.background("class")
@pytest.mark.timeout(1800)  # (the class's grading may fall to it, -k choosing it alone)
def test_messages_never_show_hidden_inputs_or_expected_values(wrong_graded, tmp_path):
    """Each problem's first curated wrong answer's message (graded above, on the class's shared
    hidden cases) against those hidden inputs and the expected values it was judged against (the
    class's own, kept by its grading; computed here for a problem it did not run); every wrong
    answer's message against the hidden tests' source."""
    from autograder.engine.shared import CLASS_ID

    for p in registry.PROBLEMS:
        name = WRONG[p.id][0][0]
        result = wrong_graded[p.id, name]
        assert result["status"] in ("incorrect", "error"), (p.id, name, result["status"])
        text = _scrub(result["message"])  # a problem's message against that problem's hidden data
        _, cases = grading.hidden_cases(p, CLASS_ID)
        outcomes = wrong_graded.expected.get(p.id)
        if outcomes is None:  # (no learner's code ran for it: its outcomes computed here)
            # (realized together: 5.2's checkpoint roots come from one helper process, not one each)
            args = files.realize(tuple(c.args for c in cases), str(tmp_path / p.id))
            outcomes = [grading.expected_outcome(p, a) for a in args]
        assert len(outcomes) == len(cases), p.id
        secrets = set()
        for c, outcome in zip(cases, outcomes):
            if c.category != "public":
                _numbers(c.args, secrets)
                _numbers(outcome if not isinstance(outcome, Raises) else (), secrets)
        assert secrets, p.id  # (the check can fail: there is hidden data to look for)
        for secret in secrets:
            assert not re.search(rf"(?<![\d.]){re.escape(secret)}(?![\d.])", text), (p.id, secret, text)
    everything = "\n".join(r["message"] for r in wrong_graded.values())
    for p in registry.PROBLEMS:  # and no hidden-test source either
        for line in inspect.getsource(load(p).generate).splitlines()[1:]:
            if len(line.strip()) > 30:
                assert line.strip() not in everything


def test_restore_problem_is_graded_by_a_real_restore_in_a_directory_that_is_removed(tmp_path, monkeypatch, root):
    import tempfile

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen = []
    real_worker = grading.sandbox.Worker

    class Spy(real_worker):
        def __init__(self, *args, **kw):
            super().__init__(*args, **kw)
            if self.job["function"] == "restore_resharded":  # (not the isolation probe)
                seen.append(sorted(p.name for p in (scratch / self.workdir.split("/")[-1]).iterdir()))

    monkeypatch.setattr(grading.sandbox, "Worker", Spy)
    report = grading.grade([root / "solutions" / "unit3.py"], "cleanup-check", problems=["3.3"])
    (result,) = report.problems
    assert result.status == "correct", result.message
    assert seen and all(any(name.startswith("ckpt-") for name in names) for names in seen)  # saved fresh, inside
    assert list(scratch.iterdir()) == []  # and removed with the worker


def test_strict_refused_after_the_references_started_leaves_nothing_behind(tmp_path, monkeypatch, root):
    """The references start before the isolation level is known (they overlap the zygote's
    start-up): a strict grade refused where strict is missing stops them, removes every folder
    they wrote files into, and runs no learner code."""
    import tempfile
    import threading

    from autograder import sandbox

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    monkeypatch.setattr("autograder.sandbox.worker.strict_missing", lambda: ("Landlock ABI 0 (a test)",))
    started = []
    monkeypatch.setattr(grading.sandbox, "Worker", lambda *a, **k: started.append(a) or pytest.fail("a worker ran"))
    prepared = []
    real_prepare = grading._References._prepare
    monkeypatch.setattr(grading._References, "_prepare", staticmethod(lambda plan: (real_prepare(plan), prepared.append(plan.problem.id))))
    with pytest.raises(sandbox.IsolationUnavailable, match="Landlock ABI 0"):
        grading.grade([root / "solutions" / "unit3.py", root / "solutions" / "unit4.py"], "refused", isolation="strict")
    assert prepared, "the references did not start before the level was known"
    assert not started
    assert list(scratch.iterdir()) == []  # checkpoints and safetensors files written for the cases: gone
    assert not [t for t in threading.enumerate() if t.name == "ckpt-references"]


@pytest.mark.parametrize("name", [n for n, _, status, _ in WRONG["4.4"] if status == "incorrect"])
def test_public_examples_catch_the_mistakes_4_4s_diagnoses_know(name):
    """A mistake the hidden diagnoses name (forgetting data_offsets[0], one run for a strided shard,
    ...) must already fail the notebook check, not only the hidden tests."""
    from autograder.notebook import problem

    source = next(s for n, s, *_ in WRONG["4.4"] if n == name)
    namespace: dict = {}
    exec(HEADERS["4.4"] + source, namespace)  # noqa: S102 - a curated wrong answer, run as a notebook would
    result = problem("4.4").check(namespace["read_shard"])
    assert not result.passed and result.status == "incorrect", result
    assert any(ex.args[0].header()[ex.args[1]]["data_offsets"][0] > 0 for ex in registry.get("4.4").examples)


_EAGER_VALUES = '''
import jax, jax.numpy as jnp, numpy as np
from flax import linen as nn


def values(seed, shape, features):
    params = nn.Dense(features).init(jax.random.PRNGKey(seed), jnp.ones(shape))
    k = params["params"]["kernel"]
    y = jnp.tanh(jnp.ones(shape) @ k) * jnp.exp(-k.sum()) + jax.nn.softmax(k, axis=0).mean()
    return [np.asarray(k), np.asarray(y), float(jnp.linalg.norm(k))]
'''


def test_workers_compile_faster_and_compute_within_the_tolerance_floats_are_judged_with():
    """Workers compile with XLA flags of their own (no LLVM optimisation, the older fusion
    emitter): a learner's eager Flax and jax.numpy may differ there in a float's last bits from
    what they give here, never by more than the relative tolerance float answers are judged with."""
    from autograder import sandbox
    from autograder.wall import codec
    from autograder.wall.returns import ArrayOf

    cases = [(0, (2, 4), 3), (7, (5, 33), 17)]
    run = sandbox.Worker(_EAGER_VALUES, "values", cases, level=best_isolation()).wait()
    assert run.status == "ok" and not run.setup, run.stderr_tail
    namespace: dict = {}
    exec(_EAGER_VALUES, namespace)  # noqa: S102 - the test's own code, in this process's default XLA
    tolerance = min(p.returns.rtol for p in registry.PROBLEMS if isinstance(p.returns, ArrayOf))
    for args, out in zip(cases, run.cases):
        assert "value" in out, out
        here = codec.loads(codec.dumps(namespace["values"](*args)))
        for theirs, ours in zip(out["value"], here):
            np.testing.assert_allclose(theirs, ours, rtol=tolerance / 4, atol=0)


def test_unit1_is_graded_without_starting_jax_in_the_grading_process(root):
    """Unit 1's expected values come from the hidden tests' arithmetic, so grading it leaves JAX
    (and Flax) out of the grading process, whose CPU the zygote and the workers need at start-up
    (checked: with a reference run for 1.3, JAX starts here and this fails)."""
    script = ("import json, sys\n"
              "from autograder.engine.grade import grade\n"
              "r = grade(['solutions/unit1.py'], 'nojax', problems=['1.1', '1.2', '1.3', '1.4'])\n"
              "print(json.dumps([r.score, r.max_score, 'jax' in sys.modules, 'flax' in sys.modules]))\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, timeout=300)
    unit1 = sum(p.points for p in registry.PROBLEMS if p.unit == 1)
    assert json.loads(out.stdout.splitlines()[-1]) == [unit1, unit1, False, False], out.stderr[-2000:]


def test_a_notebook_check_leaves_no_files_behind(tmp_path, monkeypatch, root):
    """A check whose examples are files (4.4's safetensors files) writes them into a temporary
    folder, and removes it when done, passed or not: each run of a check cell used to leave its
    files (megabytes: 349 folders, 140 MB in this machine's /tmp)."""
    import tempfile

    from autograder.notebook import problem

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    namespace: dict = {}
    exec((root / "solutions" / "unit4.py").read_text(), namespace)  # noqa: S102 - the reference, as a notebook runs it
    assert problem("4.4").check(namespace["read_shard"]).passed
    assert problem("4.4").check(lambda *args: None).status == "incorrect"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("ckpt-example-")], list(tmp_path.iterdir())


# What the notebook's check of 5.3 says of a curated wrong answer: its second example, a run stopped
# after step 2 committed and started again, names the rule broken.
CHECKED_5_3 = {
    "copies_the_lessons_old_resume": "a resumed run must continue the data where it stopped",
    "forgets_the_batches_position": "a resumed run must continue the data where it stopped",
    "never_restores": "a run must go on from the latest committed step (2 here): restore it",
    "starts_over": "a run must go on from the latest committed step (2 here): restore it",
    "never_saves": "its last step must be committed on disk",
    "parameters_only": "restore the whole training state",
}


@pytest.mark.parametrize("name", sorted(CHECKED_5_3))
def test_the_notebook_check_of_5_3_catches_a_resume_that_loses_its_place(name):
    """Issue 49's miss: a resume copied from Lesson 5 as it was (the step saved as the data item, the
    batches drawn from a fresh pipeline) passed the check, whose only example was a fresh folder, and
    failed the grader. The second example fails it, and the other wrong resumes, with the rule."""
    from autograder.notebook import problem

    source = next(s for n, s, *_ in WRONG["5.3"] if n == name)
    namespace: dict = {}
    exec(HEADERS["5.3"] + source, namespace)  # noqa: S102 - a curated wrong answer, run as a notebook would
    result = problem("5.3").check(namespace["train_with_preemption"])
    assert result.status == "incorrect" and result.message.startswith("example 2: "), result
    assert CHECKED_5_3[name] in result.message, result


def test_the_notebook_check_of_5_3_passes_the_reference_and_every_right_answer():
    """Its second example holds no curated right answer back: each names its step folders its own way
    (step_4, 00000004), or saves with Orbax v1's training Checkpointer, and each runs first to step 2
    in the folder it then resumes from."""
    from autograder.notebook import problem
    from solutions import unit5
    from tests.right_answers import HEADERS as RIGHT_HEADERS, RIGHT

    assert len(registry.get("5.3").examples) == 2
    assert problem("5.3").check(unit5.train_with_preemption).status == "correct"
    for name, source in RIGHT["5.3"]:
        namespace: dict = {}
        exec(RIGHT_HEADERS["5.3"] + source, namespace)  # noqa: S102 - a curated right answer
        result = problem("5.3").check(namespace["train_with_preemption"])
        assert result.status == "correct", (name, result)
