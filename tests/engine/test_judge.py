"""The judge on its own: a pure function from a worker's plain-data outputs to (status, category,
message). Each branch here, with no worker and no sandbox: what a learner is told for each way a
run can end, and that no hidden input appears in any of it."""

from __future__ import annotations

import numpy as np
import pytest

from autograder import registry
from autograder.engine.cases import expected_outcome, hidden_cases
from autograder.engine.judge import judge
from autograder.sandbox import RunResult

P = registry.get("1.1")
# The module a worker runs: each block headed by where it came from.
SOURCE = ("# unit1.ipynb code cell 1, line 1\nimport numpy as np\n"
          "# unit1.ipynb code cell 2, line 1\ndef dense_checkpoint_accounting(seed, x, num_shards, features):\n"
          "    return 1 / 0\n")


@pytest.fixture(scope="module")
def setup():
    hidden, cases = hidden_cases(P, "ada")
    expected = [expected_outcome(P, c.args) for c in cases]
    return hidden, cases, expected


def _judge(setup, run: RunResult):
    hidden, cases, expected = setup
    return judge(P, hidden, cases, expected, run, SOURCE, timeout=60.0)


def _values(expected, change=lambda i, e: e):
    return [{"value": np.asarray(change(i, e), dtype=np.float64)} for i, e in enumerate(expected)]


def _shows_no_hidden_input(message: str, setup) -> None:
    """No hidden case's expected total (a number of three digits or more) is in the message."""
    _, cases, expected = setup
    totals = {f"{e[0]:g}" for c, e in zip(cases, expected) if c.category != "public" and e[0] >= 100}
    assert totals and not [t for t in totals if t in message]


def test_all_right(setup):
    status, category, message = _judge(setup, RunResult("ok", cases=_values(setup[2])))
    assert (status, category) == ("correct", "") and message == f"All {len(setup[1])} cases passed."


def test_floor_division_is_named(setup):
    run = RunResult("ok", cases=_values(setup[2], lambda i, e: [e[0], e[0] // (e[0] / e[1])]))
    status, category, message = _judge(setup, run)
    assert status == "incorrect" and "//" in message and message.startswith("Wrong on ")
    _shows_no_hidden_input(message, setup)


def test_an_integer_array_is_told_about_floor_division(setup):
    run = RunResult("ok", cases=[{"value": np.asarray(e, dtype=np.int64)} for e in setup[2]])
    status, category, message = _judge(setup, run)
    assert (status, category) == ("incorrect", "wrong_type") and "`//`" in message and "int64" not in message


def test_nan(setup):
    run = RunResult("ok", cases=_values(setup[2], lambda i, e: [np.nan, e[1]] if i == len(setup[2]) - 1 else e))
    status, category, message = _judge(setup, run)
    assert (status, category) == ("incorrect", "nan") and "a hidden case" in message


def test_stub(setup):
    run = RunResult("ok", cases=[{"error": {"kind": "not_implemented"}} for _ in setup[1]])
    assert _judge(setup, run)[:2] == ("not_attempted", "not_attempted")


def test_an_exception_shows_its_line_on_a_public_example_only(setup):
    hidden, cases, expected = setup
    err = {"error": {"kind": "exception", "type": "ZeroDivisionError", "mro": ["ZeroDivisionError"], "line": 5}}
    public = [i for i, c in enumerate(cases) if c.category == "public"]
    outs = _values(expected)
    outs[public[0]] = err
    status, _, message = _judge(setup, RunResult("ok", cases=outs))
    assert status == "error" and "at unit1.ipynb code cell 2, line 2 on a public example" in message
    outs = _values(expected)
    outs[-1] = err  # a hidden case: its line could encode its input
    status, _, message = _judge(setup, RunResult("ok", cases=outs))
    assert status == "error" and "a hidden case" in message and "code cell" not in message


@pytest.mark.parametrize("run, status, category, says", [
    (RunResult("timeout"), "timeout", "timeout", "endless loop"),
    (RunResult("crashed", returncode=-9), "error", "crashed", "killed by signal 9"),
    (RunResult("crashed", returncode=3), "error", "crashed", "exit code 3"),
    (RunResult("failed_start", returncode=1, stderr_tail="F1127 12:07:29.922111    3913 parse_flags_from_env.cc:234] "
               "Unknown flag in XLA_FLAGS: --xla_gone=1\n"), "error", "grader",
     "failed to start, before any of your code ran (exit code 1: Unknown flag in XLA_FLAGS: --xla_gone=1)"),
    (RunResult("failed_start", returncode=-6, stderr_tail="Traceback (most recent call last):\n  ...\n"
               "ModuleNotFoundError: No module named 'jaxlib'\n"), "error", "grader",
     "killed by signal 6: ModuleNotFoundError: No module named 'jaxlib'"),
    (RunResult("ok", setup={"kind": "devices", "type": "RuntimeError", "detail": "no CPU backend"}), "error", "grader",
     "grader's failure, not your code's"),
    (RunResult("machine_killed", returncode=137), "error", "grader", "killed by this machine's memory limit"),
    (RunResult("malformed"), "error", "malformed", "not a result"),
    (RunResult("scratch_full"), "error", "scratch_full", "scratch folder"),
    (RunResult("crowded"), "error", "crowded", "run folder"),
    (RunResult("ok", setup={"kind": "memory", "line": 2}), "error", "memory", "while loading your code"),
    (RunResult("ok", setup={"kind": "exception", "type": "ImportError", "line": 2}), "error", "load_error",
     "ImportError while loading"),
    (RunResult("ok", cases=[{"value": 1.0}]), "error", "incomplete", "incomplete result"),
])
def test_every_way_a_run_can_end(setup, run, status, category, says):
    got = _judge(setup, run)
    assert got[:2] == (status, category) and says in got[2], got


def test_every_return_spec_keeps_the_contract():
    """Each problem's return spec is a ReturnSpec (built: none lacks a required member), says what it
    wants in words, and checks its public examples from their own arguments exactly where it says
    so (its own check_example where checks_examples, the contract's default elsewhere)."""
    from autograder.wall.returns import ReturnSpec

    for p in registry.PROBLEMS:
        spec = p.returns
        assert isinstance(spec, ReturnSpec) and isinstance(spec.describe, str) and spec.describe, p.id
        assert spec.checks_examples == (type(spec).check_example is not ReturnSpec.check_example), p.id


def test_an_error_names_its_dimension_however_it_is_written():
    """2.1's statement asks for a message naming the dimension by its index; common ways of writing
    that are all read as naming it (before, 'axis=1', 'dimension #1' and 'global_shape[1]' scored 0),
    and another dimension's index or none is not."""
    from autograder.wall.returns import names_dimension

    for said in ("dimension 1 of size 10 is not divisible by 4", "dim 1: 10 % 4 != 0", "array axis 1 of size 10",
                 "axis=1: 10 not divisible by 4", "Dimension #1 does not divide", "global_shape[1] = 10 is not divisible",
                 "dim index 1 (size 10)", "axis: 1"):
        assert names_dimension(said, 1), said
    for said in ("dimension 10 is too big", "not divisible", "dimension 0 of size 10", "shape[11]", "axis 2"):
        assert not names_dimension(said, 1), said


_TWO_TREES = r"""
import ast, sys, threading, time

if sys.argv[1] == "serialized":
    from autograder.source import serialize_syntax_trees

    serialize_syntax_trees()
sys.setswitchinterval(1e-6)
source = "\n".join(f"def f{i}(a, b):\n    return [x * (a + b) for x in range({i})]" for i in range(200))


class Garbage:  # a cycle whose finaliser runs Python code, where a collection lets another thread in
    def __init__(self):
        self.me = self

    def __del__(self):
        time.sleep(0)


errors, stop = [], time.monotonic() + float(sys.argv[2])


def parse():  # a learner's source
    while time.monotonic() < stop and not errors:
        for _ in range(300):
            Garbage()
        try:
            ast.parse(source)
        except SystemError as exc:
            errors.append(str(exc))


def header(depth=20):  # NumPy's .npy header, as np.load reads it (a reference's)
    return header(depth - 1) if depth else ast.literal_eval("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }")


def headers():
    while time.monotonic() < stop and not errors:
        try:
            header()
        except SystemError as exc:
            errors.append(str(exc))


threads = [threading.Thread(target=parse), threading.Thread(target=headers)]
[t.start() for t in threads]
[t.join() for t in threads]
print(errors[0] if errors else "none")
"""


def test_syntax_trees_built_on_two_threads_at_once_never_fail_the_grader():
    """The honest-classmate flake (a problem lost as "the grader itself failed (SystemError)"): a
    syntax tree built on one thread while another thread's is half built (CPython 3.11, issue
    106905). Reproduced first, with no lock (it fails within a fraction of a second here), then never
    with every ast.parse of the process serialized, as the grading process makes them."""
    import subprocess
    import sys

    def run(mode, seconds):
        return subprocess.run([sys.executable, "-c", _TWO_TREES, mode, str(seconds)], capture_output=True, text=True,
                              timeout=120).stdout.strip()

    if sys.version_info[:2] == (3, 11):  # (where CPython has the bug: the control must reproduce it)
        assert "recursion depth mismatch" in run("plain", 30)
    assert run("serialized", 2) == "none"


def test_a_public_examples_silence_does_not_outvote_the_hidden_family_that_names_it():
    """Public examples carry the statement's traps (tests/content/test_public_checks_catch.py): an answer that
    returns where two of them raise fails them with a bare "should raise" (an example has no family),
    and the hidden case of that mistake names it. The family is the message; the control, a silence no
    hidden case names, keeps the bare one."""
    from autograder.hidden import Case, Hidden
    from autograder.wall.returns import Raises

    hidden = Hidden(generate=lambda rng: [], messages={"should_raise": "Raise where it must.",
                                                      "should_raise/unplaced": "Silent: a leaf with no place.",
                                                      "other": "Wrong on another case."})
    p = registry.get("7.2")
    cases = [Case("public", ()), Case("public", ()), Case("unplaced", ()), Case("other", ())]
    returned = RunResult("ok", cases=[{"value": {}}] * 4)
    status, category, message = judge(p, hidden, cases, [Raises("ValueError")] * 3 + [{}], returned, "", timeout=60.0)
    assert (status, category) == ("incorrect", "should_raise/unplaced") and "Silent: a leaf with no place." in message
    assert "It fails a public example too" in message
    control = [Case("public", ()), Case("public", ()), Case("other", ()), Case("other", ())]
    status, category, _ = judge(p, hidden, control, [Raises("ValueError")] * 3 + [{}], returned, "", timeout=60.0)
    assert category == "should_raise"


def test_a_library_class_it_could_not_send_is_named_even_where_the_grader_never_loaded_the_library():
    """The grader imports no library for its own work (the references run in processes of their own):
    a jax.Array returned where plain data was asked is still named (its library imported, by its fixed
    name, to look the class up); a class of any other name, or a module no library has, is not, and
    nothing is imported for it."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from autograder.engine.judge import return_detail\n"
        "from autograder.wall.codec import UNKNOWN_TYPE\n"
        "before = 'jax' in sys.modules\n"
        "named = return_detail(UNKNOWN_TYPE.format('jaxlib._jax.ArrayImpl'))\n"
        "fake = return_detail(UNKNOWN_TYPE.format('jaxlib._jax.SecretValue42'))\n"
        "mine = return_detail(UNKNOWN_TYPE.format('evil_module.Thing'))\n"
        "print(before, named, '|', fake, '|', mine, 'evil_module' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.strip()
    before, rest = out.split(" ", 1)
    named, fake, mine = (part.strip() for part in rest.rsplit(" ", 1)[0].split("|"))
    assert before == "False" and named == "cannot return a value of type jaxlib._jax.ArrayImpl", out
    assert fake == mine and "not plain data" in fake and "SecretValue42" not in fake, out
    assert out.endswith("False")
