"""``python -m ckptlab inspect|diff ...``: see :mod:`ckptlab.tool.cli`."""

import os
import sys

# ``python -m`` puts the current folder first on the import path: run from inside a checkpoint from
# elsewhere, a module of it named as one the tool imports next (``json.py``) would run. Dropped before
# anything more is imported (``python -P`` never puts it there; see ckptlab.tool.untrusted).
if not sys.flags.safe_path and sys.path and os.path.abspath(sys.path[0] or os.curdir) == os.getcwd():
    del sys.path[0]

from ckptlab.tool.cli import main  # noqa: E402

sys.exit(main())
