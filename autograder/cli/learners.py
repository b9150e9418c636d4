"""The learner's commands: ``grade``, ``check``, ``practice``, ``drill``, ``progress``, ``isolation``
and ``list``: each command's function and its parser."""

from __future__ import annotations

import sys
from pathlib import Path

from autograder.cli.arguments import isolation_arg, read_scope, submission_args, write_json
from autograder.invoke import default_learner


def cmd_grade(args) -> int:
    from autograder.registry import hidden_tests_available

    if not hidden_tests_available():
        print("This copy of the course has no hidden tests (it is the learner bundle): your instructor grades "
              "your work. Run `python -m autograder check problems/` (or `make check`) for the public "
              "examples.", file=sys.stderr)
        return 2
    from autograder.engine.grade import grade
    from autograder.learner.report import LiveReport, summary

    scope = read_scope(args)
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
    from autograder.learner import progress

    solved_before = progress.mastered(progress.load(args.learner)) if not args.no_record else frozenset()
    print(summary(report, live.width, solved_before))
    if args.json:
        write_json(args.json, report.to_json())
    if not args.no_record:
        progress.record_grading(report.to_json(), "grade")
    return 0


def cmd_check(args) -> int:
    """Public examples only, in this process: what each notebook check cell says, for every problem."""
    from autograder.learner.public import check_paths

    scope = read_scope(args)
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
        write_json(args.json, {"problems": [{"id": r.problem.id, "status": r.status, "message": r.message,
                                              "detail": r.detail} for r in results]})
    return 0


def cmd_practice(args) -> int:
    import numpy as np

    from autograder.learner import practice, progress

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
    from autograder.learner import drills

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
    from autograder.learner import progress

    records = progress.load(args.learner)
    if args.json:
        rows = progress.summarize(records)
        write_json(args.json, {"learner": args.learner, "problems": [
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


def grade_parser(sub) -> None:
    g = sub.add_parser("grade", help="grade notebooks or .py files with the hidden tests")
    submission_args(g, "grade")
    g.add_argument("--learner", default=default_learner(), help="learner id (chooses the hidden cases)")
    g.add_argument("--timeout", type=float, help="seconds per problem (default: each problem's own limit)")
    g.add_argument("-j", "--jobs", type=int, help="problems graded in parallel (default: 2)")
    g.add_argument("--no-record", action="store_true", help="do not record this run in the learner's progress")
    isolation_arg(g, "auto")
    g.set_defaults(func=cmd_grade)


def practice_parser(sub) -> None:
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


def drill_parser(sub) -> None:
    dr = sub.add_parser("drill", help="quick-fire numeric questions with worked answers")
    dr.add_argument("--count", type=int, default=5, help="number of questions (default: 5)")
    dr.add_argument("--kind", nargs="+", metavar="KIND", help="only these kinds of question")
    dr.add_argument("--unit", type=int, nargs="+", metavar="N",
                    help="only these units' questions (default: the units you have studied; at first Unit 1)")
    dr.add_argument("--learner", default=default_learner())
    dr.add_argument("--seed", type=int, help="the same questions again")
    dr.set_defaults(func=cmd_drill)


def progress_parser(sub) -> None:
    pg = sub.add_parser("progress", help="where you stand: per unit and problem, from your grading runs")
    pg.add_argument("--learner", default=default_learner())
    pg.add_argument("--json", metavar="FILE", help="also write it as JSON")
    pg.add_argument("--difficulty", nargs="+", default=[], choices=("easy", "medium", "hard"),
                    help="list only problems of these difficulties")
    pg.add_argument("--category", nargs="+", default=[], choices=("accounting", "layout", "orbax", "formats",
                                                                 "fault-tolerance", "debugging"),
                    help="list only problems of these categories")
    pg.set_defaults(func=cmd_progress)


def check_parser(sub) -> None:
    c = sub.add_parser("check", help="run every problem's public examples (what the notebook check cells run)")
    submission_args(c, "check")
    c.add_argument("--worker-limits", action="store_true", help="run under the grader's worker limits (memory, files)")
    c.set_defaults(func=cmd_check)


def isolation_parser(sub) -> None:
    iso = sub.add_parser("isolation", help="what isolation this machine gives learner code (exit 1 if not strict)")
    iso.set_defaults(func=cmd_isolation)


def list_parser(sub) -> None:
    ls = sub.add_parser("list", help="list the problems")
    ls.set_defaults(func=cmd_list)
