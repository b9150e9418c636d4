"""nbgrader's exchange shared by several accounts (a JupyterHub's courses): a submission is its owner's.

nbgrader names a submission's folder in the exchange after the learner it claims to be
(``<student>+<assignment>+<time>+<random>``), and ``nbgrader submit --student <classmate>`` writes
one claiming a classmate: on a JupyterHub its course check refuses that (a learner's token cannot
read another user), but a learner's own config can drop the check (a ``nbgrader_config.py`` in the
folder they run nbgrader from), and on one machine without a hub nothing checks it. nbgrader's
collect takes the id from that name and only logs "cheating attempt?" when the folder's owner
differs; the latest submission wins, so a learner could replace a classmate's work. :class:`OwnersCollect` collects each submission as its owner's: the account
that wrote it, which no learner can forge. Courses written with a shared exchange
(``python -m autograder nbgrader --exchange``, ``autograder hub``) use it.

Instructors' side only (nbgrader's collect); a learner's kernel never loads it.
"""

from __future__ import annotations

import os
import pwd

from nbgrader.exchange.default.collect import ExchangeCollect


class OwnersCollect(ExchangeCollect):
    """nbgrader's collect, each submission attributed to the account that owns its folder."""

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        try:  # the entry's own owner: a link a learner makes to a classmate's folder is the learner's
            owner = pwd.getpwuid(os.lstat(path).st_uid).pw_name
        except (KeyError, OSError):
            owner = None
        if owner is not None and owner != record["username"]:
            self.log.warning(f"{record['filename']} names {record['username']!r} but {owner!r} submitted it: "
                             f"collected as {owner}'s")
            record["username"] = owner
        return record
