"""``python -m ckptlab.adapters``: are the private names the course uses where it looks for them?"""

import sys

from ckptlab.adapters import check

problems = check()
print("\n".join(problems) or "every private name the course uses is where its adapter looks")
sys.exit(1 if problems else 0)
