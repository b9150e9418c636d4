"""``python -m ckptlab inspect|diff|plan|measure ...``, the checkpoint tool: a checkpoint's tree,
shapes, dtypes, shardings, chunks and bytes (``inspect``); what differs between two (``diff``); per
host, what a restore onto another layout reads and holds (``plan``), and that restore run for real
beside the plan (``measure``). See :mod:`ckptlab.tool.cli`."""

import os
import sys

# ``python -m`` puts the current folder first on the import path: run from inside a checkpoint from
# elsewhere, a module of it named as one the tool imports next (``json.py``) would run. Dropped before
# anything more is imported (``python -P`` never puts it there; see ckptlab.tool.untrusted).
if not sys.flags.safe_path and sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
    del sys.path[0]

from ckptlab.tool.cli import main  # noqa: E402

sys.exit(main())
