"""Unit 3's drills (restore re-sharding): how many times the bytes it needs a row-sharded restore reads.

Each kind makes a :class:`~autograder.learner.drills.Question` with ``unit_of_study=3``;
``DRILLS`` lists them in the order :data:`autograder.learner.drills.KINDS` takes them, after the earlier
units' kinds.
"""

from __future__ import annotations

from autograder.learner.drills import Question


def row_restore(rng) -> Question:
    rows, cols = int(rng.choice([1024, 4096])), int(rng.choice([512, 1024]))
    saved, restored = int(rng.choice([4, 8])), int(rng.choice([2, 4, 8, 16]))
    facts = dict(shape=(rows, cols), saved=saved, restored=restored)
    if rng.random() < 0.5:
        amp = max(restored // saved, 1)
        how = (f"each of the {restored} devices needs {rows // restored} rows, inside one chunk of {rows // saved} "
               f"rows that it reads whole: {rows // saved}/{rows // restored} = {amp}x." if restored > saved else
               f"each device needs {rows // restored} rows: {saved // restored} whole chunk(s) of {rows // saved} rows, "
               "exactly what it needs: 1x.")
        return Question(
            "row_restore",
            f"A ({rows}, {cols}) array was saved row-sharded over {saved} devices (one chunk per shard). It is "
            f"restored row-sharded over {restored} devices. One device, reading alone (no sharing with other "
            "devices of its host), reads how many times the bytes it needs? (the ceiling: no read shared)",
            amp, "x", how, facts=facts, unit_of_study=3)
    per_host = int(rng.choice([d for d in (2, 4, 8) if d <= restored]))
    host_rows, chunk_rows = rows // restored * per_host, rows // saved
    amp = max(chunk_rows // host_rows, 1)
    how = (f"the host's {per_host} devices need {host_rows} consecutive rows, inside one chunk of {chunk_rows} rows, "
           f"read once: {chunk_rows}/{host_rows} = {amp}x." if chunk_rows > host_rows else
           f"the host's {per_host} devices need {host_rows} consecutive rows, {host_rows // chunk_rows} whole chunk(s) "
           f"of {chunk_rows} rows: 1x.")
    return Question(
        "row_restore",
        f"A ({rows}, {cols}) array was saved row-sharded over {saved} devices (one chunk per shard). It is "
        f"restored row-sharded over {restored} devices, {per_host} consecutive devices per "
        "host. If each host read every chunk it needs once (the floor: one read per chunk per host), how many "
        "times the bytes the host needs would it read?",
        amp, "x", how + " (Reading alone, each device would read its whole chunk: a real restore lands between, "
        "Lesson 3.)", facts={**facts, "per_host": per_host}, unit_of_study=3,
        mistakes=((max(restored // saved, 1), f"That is each device reading alone (the ceiling); the question asks the "
                                              f"floor, the host's {per_host} devices reading each chunk once."),))


DRILLS = (row_restore,)
