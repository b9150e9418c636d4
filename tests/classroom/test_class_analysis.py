"""What grade-batch tells an instructor about a class beyond its scores: item analysis (pass rate,
discrimination, failures, time, attempts and hints) and similar code (``--similarity``)."""

from __future__ import annotations

import ast
import csv
import json
import os
import shutil
from pathlib import Path

import pytest

from autograder import registry
from autograder.classroom import item_analysis, similarity
from tests.right_answers import HEADERS as RIGHT_HEADERS, RIGHT
from tests.wrong_answers import HEADERS as WRONG_HEADERS, WRONG

ROOT = Path(__file__).resolve().parents[2]


def test_discrimination_is_kelleys_index_on_a_hand_checked_class():
    """Eleven learners: groups of round(0.27 x 11) = 3. The top three on the rest (0.9, 0.8, 0.8)
    scored 1, 1, 0 on the item: 2/3. The bottom: 0.1 (scored 0), then three learners tied at 0.3
    (scored 0, 1, 0) for the two places left, each counting for 2/3 of a place: (0 + 2/3 x 1) / 3
    = 2/9. The index: 2/3 - 2/9 = 4/9."""
    rest = [0.9, 0.8, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.3, 0.3, 0.1]
    item = [1, 1, 0, 1, 0, 1, 0, 0, 1, 0, 0]
    assert item_analysis.discrimination(item, rest) == pytest.approx(4 / 9)
    # reversed, the weaker learners did better: the index changes sign
    assert item_analysis.discrimination([1 - x for x in item], rest) == pytest.approx(-4 / 9)
    # too few learners, or no spread on the rest: not computed
    assert item_analysis.discrimination(item[:3], rest[:3]) is None
    assert item_analysis.discrimination(item, [0.5] * len(item)) is None


def _report(learner: str, scores: dict[str, float], categories: dict[str, str] | None = None) -> dict:
    problems = []
    for pid, score in scores.items():
        points = registry.get(pid).points
        status = "correct" if score == 1 else ("not_attempted" if score is None else "incorrect")
        problems.append({"id": pid, "function": registry.get(pid).function, "status": status, "message": "",
                         "score": (score or 0) * points, "max_score": points, "code_seconds": 0.5,
                         "category": (categories or {}).get(pid, "" if status == "correct" else "values")})
    return {"learner": learner, "key": learner, "score": 0, "max_score": 0, "problems": problems}


def test_the_summary_analyses_each_problem_with_progress_files_where_collected(tmp_path):
    """A synthetic class of eight: the four strongest pass 2.1, 2.3 and 2.5, the four weakest pass
    2.2 (so on the rest of the assignment the strong lead: 2.1's discrimination is 1, 2.2's -1,
    flagged), all pass 2.4, one did not attempt 2.3; progress files for two learners give attempts
    and hints. summary.md, summary.json and summary.png say so."""
    from autograder.classroom.batch import write_outputs

    selected = tuple(registry.get(p) for p in ("2.1", "2.2", "2.3", "2.4", "2.5"))
    reports = []
    for k in range(8):
        strong = int(k < 4)
        reports.append(_report(f"l{k}", {"2.1": strong, "2.2": 1 - strong, "2.3": None if k == 7 else strong,
                                         "2.4": 1, "2.5": strong}, {"2.3": "exception"}))
    progress = {"l0": [{"kind": "grading", "problems": [{"id": "2.1", "status": "incorrect", "hints": 2},
                                                        {"id": "2.2", "status": "not_attempted"}]},
                       {"kind": "grading", "problems": [{"id": "2.1", "status": "correct", "hints": 1}]}],
                "l5": [{"kind": "grading", "problems": [{"id": "2.1", "status": "incorrect"}]}]}
    write_outputs(reports, tmp_path, selected, progress)
    rows = {r["id"]: r for r in json.loads((tmp_path / "summary.json").read_text())}
    assert rows["2.1"]["discrimination"] == pytest.approx(1.0) and rows["2.2"]["discrimination"] == pytest.approx(-1.0)
    assert rows["2.4"]["pass_rate"] == 1.0 and rows["2.4"]["reading"] == \
        "nearly everyone passed; easier than declared (medium): as easy, 10 points"
    # Difficulty as the class found it, beside the declared one whose points follow it: half passed
    # 2.1 (declared easy) and 2.5 (declared hard), so both are medium for this class.
    assert (rows["2.1"]["difficulty"], rows["2.1"]["found_difficulty"]) == ("easy", "medium")
    assert rows["2.1"]["reading"] == "harder than declared (easy): as medium, 15 points"
    assert rows["2.5"]["reading"] == "easier than declared (hard): as medium, 15 points"
    assert (rows["2.3"]["difficulty"], rows["2.3"]["found_difficulty"]) == ("medium", "medium")
    assert rows["2.2"]["reading"] == "weaker learners did better: look at the problem"
    assert rows["2.3"]["most_common_failure"] == "exception" and rows["2.3"]["attempted"] == 7
    assert (rows["2.1"]["median_attempts"], rows["2.1"]["hints"], rows["2.1"]["with_progress"]) == (1.5, 3, 2)
    assert rows["2.1"]["median_seconds"] == 0.5
    summary = (tmp_path / "summary.md").read_text()
    assert "| Discrimination |" in summary and "| Attempts (median) | Hints |" in summary and "+1.00" in summary
    assert "Kelley" in summary and "judge no learner" in summary
    assert "| Difficulty (declared / found) |" in summary and "| easy / medium |" in summary
    assert (tmp_path / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _renamed(source: str, comment: str) -> str:
    """``source`` with every name it binds renamed, a comment and a docstring added, and its
    first two independent assignments in a row swapped, where a function has them: a near-copy."""
    tree = ast.parse(source)
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) for a in n.args.args}
    helpers = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}

    class Rename(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in bound or node.id in helpers - {"shard_shape", "replica_writes"}:
                node.id = f"my_{node.id}_x"
            return node

        def visit_arg(self, node):
            if node.arg in bound:
                node.arg = f"my_{node.arg}_x"
            return node

    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:  # swapped before renaming
        for i in range(len(fn.body) - 1):
            a, b = fn.body[i], fn.body[i + 1]
            if isinstance(a, ast.Assign) and isinstance(b, ast.Assign) and similarity._independent(a, b):
                fn.body[i], fn.body[i + 1] = b, a
                break
    tree = Rename().visit(tree)
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        fn.body.insert(0, ast.Expr(ast.Constant("Written by me, honestly.")))
    return f"# {comment}\n" + ast.unparse(tree) + "\n"


_DEAD = """\
if len(()) > 1:
    unused_a = [0] * 3
    unused_b = sorted(unused_a)
    unused_c = {k: k + 1 for k in unused_b}
    print(unused_c, flush=True)
    for i in range(len(unused_a)):
        unused_a[i] += i * 2
        if unused_a[i] % 3 == 0:
            unused_b.append(unused_a[i] // 2)
    while unused_b and unused_b[-1] > 10:
        unused_b.pop()
    unused_d = tuple(reversed(unused_b))
    unused_e = max(unused_d, default=None)
    assert unused_e is None or unused_e >= 0, unused_e
    unused_f = "".join(str(x) for x in unused_d)
"""


def _padded(source: str) -> str:
    """``source`` with fifteen lines of dead code in each function: a copy padded to dilute its overlap."""
    tree = ast.parse(source)
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        fn.body[:0] = ast.parse(_DEAD).body
    return ast.unparse(tree) + "\n"


def test_similarity_finds_planted_near_copies_and_never_pairs_the_reference_or_the_stub():
    """Per problem: learners who handed in the reference (verbatim), the stub, the curated wrong
    answers, and curated right answers with a near-copy of one of them (names renamed, comments and
    docstrings added). The planted pairs are found; no pair holds a reference copy (counted apart)
    or a stub (too short); every pair found is of answers at least as alike as the threshold."""
    problems = ("2.1", "2.5", "3.2")
    codes, stubs, references = {}, similarity.course_code(ROOT / "problems", [registry.get(p) for p in problems]), \
        similarity.course_code(ROOT / "solutions", [registry.get(p) for p in problems])
    planted = set()
    for pid in problems:
        by = codes[pid] = {"ref_a": references[pid], "ref_b": references[pid], "stub": stubs[pid]}
        for name, source, *_ in WRONG[pid]:
            by[f"wrong_{name}"] = WRONG_HEADERS[pid] + source
        for name, source in [(n, s) for n, s, *_ in RIGHT[pid]]:
            by[f"right_{name}"] = RIGHT_HEADERS[pid] + source
        first, source = RIGHT[pid][0][0], RIGHT[pid][0][1]
        by[f"copy_of_{first}"] = _renamed(RIGHT_HEADERS[pid] + source, "my own work")
        planted.add((pid, f"copy_of_{first}", f"right_{first}"))
        second, source = RIGHT[pid][1][0], RIGHT[pid][1][1]
        by[f"padded_{second}"] = _padded(RIGHT_HEADERS[pid] + source)
        planted.add((pid, f"padded_{second}", f"right_{second}"))
    found = similarity.compare(codes, stubs, references)
    pairs = {(p.problem, *sorted((p.a, p.b))) for p in found.pairs}
    assert {(pid, *sorted(ab)) for pid, *ab in planted} <= pairs, found.pairs
    assert not [p for p in found.pairs if {"ref_a", "ref_b", "stub"} & {p.a, p.b}], found.pairs
    assert all(set(found.near_reference[pid]) >= {"ref_a", "ref_b"} for pid in problems), found.near_reference
    assert all("stub" in found.too_short[pid] for pid in problems), found.too_short
    # the padded copies are found by containment, which Jaccard alone misses (the control)
    padded = [p for p in found.pairs if p.a.startswith("padded_") or p.b.startswith("padded_")]
    assert padded and all(p.containment >= similarity.containment_threshold(similarity.THRESHOLD) for p in padded)
    assert len(padded) == len(problems) and all(p.similarity < similarity.THRESHOLD for p in padded), padded
    # the control: the same near-copy against an unrelated right answer is not alike
    other = RIGHT["2.1"][1]
    assert similarity.jaccard(similarity.fingerprints(similarity.normalise(codes["2.1"][f"copy_of_{RIGHT['2.1'][0][0]}"])),
                              similarity.fingerprints(similarity.normalise(RIGHT_HEADERS["2.1"] + other[1]))) < 0.5


@pytest.mark.slow
def test_grade_batch_writes_the_item_analysis_and_the_similarity_report(tmp_path):
    """A small real class, graded with --similarity on shared cases: references, the released
    notebook untouched, wrong answers and a planted near-copy; one learner's folder holds a progress
    file. The report pairs the planted copy with its original and no one with the reference."""
    from autograder.classroom.batch import grade_batch

    subs = tmp_path / "submissions"
    subs.mkdir()
    pid = "2.5"
    for name in ("ref_one", "ref_two"):
        shutil.copy(ROOT / "solutions" / "unit2.py", subs / f"{name}.py")
    shutil.copy(ROOT / "problems" / "unit2_sharded_save_layouts.ipynb", subs / "untouched.ipynb")
    for name, source, *_ in WRONG[pid][:2]:
        (subs / f"wrong_{name}.py").write_text(WRONG_HEADERS[pid] + source)
    source = RIGHT[pid][0][1]
    original = subs / "original"
    original.mkdir()
    (original / "answer.py").write_text(RIGHT_HEADERS[pid] + source)
    (original / "progress.jsonl").write_text(json.dumps({"kind": "grading", "problems": [
        {"id": pid, "status": "incorrect", "hints": 2}]}) + "\n")
    (subs / "copy.py").write_text(_renamed(RIGHT_HEADERS[pid] + source, "mine"))
    grade_batch(subs, tmp_path / "out", jobs=2, progress=False, problems=(registry.get(pid),), shared_cases=True,
                similarity=0.8)
    out = tmp_path / "out"
    found = json.loads((out / "similarity.json").read_text())
    pairs = [(p["problem"], sorted((p["a"], p["b"]))) for p in found["pairs"]]
    assert (pid, ["copy", "original"]) in pairs  # (two curated wrong answers written from one template may pair too)
    assert not [p for p in found["pairs"] if {p["a"], p["b"]} & {"ref_one", "ref_two", "untouched"}], pairs
    assert sorted(found["near_reference"][pid]) == ["ref_one", "ref_two"]
    rates = found["independent_answers_listed"]  # measured on the curated right answers, written apart
    assert rates["pairs"] > 100 and rates["either"] / rates["pairs"] < 0.05, rates
    page = (out / "similarity.html").read_text()
    assert "curated right answers" in page and "containment" in page
    assert "not a verdict" in page and "my_" in page and "Written by me" in page
    row = json.loads((out / "summary.json").read_text())[0]
    assert row["pass_rate"] == pytest.approx(4 / 7) and row["with_progress"] == 1 and row["hints"] == 2
    summary = (out / "summary.md").read_text()
    assert "similarity.html" in summary and f"{len(pairs)} pair" in summary


def test_the_shipped_calibration_is_the_curated_answers_measured_now():
    """The figures a report prints of code written independently come from a file shipped with the
    grader (an installed copy has no tests); they must be the curated right answers measured today."""
    from tests.right_answers.__main__ import measured

    shipped = json.loads(similarity.CALIBRATION.read_text())["pairs"]
    assert shipped == measured(), "stale: run python -m tests.right_answers --calibrate"
    assert similarity.independent_rates(0.8) == similarity.independent_rates(0.8, shipped)
    planted = [["1.1", 0.9, 0.5], ["1.1", 0.5, 0.95], ["1.2", 0.1, 0.2]]  # control: each measure counts its own
    assert similarity.independent_rates(0.8, planted) == {"pairs": 3, "jaccard": 1, "containment": 1, "either": 2}


def test_normalising_sets_aside_names_constants_comments_and_the_order_of_independent_statements():
    """Two codes that differ only in those come out the same; one that computes something else does
    not (the control)."""
    a = '''
def f(shape, n):
    """Say what it does."""
    rows = shape[0] // n  # a comment
    cols = shape[1]
    return (rows, cols)
'''
    b = '''
def g(global_shape, devices):
    width = global_shape[1]
    height = global_shape[0] // devices
    return (height, width)
'''
    c = '''
def g(global_shape, devices):
    width = global_shape[1] // devices
    height = global_shape[0]
    return (height, width)
'''
    assert similarity.normalise(a) == similarity.normalise(b)
    assert similarity.normalise(a) != similarity.normalise(c)


def _honest_progress(pid: str, hints: int = 2) -> str:
    return json.dumps({"kind": "grading", "problems": [{"id": pid, "status": "incorrect", "hints": hints}]}) + "\n"


def _hostile_progress(folder: Path, pid: str) -> dict[str, str]:
    """Progress files a hostile class hands in, each in a learner folder of its own under ``folder``;
    what each must cost (the words of its note)."""
    made = {}

    def learner(name: str) -> Path:
        (folder / name).mkdir(parents=True)
        return folder / name / "progress.jsonl"

    learner("linked").symlink_to("/proc/self/pagemap")
    made["linked"] = "symbolic link"
    os.mkfifo(learner("fifo"))
    made["fifo"] = "not a regular file"
    with learner("huge").open("wb") as f:  # 30 MB: over the limit, never read
        f.truncate(30 * 2**20)
    made["huge"] = "over the"
    learner("malformed").write_text(json.dumps({"kind": "grading", "problems": 5}) + "\n" + _honest_progress(pid))
    made["malformed"] = "1 record of another shape skipped"
    long_count = '{"kind": "grading", "problems": [{"id": "' + pid + '", "hints": ' + "9" * 4300 + "}]}\n"
    learner("digits").write_text(long_count + "[" * 100_000 + "\n" + _honest_progress(pid))
    made["digits"] = "2 unreadable lines skipped"
    learner("billion").write_text(json.dumps({"kind": "grading", "problems": [{"id": pid, "hints": 10**9}]}) + "\n"
                                  + _honest_progress(pid, hints=100) * 50)
    made["billion"] = ""
    return made


def test_a_hostile_progress_file_costs_its_learner_only_and_moves_no_class_figure(tmp_path):
    """Each progress file a learner hands in is read as every learner file is: a link is not followed,
    a FIFO not waited on, a file over the limit not read, a malformed record or line skipped, a count
    bounded; a learner's hints count up to the problem's number of hints. The control: an honest
    file's counts, read whole."""
    pid = "2.1"
    made = _hostile_progress(tmp_path, pid)
    got = {name: item_analysis.progress_of(tmp_path / name) for name in made}
    for name, note in made.items():
        assert note in got[name].note, (name, got[name])
    for name in ("linked", "fifo", "huge"):
        assert got[name].counts == {} and not got[name].read
    assert got["malformed"].counts == {pid: (1, 2)} and got["digits"].counts == {pid: (1, 2)}
    assert got["billion"].counts[pid] == (51, 5000)  # 10**9 is no count: that record's hints are not counted
    (tmp_path / "honest").mkdir()
    (tmp_path / "honest" / "progress.jsonl").write_text(_honest_progress(pid) * 3)
    honest = item_analysis.progress_of(tmp_path / "honest")
    assert honest.counts == {pid: (3, 6)} and honest.note == ""
    assert item_analysis.progress_of(tmp_path / "nobody") is None
    # In the class's figures, the billion-hint learner counts up to 2.1's hints, as any learner can.
    reports = [_report(name, {pid: 0}) for name in [*made, "honest"]]
    progress = {**got, "honest": honest}
    row = item_analysis.summary_rows(reports, (registry.get(pid),), progress)[0]
    cap = len(registry.get(pid).hints)
    assert row["hints"] == min(2, cap) * 2 + cap + min(6, cap) and row["with_progress"] == 4


def test_grade_batch_writes_every_class_file_beside_a_hostile_classs_progress_files(tmp_path):
    """grade-batch of honest classmates beside learners whose folders hold hostile progress files:
    every learner's grade and feedback, the summary with a note per refused file, every honest score
    kept (before: a linked file stopped the whole batch, a malformed record the summary)."""
    from autograder.classroom.batch import grade_batch

    subs = tmp_path / "submissions"
    made = _hostile_progress(subs, "1.1")
    for name in [*made, "honest"]:
        (subs / name).mkdir(exist_ok=True)
        shutil.copy(ROOT / "solutions" / "unit1.py", subs / name / "answer.py")
    (subs / "honest" / "progress.jsonl").write_text(_honest_progress("1.1"))
    summary = grade_batch(subs, tmp_path / "out", jobs=2, progress=False, problems=(registry.get("1.1"),))
    assert summary["results"] == len(made) + 1 and not summary["interrupted"]
    out = tmp_path / "out"
    rows = {r["learner"]: r for r in csv.DictReader((out / "gradebook.csv").open())}
    assert set(rows) == {*made, "honest"} and all(float(r["1.1"]) == 10 for r in rows.values()), rows
    assert all((out / "feedback" / f"{name}.html").exists() for name in rows)
    text = (out / "summary.md").read_text()
    for name, note in made.items():
        if note:
            assert f"- `{name}`:" in text and note in text.split(f"- `{name}`:")[1].splitlines()[0], name
    row = json.loads((out / "summary.json").read_text())[0]
    assert row["with_progress"] == 4 and row["hints"] <= 4 * len(registry.get("1.1").hints)


def test_the_class_figure_counts_a_notebook_s_hints_each_number_once():
    """Hints shown in a notebook (``problem(id).hint()``) are in the progress file as ``hint`` records:
    the class's figure counts them beside the practice sets', each hint number of a problem once."""
    from autograder.classroom.item_analysis import tally

    records = [{"kind": "hint", "problem": "7.3", "hint": 1, "of": 3},
               {"kind": "hint", "problem": "7.3", "hint": 1, "of": 3},  # the cell run again
               {"kind": "hint", "problem": "7.3", "hint": 2, "of": 3},
               {"kind": "grading", "problems": [{"id": "7.3", "status": "incorrect", "hints": 1}]},
               {"kind": "hint", "problem": "7.3", "hint": 10**9}]  # of another shape
    collected = tally(records)
    assert collected.counts["7.3"] == (1, 3)
    assert "1 record of another shape skipped" in collected.note


def test_independent_statements_are_put_in_one_order_whatever_order_they_came_in():
    """Statements that do not depend on each other, in any order a learner wrote them (here: random
    orders of the same 14 assignments and calls, each swap of two independent neighbours), normalise
    alike; a reordering that moves a statement past one it depends on never happens (the reordered
    code computes what the original did)."""
    import random

    rng = random.Random(60)
    names = "abcdefg"
    for _ in range(60):
        lines = []
        for k in range(14):  # (each statement a shape of its own: its attribute)
            t, a, b = rng.choice(names), rng.choice(names), rng.choice(names)
            lines.append(f"print({a}, math.p{k})" if rng.random() < 0.15 else f"{t} = {a} + {b} * math.k{k}")
        body = ast.parse("\n".join(lines)).body
        for _ in range(60):
            i = rng.randrange(len(body) - 1)
            if similarity._independent(body[i], body[i + 1]):
                body[i], body[i + 1] = body[i + 1], body[i]
        head = "import math\ndef f(a, b, c, d, e, f, g):\n"
        original = head + "".join(f"    {line}\n" for line in lines)
        shuffled = head + "".join(f"    {ast.unparse(s)}\n" for s in body)
        assert similarity.normalise(original) == similarity.normalise(shuffled)
        ordered = similarity._order(ast.parse("\n".join(lines)).body, {"math", "print"})
        math = type("math", (), {**{f"k{k}": k + 2 for k in range(14)}, **{f"p{k}": k for k in range(14)}})
        runs = []
        for statements in (ast.parse("\n".join(lines)).body, ordered):
            printed, env = [], dict(zip(names, range(1, 8)))
            scope = {"print": lambda *a, out=printed: out.append(a), "math": math}
            exec(compile(ast.Module(statements, []), "<code>", "exec"), scope, env)  # noqa: S102 - the test's own code
            runs.append((env, printed))
        assert runs[0] == runs[1]


def test_normalising_reads_each_statement_once_however_its_statements_are_ordered(monkeypatch):
    """A learner's file cannot make the class's report wait (issue 61: 1,500 dead assignments after a
    `return`, each shape sorting before the last, took minutes): ordering a block reads each of its
    statements' names once, not once per pair compared (counted, not timed: 400 such assignments,
    which a bubble sort of neighbours read 160,000 times)."""
    calls = []
    real = similarity._uses
    monkeypatch.setattr(similarity, "_uses", lambda stmt: calls.append(stmt) or real(stmt))
    n = 400
    source = "import math\ndef f(x):\n    y = x\n    return y\n" + "".join(f"    z{i} = math.f{n - i:05d}\n" for i in range(n))
    tokens = similarity.normalise(source)
    assert tokens and len(calls) <= n + 2, len(calls)
    assert tokens.index("'f00001'") < tokens.index("'f00400'")  # (ordered: the control that the block was sorted)


def test_one_learners_giant_file_neither_holds_up_the_gradebook_nor_the_report_for_long(tmp_path, monkeypatch):
    """A crafted class member (a hostile holdout's: a right answer, then thousands of dead assignments
    after its `return`) beside an honest one. The gradebook, feedback and summary are written before the
    similarity report runs: here the report fails outright, and they are there. And the report compares
    one learner's code for a problem in its first MAX_CHARS only, saying whose was cut (the control: the
    honest learner's is compared whole)."""
    from autograder.classroom import similarity
    from autograder.classroom.batch import find_learners, grade_batch

    subs = tmp_path / "submissions"
    subs.mkdir()
    pid = "2.5"
    shutil.copy(ROOT / "solutions" / "unit2.py", subs / "honest.py")
    source = RIGHT_HEADERS[pid] + RIGHT[pid][0][1]
    cut = source.rindex("return")
    line_end = source.index("\n", cut)
    dead = "".join(f"    z{i} = {4000 - i}\n" for i in range(4000))
    (subs / "crafted.py").write_text(source[:line_end + 1] + dead + source[line_end + 1:])
    assert len((subs / "crafted.py").read_text()) > similarity.MAX_CHARS

    def fails(*args, **kwargs):
        raise RuntimeError("the similarity report, failing here")

    monkeypatch.setattr(similarity, "report", fails)
    with pytest.raises(RuntimeError, match="failing here"):
        grade_batch(subs, tmp_path / "out", jobs=2, progress=False, problems=(registry.get(pid),), shared_cases=True,
                    similarity=0.8)
    out = tmp_path / "out"
    book = (out / "gradebook.csv").read_text()
    assert "honest" in book and "crafted" in book
    assert (out / "feedback" / "crafted.md").exists() and (out / "summary.md").exists()
    monkeypatch.undo()
    found = similarity.report(find_learners(subs), (registry.get(pid),), out, ROOT)
    assert found.capped == {pid: ["crafted"]}, found.capped
    assert json.loads((out / "similarity.json").read_text())["capped"] == {pid: ["crafted"]}
    assert "longer than" in (out / "similarity.html").read_text()
