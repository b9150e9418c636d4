"""``python -m tests.right_answers --calibrate``: measure every pair of the curated right answers of a
problem as grade-batch's similarity report measures a class, and write the figures it prints beside
a class's pairs (``autograder/classroom/similarity_calibration.json``). Without ``--calibrate``: say
whether the file still matches the answers (a test holds it too)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def measured() -> list[list]:
    from autograder import registry
    from autograder.classroom import similarity
    from tests.right_answers import HEADERS, RIGHT

    return similarity.calibration_pairs(RIGHT, HEADERS, similarity.course_code(ROOT / "problems", registry.PROBLEMS))


def main(argv=None) -> int:
    from autograder.classroom.similarity import CALIBRATION

    parser = argparse.ArgumentParser(prog="python -m tests.right_answers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--calibrate", action="store_true", help="write the calibration file")
    args = parser.parse_args(argv)
    pairs = measured()
    if args.calibrate:
        rows = ",\n".join(f"  {json.dumps(pair)}" for pair in pairs)
        CALIBRATION.write_text(f'{{"written_by": "python -m tests.right_answers --calibrate",\n "pairs": [\n{rows}\n]}}\n')
        print(f"written: {CALIBRATION.relative_to(ROOT)} ({len(pairs)} pairs)")
        return 0
    same = json.loads(CALIBRATION.read_text())["pairs"] == pairs
    print("up to date" if same else "stale: run python -m tests.right_answers --calibrate")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
