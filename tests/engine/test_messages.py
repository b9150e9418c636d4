"""Messages that point at the real mistake (issue: the learner's and the instructor's day): each
one here sent learners after the wrong thing before."""

from __future__ import annotations

import numpy as np

from autograder import registry, text
from autograder.notebook import problem
from autograder.wall.returns import ArrayOf

INT_DIVISION = registry.get("1.1")


def _wrong_values(seed, x, num_shards, features):
    # floor division, returned in float32 as hint 3 says: only the values are wrong
    total = int(x.shape[-1]) * int(features) + int(features)
    return np.array([total, total // int(num_shards)], dtype=np.float32)


def test_a_wrong_value_does_not_show_a_dtype_the_learner_need_not_change():
    result = problem("1.1").check(_wrong_values)
    assert result.status == "incorrect"
    assert "expected [15.  ,  3.75]" in result.detail and "got      [15.,  3.]" in result.detail
    assert "(dtype" not in result.detail  # was: "expected ... (dtype float64)" beside "got ... (dtype float32)"


def test_an_integer_array_points_at_floor_division():
    spec = ArrayOf((2,), "f")
    learner = np.array([15, 3])
    shown = spec.type_error(learner)
    assert "returned an integer array (int64)" in shown and "`//`" in shown and "`/`" in shown
    hidden = spec.type_error(learner, detail=False)  # the hidden tests' wording
    assert "integer array;" in hidden and "int64" not in hidden and "`//`" in hidden
    assert "but its dtype is not" not in hidden
    # A float answer of the wrong kind of float is fine; a bool array gets the kind, not the pointer.
    assert spec.type_error(np.array([1.0, 2.0], np.float16)) is None
    assert "boolean array" in spec.type_error(np.array([True, False]))


def test_the_hint_beside_a_message_is_the_one_about_it():
    p = INT_DIVISION
    message = ArrayOf((2,), "f").type_error(np.array([15, 3]), detail=False)
    assert p.hint_for(message) == p.hints[2] and "`//`" in p.hints[2]
    assert p.hint_for("Wrong on 6 of 12 cases.") == p.hints[0]  # nothing in common: the first step


def test_message_html_renders_code_and_escapes_the_rest():
    shown = text.message_html("use `/`, not `//`; got <script>alert(1)</script>\nsecond line\x1b[31m")
    assert "<code>/</code>" in shown and "<code>//</code>" in shown
    assert "<script>" not in shown and "&lt;script&gt;" in shown
    assert "\nsecond line?" in shown and "\x1b" not in shown


def test_a_fresh_check_explains_its_isolation_and_learner_lines():
    from autograder.engine.grade import grade
    from autograder.learner.report import table
    from tests.conftest import ROOT

    report = grade([ROOT / "problems" / registry.UNITS[INT_DIVISION.unit].notebook], "ada", problems=["1.1"], isolation="auto")
    shown = table(report)
    assert shown.splitlines()[0] == "Learner: ada (this id chooses your hidden cases)"
    assert "Isolation: none needed: no function of yours ran" in shown and "(no learner code ran)" not in shown


def test_the_isolation_text_and_security_md_name_the_same_memory_measured_problems():
    """`python -m autograder isolation` and SECURITY.md say what a memory-measured problem is charged
    (anonymous memory, sampled from outside), and both name every such problem of the registry."""
    import re
    from pathlib import Path

    from autograder import registry
    from autograder.sandbox import levels

    measured = {p.id for p in registry.PROBLEMS if p.measure_memory}
    row = next(r for r in levels.guarantees() if "memory-measured" in r[0])
    said = set(re.findall(r"\d\.\d", row[0]))
    security = (Path(__file__).resolve().parents[2] / "SECURITY.md").read_text()
    line = next(x for x in security.splitlines() if x.startswith("| Peak memory"))
    assert said == measured == set(re.findall(r"\d\.\d", line.split("|")[1])), (said, measured, line[:80])
    assert "anonymous memory" in row[1] and "anonymous memory" in line and "VmHWM" not in row[1]
