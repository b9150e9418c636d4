"""Benchmark: the references graded inside Gradescope's default container (768 MB of memory, half a
CPU, a 10-minute limit), emulated with cgroups (root; ``gradescope-try --memory 768M --cpus 0.5``):
per unit (one assignment each) and the whole course at once, the score, the time, and the peak of
the grader's processes' own memory (anonymous and shared: not the page cache, which the kernel
reclaims when the container runs short). Targets: full marks everywhere, each run within 10
minutes, each peak under 85% of the container's memory.

``--write`` records what it measured in ``autograder/exports/gradescope_profile.json``, which ``python -m
autograder gradescope`` prints for the problems it packs, and states in the zip's GRADESCOPE.md
(what to set on Gradescope). Run: ``python bench/bench_container.py [--write]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MEMORY, CPUS, LIMIT_SECONDS = 768 * 2**20, 0.5, 600


def measure(units: list[int]) -> dict:
    from autograder import registry
    from autograder.exports.gradescope import build_zip, try_locally

    problems = [p for p in registry.PROBLEMS if p.unit in units]
    with tempfile.TemporaryDirectory(prefix="ckpt-bench-container-") as folder:
        folder = Path(folder)
        build_zip(ROOT, folder / "a.zip", problems)
        results = try_locally(folder / "a.zip", [ROOT / "solutions" / f"unit{u}.py" for u in units], folder / "tree",
                              memory=MEMORY, cpus=CPUS)
        measured = json.loads((folder / "tree" / "results" / "container.json").read_text())
    return {"units": units, "score": results["score"], "max_score": float(sum(p.points for p in problems)),
            "seconds": measured["seconds"], "own_peak_mib": round((measured["own_peak"] or 0) / 2**20)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="record the profile in autograder/exports/gradescope_profile.json")
    args = parser.parse_args()
    from autograder import registry

    runs = [measure([u]) for u in registry.units()] + [measure(list(registry.units()))]
    ok = True
    print(f"Inside {MEMORY >> 20} MiB and {CPUS} CPUs (Gradescope's defaults), the references:")
    for r in runs:
        name = "whole course" if len(r["units"]) > 1 else f"unit {r['units'][0]}"
        share = r["own_peak_mib"] / (MEMORY >> 20)
        fine = r["score"] == r["max_score"] and r["seconds"] < LIMIT_SECONDS and share < 0.85
        ok &= fine
        print(f"  {name:13s} {r['score']:g}/{r['max_score']:g} in {r['seconds']:5.0f} s; own memory peak "
              f"{r['own_peak_mib']:4d} MiB ({share:.2f} of the container's){'' if fine else '  <- NOT met'}")
    print("target (full marks, within 10 minutes, peak under 0.85 of the memory): " + ("met" if ok else "NOT met"))
    if args.write:
        profile = {"measured": time.strftime("%Y-%m-%d"), "machine": f"{platform.machine()}, {platform.python_version()}",
                   "memory_mib": MEMORY >> 20, "cpus": CPUS,
                   "units": {str(r["units"][0]): {"seconds": r["seconds"], "own_peak_mib": r["own_peak_mib"]}
                             for r in runs if len(r["units"]) == 1},
                   "whole": {"seconds": runs[-1]["seconds"], "own_peak_mib": runs[-1]["own_peak_mib"]}}
        from autograder.exports.gradescope import PROFILE

        PROFILE.write_text(json.dumps(profile, indent=1) + "\n")
        print(f"written: {PROFILE.relative_to(ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
