"""Benchmark: each lesson run top to bottom in a real Jupyter kernel, against the 60 s target.

Prints the wall time of every lesson (the kernel's start included) and its ratio to the target.
Run: ``make bench`` (or ``python bench/bench_lessons.py --repeat 3``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

TARGET_S = 60.0
ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    import os

    import nbformat
    from nbclient import NotebookClient

    os.environ.setdefault("CKPT_COURSE_HOME", tempfile.mkdtemp(prefix="bench-home-"))  # leave the learner's record alone
    print(f"{'lesson':42} {'min s':>7} {'median s':>9} {'max s':>7}  target {TARGET_S:.0f} s")
    worst = 0.0
    for path in sorted((ROOT / "course").glob("*.ipynb")):
        times = []
        for _ in range(args.repeat):
            nb = nbformat.read(path, as_version=4)
            start = time.perf_counter()
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(path.parent)}}).execute()
            times.append(time.perf_counter() - start)
        worst = max(worst, max(times))
        print(f"{path.name:42} {min(times):7.1f} {statistics.median(times):9.1f} {max(times):7.1f}  "
              f"{max(times) / TARGET_S:.2f}x of the target")
    print(f"slowest lesson: {worst:.1f} s = {worst / TARGET_S:.2f}x of the {TARGET_S:.0f} s target "
          f"({'within' if worst < TARGET_S else 'OVER'})")


if __name__ == "__main__":
    main()
