"""The checkpoint tool, ``python -m ckptlab inspect|plan|measure|diff``, on any Orbax checkpoint on
local disk or in S3-compatible object storage; its public face, as functions:

    from ckptlab.tool import inspect_checkpoint, plan_restore, measure_restore, diff_checkpoints

Its modules: `ckptlab.tool.cli` (the command line), `ckptlab.tool.inspection` (what a checkpoint
holds, from its records), `ckptlab.tool.planning` (what a restore onto a layout reads and holds, per
host), `ckptlab.tool.measuring` (the same restore run for real), `ckptlab.tool.diffing` (two
checkpoints compared, leaf by leaf), `ckptlab.tool.figures` (one array's placement),
`ckptlab.tool.files` (what a path that is no checkpoint is), `ckptlab.tool.objectstore`
(``s3://``), `ckptlab.tool.untrusted` (what it promises for a checkpoint someone else wrote, and
the bounds that keep it). It imports no
lesson's module, and the grader imports none of it (``tests/house/test_architecture.py``). Importing this
package does not import JAX: each function loads its module when first asked for.
"""

from __future__ import annotations

import importlib

_PUBLIC = {"inspect_checkpoint": "inspection", "plan_restore": "planning", "measure_restore": "measuring",
           "diff_checkpoints": "diffing"}


def __getattr__(name: str):
    if name in _PUBLIC:
        return getattr(importlib.import_module(f"ckptlab.tool.{_PUBLIC[name]}"), name)
    raise AttributeError(f"module 'ckptlab.tool' has no attribute {name!r}")


__all__ = sorted(_PUBLIC)
