"""Command line: ``python -m autograder grade PATH... [--learner ID] [--json FILE]``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from autograder.invoke import default_learner


def _write_json(path: str, data: dict) -> None:
    from autograder.outputs import atomic_write

    atomic_write(Path(path), json.dumps(data, indent=2) + "\n")


def _missing(paths) -> bool:
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
    return bool(missing)


def _scope(args):
    """The problems ``paths``, ``--unit`` and ``--only`` cover, and their name (None: an error printed)."""
    from autograder.report import grading_scope

    try:
        return None if _missing(args.paths) else grading_scope(args.paths, args.unit, args.only)
    except (ValueError, KeyError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return None


def cmd_grade(args) -> int:
    from autograder.release import hidden_tests_available

    if not hidden_tests_available():
        print("This copy of the course has no hidden tests (it is the learner bundle): your instructor grades "
              "your work. Run `python -m autograder check problems/` (or `make check`) for the public "
              "examples.", file=sys.stderr)
        return 2
    from autograder.engine.grade import grade
    from autograder.report import LiveReport, summary

    scope = _scope(args)
    if scope is None:
        return 2
    chosen, what = scope
    from autograder.sandbox import IsolationUnavailable

    live = LiveReport(chosen)
    live.header(args.learner, what, args.paths, chosen)
    try:
        report = grade(args.paths, args.learner, problems=[p.id for p in chosen], timeout=args.timeout,
                       jobs=args.jobs, isolation=args.isolation, on_result=live)
    except IsolationUnavailable as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from autograder import progress

    solved_before = progress.mastered(progress.load(args.learner)) if not args.no_record else frozenset()
    print(summary(report, live.width, solved_before))
    if args.json:
        _write_json(args.json, report.to_json())
    if not args.no_record:
        progress.record_grading(report.to_json(), "grade")
    return 0


def cmd_check(args) -> int:
    """Public examples only, in this process: what each notebook check cell says, for every problem."""
    from autograder.public import check_paths

    scope = _scope(args)
    if scope is None:
        return 2
    if args.worker_limits:  # before any learner code runs here
        from autograder import sandbox

        sandbox.limit(sandbox.DEFAULT_MEMORY, sandbox.DEFAULT_FILE_BYTES)
    results = check_paths(args.paths, [p.id for p in scope[0]])
    for r in results:
        print(f"{r.problem.id:5} {r.problem.function:28} {r.status.replace('_', ' '):14} {r.message}")
    passed = sum(r.passed for r in results)
    print(f"\nPublic examples pass for {passed} of {len(results)} problems. Hidden tests run when your "
          "work is graded.")
    if args.json:
        _write_json(args.json, {"problems": [{"id": r.problem.id, "status": r.status, "message": r.message,
                                              "detail": r.detail} for r in results]})
    return 0


def cmd_release(args) -> int:
    from autograder.release import build_release

    try:
        written = build_release(Path(args.root), Path(args.out))
    except (FileExistsError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote the learner bundle to {args.out} ({len(written)} files): lessons, problem notebooks, "
          "public checks; no reference solutions, no hidden tests")
    return 0


def _share(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: give a share between 0 and 1, e.g. 0.8")
    return value


def cmd_grade_batch(args) -> int:
    from autograder.batch import grade_batch
    from autograder.release import hidden_tests_available

    if not hidden_tests_available():
        print("error: grade-batch needs the hidden tests: run it from the full course repository", file=sys.stderr)
        return 2
    if not Path(args.submissions).is_dir():
        print(f"error: {args.submissions} is not a folder of submissions (one sub-folder or file per learner)",
              file=sys.stderr)
        return 2
    from autograder.sandbox import IsolationUnavailable

    chosen = _chosen(args)
    if chosen is None:
        return 2
    try:
        summary = grade_batch(Path(args.submissions), Path(args.out), jobs=args.jobs, force=args.force,
                              timeout=args.timeout, progress=not args.quiet, isolation=args.isolation,
                              problems=chosen, shared_cases=args.shared_cases, similarity=args.similarity)
    except (ValueError, KeyError, IsolationUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{summary['learners']} learners: {summary['graded']} graded now, {summary['skipped']} already graded "
          f"(--force regrades them). Results in {args.out}: gradebook.csv, feedback/, summary.md, summary.png")
    print(f"Isolation: {summary['isolation']}" + ("" if summary["isolation"] == "strict" else
          " -- WARNING: learner code was not isolated from the grader or from other submissions (see SECURITY.md)"))
    if summary["isolation"] == "strict":
        print(f"  {summary['isolation_detail']}")
    if summary["interrupted"]:
        print("Interrupted: what was graded is saved; run the same command again to go on.", file=sys.stderr)
        return 130
    return 0


def _chosen(args):
    """The problems ``--unit`` / ``--only`` choose, or None (an error already printed)."""
    from autograder.batch import selection

    try:
        return selection(args.unit, args.only)
    except (ValueError, KeyError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return None


def _covers(chosen) -> str:
    return f"{len(chosen)} problems, {sum(p.points for p in chosen)} points ({', '.join(p.id for p in chosen)})"


def cmd_gradescope(args) -> int:
    from autograder.gradescope import build_zip

    chosen = _chosen(args)
    if chosen is None:
        return 2
    try:
        names = build_zip(Path(args.root), Path(args.out), chosen, args.visibility, args.max_attempts)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    shown = {"visible": "each problem's result shown at once", "hidden": "each problem's result hidden from learners",
             "after_due_date": "each problem's result shown after the due date",
             "after_published": "each problem's result shown once grades are published"}[args.visibility]
    limit = "no attempt limit" if args.max_attempts is None else f"at most {args.max_attempts} graded attempts"
    print(f"Settings: {shown}; {limit}.")
    from autograder import registry
    from autograder.gradescope import container_needs

    print(container_needs(chosen or registry.PROBLEMS))
    print(f"wrote {args.out} ({len(names)} files), grading {_covers(chosen)}: upload it as the assignment's "
          "autograder on Gradescope (setup.sh installs the course; run_autograder grades each submission). "
          f"Try it here first: python -m autograder gradescope-try {args.out} YOUR_NOTEBOOK.ipynb")
    return 0


def cmd_nbgrader(args) -> int:
    from autograder.nbgrader_course import assignments, write_course

    chosen = _chosen(args)
    if chosen is None:
        return 2
    course = Path(args.course_dir)
    kept = (course / "nbgrader_config.py").exists()
    try:
        written = write_course(course, chosen, args.assignment)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    if kept:
        print(f"kept your {course / 'nbgrader_config.py'}")
    names = list(assignments(chosen, args.assignment))
    print(f"assignments: {', '.join(names)} ({_covers(chosen)})")
    print(f"next: cd {course} && nbgrader generate_assignment {names[0]}   (see {course / 'README.md'})")
    return 0


def cmd_practice(args) -> int:
    import numpy as np

    from autograder import practice, progress

    if args.minutes <= 0 or (args.count is not None and args.count < 1):
        print("error: --minutes and --count must be positive", file=sys.stderr)
        return 2
    try:
        records = progress.load(args.learner)
        problems, review = practice.choose(records, args.minutes, args.unit, args.count,
                                           np.random.default_rng(args.seed), tuple(args.difficulty), tuple(args.category))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if review:
        print("You have mastered every problem here and none is due for review yet: this set is for extra review.")
    again = sorted(progress.due(records) & {p.id for p in problems})
    if again:
        print(f"Back for a spaced review (mastered a while ago): {', '.join(again)}.")
    path = practice.new_workspace(problems, args.minutes, Path(args.workspace))
    try:
        practice.Session(problems, args.minutes, args.learner, path).run()
    except KeyboardInterrupt:
        print(f"\nStopped without grading. Your file stays at {path}.")
        return 130
    return 0


def cmd_drill(args) -> int:
    from autograder import drills

    kinds = args.kind or None
    unknown = [k for k in kinds or [] if k not in drills.KINDS]
    if unknown:
        print(f"error: no drill {', '.join(unknown)}; choose from: {', '.join(drills.KINDS)}", file=sys.stderr)
        return 2
    if args.count < 1:
        print("error: --count must be positive", file=sys.stderr)
        return 2
    try:
        drills.run(args.count, kinds, args.learner, seed=args.seed, units=args.unit)
    except ValueError as e:  # a unit with no drills
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nStopped.")
        return 130
    return 0


def cmd_progress(args) -> int:
    from autograder import progress

    records = progress.load(args.learner)
    if args.json:
        rows = progress.summarize(records)
        _write_json(args.json, {"learner": args.learner, "problems": [
            {"id": r.problem.id, "function": r.problem.function, "unit": r.problem.unit, "status": r.status,
             "difficulty": r.problem.difficulty, "category": r.problem.category,
             "best": r.best, "max_score": r.problem.points, "attempts": r.attempts, "seconds": round(r.seconds, 1),
             "hints": r.hints, "checks": r.checks, "last": r.last} for r in rows], "drills": progress.drill_stats(records)})
    difficulty, category = set(args.difficulty), set(args.category)
    print(progress.table(args.learner, records, keep=lambda p: (not difficulty or p.difficulty in difficulty)
                         and (not category or p.category in category)))
    return 0


def cmd_isolation(args) -> int:
    from autograder import sandbox

    level = sandbox.resolve("auto")
    abi, why = sandbox.landlock_status()
    print(f"Landlock ABI: {abi} (strict needs {sandbox.STRICT_LANDLOCK_ABI}; 4 adds TCP rules and 6 signal rules, "
          "on top of seccomp's and the namespaces')" + (f": {why}" if why else ""))
    print(f"Level available: {level.level}")
    if level.missing:
        print("Missing for strict: " + "; ".join(level.missing))
    print("\nWhat learner code is held to here, and by what:")
    for guarantee, mechanism, lacking in sandbox.guarantees():
        print(f"  - {guarantee}\n      by: {mechanism}" + (f"\n      missing: {lacking}" if lacking else ""))
    print()
    print(level.describe if not level.missing else "grade-batch, gradescope-run and nbgrader autograding refuse to "
          "grade here unless given --isolation basic (see SECURITY.md).")
    return 0 if level.level == "strict" else 1


def cmd_list(args) -> int:
    from autograder import registry

    for p in registry.PROBLEMS:
        print(f"{p.id:5} {p.points:>3} pts  {p.call}\n       {p.title}")
    print()
    for unit in registry.units():  # the counts the README's unit table gives (a test holds them equal)
        ps = [p for p in registry.PROBLEMS if p.unit == unit]
        print(f"Unit {unit}: {len(ps)} problems, {sum(p.points for p in ps)} points")
    print(f"In all: {len(registry.PROBLEMS)} problems, {sum(p.points for p in registry.PROBLEMS)} points")
    return 0


def cmd_notebooks(args) -> int:
    from autograder.problem_notebooks import write_problem_notebooks

    for path in write_problem_notebooks(Path(args.root)):
        print(f"wrote {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="The course autograder.")
    sub = parser.add_subparsers(dest="command", required=True)
    def isolation_arg(p: argparse.ArgumentParser, default: str) -> None:
        p.add_argument("--isolation", choices=("strict", "basic", "auto"), default=default,
                       help=f"how learner code is isolated (default: {default}; see SECURITY.md and "
                            "`python -m autograder isolation`)")

    def assignment_args(p: argparse.ArgumentParser, verb: str) -> None:
        p.add_argument("--unit", type=int, nargs="+", default=[], metavar="N",
                       help=f"{verb} only these units' problems (what was assigned): scores, feedback and summary "
                            "cover them")
        p.add_argument("--only", nargs="+", default=[], metavar="PROBLEM",
                       help=f"{verb} only these problem ids or function names (with --unit: both)")

    def submission_args(p: argparse.ArgumentParser, verb: str) -> None:
        p.add_argument("paths", nargs="+", metavar="PATH", help="a notebook, a .py file, or a folder of them")
        p.add_argument("--only", nargs="+", metavar="PROBLEM", help=f"{verb} only these problem ids or function "
                       "names (2.5 3.1, or 2.5,3.1); with --unit: both. Default: all in a folder, a notebook's own")
        p.add_argument("--unit", nargs="+", default=[], metavar="N", help=f"{verb} only these units' problems")
        p.add_argument("--json", metavar="FILE", help="also write the results as JSON")

    g = sub.add_parser("grade", help="grade notebooks or .py files with the hidden tests")
    submission_args(g, "grade")
    g.add_argument("--learner", default=default_learner(), help="learner id (chooses the hidden cases)")
    g.add_argument("--timeout", type=float, help="seconds per problem (default: each problem's own limit)")
    g.add_argument("-j", "--jobs", type=int, help="problems graded in parallel (default: 2)")
    g.add_argument("--no-record", action="store_true", help="do not record this run in the learner's progress")
    isolation_arg(g, "auto")
    g.set_defaults(func=cmd_grade)
    pr = sub.add_parser("practice", help="a timed set of problems you have not mastered, graded at the end")
    pr.add_argument("--minutes", type=float, default=30, help="length of the set (default: 30)")
    pr.add_argument("--unit", type=int, help="draw from this unit only")
    pr.add_argument("--count", type=int, help="number of problems (default: as many as fit the time)")
    pr.add_argument("--learner", default=default_learner(), help="whose progress to read and record")
    pr.add_argument("--workspace", default="practice", help="folder for the practice file (default: ./practice)")
    pr.add_argument("--seed", type=int, help="choose the same set again")
    pr.add_argument("--difficulty", nargs="+", default=[], choices=("easy", "medium", "hard"),
                    help="draw only problems of these difficulties")
    pr.add_argument("--category", nargs="+", default=[], metavar="CATEGORY",
                    help="draw only problems of these categories (accounting, layout, orbax, formats, "
                         "fault-tolerance, debugging)")
    pr.set_defaults(func=cmd_practice)
    dr = sub.add_parser("drill", help="quick-fire numeric questions with worked answers")
    dr.add_argument("--count", type=int, default=5, help="number of questions (default: 5)")
    dr.add_argument("--kind", nargs="+", metavar="KIND", help="only these kinds of question")
    dr.add_argument("--unit", type=int, nargs="+", metavar="N",
                    help="only these units' questions (default: the units you have studied; at first Unit 1)")
    dr.add_argument("--learner", default=default_learner())
    dr.add_argument("--seed", type=int, help="the same questions again")
    dr.set_defaults(func=cmd_drill)
    pg = sub.add_parser("progress", help="where you stand: per unit and problem, from your grading runs")
    pg.add_argument("--learner", default=default_learner())
    pg.add_argument("--json", metavar="FILE", help="also write it as JSON")
    pg.add_argument("--difficulty", nargs="+", default=[], choices=("easy", "medium", "hard"),
                    help="list only problems of these difficulties")
    pg.add_argument("--category", nargs="+", default=[], choices=("accounting", "layout", "orbax", "formats",
                                                                 "fault-tolerance", "debugging"),
                    help="list only problems of these categories")
    pg.set_defaults(func=cmd_progress)
    b = sub.add_parser("grade-batch", help="(instructors) grade a folder of submissions, one per learner")
    b.add_argument("submissions", metavar="SUBMISSIONS_DIR", help="one sub-folder or notebook/.py file per learner")
    b.add_argument("--out", required=True, metavar="RESULTS_DIR", help="where results, feedback and summary go")
    b.add_argument("-j", "--jobs", type=int, default=2, help="learners graded in parallel (default: 2)")
    b.add_argument("--force", action="store_true", help="regrade learners that already have a result")
    b.add_argument("--timeout", type=float, help="seconds per problem (default: each problem's own limit)")
    b.add_argument("--quiet", action="store_true", help="no progress bar")
    b.add_argument("--shared-cases", action="store_true",
                   help="grade every learner on the same hidden cases (default: each learner's own): item "
                        "statistics compare like with like, and the references run once per problem, not per learner")
    b.add_argument("--similarity", type=_share, nargs="?", const=0.8, metavar="THRESHOLD",
                   help="also compare the learners' code problem by problem (names, constants, comments and "
                        "statement order set aside) and list the pairs alike beyond THRESHOLD (default 0.8; "
                        "containment halfway from it to 1) in "
                        "RESULTS_DIR/similarity.html: evidence to read, not a verdict")
    assignment_args(b, "grade")
    isolation_arg(b, "strict")
    b.set_defaults(func=cmd_grade_batch)
    gs = sub.add_parser("gradescope", help="(instructors) write the Gradescope autograder zip")
    gs.add_argument("out", metavar="OUT.zip")
    gs.add_argument("--root", default=".", help="the course repository (default: here)")
    gs.add_argument("--visibility", choices=("visible", "after_due_date", "after_published", "hidden"), default="visible",
                    help="when learners see each problem's result (its hidden cases' verdict, message and points); "
                         "default: at once")
    gs.add_argument("--max-attempts", type=int, metavar="N",
                    help="graded submissions per learner; beyond N a submission is not graded and keeps the last graded "
                         "one's results (runs the autograder itself failed on never count). Default: no limit")
    assignment_args(gs, "grade")
    gs.set_defaults(func=cmd_gradescope)
    gt = sub.add_parser("gradescope-try", help="(instructors) run an autograder zip here as Gradescope would")
    gt.add_argument("zip", metavar="AUTOGRADER.zip")
    gt.add_argument("submissions", nargs="+", metavar="FILE", help="what a learner uploads (notebooks, .py files)")
    gt.add_argument("--tree", metavar="DIR", help="where to build the fake /autograder tree (default: a new temporary folder)")
    gt.add_argument("--learner", default="local-test", help="the learner id Gradescope's metadata would give")
    gt.add_argument("--previous", action="append", default=[], metavar="RESULTS.json",
                    help="an earlier submission's results.json, listed in the metadata as a previous submission "
                         "(repeat it: to try an attempt limit)")
    gt.add_argument("--memory", metavar="SIZE", help="run it within this much memory, as Gradescope's container does "
                                                     "(its default: 768M); emulated with cgroups, as root")
    gt.add_argument("--cpus", type=float, metavar="N", help="and this many CPUs (Gradescope's default: 0.5)")
    gt.set_defaults(func=lambda a: importlib.import_module("autograder.gradescope").try_command(a))
    gr = sub.add_parser("gradescope-run", help="(inside Gradescope) grade /autograder/submission")
    gr.add_argument("--root", default="/autograder", help="the Gradescope tree (default: /autograder)")
    isolation_arg(gr, "strict")  # run_autograder passes CKPT_ISOLATION, if the instructor set it
    gr.set_defaults(func=lambda a: importlib.import_module("autograder.gradescope").run_command(a))
    c = sub.add_parser("check", help="run every problem's public examples (what the notebook check cells run)")
    submission_args(c, "check")
    c.add_argument("--worker-limits", action="store_true", help="run under the grader's worker limits (memory, files)")
    c.set_defaults(func=cmd_check)
    r = sub.add_parser("release", help="(instructors) write the learner bundle: no solutions, no hidden tests")
    r.add_argument("out", metavar="OUT_DIR", help="a new, empty folder")
    r.add_argument("--root", default=".", help="the course repository (default: here)")
    r.set_defaults(func=cmd_release)
    ng = sub.add_parser("nbgrader", help="(instructors) write an nbgrader course: source notebooks and config")
    ng.add_argument("course_dir", metavar="COURSE_DIR", help="the nbgrader course folder (created if missing)")
    assignment_args(ng, "assign")
    ng.add_argument("--assignment", metavar="NAME", help="one assignment of this name holding the chosen problems "
                                                         "(default: one per unit, unit1 ...)")
    ng.set_defaults(func=cmd_nbgrader)
    iso = sub.add_parser("isolation", help="what isolation this machine gives learner code (exit 1 if not strict)")
    iso.set_defaults(func=cmd_isolation)
    ls = sub.add_parser("list", help="list the problems")
    ls.set_defaults(func=cmd_list)
    nb = sub.add_parser("notebooks", help="(maintainers) rebuild problems/*.ipynb from the registry")
    nb.add_argument("--root", default=".", help="repository root")
    nb.set_defaults(func=cmd_notebooks)
    rv = sub.add_parser("revision", help="(maintainers) rebuild course/revision/ from the lessons' revision cells")
    rv.add_argument("--root", default=".", help="repository root")
    rv.add_argument("--check", action="store_true", help="write nothing; exit 1 if a sheet is stale")
    rv.set_defaults(func=lambda args: importlib.import_module("autograder.revision").command(Path(args.root), args.check))
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
