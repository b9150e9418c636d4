"""Benchmark: each lesson run top to bottom in a real Jupyter kernel, against the 60 s target, on a
quiet machine or on one kept busy (``--load N``: N processes spinning at normal priority, as another
job on a shared machine or CI runner would).

Prints each lesson's wall time (the kernel's start included), its ratio to the target, and whether
it passed: a lesson's claims are asserted by its cells (``ckptlab.claims``), so a margin that a
loaded machine breaks fails here, with the claim and its figures. A lesson that fails must leave
no file behind either (``ckptlab.workdir``): each runs with a temporary folder of its own, checked
empty after. Run: ``make bench`` (or ``python bench/bench_lessons.py --load 2 --only 08``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 60.0
ROOT = Path(__file__).resolve().parents[1]


def _failure(exc: Exception) -> str:
    """The line that says why a lesson failed: a claim's own words where a claim failed."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    claims = [line for line in lines if "ClaimFailed:" in line or "the run contradicts" in line]
    named = claims or [line for line in lines if "Error" in line] or lines or [type(exc).__name__]
    return named[-1][:300]


def run_lesson(path: Path) -> tuple[float, str | None, list[str]]:
    """(seconds, why it failed or None, what it left in its temporary folder)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    with tempfile.TemporaryDirectory(prefix="bench-lesson-") as temp:
        before = os.environ.get("TMPDIR")
        os.environ["TMPDIR"] = temp  # the kernel and every process it starts write their scratch here
        start = time.perf_counter()
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
            failed = None
        except Exception as exc:  # noqa: BLE001 - a failing lesson is a result to print, not a crash
            failed = _failure(exc)
        finally:
            seconds = time.perf_counter() - start
            if before is None:
                os.environ.pop("TMPDIR")
            else:
                os.environ["TMPDIR"] = before
        deadline = time.monotonic() + 5  # a killed kernel's folder goes with its watcher, within a second
        while (left := sorted(str(p.relative_to(temp)) for p in Path(temp).rglob("*"))) and time.monotonic() < deadline:
            time.sleep(0.1)
    return seconds, failed, left


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--load", type=int, default=0, help="processes kept spinning while the lessons run")
    parser.add_argument("--only", nargs="*", default=None, help="lessons whose names start with these (08 09)")
    args = parser.parse_args()

    home = tempfile.TemporaryDirectory(prefix="bench-home-")  # leave the learner's record alone; removed at the end
    os.environ.setdefault("CKPT_COURSE_HOME", home.name)
    lessons = [p for p in sorted((ROOT / "course").glob("*.ipynb"))
               if args.only is None or any(p.name.startswith(o) for o in args.only)]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    print(f"{len(lessons)} lessons, {args.repeat} run(s) each, {args.load} busy process(es) beside them on "
          f"{os.cpu_count()} CPU(s)")
    print(f"{'lesson':42} {'min s':>7} {'median s':>9} {'max s':>7}  {'target ' + format(TARGET_S, '.0f') + ' s':>15}  result")
    worst, failures = 0.0, 0
    try:
        for path in lessons:
            times, why, left = [], None, []
            for _ in range(args.repeat):
                seconds, failed, leftover = run_lesson(path)
                times.append(seconds)
                why, left = why or failed, left or leftover
            worst = max(worst, max(times))
            failures += bool(why or left)
            result = "passed" if not why else f"FAILED: {why}"
            if left:
                result += f"; LEFT {len(left)} file(s): {left[:3]}"
            print(f"{path.name:42} {min(times):7.1f} {statistics.median(times):9.1f} {max(times):7.1f}  "
                  f"{max(times) / TARGET_S:13.2f}x  {result}", flush=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()
        home.cleanup()
    print(f"slowest lesson: {worst:.1f} s = {worst / TARGET_S:.2f}x of the {TARGET_S:.0f} s target "
          f"({'within' if worst < TARGET_S else 'OVER'}); {failures} lesson(s) failed or left files"
          + (f", with {args.load} busy process(es)" if args.load else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
