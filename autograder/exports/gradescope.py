"""Gradescope: ``python -m autograder gradescope OUT.zip`` writes the autograder zip an instructor
uploads; Gradescope runs it, at any class size, on its own machines.

Inside the zip: ``setup.sh`` (installs the newest Python the course runs on and the course, pinned, into
``/autograder/venv``), ``run_autograder`` (grades ``/autograder/submission`` and writes
``/autograder/results/results.json``), and the course's code with its references and hidden
tests. Learners never see the zip; results show only the grader's own messages.
"""

from __future__ import annotations

import json
import os
import sys
import time
import zipfile
from pathlib import Path

from autograder import registry, stack, text
from autograder.outputs import atomic_write, replacing


def setup_sh() -> str:
    """Gradescope's ``setup.sh``: the newest Python the course runs on (from pyproject.toml), and the
    course with its pinned packages into ``/autograder/venv``."""
    python = f"python{stack.newest_python()}"
    return f"""\
#!/usr/bin/env bash
# Gradescope runs this once, as root, when the autograder is built (Ubuntu images).
# The course runs on {stack.describe()}.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
if ! command -v {python} >/dev/null; then
  apt-get update
  apt-get install -y software-properties-common
  add-apt-repository -y ppa:deadsnakes/ppa
  apt-get update
  apt-get install -y {python} {python}-venv
fi
{python} -m venv /autograder/venv
/autograder/venv/bin/python -m pip install --upgrade pip
/autograder/venv/bin/python -m pip install /autograder/source
"""


RUN_AUTOGRADER = """\
#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT and PYTHON can be overridden to try it
# locally against a fake /autograder tree. Learner code runs at the strict isolation level, and no
# submission is graded where the container cannot give it: CKPT_ISOLATION=basic (here, or in the
# assignment's environment) grades with resource limits only (see SECURITY.md).
ROOT="${AUTOGRADER_ROOT:-/autograder}"
PY="${PYTHON:-$ROOT/venv/bin/python}"
cd "$ROOT/source" && JAX_PLATFORMS=cpu "$PY" -m autograder gradescope-run --root "$ROOT" \\
  --isolation "${CKPT_ISOLATION:-strict}"
"""

_FILES = ("pyproject.toml", "README.md")
_PACKAGES = ("ckptlab", "autograder", "solutions")
VISIBILITY = ("hidden", "after_due_date", "after_published", "visible")


ASSIGNMENT = "assignment.json"  # in the zip: the problems this assignment grades
GUIDE = "GRADESCOPE.md"  # in the zip: what the assignment needs of Gradescope's container
# What bench/bench_container.py measured, the references graded inside Gradescope's default container.
PROFILE = Path(__file__).with_name("gradescope_profile.json")
DEFAULT_MEMORY_MIB, DEFAULT_CPUS, DEFAULT_TIMEOUT_S = 768, 0.5, 600


def container_needs(problems) -> str:
    """What grading ``problems`` needs of Gradescope's container, from the profile measured here:
    the references' time at half a CPU and the grader's own memory at its peak (each unit, or the
    whole course), whether Gradescope's defaults fit, and the longest a submission can take."""
    from autograder.limits import WALL_FACTOR

    units = sorted({p.unit for p in problems})
    try:
        profile = json.loads(PROFILE.read_text())
        if set(units) == set(registry.units()):
            seconds, peak = profile["whole"]["seconds"], profile["whole"]["own_peak_mib"]
        else:
            seconds = sum(profile["units"][str(u)]["seconds"] for u in units)
            peak = max(profile["units"][str(u)]["own_peak_mib"] for u in units)
    except (OSError, ValueError, KeyError):
        return "No measured profile for these problems (run python bench/bench_container.py --write)."
    from autograder.engine.preempted import PROBLEM_CLOCK

    # A problem of killed or signalled runs (5.3, 8.3) gets PROBLEM_CLOCK on the clock for all its runs.
    worst = sum(p.timeout for p in problems if p.mode != "preempted")
    clock = WALL_FACTOR * worst + sum(PROBLEM_CLOCK for p in problems if p.mode == "preempted")
    fits = peak <= 0.85 * DEFAULT_MEMORY_MIB and seconds <= DEFAULT_TIMEOUT_S / 2
    memory = max(DEFAULT_MEMORY_MIB, -(-int(peak / 0.85) // 256) * 256)
    lines = [
        f"Measured on {profile['measured']} ({profile['machine']}), inside Gradescope's default container "
        f"({DEFAULT_MEMORY_MIB} MB of memory, {DEFAULT_CPUS} CPU): the reference solutions of unit"
        f"{'s' * (len(units) > 1)} {', '.join(map(str, units))} graded in {seconds:.0f} s, the grader's own memory "
        f"peaking at {peak} MiB ({peak / DEFAULT_MEMORY_MIB:.0%} of the container's).",
        ("Gradescope's defaults fit: nothing to change." if fits else
         f"Raise the autograder's memory to at least {memory} MB in the assignment's settings."),
        f"A submission whose every problem runs to its time limit takes up to {worst / 60:.0f} minutes of CPU time "
        f"({clock / 60:.0f} on the clock at most, each problem of killed or signalled runs, 5.3 and 8.3, "
        f"{PROBLEM_CLOCK / 60:.0f} minutes on the clock for all its runs); Gradescope stops a run at its timeout "
        f"({DEFAULT_TIMEOUT_S // 60} minutes by default) with no results, which is no attempt: raise the timeout "
        "where such submissions must still be graded.",
        "A worker the container's memory kills is tried again alone, then reported to the learner as the "
        "grader's failure (never their code's), and that run is no attempt. Try the zip under these limits: "
        "python -m autograder gradescope-try ZIP NOTEBOOK --memory 768M --cpus 0.5 (as root).",
    ]
    return "\n".join(lines)



def build_zip(root: Path, out: Path, problems=None, visibility: str = "visible", max_attempts: int | None = None) -> list[str]:
    """Write the Gradescope autograder zip for ``problems`` (default: every problem); return the
    names inside it. ``visibility``: when learners see each problem's result (its hidden cases'
    verdict, message and points): one of :data:`VISIBILITY`. ``max_attempts``: graded submissions
    per learner (a run the grader itself failed never counts); beyond it a submission is not graded
    and keeps the last graded one's results."""
    root, out = Path(root), Path(out)
    if visibility not in VISIBILITY:
        raise ValueError(f"visibility {visibility!r}: choose one of {', '.join(VISIBILITY)}")
    if max_attempts is not None and max_attempts < 1:
        raise ValueError(f"max_attempts {max_attempts}: give at least 1 (or none, for no limit)")
    chosen = [p.id for p in (problems or registry.PROBLEMS)]
    names = []
    with replacing(out) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as z:
        for name, text in (("setup.sh", setup_sh()), ("run_autograder", RUN_AUTOGRADER)):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o755 << 16  # executable, as Gradescope requires
            z.writestr(info, text)
            names.append(name)
        for name in _FILES:
            z.write(root / name, name)
            names.append(name)
        settings = {"problems": chosen}
        if visibility != "visible":
            settings["visibility"] = visibility
        if max_attempts is not None:
            settings["max_attempts"] = int(max_attempts)
        z.writestr(ASSIGNMENT, json.dumps(settings, indent=1) + "\n")
        names.append(ASSIGNMENT)
        chosen_problems = [registry.get(pid) for pid in chosen]
        z.writestr(GUIDE, "# What this autograder needs of Gradescope\n\n"
                   + container_needs(chosen_problems).replace("\n", "\n\n") + "\n")
        names.append(GUIDE)
        for package in _PACKAGES:
            for path in sorted((root / package).rglob("*.py")):
                if "__pycache__" in path.parts:
                    continue
                arc = path.relative_to(root).as_posix()
                z.write(path, arc)
                names.append(arc)
    return names


def _learner_id(root: Path) -> str:
    """Gradescope's submission metadata names the learner; the id chooses their hidden cases."""
    try:
        meta = json.loads((root / "submission_metadata.json").read_text())
        users = meta.get("users") or []
        if users:
            user = users[0]
            return str(user.get("id") or user.get("email") or user.get("name"))
        return str(meta.get("id", "gradescope"))
    except (OSError, ValueError, AttributeError):
        return "gradescope"


def settings(source: Path) -> dict:
    """The zip's ``assignment.json``: ``problems`` (None: every problem), ``visibility``,
    ``max_attempts`` (None: no limit)."""
    try:
        saved = json.loads((source / ASSIGNMENT).read_text())
    except FileNotFoundError:
        saved = {}
    return {"problems": [registry.get(pid).id for pid in saved["problems"]] if "problems" in saved else None,
            "visibility": saved.get("visibility", "visible"), "max_attempts": saved.get("max_attempts")}


def assigned(source: Path) -> list[str] | None:
    """The problem ids the zip's ``assignment.json`` names (None, every problem, where it has none)."""
    return settings(source)["problems"]


COUNTED = "ckpt_graded"  # results.json's extra_data: whether this run graded the submission (an attempt)


def _counted(previous: dict) -> bool:
    """Whether a previous submission was an attempt: graded by this autograder (its results say so).
    One the grader failed on, could not isolate, or refused over the limit is not; nor one with
    no results at all (Gradescope's own failure)."""
    results = previous.get("results") if isinstance(previous, dict) else None
    extra = results.get("extra_data") if isinstance(results, dict) else None
    return isinstance(extra, dict) and extra.get(COUNTED) is True


def previous_attempts(root: Path) -> list[dict]:
    """The previous submissions that count as attempts, oldest first (``submission_metadata.json``)."""
    try:
        meta = json.loads((root / "submission_metadata.json").read_text())
        previous = meta.get("previous_submissions") or []
    except (OSError, ValueError, AttributeError):
        return []
    counted = [p for p in previous if _counted(p)] if isinstance(previous, list) else []
    return sorted(counted, key=lambda p: str(p.get("submission_time", "")))  # (whatever order the list has)


def _over_the_limit(attempts: list[dict], limit: int, seconds: float) -> dict:
    """The results of a submission beyond the limit: not graded; the last graded one's results
    kept (Gradescope takes the latest submission's), with a message saying so."""
    last = dict(attempts[-1]["results"])
    note = (f"Not graded: you have used your {limit} graded attempt{'s' * (limit != 1)} for this assignment "
            "(runs the autograder itself failed on are not counted). The results below are those of your last "
            "graded submission, and its score stands.")
    last["output"] = note + ("\n\n" + last["output"] if last.get("output") else "")
    last["execution_time"] = round(seconds)
    last["extra_data"] = {**last.get("extra_data", {}), COUNTED: False}
    return last


def try_locally(zip_path: Path, submissions: list[Path], tree: Path, learner: str = "local-test",
                isolation: str | None = None, previous: list[dict] | None = None,
                memory: int | None = None, cpus: float | None = None) -> dict:
    """Run the zip as Gradescope would, on this machine: build the ``/autograder`` tree Gradescope
    makes in ``tree`` (``source/`` the unzipped autograder, ``submission/`` the files,
    ``submission_metadata.json``, listing ``previous`` results as earlier submissions), run its
    ``run_autograder`` with this Python, and return ``results/results.json``. ``memory`` (bytes) and
    ``cpus``: run it inside those limits, as Gradescope's container sets them (768 MB and half a
    CPU by default), emulated with cgroups (root only; :func:`autograder.sandbox.cgroups.make_container`)."""
    import shutil
    import subprocess
    import sys

    tree = Path(tree)
    if tree.exists() and any(tree.iterdir()):
        raise FileExistsError(f"{tree} is not empty: give a new folder for the fake /autograder tree")
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(tree / "source")
    (tree / "submission").mkdir()
    for path in map(Path, submissions):
        if path.is_dir():
            shutil.copytree(path, tree / "submission" / path.name)
        else:
            shutil.copy2(path, tree / "submission" / path.name)
    earlier = [{"submission_time": f"2026-01-01T00:{k:02d}:00+00:00", "score": r.get("score", 0.0), "results": r}
               for k, r in enumerate(previous or [])]
    (tree / "submission_metadata.json").write_text(json.dumps({"id": len(earlier) + 1, "users": [{"id": learner}],
                                                               "previous_submissions": earlier}))
    env = {**os.environ, "AUTOGRADER_ROOT": str(tree), "PYTHON": sys.executable}
    if isolation:
        env["CKPT_ISOLATION"] = isolation
    folders: list[str] = []
    if memory or cpus:
        from autograder.sandbox import cgroups

        folders, why = cgroups.make_container(memory, cpus)
        if not folders:
            raise RuntimeError(f"cannot set the container's limits here: {why}")
    try:
        command = ["bash", str(tree / "source" / "run_autograder")]
        sampled = cgroups.OwnMemoryPeak(folders) if folders else None
        start = time.monotonic()
        run = subprocess.run(cgroups.command_inside(folders, command) if folders else command, env=env,
                             capture_output=True, text=True)
        seconds = time.monotonic() - start
        own = sampled.stop() if sampled else None
        peak = cgroups.container_peak(folders) if folders else None
    finally:
        if folders:
            cgroups.remove_container(folders)
    out = tree / "results" / "results.json"
    if not out.exists():
        raise RuntimeError(f"run_autograder wrote no results.json (exit status {run.returncode}):\n{run.stderr[-3000:]}")
    results = json.loads(out.read_text())
    if folders:  # (this machine's measurement, for the instructor: not part of what Gradescope shows)
        (tree / "results" / "container.json").write_text(json.dumps({"memory": memory, "cpus": cpus, "peak": peak,
                                                                     "own_peak": own, "seconds": round(seconds, 1)}))
    return results


def results_json(report: dict, seconds: float, visibility: str = "visible", attempt: tuple | None = None,
                 grader_failed: list | tuple = ()) -> dict:
    """Gradescope's results.json for a graded submission: one test per problem, each shown to the
    learner as ``visibility`` says; ``attempt``: (this attempt's number, the limit). Where the grader
    itself failed on a problem (``grader_failed``: its worker did not start, or the machine's memory
    killed it), the run is no attempt: it is not counted against the limit, and says so."""
    tests = []
    for p in report["problems"]:
        problem = registry.get(p["id"])
        output = text.printable(p["message"], 4000) if p["status"] != "correct" else "All cases passed."
        if p["status"] not in ("correct", "not_attempted"):
            output += f"\nHint: {problem.hint_for(p['message'])}"
        tests.append({"name": f"{p['id']} {p['function']}: {problem.title}", "number": p["id"],
                      "score": p["score"], "max_score": p["max_score"], "status":
                      "passed" if p["status"] == "correct" else "failed",
                      "output": output, "visibility": visibility, "tags": list(problem.tags)})
    when = {"visible": "", "hidden": " Each problem's result is hidden from you by your instructor.",
            "after_due_date": " Each problem's result is shown after the due date.",
            "after_published": " Each problem's result is shown once your instructor publishes the grades."}[visibility]
    output = (f"Total: {report['score']:g} / {report['max_score']:g}. Each problem ran hidden cases chosen "
              "for you; messages say what to look at, never the hidden inputs. "
              f"Isolation: {report.get('isolation', '')}." if visibility == "visible" else
              "Your submission was graded: each problem ran hidden cases chosen for you." + when)
    if grader_failed:
        output += (f" The autograder itself failed on {', '.join(grader_failed)} (not your code: the message there "
                   "says why), so this run does not count as an attempt: please submit again.")
    elif attempt is not None:
        output += f" Graded attempt {attempt[0]} of {attempt[1]}."
    if visibility == "hidden":
        # Gradescope hides a learner's total while any test is not yet shown to them, but a test marked
        # "hidden" does not count for that (its documentation: hidden tests should carry no points):
        # with only hidden tests the total would be shown, and from it each hidden verdict, one
        # submission at a time. A test of no points shown once the grades are published keeps the
        # total hidden until then.
        tests.append({"name": "Your total score", "number": "0", "score": 0.0, "max_score": 0.0, "status": "passed",
                      "output": "Your total is shown once your instructor publishes the grades; each problem's "
                                "result stays hidden.", "visibility": "after_published", "tags": []})
    return {"score": report["score"], "execution_time": round(seconds), "output": output,
            "visibility": "visible", "stdout_visibility": "hidden", "tests": tests,
            "extra_data": {COUNTED: not grader_failed}}


def run(root: Path, isolation: str = "strict") -> dict:
    """Grade ``root/submission`` and write ``root/results/results.json``; never raises."""
    root = Path(root)
    start = time.monotonic()
    try:
        from autograder.engine.grade import grade
        from autograder.sandbox import IsolationUnavailable

        submission = root / "submission"
        chosen = settings(root / "source")
        limit, attempts = chosen["max_attempts"], previous_attempts(root)
        try:
            if limit is not None and len(attempts) >= limit:
                results = _over_the_limit(attempts, limit, time.monotonic() - start)
            else:
                graded = grade([submission], _learner_id(root), problems=chosen["problems"], isolation=isolation)
                failed = [p.id for p in graded.problems if p.category == "grader"]
                if failed:  # the instructor's debugging output (stdout is hidden from learners)
                    print(f"the grader itself failed on {', '.join(failed)}: this run is not counted as an attempt")
                results = results_json(graded.to_json(), time.monotonic() - start, chosen["visibility"],
                                       None if limit is None else (len(attempts) + 1, limit), failed)
        except IsolationUnavailable as exc:
            print(f"error: {exc}")  # the instructor's debugging output (stdout is hidden from learners)
            results = {"score": 0.0, "execution_time": round(time.monotonic() - start), "visibility": "visible",
                       "stdout_visibility": "hidden", "tests": [],
                       "output": "Not graded: this autograder container cannot isolate submitted code (the strict "
                                 "level), so no code was run. Your instructor has been told; please resubmit later "
                                 "(this run does not count as an attempt)."}
    except Exception as exc:  # noqa: BLE001 - Gradescope must always get a results.json
        results = {"score": 0.0, "execution_time": round(time.monotonic() - start), "visibility": "visible",
                   "output": f"The autograder failed ({type(exc).__name__}); your instructor has been told. "
                             "Please resubmit later: this run does not count as an attempt.", "tests": []}
    results.setdefault("extra_data", {COUNTED: False})  # (not graded: not an attempt)
    atomic_write(root / "results" / "results.json", json.dumps(results, indent=1))
    return results


# --- the command line's gradescope-try and gradescope-run (autograder/cli/instructors.py) ---------------------

def try_command(args) -> int:
    """``python -m autograder gradescope-try``: run a zip's grading of submissions here, as Gradescope would."""
    import tempfile
    import zipfile

    tree = Path(args.tree) if args.tree else Path(tempfile.mkdtemp(prefix="gradescope-tree-"))
    try:
        previous = [json.loads(Path(p).read_text()) for p in args.previous]
        from autograder.sandbox.cgroups import parse_bytes

        results = try_locally(Path(args.zip), [Path(p) for p in args.submissions], tree, args.learner, previous=previous,
                              memory=parse_bytes(args.memory) if args.memory else None, cpus=args.cpus)
    except (OSError, RuntimeError, ValueError, zipfile.BadZipFile) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"Gradescope tree: {tree} (results/results.json is what Gradescope would show)")
    measured = tree / "results" / "container.json"
    if measured.exists():
        limits = json.loads(measured.read_text())
        own, total = limits.get("own_peak"), limits.get("memory")
        print(f"Inside {total / 2**20 if total else 0:,.0f} MiB and {limits['cpus'] or 'all the'} CPUs: graded in "
              f"{limits['seconds']:.0f} s; the processes' own memory (not the page cache, which the kernel reclaims) peaked at "
              + (f"{own / 2**20:,.0f} MiB ({own / total:.0%} of the container's)" if own and total else "(not measured here)"))
    for t in results.get("tests", []):
        print(f"  {t['name']}: {t['status']}, {t['score']:g}/{t['max_score']:g} (shown to the learner: {t['visibility']})")
    print(results.get("output", ""))
    return 0


def run_command(args) -> int:
    """``python -m autograder gradescope-run``: what the zip's run_autograder calls."""
    results = run(Path(args.root), args.isolation)
    print(f"score {results['score']:g}; results in {Path(args.root) / 'results' / 'results.json'}")
    return 0
