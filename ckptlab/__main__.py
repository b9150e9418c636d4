"""``python -m ckptlab inspect PATH``: see :mod:`ckptlab.inspection`."""

import sys

from ckptlab.inspection import main

sys.exit(main())
