"""Grading inside the container instructors grade in: Gradescope's default is 768 MB of memory and
half a CPU. Emulated with cgroups below this process's own (as root: cgroup v1 here, v2 where the
machine has it; elsewhere each test says why it skips), with every process of the grader inside,
its workers' own cgroups nested in it. The grader reads those limits and plans to fit; a worker
the container's memory kills is tried again alone, then reported as the grader's failure (never
as the learner's), and such a run is no attempt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox import cgroups

ROOT = Path(__file__).resolve().parents[2]
GRADESCOPE_MEMORY, GRADESCOPE_CPUS = 768 * 2**20, 0.5


def _skip_without_containers() -> None:
    folders, why = cgroups.make_container(64 * 2**20, 0.5)
    cgroups.remove_container(folders)
    if not folders:
        pytest.skip(f"no container can be emulated here: {why}")


def _inside(memory: int | None, cpus: float | None, code: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh Python inside a container of those limits (every process it starts too)."""
    folders, why = cgroups.make_container(memory, cpus)
    assert folders, why
    try:
        return subprocess.run(cgroups.command_inside(folders, [sys.executable, "-c", code]), cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
    finally:
        cgroups.remove_container(folders)


def test_the_grader_reads_its_containers_limits_and_runs_one_worker_at_a_time_there():
    _skip_without_containers()
    code = ("import json\nfrom autograder.sandbox import container_limits\nfrom autograder.engine.grade import fitted_jobs\n"
            "print(json.dumps([*container_limits(), fitted_jobs(), fitted_jobs(4)]))")
    memory, cpus, jobs, asked = json.loads(_inside(GRADESCOPE_MEMORY, GRADESCOPE_CPUS, code).stdout)
    assert (memory, cpus, jobs, asked) == (GRADESCOPE_MEMORY, GRADESCOPE_CPUS, 1, 1)
    # The control: outside, the machine's memory and CPUs.
    memory, cpus = cgroups.container_limits()
    assert memory > GRADESCOPE_MEMORY and cpus >= 1


_HOG = """
import numpy as np
def dense_checkpoint_accounting(seed, x, num_shards, features):
    held = np.ones(KIB * 1024 // 8)  # real pages: under its own 4 GiB limit, over the container's memory
    return np.array([held.sum(), 0.0])
"""
# Ends as a killed worker looks (exit status 137, as its launcher reports a SIGKILL), with no OOM kill.
_SELF_KILLED = """
import os
def dense_checkpoint_accounting(seed, x, num_shards, features):
    os._exit(128 + 9)
"""


def _grade_inside(tmp_path, source: str, memory: int | None, crowded_mib: int = 0) -> dict:
    """Grade ``source`` for 1.1 in a fresh grader inside a container of ``memory`` bytes, beside a
    process of the container's holding ``crowded_mib`` MiB that the OOM killer spares (the machine
    busy with something else)."""
    path = tmp_path / "answer.py"
    path.write_text(source)
    code = ("import json, subprocess, sys\nfrom autograder.engine.grade import grade\n"
            "hog = subprocess.Popen([sys.executable, '-c', 'import numpy as np, sys, time; "
            "open(\\'/proc/self/oom_score_adj\\', \\'w\\').write(\\'-1000\\'); "
            f"held = np.ones({crowded_mib} * 2**20 // 8); print(1, flush=True); time.sleep(600)'], stdout=subprocess.PIPE)\n"
            "hog.stdout.readline()\n"
            f"r = grade([{str(path)!r}], 'ada', problems=['1.1'])\n"
            "hog.kill()\n"
            "print(json.dumps({**r.problems[0].__dict__}))")
    out = _inside(memory, None, code)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.splitlines()[-1])


def test_a_worker_the_containers_memory_kills_is_the_graders_failure_and_no_attempt(tmp_path):
    """A learner holding 300 MiB (under its own 4 GiB limit) in a 1 GiB container that something
    else fills (700 MiB, spared by the OOM killer): the kernel's OOM killer ends the worker, it is
    tried again alone, and ends the same way: the learner is told it is the grader's failure
    (category ``grader``, which the instructor's summary counts), and Gradescope's results say the
    run is no attempt. Controls: with room, the same code is graded on its value; a worker that
    ends itself as a killed one looks is the learner's own crash; a worker that held over half the
    container itself (1.5 GiB) is the learner's, and so is one over its own limit."""
    _skip_without_containers()
    modest = _HOG.replace("KIB", str(300 * 1024))
    killed = _grade_inside(tmp_path, modest, 2**30, crowded_mib=700)
    assert (killed["status"], killed["category"]) == ("error", "grader"), killed
    assert "killed by this machine's memory limit" in killed["message"] and "not your code's" in killed["message"]
    roomy = _grade_inside(tmp_path, modest, 4 * 2**30, crowded_mib=700)
    assert roomy["category"] not in ("grader", "crashed", "memory"), roomy
    itself = _grade_inside(tmp_path, _SELF_KILLED, 2**30)
    assert (itself["status"], itself["category"]) == ("error", "crashed"), itself
    hog = _grade_inside(tmp_path, _HOG.replace("KIB", str(1536 * 1024)), 2**30)
    assert (hog["status"], hog["category"]) == ("error", "memory") and "over half of what" in hog["message"], hog
    over = _grade_inside(tmp_path, _HOG.replace("KIB", str(5 * 2**20)), 8 * 2**30)
    assert over["category"] in ("crashed", "memory"), over
    from autograder.exports.gradescope import COUNTED, results_json

    report = {"score": 0.0, "max_score": 10.0, "problems": [{**killed, "function": "dense_checkpoint_accounting"}]}
    results = results_json(report, 1.0, grader_failed=["1.1"])
    assert results["extra_data"][COUNTED] is False and "does not count as an attempt" in results["output"]
    assert results_json(report, 1.0)["extra_data"][COUNTED] is True  # (the control: a failure of the learner's own counts)


# Fills its scratch folder (a tmpfs of its own, cwd) with 480 MiB, in files under the file-size limit,
# then holds 300 MiB: over a 768 MiB container, with the grader's own.
_TMPFS_HOG = """
import numpy as np
def dense_checkpoint_accounting(seed, x, num_shards, features):
    chunk = b"\\1" * (16 * 2**20)
    for i in range(2):
        with open(f"fill-{i}", "wb") as f:
            for _ in range(15):  # 240 MiB a file
                f.write(chunk)
    held = np.ones(300 * 2**20 // 8)
    return np.array([held.sum(), 0.0])
"""


def test_memory_a_learner_fills_in_its_scratch_tmpfs_is_the_learners_not_the_graders(tmp_path):
    """A hostile holdout's: a worker that writes 480 MiB into its scratch (a tmpfs, charged to the
    container, in no process's resident memory) and holds 300 MiB, in Gradescope's 768 MiB container:
    the OOM killer ends it, and the grader, which counted the tmpfs's pages with the worker's memory,
    says it held over half the container itself (its own doing: an attempt that counts). Before, it
    read as the grader's failure, no attempt counted, twice. The control: the same 300 MiB with nothing
    in the scratch is graded on its value."""
    _skip_without_containers()
    filled = _grade_inside(tmp_path, _TMPFS_HOG, GRADESCOPE_MEMORY)
    assert (filled["status"], filled["category"]) == ("error", "memory"), filled
    assert "over half of what" in filled["message"], filled["message"]
    control = _grade_inside(tmp_path, _HOG.replace("KIB", str(300 * 1024)), GRADESCOPE_MEMORY)
    assert control["category"] not in ("grader", "crashed", "memory"), control


WHOLE_COURSE = "test_the_references_whole_submission_at_full_marks_inside_gradescopes_default_container"
_WHOLE: dict = {}  # the whole course's try, once started: its process, folder and output files


def start_whole_course_try() -> None:
    """Start the whole course's try (the zip built, then `gradescope-try` on every unit's reference) now,
    in the background: its container holds it to half a CPU for minutes, so the suite runs beside it
    (tests/conftest.py starts it once the test that reads it is collected), and the test waits for it.
    Nothing where no container can be emulated (the test says why it skips)."""
    import os
    import tempfile

    from autograder import registry

    if _WHOLE:
        return
    folders, _ = cgroups.make_container(64 * 2**20, 0.5)
    cgroups.remove_container(folders)
    if not folders:
        return
    tmp = Path(tempfile.mkdtemp(prefix="ckpt-whole-course-try-"))
    zip_path, tree = tmp / "course.zip", tmp / "tree"
    try_command = [sys.executable, "-m", "autograder", "gradescope-try", str(zip_path),
                   *[str(ROOT / "solutions" / f"unit{u}.py") for u in registry.units()], "--tree", str(tree),
                   "--memory", "768M", "--cpus", "0.5"]
    script = ("import subprocess, sys\nfrom autograder.cli import main\n"
              f"built = main(['gradescope', {str(zip_path)!r}])\n"
              "if built != 0:\n    sys.exit(f'the zip was not built: exit code {built}')\n"
              f"sys.exit(subprocess.run({try_command!r}).returncode)\n")
    stdout, stderr = open(tmp / "stdout", "w"), open(tmp / "stderr", "w")  # noqa: SIM115 - closed by finish
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    _WHOLE.update(tmp=tmp, zip=zip_path, tree=tree, files=(stdout, stderr),
                  proc=subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, env=env, stdout=stdout,
                                        stderr=stderr, start_new_session=True))


def stop_whole_course_try() -> None:
    """At the session's end: the try stopped if still running (a test run cut short), its folder removed."""
    from tests.background import end_run

    if not _WHOLE:
        return
    end_run(_WHOLE["proc"], _WHOLE["files"], _WHOLE["tmp"])
    _WHOLE.clear()


def test_the_references_whole_submission_at_full_marks_inside_gradescopes_default_container():
    """`gradescope-try ZIP ... --memory 768M --cpus 0.5`, as an instructor would try it: the whole
    course's references, graded at full marks, within Gradescope's 10 minutes, the grader's own
    memory under the container's; the zip says what it needs (GRADESCOPE.md, from the profile
    bench/bench_container.py measured), for every unit. (Started when collected: see start_whole_course_try.)"""
    _skip_without_containers()
    from autograder import registry
    from autograder.exports.gradescope import GUIDE, PROFILE

    start_whole_course_try()  # (already started, unless this test was not collected first)
    proc, zip_path, tree = _WHOLE["proc"], _WHOLE["zip"], _WHOLE["tree"]
    returncode = proc.wait(timeout=900)
    for f in _WHOLE["files"]:
        f.flush()
    out = subprocess.CompletedProcess(proc.args, returncode, (_WHOLE["tmp"] / "stdout").read_text(),
                                      (_WHOLE["tmp"] / "stderr").read_text())
    assert out.returncode == 0, out.stderr[-3000:]
    results = json.loads((tree / "results" / "results.json").read_text())
    measured = json.loads((tree / "results" / "container.json").read_text())
    assert results["score"] == sum(p.points for p in registry.PROBLEMS), [t for t in results["tests"] if t["score"] < t["max_score"]]
    assert measured["seconds"] < 600 and 0 < measured["own_peak"] < GRADESCOPE_MEMORY, measured
    assert "Inside 768 MiB and 0.5 CPUs" in out.stdout
    import zipfile

    guide = zipfile.ZipFile(zip_path).read(GUIDE).decode()
    profile = json.loads(PROFILE.read_text())
    fits = profile["whole"]["own_peak_mib"] < 0.85 * profile["memory_mib"]  # (what the guide must say of it)
    assert ("Gradescope's defaults fit" in guide) == fits and ("Raise the autograder's memory" in guide) != fits, guide
    assert "units " + ", ".join(map(str, registry.units())) in guide
    assert set(json.loads(PROFILE.read_text())["units"]) == {str(u) for u in registry.units()}


def test_a_worker_tried_again_runs_alone_and_those_after_it_wait():
    """The room workers run in: one tried again alone waits for those inside to leave, and no worker
    starts beside it meanwhile (control: two together are inside at once)."""
    import threading

    from autograder.engine.grade import _Room

    room, log, release = _Room(), [], {name: threading.Event() for name in ("a", "b", "solo", "late")}

    def work(name: str, alone: bool) -> None:
        with room.alone() if alone else room.together():
            log.append(f"in {name}")
            release[name].wait(30)
            log.append(f"out {name}")

    def start(name: str, alone: bool = False) -> threading.Thread:
        thread = threading.Thread(target=work, args=(name, alone))
        thread.start()
        return thread

    threads = [start("a"), start("b")]
    while log.count("in a") + log.count("in b") < 2:
        threading.Event().wait(0.01)
    assert sorted(log) == ["in a", "in b"]  # together: both inside at once
    threads.append(start("solo", alone=True))
    while not room.alone_wanted:
        threading.Event().wait(0.01)
    threads.append(start("late"))
    threading.Event().wait(0.3)
    assert "in solo" not in log and "in late" not in log  # solo waits for a and b; late waits for solo
    release["a"].set(), release["b"].set()
    while "in solo" not in log:
        threading.Event().wait(0.01)
    threading.Event().wait(0.2)
    assert "in late" not in log  # nothing beside the worker alone
    release["solo"].set(), release["late"].set()
    for thread in threads:
        thread.join(30)
    assert log.index("out solo") < log.index("in late")
