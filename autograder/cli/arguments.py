"""What the commands share: their common arguments (isolation, an assignment's problems, the
submissions), reading them, and writing JSON."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def write_json(path: str, data: dict) -> None:
    from autograder.outputs import atomic_write

    atomic_write(Path(path), json.dumps(data, indent=2) + "\n")


def any_missing(paths) -> bool:
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        print(f"error: no such file or folder: {', '.join(missing)}", file=sys.stderr)
    return bool(missing)


def read_scope(args):
    """The problems ``paths``, ``--unit`` and ``--only`` cover, and their name (None: an error printed)."""
    from autograder.learner.report import grading_scope

    try:
        return None if any_missing(args.paths) else grading_scope(args.paths, args.unit, args.only)
    except (ValueError, KeyError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return None


def share_arg(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{text}: give a share between 0 and 1, e.g. 0.8")
    return value


def chosen_problems(args):
    """The problems ``--unit`` / ``--only`` choose, or None (an error already printed)."""
    from autograder.registry import selection

    try:
        return selection(args.unit, args.only)
    except (ValueError, KeyError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return None


def covers(chosen) -> str:
    return f"{len(chosen)} problems, {sum(p.points for p in chosen)} points ({', '.join(p.id for p in chosen)})"


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
