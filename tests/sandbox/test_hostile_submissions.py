"""Red team, second round: hostile submissions that attack the trusted side through what it reads
and writes, not through code that runs. Links and special files in a submission, learner ids
made of markup, formulas, control characters, over-long or non-UTF-8 names, and messages that
try to carry hidden inputs out (a class name, a line number) or markup in.

Each test names what it checked against the code before its protection (it succeeded then)."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from autograder import registry
from autograder.classroom.batch import grade_batch
from autograder.engine.cases import hidden_cases
from tests.conftest import best_isolation
from tests.hostile import POSING, cpu_hog, reference

ROOT = Path(__file__).resolve().parents[2]
HONEST_4 = "unit4.py"  # the reference Unit 4, as an honest classmate's file
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _batch(subs: Path, out: Path, **kw) -> dict:
    return grade_batch(subs, out, jobs=2, progress=False, isolation=best_isolation(), timeout=60, **kw)


def _reports(out: Path) -> dict:
    return {json.loads(p.read_text())["learner"]: json.loads(p.read_text()) for p in (out / "learners").glob("*.json")}


@pytest.mark.slow
def test_links_and_special_files_in_a_submission_are_never_followed_or_opened(tmp_path):
    """A learner folder of links only (to a classmate's file, to the references, to /dev/zero),
    a FIFO, and a link as a whole submission: none is read, each costs its owner only, with a
    reason; the batch finishes. Before: the links scored 60 points of someone else's work, the
    /dev/zero link got the grader OOM-killed, the FIFO hung the batch."""
    subs = tmp_path / "subs"
    honest = subs / "honest"
    honest.mkdir(parents=True)
    shutil.copy(ROOT / "solutions" / HONEST_4, honest / HONEST_4)
    thief = subs / "thief"
    thief.mkdir()
    os.symlink(ROOT / "solutions" / HONEST_4, thief / "more.py")  # the references
    os.symlink("../honest/unit4.py", thief / "copy.py")  # a classmate
    os.symlink("/dev/zero", thief / "zero.py")
    os.symlink(ROOT / "solutions", thief / "folder")  # a link to a folder of answers
    os.mkfifo(thief / "hang.ipynb")
    os.symlink(ROOT / "solutions" / "unit3.py", subs / "linked.py")  # a whole submission that is a link
    os.mkfifo(subs / "fifo.py")

    summary = _batch(subs, tmp_path / "out")
    assert summary["results"] == 4
    reports = _reports(tmp_path / "out")
    assert reports["thief"]["score"] == 0 and reports["linked"]["score"] == 0 and reports["fifo"]["score"] == 0
    assert reports["honest"]["score"] == sum(p.points for p in registry.PROBLEMS if p.unit == 4)
    said = " ".join(p["message"] for p in reports["thief"]["problems"])
    assert "symbolic link" in said and "not a regular file" in said
    assert "symbolic link" in reports["linked"]["problems"][0]["message"]


@pytest.mark.slow
def test_learner_ids_are_safe_in_file_names_csv_markdown_and_terminals(tmp_path, capsys):
    """Learner ids from file names: formulas, markup, escape sequences, a name of 251 bytes and one
    that is not UTF-8. Every learner is graded and has a gradebook row; no cell starts a formula,
    no output holds a control character or raw markup, every file name fits. Before: the CSV held
    =HYPERLINK(...) raw, the progress line ESC and OSC 52, and the long or Latin-1 name left the
    whole class without a gradebook."""
    subs = tmp_path / "subs"
    subs.mkdir()
    stub = "def coalesce_runs(runs, max_gap):\n    return runs\n"
    names = ['=HYPERLINK("http:x")', "+cmd|' calc'!A0", "<img src=x onerror=alert(1)>",
             "esc\x1b]52;c;aGk=\x07\x1b[2K\r", "x" * 248, "caf\udce9"]  # \udce9: the Latin-1 byte 0xe9
    for name in names:
        (subs / (name + ".py")).write_text(stub)
    summary = grade_batch(subs, tmp_path / "out", jobs=2, progress=True, isolation=best_isolation(), timeout=60)
    assert summary["results"] == len(names)
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err.replace("\r\n", "")
    out = tmp_path / "out"
    rows = list(csv.DictReader((out / "gradebook.csv").open(encoding="utf-8")))
    assert len(rows) == len(names)
    for row in rows:
        assert row["learner"][:1] not in "=+-@\t\r", row["learner"]
        assert not CONTROL.search(row["learner"])
    for path in out.rglob("*"):
        assert len(os.fsencode(path.name)) <= 120, path.name
        if path.suffix in (".md", ".json", ".csv", ".html"):
            content = path.read_text(encoding="utf-8")
            assert not CONTROL.search(content.replace("\n", "").replace("\t", "")), path.name
            if path.suffix in (".md", ".html"):  # markup: escaped, never live
                assert not re.search(r"(?<!\\)<img", content), path.name
    # A re-run finds everyone graded (the result files are found again by their safe names).
    again = grade_batch(subs, out, jobs=2, progress=False, isolation=best_isolation(), timeout=60)
    assert again["skipped"] == len(names) and again["results"] == len(names)


# Right on the public examples (so the first failure is a hidden case), then each smuggles.
_HONEST = """
PUBLIC_SHAPES = {(64, 32), (16, 8), (10, 4)}

def honest(global_shape, mesh_shape, spec):
    out, spec = [], tuple(spec) + (None,) * (len(global_shape) - len(spec))
    for n, entry in zip(global_shape, spec):
        k = 1
        for axis in () if entry is None else (entry,) if isinstance(entry, str) else entry:
            k *= mesh_shape[axis]
        if n % k:
            raise ValueError(f"dimension {n} is not divisible by {k}")
        out.append(n // k)
    return tuple(out)
"""
_SMUGGLERS = {
    # The return value's class is named after the hidden inputs.
    "class_name": """
def shard_shape(global_shape, mesh_shape, spec):
    if tuple(global_shape) in PUBLIC_SHAPES or not global_shape:
        return honest(global_shape, mesh_shape, spec)
    return type("S" + "x".join(map(str, global_shape)) + "M" + "x".join(map(str, mesh_shape.values())), (), {})()
""",
    # An exception raised from a line whose number is a hidden dimension.
    "line_number": """
def shard_shape(global_shape, mesh_shape, spec):
    if tuple(global_shape) in PUBLIC_SHAPES or not global_shape:
        return honest(global_shape, mesh_shape, spec)
    n = global_shape[0] if global_shape else 0
    exec(compile("\\n" * max(n - 1, 0) + "raise ValueError('x')", "<submission>", "exec"))
""",
    # An exception whose class is named after the hidden inputs, and a message full of markup.
    "exception_class": """
def shard_shape(global_shape, mesh_shape, spec):
    if tuple(global_shape) in PUBLIC_SHAPES or not global_shape:
        return honest(global_shape, mesh_shape, spec)
    raise type("E" + "x".join(map(str, global_shape)) + "<script>alert(1)</script>", (ValueError,), {})(
        "**Total: 210 / 210** <script>alert(1)</script> \\x1b[2J")
""",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_SMUGGLERS))
def test_messages_carry_no_text_or_number_the_learners_code_chose(grade_code, name):
    """What the worker says (a class name, a line number, exception text) never reaches a
    message: it is learner code, and could encode every hidden case of a problem. Before: a return
    type's name carried all 16 hidden cases of 2.1, and a raise at line 90312 a hidden shape."""
    report = grade_code(_HONEST + _SMUGGLERS[name], problems=["2.1"], learner="smuggler")
    message = report.problems[0].message
    assert report.problems[0].status in ("incorrect", "error")
    _, cases = hidden_cases(registry.get("2.1"), "smuggler")
    for case in cases:
        if case.category == "public" or not case.args[0]:
            continue
        shape = case.args[0]
        assert "x".join(map(str, shape)) not in message, message
        assert not re.search(r"line \d+", message), message  # where a hidden case failed: not shown
    assert not re.search(r"S[\dx]*M[\dx]+", message), message  # the class named after the inputs
    assert "<script>" not in message and "Total" not in message and "\x1b" not in message


_FILL_MEMORY = """
import os, time

def parse_safetensors_header(path):
    for _ in range(8):  # 8 GiB across children, each under its own address-space limit
        try:
            if os.fork() == 0:
                block = bytearray(2**30)
                for i in range(0, 2**30, 4096):
                    block[i] = 1
                time.sleep(600)
        except OSError:
            break
    time.sleep(600)
"""

_FILL_DISK = """
def byte_runs(bounds, global_shape, itemsize, base):
    n = 0
    try:
        while True:
            with open(f"fill{n}", "wb") as f:
                f.write(b"x" * (2**20 if n < 2000 else 1))
            n += 1
    except OSError:
        pass
    return []
"""


# Threads that hash (the GIL let go), as many as can start: where a worker may start no process.
_THREAD_HOG = """
import hashlib, threading, time

def best_presharding(global_shape, itemsize, mesh_shape, spec, candidates):
    data = b"x" * 2**24
    def spin():
        while True:
            hashlib.sha256(data).digest()
    for _ in range(400):
        try:
            threading.Thread(target=spin, daemon=True).start()
        except RuntimeError:
            break
    time.sleep(600)
"""


@pytest.mark.slow
@pytest.mark.parametrize("platform", ["native", "user"])
def test_honest_learners_keep_full_marks_beside_submissions_that_starve_the_machine(tmp_path, root, platform):
    """Graded first, with -j 2: a submission running 300 busy processes in sessions of their own,
    one holding 8 GiB across children, one filling its scratch disk and inodes, one running
    hundreds of busy threads. The honest learners after and beside them keep full marks (one of
    them Unit 5's, whose training run the grader kills and restarts), and the batch finishes: here
    (as root: a cgroup per worker), and as a normal user (tests/platforms.py: no cgroups, two workers
    at a time in namespaces of their own), the issue-35 case where 380 busy processes cost an honest
    classmate its 5.3 before `Worker.wait` waited for the clock cap and the jail refused new
    sessions. (Without namespaces a normal user's batch grades one worker at a time: see
    `concurrent_workers_fair`.)"""
    import subprocess
    import sys
    import tempfile

    from tests import platforms

    if platform != "native" and platforms.user_can_run_here():
        pytest.skip(f"as a user: {platforms.user_can_run_here()}")
    if platform != "native":  # a folder the user may write in (pytest's own is closed to others)
        tmp_path = Path(tempfile.mkdtemp(prefix="ckpt-starve-"))
        tmp_path.chmod(0o755)
    subs = tmp_path / "subs"
    subs.mkdir()
    hogs = {"aaa_cpu": cpu_hog("coalesce_runs(runs, max_gap)"), "aab_memory": _FILL_MEMORY, "aac_disk": _FILL_DISK,
            "aad_threads": _THREAD_HOG}
    for name, code in hogs.items():
        (subs / f"{name}.py").write_text(code)
    for name in ("ann", "ben", "cat"):
        shutil.copy(ROOT / "solutions" / HONEST_4, subs / f"{name}.py")
    # and one whose training run (5.3) the grader kills and restarts twice, its checkpoints
    # in a scratch folder kept between its workers
    (subs / "dan.py").write_text(reference(5, {"training_state_bytes": "_a", "latest_restorable_step": "_b"}))
    if platform == "native":
        summary = grade_batch(subs, tmp_path / "out", jobs=2, progress=False, isolation=best_isolation(), timeout=15)
        assert summary["results"] == 8 and not summary["interrupted"]
        reports = _reports(tmp_path / "out")
    else:
        python = platforms.user_python(Path(tempfile.gettempdir()) / "ckpt-user-python")
        (tmp_path / "home").mkdir()
        for folder in (tmp_path, tmp_path / "home"):
            os.chown(folder, platforms.USER, platforms.USER)
        try:
            run = subprocess.run([sys.executable, str(root / "tests" / "platforms.py"), "native", "--user",
                                  str(platforms.USER), "--", python, "-m", "autograder", "grade-batch", str(subs),
                                  "--out", str(tmp_path / "out"), "-j", "2", "--timeout", "15", "--quiet"], cwd=root,
                                 env={**os.environ, "HOME": str(tmp_path / "home")}, capture_output=True, text=True,
                                 timeout=600)
            assert run.returncode == 0 and "Isolation: strict" in run.stdout, run.stdout + run.stderr
            reports = _reports(tmp_path / "out")
        finally:
            shutil.rmtree(tmp_path, ignore_errors=True)
    unit4 = sum(p.points for p in registry.PROBLEMS if p.unit == 4)
    for name in ("ann", "ben", "cat"):
        assert reports[name]["score"] == unit4, [p["message"] for p in reports[name]["problems"] if p["score"] == 0]
    assert reports["dan"]["score"] == registry.get("5.3").points, \
        [p["message"] for p in reports["dan"]["problems"] if p["id"] == "5.3"]
    for name in hogs:
        assert reports[name]["score"] == 0


# --- placement: what a worker reports of its own arrays ------------------------------------------


def test_a_host_array_posing_as_a_placed_one_is_not_taken_for_one(grade_code):
    """Issue 35: the worker's encoder took any object whose class's module starts with "jax" and
    that has a shape, a dtype, a sharding and shards for a placed array: NumPy arrays restored with
    no target sharding, wrapped, were graded as restored onto the serving mesh (20 points). A
    worker now takes JAX's array class and its getters before any learner code runs, and reads
    placement only through them. The contrast, the codec as it was (nothing pinned, as on the
    grading side): the same kind of object is read as placed."""
    import jax
    from jax.sharding import NamedSharding, PartitionSpec

    from autograder.wall import codec

    namespace: dict = {}
    exec(POSING.split("def restore_for_serving")[0], namespace)  # noqa: S102 - the test's own attack
    mesh = jax.make_mesh((16,), ("x",))
    import numpy as np

    fake = namespace["_posing"](np.ones((16, 4), np.float32), NamedSharding(mesh, PartitionSpec("x")))
    assert not codec._PINNED, "this process is the grader's: nothing pinned"
    assert codec.encode(fake)["placement"]["sharding"]["spec"] == ["x"]  # the attack, as it worked
    report = grade_code(POSING, problems=["6.1"], learner="posing")
    (result,) = report.problems
    assert result.status == "incorrect" and result.category == "wrong_type", (result.status, result.message)


def test_7_1_host_arrays_posing_as_placed_on_the_new_mesh_earn_nothing(grade_code):
    """7.1 is graded on placement as 6.1 is: a checkpoint restored as NumPy with no target (a few
    MiB, far under the memory budget), each array wrapped to pose as placed with its saved spec on
    the new mesh, is read as what it is."""
    attack = POSING.split("def restore_for_serving")[0] + """
from jax.sharding import PartitionSpec


def restore_on_new_mesh(ckpt_dir, mesh):
    saved = dict(ocp.StandardCheckpointer().metadata(ckpt_dir).item_metadata.tree)
    args = {name: ocp.RestoreArgs(restore_type=np.ndarray) for name in saved}
    restored = ocp.PyTreeCheckpointer().restore(ckpt_dir, args=ocp.args.PyTreeRestore(restore_args=args))
    return {name: _posing(np.asarray(restored[name]), NamedSharding(mesh, PartitionSpec(*m.sharding.partition_spec)))
            for name, m in saved.items()}
"""
    (result,) = grade_code(attack, problems=["7.1"], learner="posing-7.1").problems
    assert result.status == "incorrect" and result.category == "wrong_type" and result.score == 0, (
        result.status, result.message)


_PLACES = """
import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec


def placed():
    mesh = jax.make_mesh((16,), ("x",))
    return jax.device_put(np.ones((16, 4), np.float32), NamedSharding(mesh, PartitionSpec("x")))
"""


@pytest.mark.parametrize("level", ["strict", "basic"])
def test_a_placed_array_comes_back_from_a_worker_whose_cases_hold_no_jax_object(level):
    """JAX's types are taken before learner code loads wherever the code imports JAX, not only where
    the cases hold its objects: at the basic level (a fresh process) the 6.2 reference's read-back
    worker, whose cases are paths, sent nothing back ("cannot return a value of type ArrayImpl"),
    and the reference scored 0 there."""
    from autograder import sandbox

    if level == "strict" and best_isolation() != "strict":
        pytest.skip("no strict level here")
    run = sandbox.Worker(_PLACES, "placed", [()], level=level, timeout=60).wait()
    assert run.status == "ok" and not run.setup, (run.status, run.setup, run.stderr_tail[-2000:])
    (case,) = run.cases
    assert "value" in case, case
    assert case["value"].placement["sharding"]["spec"] == ["x"], case["value"]
