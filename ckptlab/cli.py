"""``python -m ckptlab inspect|diff ...``: the course's models as a tool, on any Orbax checkpoint on
local disk. Each command's text says what it reads; ``--json`` prints the same as JSON.

    python -m ckptlab inspect PATH [--step N] [--json]     # ckptlab.inspection
    python -m ckptlab diff A B [--rtol R] [--json]         # ckptlab.diffing; exit 1 when they differ

Exit codes: 0 done (diff: the same model), 1 diff found a difference, 2 a path or an option this
tool cannot use (the message says what to pass instead).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ckptlab", description="Look into Orbax checkpoints.")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("inspect", help="the tree, shapes, dtypes, saved shardings, chunks and bytes on disk")
    one.add_argument("path", help="a checkpoint folder, a step, or a CheckpointManager root")
    one.add_argument("--step", type=int, default=None, help="the step of a CheckpointManager root (default: newest)")
    one.add_argument("--json", action="store_true", help="print JSON instead of a table")
    two = sub.add_parser("diff", help="missing, extra, reshaped, recast and changed leaves, block by block")
    two.add_argument("a", help="the reference checkpoint (a folder, a step, or a manager root)")
    two.add_argument("b", help="the checkpoint compared with it")
    two.add_argument("--rtol", type=float, default=0.0,
                     help="values differ when |a - b| > rtol * max(|a|, |b|) (default 0: the bytes must be equal)")
    two.add_argument("--json", action="store_true", help="print JSON instead of text")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from ckptlab.inspection import NotACheckpoint, as_json, inspect_checkpoint

    try:
        if args.command == "inspect":
            info = inspect_checkpoint(args.path, args.step)
            print(as_json(info) if args.json else info.table())
            return 0
        from ckptlab.diffing import diff_checkpoints

        def progress(done, count, path):
            if count >= 20 and sys.stderr.isatty():
                print(f"\r[{done}/{count}] {path[:60]:60}", end="" if path else "\n", file=sys.stderr, flush=True)

        report = diff_checkpoints(args.a, args.b, args.rtol, progress=progress)
        print(json.dumps(report.as_dict(), indent=1) if args.json else report.text())
        return 0 if report.same else 1
    except (NotACheckpoint, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
