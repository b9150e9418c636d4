"""Who is grading, and the autograder run in a fresh process: shared by the command line, the
nbgrader test cell, practice, drills and progress (so none of them imports the command line)."""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def default_learner() -> str:
    """The learner id when none is given: the user name."""
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name in some containers
        return "local"


def run_json(args: list[str], timeout: float) -> tuple[dict | None, int, str]:
    """Run ``python -m autograder <args> --json FILE`` in a fresh process; return (its JSON, or None
    when it ended without one, its exit status, and the last line it wrote to stderr). Callers show
    learners only what the JSON says; the stderr line is for an instructor's log. Raises
    ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
    with tempfile.TemporaryDirectory(prefix="autograder-run-") as tmp:
        out = Path(tmp) / "result.json"
        run = subprocess.run([sys.executable, "-m", "autograder", *args, "--json", str(out)], capture_output=True,
                             text=True, timeout=timeout, cwd=tmp)
        last = next((line.strip() for line in reversed(run.stderr.splitlines()) if line.strip()), "")
        try:
            return json.loads(out.read_text()), run.returncode, last
        except (OSError, ValueError):
            return None, run.returncode, last
