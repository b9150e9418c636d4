"""The instructor's and maintainer's commands: ``grade-batch``, ``gradescope`` (and its ``-try`` and
``-run``), ``release``, ``nbgrader``, ``hub``, ``notebooks`` and ``revision``: each command's function and its
parser."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from autograder.cli.arguments import assignment_args, chosen_problems, covers, isolation_arg, share_arg


def cmd_release(args) -> int:
    from autograder.exports.release import build_release

    try:
        written = build_release(Path(args.root), Path(args.out))
    except (FileExistsError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote the learner bundle to {args.out} ({len(written)} files): lessons, problem notebooks, "
          "public checks; no reference solutions, no hidden tests")
    return 0


def cmd_grade_batch(args) -> int:
    from autograder.classroom.batch import grade_batch
    from autograder.registry import hidden_tests_available

    if not hidden_tests_available():
        print("error: grade-batch needs the hidden tests: run it from the full course repository", file=sys.stderr)
        return 2
    if not Path(args.submissions).is_dir():
        print(f"error: {args.submissions} is not a folder of submissions (one sub-folder or file per learner)",
              file=sys.stderr)
        return 2
    from autograder.sandbox import IsolationUnavailable

    chosen = chosen_problems(args)
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


def cmd_gradescope(args) -> int:
    from autograder.exports.gradescope import build_zip

    chosen = chosen_problems(args)
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
    from autograder.exports.gradescope import container_needs

    print(container_needs(chosen or registry.PROBLEMS))
    print(f"wrote {args.out} ({len(names)} files), grading {covers(chosen)}: upload it as the assignment's "
          "autograder on Gradescope (setup.sh installs the course; run_autograder grades each submission). "
          f"Try it here first: python -m autograder gradescope-try {args.out} YOUR_NOTEBOOK.ipynb")
    return 0


def cmd_nbgrader(args) -> int:
    from autograder.exports.nbgrader_course import COURSE_ID, assignments, write_course

    chosen = chosen_problems(args)
    if chosen is None:
        return 2
    course = Path(args.course_dir)
    kept = (course / "nbgrader_config.py").exists()
    try:
        written = write_course(course, chosen, args.assignment, args.course_id or COURSE_ID,
                               Path(args.exchange) if args.exchange else None)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path}")
    if kept:
        print(f"kept your {course / 'nbgrader_config.py'} (its course id and exchange are as it says: delete it and "
              "run this again to write them anew)")
    names = list(assignments(chosen, args.assignment))
    print(f"assignments: {', '.join(names)} ({covers(chosen)})")
    print(f"next: cd {course} && nbgrader generate_assignment {names[0]}   (see {course / 'README.md'})")
    return 0


def cmd_hub(args) -> int:
    from autograder.exports import hub

    try:
        courses = [hub.parse_course(text) for text in args.course]
        config = hub.set_up(Path(args.state_dir).resolve(), courses, Path(args.root).resolve(), port=args.port,
                            references_readable=args.references_readable)
    except (ValueError, PermissionError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {config}")
    if args.write_only:
        print(f"start it: {sys.executable} -m jupyterhub -f {config}")
        return 0
    print(f"JupyterHub at http://127.0.0.1:{args.port}/ (Ctrl-C stops it)", flush=True)
    return hub.start(config)


def cmd_notebooks(args) -> int:
    from autograder.exports.problem_notebooks import write_problem_notebooks

    for path in write_problem_notebooks(Path(args.root)):
        print(f"wrote {path}")
    return 0


def grade_batch_parser(sub) -> None:
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
    b.add_argument("--similarity", type=share_arg, nargs="?", const=0.8, metavar="THRESHOLD",
                   help="also compare the learners' code problem by problem (names, constants, comments and "
                        "statement order set aside) and list the pairs alike beyond THRESHOLD (default 0.8; "
                        "containment halfway from it to 1) in "
                        "RESULTS_DIR/similarity.html: evidence to read, not a verdict")
    assignment_args(b, "grade")
    isolation_arg(b, "strict")
    b.set_defaults(func=cmd_grade_batch)


def gradescope_parser(sub) -> None:
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


def gradescope_try_parser(sub) -> None:
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
    gt.set_defaults(func=lambda a: importlib.import_module("autograder.exports.gradescope").try_command(a))


def gradescope_run_parser(sub) -> None:
    gr = sub.add_parser("gradescope-run", help="(inside Gradescope) grade /autograder/submission")
    gr.add_argument("--root", default="/autograder", help="the Gradescope tree (default: /autograder)")
    isolation_arg(gr, "strict")  # run_autograder passes CKPT_ISOLATION, if the instructor set it
    gr.set_defaults(func=lambda a: importlib.import_module("autograder.exports.gradescope").run_command(a))


def release_parser(sub) -> None:
    r = sub.add_parser("release", help="(instructors) write the learner bundle: no solutions, no hidden tests")
    r.add_argument("out", metavar="OUT_DIR", help="a new, empty folder")
    r.add_argument("--root", default=".", help="the course repository (default: here)")
    r.set_defaults(func=cmd_release)


def nbgrader_parser(sub) -> None:
    ng = sub.add_parser("nbgrader", help="(instructors) write an nbgrader course: source notebooks and config")
    ng.add_argument("course_dir", metavar="COURSE_DIR", help="the nbgrader course folder (created if missing)")
    assignment_args(ng, "assign")
    ng.add_argument("--assignment", metavar="NAME", help="one assignment of this name holding the chosen problems "
                                                         "(default: one per unit, unit1 ...)")
    ng.add_argument("--course-id", metavar="ID",
                    help="the course's id in nbgrader (default: sharded-checkpointing): on a JupyterHub, the groups "
                         "nbgrader-<ID> (learners) and formgrade-<ID> (instructors) give access to it")
    ng.add_argument("--exchange", metavar="DIR", help="an exchange every course on this machine shares (made "
                                                      "beforehand, mode 1777), each course in a folder of its id "
                                                      "(default: COURSE_DIR/exchange, this course's own)")
    ng.set_defaults(func=cmd_nbgrader)


def hub_parser(sub) -> None:
    h = sub.add_parser("hub", help="(instructors, as root) a class on this machine's JupyterHub: courses, their "
                                   "instructors and learners (system users), nbgrader's exchange between them")
    h.add_argument("state_dir", metavar="STATE_DIR", help="where the hub's environments, courses, exchange and "
                                                          "database go (created if missing)")
    h.add_argument("--course", action="append", required=True, metavar="ID:INSTRUCTORS:LEARNERS",
                   help="a course: its nbgrader id, then its instructors and its learners, each a comma-separated "
                        "list of system users (ml-101:ada:bo,cy); once per course")
    h.add_argument("--port", type=int, default=8000, help="the hub's port on 127.0.0.1 (default: 8000)")
    h.add_argument("--root", default=".", help="the course repository (default: here)")
    h.add_argument("--write-only", action="store_true", help="write everything, start nothing")
    h.add_argument("--references-readable", action="store_true",
                   help="go on where other users can read the repository's solutions/ and hidden tests (refused "
                        "otherwise: learners have terminals)")
    h.set_defaults(func=cmd_hub)


def notebooks_parser(sub) -> None:
    nb = sub.add_parser("notebooks", help="(maintainers) rebuild problems/*.ipynb from the registry")
    nb.add_argument("--root", default=".", help="repository root")
    nb.set_defaults(func=cmd_notebooks)


def revision_parser(sub) -> None:
    rv = sub.add_parser("revision", help="(maintainers) rebuild course/revision/ from the lessons' revision cells")
    rv.add_argument("--root", default=".", help="repository root")
    rv.add_argument("--check", action="store_true", help="write nothing; exit 1 if a sheet is stale")
    rv.set_defaults(func=lambda args: importlib.import_module("autograder.exports.revision").command(Path(args.root), args.check))
