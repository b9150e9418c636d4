"""``python -m ckptlab inspect|diff ...``: the course's models as a tool, on any Orbax checkpoint on
local disk or in S3-compatible object storage (``s3://bucket/path``, the store's address from
``AWS_ENDPOINT_URL``: ckptlab.tool.objectstore). Each command's text says what it reads; ``--json``
prints the same as JSON.

    python -m ckptlab inspect PATH [--step N] [--json] [--figure ARRAY [--out F.png]]   # ckptlab.tool.inspection
    python -m ckptlab diff A B [--rtol R] [--json]         # ckptlab.tool.diffing; exit 1 when they differ
    python -m ckptlab plan PATH --mesh data=2,model=8 [--spec 'PATTERN=SPEC' ...] [--rules FILE] [--hosts N] [--json]
    python -m ckptlab measure PATH --mesh ... [--spec ...] [--hosts N]   # ckptlab.tool.measuring, for real

Exit codes: 0 done (diff: the same model), 1 diff found a difference, 2 a path or an option this
tool cannot use (the message says what to pass instead). A checkpoint someone else wrote: see
ckptlab.tool.untrusted (plan, measure and diff take --max-chunks N and --max-bytes B).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys

_SPEC_HELP = ("A spec is the mesh axis per dimension, comma-separated: 'model', 'None,model', 'data+model,None' "
              "(a dimension over two axes); an empty one replicates.")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ckptlab", description="Look into Orbax checkpoints.")
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("inspect", help="the tree, shapes, dtypes, saved shardings, chunks and bytes on disk")
    one.add_argument("path", help="a checkpoint folder, a step, or a CheckpointManager root")
    one.add_argument("--step", type=int, default=None, help="the step of a CheckpointManager root (default: newest)")
    one.add_argument("--json", action="store_true", help="print JSON instead of a table")
    one.add_argument("--figure", metavar="ARRAY", help="also draw where ARRAY's pieces lived when saved, with its chunks "
                     "(a 1-D or 2-D array, by its path in the table)")
    one.add_argument("--out", default=None, help="the figure's file (default: ARRAY's path with / as _, .png)")
    two = sub.add_parser("diff", help="missing, extra, reshaped, recast and changed leaves, block by block")
    two.add_argument("a", help="the reference checkpoint (a folder, a step, or a manager root)")
    two.add_argument("b", help="the checkpoint compared with it")
    two.add_argument("--rtol", type=float, default=0.0,
                     help="values differ when |a - b| > rtol * max(|a|, |b|) (default 0: the bytes must be equal)")
    two.add_argument("--json", action="store_true", help="print JSON instead of text")
    for name, text in (("plan", "per host, the bytes a restore onto a layout reads (floor to ceiling) and holds"),
                       ("measure", "the plan, and the same restore run for real in fresh processes beside it")):
        cmd = sub.add_parser(name, help=text)
        cmd.add_argument("path", help="a checkpoint folder, a step, or a CheckpointManager root")
        cmd.add_argument("--mesh", required=True, help="the target mesh, axis=size pairs: data=2,model=8")
        cmd.add_argument("--spec", action="append", default=[], metavar="PATTERN=SPEC",
                         help="a spec for the leaves whose path matches PATTERN (fnmatch, first match wins), e.g. "
                              "'*/kernel=None,model'; leaves matched by none keep their saved spec where it fits "
                              "the mesh, else are replicated (the plan says which). " + _SPEC_HELP)
        cmd.add_argument("--rules", default=None, metavar="FILE",
                         help="PATTERN=SPEC lines (# comments), tried after the --spec options")
        cmd.add_argument("--hosts", type=int, default=1, help="processes the devices are split over (default 1)")
        cmd.add_argument("--step", type=int, default=None, help="the step of a CheckpointManager root")
        cmd.add_argument("--json", action="store_true", help="print JSON instead of text")
    for name in ("plan", "measure", "diff"):  # what a checkpoint may declare beyond what it stores
        sub.choices[name].add_argument("--max-chunks", type=int, default=None, metavar="N",
                                       help="walk a chunk grid of up to N chunks (default: 65,536 and 64 per chunk "
                                            "stored; a checkpoint declaring more is refused)")
        sub.choices[name].add_argument("--max-bytes", default=None, metavar="B",
                                       help="accept up to B bytes of values (64GiB; default: 1 GiB and 1,024 times "
                                            "the bytes stored; plan counts no bytes)")
    return parser


def _bounds(args) -> dict:
    """--max-chunks and --max-bytes, as the functions take them (ckptlab.tool.untrusted)."""
    from ckptlab.tool.untrusted import parse_size

    return {"max_chunks": args.max_chunks, "max_bytes": None if args.max_bytes is None else parse_size(args.max_bytes)}


def _step_metadata_warning(record) -> bool:
    """False for absl's warning that a step's ``_CHECKPOINT_METADATA`` is not in the item folder read
    (Orbax looks for it there on every metadata read of a manager's step, where the step folder, not
    its item, holds it): the one record this tool's runs drop."""
    return not (str(record.msg).startswith("Metadata file does not exist") and record.args
                and str(record.args[0]).endswith("_CHECKPOINT_METADATA"))


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from ckptlab.tool.inspection import NotACheckpoint, as_json, inspect_checkpoint
    from ckptlab.tool.objectstore import shown
    from ckptlab.twohost import HostFailed

    def progress(done, count, path):  # on a terminal, for checkpoints of many arrays
        if count >= 20 and sys.stderr.isatty():
            print(f"\r[{done}/{count}] {path[:60]:60}", end="" if path else "\n", file=sys.stderr, flush=True)

    absl = logging.getLogger("absl")  # Orbax logs through absl's logger: filtered for this run only
    absl.addFilter(_step_metadata_warning)
    try:
        if args.command == "inspect":
            if args.figure:  # the figure asks JAX for the saved mesh's devices; reading the metadata starts JAX
                from ckptlab.devices import setup_devices

                setup_devices()
            info = inspect_checkpoint(args.path, args.step)
            print(shown(as_json(info) if args.json else info.table()))
            if args.figure:
                from ckptlab.tool.figures import placement_figure

                out = placement_figure(info, args.figure, args.out or re.sub(r"[^\w.-]+", "_", args.figure) + ".png")
                print(f"figure: {out}", file=sys.stderr)
            return 0
        if args.command in ("plan", "measure"):
            from ckptlab.tool import planning

            rules = planning.read_rules(args.rules) if args.rules else []
            mesh, specs = planning.parse_mesh(args.mesh), planning.parse_specs(args.spec + rules)  # the command line first
            from ckptlab.devices import setup_devices

            setup_devices(max(16, math.prod(mesh.values())))
            if args.command == "plan":
                plan = planning.plan_restore(args.path, mesh, specs, args.hosts, args.step, progress=progress,
                                             **_bounds(args))
                print(shown(json.dumps(plan.as_dict(), indent=1, default=list) if args.json else plan.text()))
            else:
                from ckptlab.tool import measuring

                result = measuring.measure_restore(args.path, mesh, specs, args.hosts, args.step, **_bounds(args))
                if args.json:
                    print(shown(json.dumps({**result, "plan": result["plan"].as_dict()}, indent=1, default=list)))
                else:
                    print(shown(measuring.measured_text(result)))
            return 0
        from ckptlab.tool.diffing import diff_checkpoints

        report = diff_checkpoints(args.a, args.b, args.rtol, progress=progress, **_bounds(args))
        print(shown(json.dumps(report.as_dict(), indent=1) if args.json else report.text()))
        return 0 if report.same else 1
    except (NotACheckpoint, ValueError) as exc:
        print(f"error: {shown(str(exc))}", file=sys.stderr)
        return 2
    except HostFailed as exc:  # measure's restoring processes: the checkpoint did not restore there
        print(f"error: the restore measure times did not finish: {shown(str(exc))}", file=sys.stderr)
        return 2
    finally:
        absl.removeFilter(_step_metadata_warning)
