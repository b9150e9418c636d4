"""Command line: ``python -m autograder COMMAND`` (``--help`` lists them).

- :mod:`autograder.cli.learners`: a learner's commands (grade, check, practice, drill, progress,
  isolation, list);
- :mod:`autograder.cli.instructors`: an instructor's and a maintainer's (grade-batch, gradescope,
  release, nbgrader, notebooks, revision);
- :mod:`autograder.cli.arguments`: the arguments they share, read one way.

Each command is a function and its parser, side by side; the table below is ``--help``'s order.
"""

from __future__ import annotations

import argparse

from autograder.cli import instructors, learners

COMMANDS = (
    learners.grade_parser,
    learners.practice_parser,
    learners.drill_parser,
    learners.progress_parser,
    instructors.grade_batch_parser,
    instructors.gradescope_parser,
    instructors.gradescope_try_parser,
    instructors.gradescope_run_parser,
    learners.check_parser,
    instructors.release_parser,
    instructors.nbgrader_parser,
    instructors.hub_parser,
    learners.isolation_parser,
    learners.list_parser,
    instructors.notebooks_parser,
    instructors.revision_parser,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m autograder", description="The course autograder.")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command(sub)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
