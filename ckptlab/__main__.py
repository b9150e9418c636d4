"""``python -m ckptlab inspect|diff ...``: see :mod:`ckptlab.cli`."""

import sys

from ckptlab.cli import main

sys.exit(main())
